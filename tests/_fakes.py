"""Small fakes the tests share: a vector record in one call, and an embedding backend that
remembers what it was asked to embed."""

from __future__ import annotations

from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend
from ragspine_lite.vector.store import VectorRecord


def rec(rid: str, *vector: float, **metadata: str) -> VectorRecord:
    return VectorRecord(rid, tuple(vector), metadata)


class RecordingBackend:
    """Deterministic embeddings that remember every text they were asked to embed."""

    def __init__(self, dim: int = 64) -> None:
        self.inner = DeterministicEmbeddingBackend(dim=dim)
        self.calls: list[list[str]] = []

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return self.inner.embed_texts(texts)

    @property
    def seen(self) -> list[str]:
        return [t for call in self.calls for t in call]
