"""The embedding seam: the ``EmbeddingBackend`` Protocol, the pure deterministic backend and
``make_embedding_backend``. Heavy backends are registered by their own modules and imported lazily.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.common.registry import Registry, normalize_spec
from ragspine_lite.lexical.tokenizer import tokenize

__all__ = [
    "DEFAULT_DETERMINISTIC_DIM",
    "DEFAULT_EMBEDDING_BATCH_SIZE",
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
    "make_embedding_backend",
]

DEFAULT_OPENAI_EMBEDDING_MODEL = "text-embedding-3-large"
DEFAULT_ST_EMBEDDING_MODEL = "Qwen/Qwen3-Embedding-0.6B"
DEFAULT_ONNX_EMBEDDING_MODEL = "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2"
DEFAULT_EMBEDDING_BATCH_SIZE = 64
DEFAULT_DETERMINISTIC_DIM = 256

EMBEDDING_BACKEND_ENV = "RAGSPINE_EMBEDDING_BACKEND"
EMBEDDING_MODEL_ENV = "RAGSPINE_EMBEDDING_MODEL"
ONNX_EMBEDDING_MODEL_ENV = "RAGSPINE_ONNX_EMBEDDING_MODEL"
EMBEDDING_DEVICE_ENV = "RAGSPINE_EMBEDDING_DEVICE"


@runtime_checkable
class EmbeddingBackend(Protocol):
    """Turns texts into dense vectors, one per text, in input order."""

    def embed_texts(self, texts: list[str]) -> list[list[float]]: ...


def _bucket(token: str, dim: int) -> int:
    digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % dim


@dataclass(frozen=True)
class DeterministicEmbeddingBackend:
    """Hashed bag-of-tokens embedding: offline, dependency-free, identical everywhere.

    Tokens come from :func:`ragspine_lite.lexical.tokenizer.tokenize`; each occurrence adds
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


EMBEDDING_BACKENDS = Registry("embedding_backends")
EMBEDDING_BACKENDS.register("deterministic", DeterministicEmbeddingBackend)


def _onnx_available() -> bool:
    """True when ``onnxruntime`` is importable and an ``onnx`` backend is registered."""
    try:
        found = importlib.util.find_spec("onnxruntime") is not None
    except (ImportError, ValueError):
        found = False
    return found and "onnx" in EMBEDDING_BACKENDS.names()


def make_embedding_backend(spec: str | None = None, **kwargs: Any) -> EmbeddingBackend | None:
    """Backend for ``spec`` (env ``RAGSPINE_EMBEDDING_BACKEND`` when ``None``, default ``none``).

    Specs are normalised like the registry (strip, lower, ``-``/space → ``_``). ``none`` →
    ``None``; ``auto`` → the ONNX backend when it is available, else ``None``; a registered
    name → that backend built with ``**kwargs``; anything else → ``ValueError``.
    """
    if spec is None:
        spec = os.environ.get(EMBEDDING_BACKEND_ENV, "none")
    key = normalize_spec(spec)
    if key == "none":
        return None
    if key == "auto":
        return EMBEDDING_BACKENDS.make("onnx", **kwargs) if _onnx_available() else None
    names = EMBEDDING_BACKENDS.names()
    if key not in names:
        valid = sorted({*names, "auto", "none"})
        raise ValueError(f"unknown embedding backend {spec!r}; valid names: {', '.join(valid)}")
    return EMBEDDING_BACKENDS.make(key, **kwargs)
