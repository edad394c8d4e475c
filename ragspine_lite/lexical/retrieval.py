"""Moved: the retrievers live in :mod:`ragspine_lite.pipeline.retrievers` (this path keeps
working, with every name it had)."""

from __future__ import annotations

from ragspine_lite.pipeline.retrievers import (
    CHANNEL_BM25,
    CHANNEL_HYBRID,
    CHANNEL_OUTSIDE_VOCABULARY,
    DEFAULT_BM25_B,
    DEFAULT_BM25_K1,
    DEFAULT_MIN_COVERAGE,
    DEFAULT_RRF_K,
    DEFAULT_TOP_K,
    EmbeddingBackend,
    GlossaryQueryRewriter,
    HybridRetriever,
    NarrativeIndex,
    QueryRewriter,
    RetrievableIndex,
    RetrievalResult,
    bm25_scores,
    cosine_similarity,
    rrf_fuse,
    tokenize,
)

__all__ = [
    "CHANNEL_BM25",
    "CHANNEL_HYBRID",
    "CHANNEL_OUTSIDE_VOCABULARY",
    "DEFAULT_BM25_B",
    "DEFAULT_BM25_K1",
    "DEFAULT_MIN_COVERAGE",
    "DEFAULT_RRF_K",
    "DEFAULT_TOP_K",
    "EmbeddingBackend",
    "GlossaryQueryRewriter",
    "HybridRetriever",
    "NarrativeIndex",
    "QueryRewriter",
    "RetrievableIndex",
    "RetrievalResult",
    "bm25_scores",
    "cosine_similarity",
    "rrf_fuse",
    "tokenize",
]
