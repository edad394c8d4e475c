"""What every embedding backend shares: the seam, its batch size, the text check, the
query role (:func:`embed_query_texts`) and the vocabulary-coverage gate.

Backends import this module, never :mod:`ragspine_lite.vector.embedding_backends` (which
registers them by name and imports them lazily).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = [
    "DEFAULT_EMBEDDING_BATCH_SIZE",
    "DEFAULT_MIN_COVERAGE",
    "EmbeddingBackend",
    "check_min_coverage",
    "check_texts",
    "embed_query_texts",
    "outside_vocabulary",
]

DEFAULT_EMBEDDING_BATCH_SIZE = 64
# Below this share of known word pieces a text is "outside the model's vocabulary". Measured
# with the MiniLM vocabulary: every SQuAD question scores 1.0, no CMRC/DRCD question (Chinese,
# mostly [UNK]) reaches 0.65, and RRF with such a dense lane loses to BM25 alone.
DEFAULT_MIN_COVERAGE = 0.9


@runtime_checkable
class EmbeddingBackend(Protocol):
    """Turns texts into dense vectors, one per text, in input order."""

    def embed_texts(self, texts: list[str]) -> list[list[float]]: ...


def check_texts(texts: Any) -> list[str]:
    """``texts`` as a list of str; a bare str or a non-str item → ``ValueError``."""
    if isinstance(texts, str):
        raise ValueError(f"texts must be a list of str, got the str {texts!r}")
    texts = list(texts)
    for text in texts:
        if not isinstance(text, str):
            raise ValueError(f"every text must be a str, got {text!r}")
    return texts


def embed_query_texts(backend: Any, texts: list[str]) -> list[list[float]]:
    """Query vectors: ``backend.embed_queries`` when the backend has one, else ``embed_texts``.

    >>> class Texts:
    ...     def embed_texts(self, texts): return [[1.0] for _ in texts]
    >>> embed_query_texts(Texts(), ["q"])
    [[1.0]]
    """
    embed = getattr(backend, "embed_queries", None)
    return list(embed(texts) if callable(embed) else backend.embed_texts(texts))


def check_min_coverage(value: Any) -> float | None:
    """``value`` as a coverage threshold: ``None`` (gate off) or a number in ``[0, 1]``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"min_query_coverage must be a number in [0, 1] or None, got {value!r}")
    return float(value)


def outside_vocabulary(
    backend: Any, text: str, min_coverage: float | None = DEFAULT_MIN_COVERAGE
) -> bool:
    """True when ``backend.coverage(text)`` is below ``min_coverage``.

    Only backends with a ``coverage`` method (share of known word pieces, e.g. the ONNX
    WordPiece models) can be outside their vocabulary; ``min_coverage`` ``None`` turns the
    gate off. A query that trips it is best searched without the dense channel.

    >>> outside_vocabulary(object(), "anything")  # no coverage method
    False
    """
    if min_coverage is None or backend is None:
        return False
    coverage = getattr(backend, "coverage", None)
    if not callable(coverage):
        return False
    return float(coverage(text)) < min_coverage
