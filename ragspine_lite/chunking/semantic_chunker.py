"""Semantic chunking: start a new segment where adjacent paragraphs drift apart (pure).

Paragraphs are embedded in one ``embed_texts`` call; the distance between neighbours is
``1 - cosine``. A segment boundary falls where that distance reaches the
``breakpoint_percentile`` of all distances (and is above zero, so identical paragraphs never
split). Each segment is then packed by
:func:`~ragspine_lite.chunking.chunking.chunk_document`, with document-global numbering.

The default embedder is the hashing ``DeterministicEmbeddingBackend`` (offline, lexical);
inject a real sentence embedder for genuinely semantic boundaries.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from ragspine_lite.chunking.chunking import (
    Chunk,
    DocumentMeta,
    _pack_spans,
    _ParagraphChunker,
)
from ragspine_lite.common.sensitivity import is_restricted, sends_text_off_host
from ragspine_lite.common.vectors import plain_cosine

__all__ = ["DEFAULT_BREAKPOINT_PERCENTILE", "SemanticChunker"]

DEFAULT_BREAKPOINT_PERCENTILE = 90.0

# Rounding noise of 1 - cos(v, v) for unit vectors; anything this small counts as no distance.
_ZERO_DISTANCE = 1e-12


def _percentile(values: list[float], percentile: float) -> float:
    """Linear-interpolated percentile of ``values`` (rank = p/100 · (n - 1))."""
    ordered = sorted(values)
    rank = percentile / 100.0 * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class SemanticChunker(_ParagraphChunker):
    """Split where the embedding distance between neighbouring paragraphs peaks.

    ``embedder`` is anything with ``embed_texts(list[str]) -> list[list[float]]``;
    ``None`` builds ``DeterministicEmbeddingBackend()`` (dim 256).
    """

    def __init__(
        self,
        embedder: Any | None = None,
        *,
        breakpoint_percentile: float = DEFAULT_BREAKPOINT_PERCENTILE,
    ) -> None:
        if isinstance(breakpoint_percentile, bool) or not isinstance(
            breakpoint_percentile, (int, float)
        ):
            raise TypeError(
                f"breakpoint_percentile must be a number, got {breakpoint_percentile!r}"
            )
        if not 0.0 <= breakpoint_percentile <= 100.0:
            raise ValueError(
                f"breakpoint_percentile must be within 0..100, got {breakpoint_percentile!r}"
            )
        if embedder is None:
            # Imported here so the chunking package never pulls the vector package at import.
            from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend

            embedder = DeterministicEmbeddingBackend()
        elif not callable(getattr(embedder, "embed_texts", None)):
            raise TypeError(
                f"embedder must have an embed_texts(texts) method, got {type(embedder).__name__}"
            )
        self.embedder = embedder
        self.breakpoint_percentile = float(breakpoint_percentile)

    def _segments(self, paragraphs: list[str]) -> list[tuple[int, int]]:
        """``(first, last)`` paragraph numbers (1-based, inclusive) of each segment."""
        vectors = self.embedder.embed_texts(list(paragraphs))
        if len(vectors) != len(paragraphs):
            raise ValueError(
                f"embedder returned {len(vectors)} vectors for {len(paragraphs)} paragraphs"
            )
        distances = []
        for left, right in itertools.pairwise(vectors):
            distance = 1.0 - plain_cosine(list(left), list(right))
            distances.append(0.0 if abs(distance) < _ZERO_DISTANCE else distance)
        if not distances:
            return [(1, len(paragraphs))]
        threshold = _percentile(distances, self.breakpoint_percentile)
        segments: list[tuple[int, int]] = []
        first = 1
        for index, distance in enumerate(distances, start=1):
            # distances[index - 1] lies between paragraphs ``index`` and ``index + 1``.
            if distance >= threshold and distance > 0.0:
                segments.append((first, index))
                first = index + 1
        segments.append((first, len(paragraphs)))
        return segments

    def _packs_plainly(self, meta: DocumentMeta) -> bool:
        # A RESTRICTED document never goes to an off-host embedder: plain packing.
        return is_restricted(meta.sensitivity) and sends_text_off_host(self.embedder)

    def _chunk_paragraphs(
        self, paragraphs: list[str], meta: DocumentMeta, max_chars: int, overlap_chars: int
    ) -> list[Chunk]:
        """Chunk each semantic segment separately; numbering stays document-global."""
        spans: list[tuple[int, int, dict[str, str]]] = [
            (first, last, {}) for first, last in self._segments(paragraphs)]
        return _pack_spans(paragraphs, meta, spans, max_chars, overlap_chars)
