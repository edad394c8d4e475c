"""Sentence embeddings in the browser: :class:`BrowserOnnxEmbeddingBackend`.

The text is tokenised here, in Python (``WordPieceTokenizer`` for BERT-family models such as
MiniLM, ``SentencePieceTokenizer`` for the exported Universal Sentence Encoder: the same ids as
on CPython); the ONNX model runs in JavaScript on onnxruntime-web, in the same Web Worker as
Pyodide; the pooling (``pool_embeddings``) is Python again. So the vectors match the CPython
backends' (``OnnxEmbeddingBackend``, ``UseOnnxEmbeddingBackend``) up to float rounding.

The model call is asynchronous in JS and ``embed_texts`` is synchronous, so there are two ways:

- **JSPI** (``pyodide.ffi.can_run_sync()`` true, e.g. Chromium ≥ 137 with the Python call
  entered through ``callPromising``): ``embed_texts`` blocks on the JS promise with
  ``run_sync``;
- **otherwise** the worker asks :meth:`plan` which texts need vectors, runs the model itself
  and hands the output to :meth:`prime` before the synchronous search; ``embed_texts`` then
  answers from that cache.

Nothing here imports ``js`` or ``pyodide`` at import time, so the module imports anywhere;
tests pass a stand-in ``runner`` and ``ffi``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from ragspine_lite.text.sentencepiece import SentencePieceTokenizer
from ragspine_lite.text.wordpiece import WordPieceTokenizer
from ragspine_lite.vector.calibration import DenseCalibration
from ragspine_lite.vector.onnx_backend import OnnxModelConfig, pool_embeddings

__all__ = [
    "DEFAULT_PRIMED_VECTORS",
    "TOKENIZERS",
    "BrowserEmbeddingUnavailable",
    "BrowserOnnxEmbeddingBackend",
]

#: How many primed vectors the no-JSPI path keeps (oldest dropped first).
DEFAULT_PRIMED_VECTORS = 512
#: ``embedding_config.json`` keys that pick the tokenizer (the rest is an ``OnnxModelConfig``).
TOKENIZER_KEYS = ("tokenizer", "bos_eos")
TOKENIZERS = ("wordpiece", "sentencepiece")


class BrowserEmbeddingUnavailable(RuntimeError):
    """A vector was needed that can neither be computed now (no JSPI) nor was primed."""


class BrowserOnnxEmbeddingBackend:
    """``EmbeddingBackend`` over onnxruntime-web (see the module doc).

    ``tokenizer`` is a ``WordPieceTokenizer`` (ids truncated to ``config.max_length``) or a
    ``SentencePieceTokenizer`` (with BOS/EOS when ``bos_eos``; no truncation, as the USE
    export expects). ``runner(input_ids, attention_mask, batch, seq)`` is a JS function
    taking the row-major padded ids and mask; it resolves to the model output for
    ``config.output`` as a flat ``Float32Array`` (``[batch, seq, dim]``, or ``[batch, dim]``
    with pooling ``none``). ``runner`` ``None`` means primed vectors only. ``ffi`` defaults
    to ``pyodide.ffi``.
    """

    sends_text_off_host = False

    def __init__(
        self,
        tokenizer: WordPieceTokenizer | SentencePieceTokenizer,
        config: OnnxModelConfig,
        *,
        runner: Callable[..., Any] | None = None,
        ffi: Any = None,
        batch_size: int = 16,
        max_primed: int = DEFAULT_PRIMED_VECTORS,
        bos_eos: bool = True,
    ) -> None:
        if config.dim is None:
            raise ValueError(
                f"the browser backend needs config.dim, got None for {config.model_id!r}"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        self.tokenizer = tokenizer
        self.bos_eos = bool(bos_eos)
        self.config = config
        self.runner = runner
        self.batch_size = batch_size
        self.max_primed = max_primed
        self._ffi = ffi
        self._primed: OrderedDict[str, list[float]] = OrderedDict()

    @classmethod
    def from_files(
        cls, vocab_path: str, config: dict[str, Any], **kwargs: Any
    ) -> BrowserOnnxEmbeddingBackend:
        """A backend from a tokenizer file and an ``embedding_config.json`` mapping.

        ``config["tokenizer"]`` ``"wordpiece"`` (default: ``vocab_path`` is a ``vocab.txt``)
        or ``"sentencepiece"`` (``vocab_path`` is an ``sp.model``; ``bos_eos`` default true);
        the other keys are an :class:`OnnxModelConfig`.
        """
        data = dict(config)
        kind = str(data.pop("tokenizer", "wordpiece")).strip().lower()
        bos_eos = data.pop("bos_eos", True)
        if kind not in TOKENIZERS:
            raise ValueError(f"unknown tokenizer {kind!r}; valid names: {', '.join(TOKENIZERS)}")
        parsed = OnnxModelConfig.from_mapping(data, default_model_id="browser-onnx")
        tokenizer: WordPieceTokenizer | SentencePieceTokenizer
        if kind == "sentencepiece":
            tokenizer = SentencePieceTokenizer.from_file(vocab_path)
        else:
            tokenizer = WordPieceTokenizer.from_file(
                vocab_path, lowercase=parsed.lowercase, strip_accents=parsed.strip_accents
            )
        return cls(tokenizer, parsed, bos_eos=bool(bos_eos), **kwargs)

    @property
    def model_id(self) -> str:
        return self.config.model_id

    @property
    def calibration(self) -> DenseCalibration | None:
        """The calibration shipped in the bundle's ``embedding_config.json``, if any."""
        return self.config.calibration

    @property
    def dim(self) -> int:
        return int(self.config.dim or 0)

    def __repr__(self) -> str:
        return f"BrowserOnnxEmbeddingBackend(model_id={self.model_id!r})"

    # -- tokenising ------------------------------------------------------------------------

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Model input ids per text: word pieces with ``[CLS]``/``[SEP]`` truncated to
        ``max_length``, or sentence pieces with BOS/EOS."""
        tok = self.tokenizer
        if isinstance(tok, SentencePieceTokenizer):
            return [tok.encode(t, add_bos=self.bos_eos, add_eos=self.bos_eos) for t in texts]
        return [tok.encode(t, max_length=self.config.max_length).ids for t in texts]

    def coverage(self, text: str) -> float:
        """Share of ``text``'s pieces the vocabulary knows (not unknown); blank → 1.0."""
        tok = self.tokenizer
        if isinstance(tok, SentencePieceTokenizer):
            ids = tok.encode(text) if text.strip() else []
        else:
            ids = tok.encode(text, add_special_tokens=False).ids
        if not ids:
            return 1.0
        return 1.0 - ids.count(tok.unk_id) / len(ids)

    def padded(self, encodings: Sequence[Sequence[int]]) -> tuple[list[int], list[list[int]]]:
        """Row-major ids padded to the longest row, and the attention masks."""
        width = max(len(ids) for ids in encodings)
        pad = getattr(self.tokenizer, "pad_id", 0)
        flat: list[int] = []
        masks: list[list[int]] = []
        for ids in encodings:
            flat.extend(ids)
            flat.extend([pad] * (width - len(ids)))
            masks.append([1] * len(ids) + [0] * (width - len(ids)))
        return flat, masks

    def _pool(self, output: Any, masks: list[list[int]]) -> list[list[float]]:
        values = output.to_py() if hasattr(output, "to_py") else output
        if isinstance(values, memoryview):
            values = values.cast("B").cast("f") if values.format != "f" else values
        return pool_embeddings(
            values, masks, self.dim, pooling=self.config.pooling, normalize=self.config.normalize
        )

    # -- the no-JSPI path --------------------------------------------------------------------

    def plan(self, texts: Sequence[str]) -> dict[str, Any]:
        """The next texts lacking a vector (at most ``batch_size``) → ``{"texts", "ids",
        "mask" (flat, padded), "batch", "seq"}``; call it again after :meth:`prime` until
        ``texts`` is empty."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._primed][: self.batch_size]
        if not todo:
            return {"texts": [], "ids": [], "mask": [], "batch": 0, "seq": 0}
        flat, masks = self.padded(self.encode(todo))
        mask = [m for row in masks for m in row]
        return {"texts": todo, "ids": flat, "mask": mask, "batch": len(todo), "seq": len(masks[0])}

    def prime(self, texts: Sequence[str], output: Any) -> int:
        """Pool the JS model ``output`` for ``texts`` (as :meth:`plan` padded them) and keep it."""
        texts = list(texts)
        if not texts:
            return 0
        _flat, masks = self.padded(self.encode(texts))
        for text, vector in zip(texts, self._pool(output, masks), strict=True):
            self._primed[text] = vector
            self._primed.move_to_end(text)
        while len(self._primed) > self.max_primed:
            self._primed.popitem(last=False)
        return len(texts)

    # -- the EmbeddingBackend protocol ------------------------------------------------------

    def _modules(self) -> Any:
        if self._ffi is None:
            import pyodide.ffi

            self._ffi = pyodide.ffi
        return self._ffi

    def _can_run_now(self) -> bool:
        if self.runner is None:
            return False
        try:
            ffi = self._modules()
        except ImportError:
            return False
        can = getattr(ffi, "can_run_sync", None)
        return bool(can()) if callable(can) else False

    def _run(self, texts: list[str]) -> list[list[float]]:
        ffi = self._modules()
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            flat, masks = self.padded(self.encode(texts[start : start + self.batch_size]))
            mask = [m for row in masks for m in row]
            promise = self.runner(  # type: ignore[misc]
                ffi.to_js(flat), ffi.to_js(mask), len(masks), len(masks[0])
            )
            out.extend(self._pool(ffi.run_sync(promise), masks))
        return out

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """One vector per text: primed ones from the cache, the rest through the runner.

        Raises :class:`BrowserEmbeddingUnavailable` when a text was not primed and the
        runner cannot be awaited synchronously here (no JSPI).
        """
        if isinstance(texts, str):
            raise ValueError(f"texts must be a list of str, got the str {texts!r}")
        texts = list(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self._primed]
        fresh: dict[str, list[float]] = {}
        if missing:
            if not self._can_run_now():
                raise BrowserEmbeddingUnavailable(
                    f"no vector for {len(missing)} text(s) (e.g. {missing[0][:40]!r}): the "
                    "model cannot be called synchronously here (no JSPI) and they were not "
                    "primed; call plan() and prime() first"
                )
            fresh = dict(zip(missing, self._run(missing), strict=True))
        return [fresh[t] if t in fresh else list(self._primed[t]) for t in texts]
