"""Lexical retrieval: CJK-aware tokenizer, Okapi BM25, RRF, the BM25 index, the retrievers.

The tokenizer and scoring primitives are imported eagerly. The retriever names come
from :mod:`ragspine_lite.lexical.retrieval` (the retrievers now live in
:mod:`ragspine_lite.pipeline.retrievers`) and the index names from
:mod:`ragspine_lite.lexical.inverted_index` on first access: the retrievers are built on
the pipeline, which is built on this package's index, so an eager import here would
create an import cycle.
"""

from __future__ import annotations

from typing import Any

from ragspine_lite.lexical.scoring import (
    DEFAULT_BM25_B,
    DEFAULT_BM25_K1,
    DEFAULT_RRF_K,
    bm25_scores,
    cosine_similarity,
    rrf_fuse,
)
from ragspine_lite.text.words import tokenize

_RETRIEVAL_NAMES = (
    "CHANNEL_BM25",
    "CHANNEL_HYBRID",
    "CHANNEL_OUTSIDE_VOCABULARY",
    "DEFAULT_MIN_COVERAGE",
    "DEFAULT_TOP_K",
    "EmbeddingBackend",
    "GlossaryQueryRewriter",
    "HybridRetriever",
    "NarrativeIndex",
    "QueryRewriter",
    "RetrievableIndex",
    "RetrievalResult",
)
_INDEX_NAMES = (
    "BM25_INDEX_FORMAT",
    "BM25Index",
    "CandidateSet",
    "CorruptIndexError",
    "InvertedIndex",
    "Postings",
    "StaleIndexError",
    "StoreBM25Index",
)

__all__ = [
    "BM25_INDEX_FORMAT",
    "CHANNEL_BM25",
    "CHANNEL_HYBRID",
    "CHANNEL_OUTSIDE_VOCABULARY",
    "DEFAULT_BM25_B",
    "DEFAULT_BM25_K1",
    "DEFAULT_MIN_COVERAGE",
    "DEFAULT_RRF_K",
    "DEFAULT_TOP_K",
    "BM25Index",
    "CandidateSet",
    "CorruptIndexError",
    "EmbeddingBackend",
    "GlossaryQueryRewriter",
    "HybridRetriever",
    "InvertedIndex",
    "NarrativeIndex",
    "Postings",
    "QueryRewriter",
    "RetrievableIndex",
    "RetrievalResult",
    "StaleIndexError",
    "StoreBM25Index",
    "bm25_scores",
    "cosine_similarity",
    "rrf_fuse",
    "tokenize",
]


def __getattr__(name: str) -> Any:
    if name in _RETRIEVAL_NAMES:
        from ragspine_lite.lexical import retrieval

        return getattr(retrieval, name)
    if name in _INDEX_NAMES:
        from ragspine_lite.lexical import inverted_index

        return getattr(inverted_index, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
