"""Lexical retrieval: CJK-aware tokenizer, Okapi BM25, RRF, and the hybrid retrievers.

The tokenizer and scoring primitives are imported eagerly. The retriever names come
from :mod:`ragspine_lite.lexical.retrieval` on first access: that module imports the
vector, rerank and chunking packages, which themselves import the tokenizer, so an
eager import here would create an import cycle.
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
from ragspine_lite.lexical.tokenizer import tokenize

_RETRIEVAL_NAMES = (
    "DEFAULT_TOP_K",
    "EmbeddingBackend",
    "GlossaryQueryRewriter",
    "HybridRetriever",
    "NarrativeIndex",
    "QueryRewriter",
    "RetrievableIndex",
    "RetrievalResult",
)

__all__ = [
    "DEFAULT_BM25_B",
    "DEFAULT_BM25_K1",
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


def __getattr__(name: str) -> Any:
    if name in _RETRIEVAL_NAMES:
        from ragspine_lite.lexical import retrieval

        return getattr(retrieval, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
