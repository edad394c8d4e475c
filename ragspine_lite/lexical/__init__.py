"""Lexical retrieval: CJK-aware tokenizer, Okapi BM25, RRF, the BM25 index, the retrievers.

The tokenizer and scoring primitives are imported eagerly. Every other public name (and
``__all__``) comes on first access from the module that declares it: the retriever names
from :mod:`ragspine_lite.lexical.retrieval` (the retrievers now live in
:mod:`ragspine_lite.pipeline.retrievers`), the index names from
:mod:`ragspine_lite.lexical.inverted_index`. The retrievers are built on the pipeline, which
is built on this package's index, so an eager import here would create an import cycle.
"""

from __future__ import annotations

from typing import Any

from ragspine_lite.lexical.scoring import DEFAULT_BM25_B as DEFAULT_BM25_B
from ragspine_lite.lexical.scoring import DEFAULT_BM25_K1 as DEFAULT_BM25_K1
from ragspine_lite.lexical.scoring import DEFAULT_RRF_K as DEFAULT_RRF_K
from ragspine_lite.lexical.scoring import bm25_scores as bm25_scores
from ragspine_lite.lexical.scoring import cosine_similarity as cosine_similarity
from ragspine_lite.lexical.scoring import rrf_fuse as rrf_fuse
from ragspine_lite.text.words import tokenize as tokenize


def _homes() -> list[Any]:
    """The modules whose ``__all__`` names this package serves lazily."""
    from ragspine_lite.lexical import inverted_index, retrieval

    return [inverted_index, retrieval]


def __getattr__(name: str) -> Any:
    # Only the homes' names (classes and constants: capitalised) are looked up; submodules
    # and probes (lower case) are left to the import system, so no lookup made while the
    # pipeline is still importing this package's index can import the retrievers.
    if name == "__all__":
        return sorted({n for home in _homes() for n in home.__all__})
    if name[:1].isupper():
        for home in _homes():
            if name in home.__all__:
                return getattr(home, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__getattr__("__all__")))
