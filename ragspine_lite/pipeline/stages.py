"""The stages of a search, one function each; :mod:`ragspine_lite.pipeline.search` runs them.

1. **filters → candidates** (:class:`RetrieveOptions`, :func:`equality_filters`,
   :func:`filtered_positions`): the five equality dimensions (``""`` is a real filter), then a
   ``MetadataFilter``. Nothing outside the candidates is scored or embedded.
2. **index text** (:func:`index_text`): the text BM25 indexes and the dense channel embeds;
   ``chunk.text`` stays the text that is cited.
3. **query variants** (:func:`query_variants`): the ``QueryRewriter``'s variants, original
   first, de-duplicated in order.
4. **channels** (:func:`choose_channel`, :func:`embed_queries`): hybrid when a dense lane is
   configured and the query passes the backend's vocabulary gate, else BM25.
5. **fusion**: :mod:`ragspine_lite.pipeline.fusion`.
6. **results** (:func:`fused_results`): a ``RetrievalResult`` per fused id, with the best score
   each channel gave it over all variants (``0.0`` when none).
7. **post-retrieval chain** (:func:`run_post_chain`): :class:`PostRetrievalStep` callables
   ``(query, results) -> results``, in order.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, TypeVar, runtime_checkable

from ragspine_lite.pipeline.fusion import ChannelHits, Fusion, Hit
from ragspine_lite.vector.base import embed_query_texts, outside_vocabulary

__all__ = [
    "CHANNEL_BM25",
    "CHANNEL_HYBRID",
    "CHANNEL_OUTSIDE_VOCABULARY",
    "DEFAULT_TOP_K",
    "FILTER_DIMS",
    "PostRetrievalStep",
    "QueryRewriter",
    "RetrievalResult",
    "RetrieveOptions",
    "choose_channel",
    "embed_queries",
    "equality_filters",
    "filtered_positions",
    "fused_results",
    "index_text",
    "query_variants",
    "results_of",
    "retrieve_keywords",
    "run_post_chain",
]

# What ``last_channel`` says after a search: BM25 + dense fused, BM25 alone (no dense lane
# configured), or BM25 alone because the query is outside the embedding vocabulary.
CHANNEL_HYBRID = "hybrid"
CHANNEL_BM25 = "bm25"
CHANNEL_OUTSIDE_VOCABULARY = "bm25:outside-vocabulary"

#: How many results a search returns unless told.
DEFAULT_TOP_K = 50

#: The five chunk attributes that act as equality filters (and as vector metadata).
FILTER_DIMS = ("topic", "entity", "geography", "period", "language")


@dataclass
class RetrievalResult:
    """One retrieved chunk with its scores.

    ``fused_score`` is the fusion's score (the sort key); ``bm25_score`` and ``vector_score``
    are the best score of that chunk over all query variants (``0.0`` when none).
    """

    chunk: Any
    bm25_score: float
    vector_score: float
    fused_score: float


# -- 1. filters → candidates ------------------------------------------------------------


@dataclass(frozen=True)
class RetrieveOptions:
    """The keyword arguments of a search, as one value: the equality ``filters`` (each of
    :data:`FILTER_DIMS` → its value, ``None``: no condition, ``""`` a real filter), ``top_k``
    (``None``: the index's own), a ``metadata_filter`` and, for an index that reranks,
    ``rerank`` and ``top_n``. Methods take them as keywords (a dimension each) through
    :func:`retrieve_keywords`."""

    filters: Mapping[str, str | None] = field(default_factory=lambda: dict.fromkeys(FILTER_DIMS))
    top_k: int | None = None
    rerank: bool = True
    top_n: int | None = None
    metadata_filter: Any | None = None


_R = TypeVar("_R")
_RERANK_ONLY = ("rerank", "top_n")


def _keyword_parameters(reranks: bool) -> list[inspect.Parameter]:
    """``self, query, *, <each filter dimension>, <each other RetrieveOptions field>``."""
    positional, keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("self", positional), inspect.Parameter("query", positional)]
    params += [inspect.Parameter(d, keyword, default=None, annotation="str | None")
               for d in FILTER_DIMS]
    return params + [
        inspect.Parameter(f.name, keyword, default=f.default, annotation=f.type)
        for f in fields(RetrieveOptions)[1:]
        if reranks or f.name not in _RERANK_ONLY
    ]


def retrieve_keywords(
    *, reranks: bool = True
) -> Callable[[Callable[[Any, str, RetrieveOptions], _R]], Callable[..., _R]]:
    """Decorate ``method(self, query, options)`` into ``method(self, query, *, topic=None,
    …)``: a keyword per filter dimension and per other field of :class:`RetrieveOptions`
    (without ``reranks``, not ``rerank`` and ``top_n``), with that signature; another
    keyword raises ``TypeError`` naming it."""
    params = _keyword_parameters(reranks)
    names = {p.name for p in params[2:]}

    def decorate(method: Callable[[Any, str, RetrieveOptions], _R]) -> Callable[..., _R]:
        @functools.wraps(method)
        def with_keywords(self: Any, query: str, **keywords: Any) -> _R:
            for name in keywords:
                if name not in names:
                    raise TypeError(
                        f"{method.__qualname__}() got an unexpected keyword argument {name!r}"
                    )
            filters = {dim: keywords.pop(dim, None) for dim in FILTER_DIMS}
            return method(self, query, RetrieveOptions(filters, **keywords))

        with_keywords.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        return with_keywords

    return decorate


def equality_filters(
    topic: str | None,
    entity: str | None,
    geography: str | None,
    period: str | None,
    language: str | None,
) -> dict[str, str | None]:
    """The equality filters of a search, by dimension (``None``: no condition)."""
    return dict(zip(FILTER_DIMS, (topic, entity, geography, period, language), strict=True))


def filtered_positions(
    chunks: Sequence[Any],
    filters: Mapping[str, str | None],
    metadata_filter: Any | None,
) -> list[int] | None:
    """Positions of the chunks passing the filters, in order; ``None`` when nothing filters."""
    active = {k: v for k, v in filters.items() if v is not None}
    if not active and metadata_filter is None:
        return None
    positions = [
        i for i, c in enumerate(chunks) if all(getattr(c, k, None) == v for k, v in active.items())
    ]
    if metadata_filter is None:
        return positions
    objs = [chunks[i] for i in positions]
    kept = metadata_filter.apply(objs)
    # apply() returns a subsequence of the very objects it got: walk both to map back.
    out: list[int] = []
    j = 0
    for obj in kept:
        while objs[j] is not obj:
            j += 1
        out.append(positions[j])
        j += 1
    return out


# -- 2. index text, 3. query variants -----------------------------------------------------


@runtime_checkable
class QueryRewriter(Protocol):
    """Expands a query into variants; the result must include the original query."""

    def rewrite(self, query: str) -> list[str]: ...


def index_text(index_text_fn: Callable[[Any], str] | None, chunk: Any) -> str:
    """The text indexed and embedded for ``chunk``: ``index_text_fn(chunk)`` or ``chunk.text``."""
    return index_text_fn(chunk) if index_text_fn is not None else chunk.text


def query_variants(rewriter: Any | None, query: str) -> list[str]:
    """The rewriter's variants of ``query`` (else ``[query]``), de-duplicated in order."""
    variants = rewriter.rewrite(query) if rewriter is not None else [query]
    return list(dict.fromkeys(variants))


# -- 4. channels ----------------------------------------------------------------------------


def choose_channel(dense: bool, backend: Any, query: str, min_coverage: float | None) -> str:
    """The channel a search takes: hybrid when ``dense`` and the query passes the gate."""
    if not dense:
        return CHANNEL_BM25
    if outside_vocabulary(backend, query, min_coverage):
        return CHANNEL_OUTSIDE_VOCABULARY
    return CHANNEL_HYBRID


def embed_queries(backend: Any, queries: list[str]) -> list[Any]:
    """Query vectors: ``backend.embed_queries`` when it has one (the query role), else
    ``embed_texts`` (:func:`~ragspine_lite.vector.embedding_backends.embed_query_texts`); all
    variants in one call (one model run)."""
    vectors = embed_query_texts(backend, queries)
    if len(vectors) != len(queries):
        raise ValueError(
            f"embedding backend returned {len(vectors)!r} vectors for {len(queries)!r} queries"
        )
    return vectors


# -- 6. results -------------------------------------------------------------------------------


def _best_scores(hits: Sequence[ChannelHits]) -> tuple[dict[str, float], dict[str, float]]:
    """Per chunk, the best BM25 (> 0) and the best cosine (any sign) over the variants."""
    best_lexical: dict[str, float] = {}
    best_dense: dict[str, float] = {}
    for h in hits:
        for cid, s in h.lexical:
            if s > best_lexical.get(cid, 0.0):
                best_lexical[cid] = s
        for cid, s in h.dense or ():
            if cid not in best_dense or s > best_dense[cid]:
                best_dense[cid] = s
    return best_lexical, best_dense


def fused_results(
    hits: Sequence[ChannelHits],
    fusion: Fusion,
    limit: int,
    chunks_for: Callable[[list[str]], Mapping[str, Any]],
) -> list[RetrievalResult]:
    """Fuse, then read the chunks of the fused ids only (``chunks_for(ids)`` → id → chunk)."""
    ordered = fusion.fuse(hits, limit)
    return results_of(hits, ordered, chunks_for([cid for cid, _ in ordered]))


def results_of(
    hits: Sequence[ChannelHits], ordered: Sequence[Hit], chunks: Mapping[str, Any]
) -> list[RetrievalResult]:
    """A result per fused ``(id, score)``, with the best score each channel gave it."""
    best_lexical, best_dense = _best_scores(hits)
    return [
        RetrievalResult(
            chunk=chunks[cid],
            bm25_score=best_lexical.get(cid, 0.0),
            vector_score=best_dense.get(cid, 0.0),
            fused_score=score,
        )
        for cid, score in ordered
    ]


# -- 7. post-retrieval chain ------------------------------------------------------------------


@runtime_checkable
class PostRetrievalStep(Protocol):
    """Reorders, cuts or annotates fused results: ``step(query, results) -> results``."""

    def __call__(self, query: str, results: list[RetrievalResult]) -> list[RetrievalResult]: ...


def run_post_chain(
    query: str, results: list[RetrievalResult], steps: Iterable[PostRetrievalStep]
) -> list[RetrievalResult]:
    """Apply ``steps`` in order; no steps → ``results`` unchanged (the same list)."""
    for step in steps:
        results = step(query, results)
    return results
