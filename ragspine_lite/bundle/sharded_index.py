"""The retrieval pipeline over a format-2 bundle, reading only the files a query needs.

:class:`ShardedIndex` answers ``retrieve`` like
:class:`~ragspine_lite.lexical.retrieval.NarrativeIndex` over the exported chunk store: the
same stages (:mod:`ragspine_lite.lexical.pipeline`), the same BM25 scorer, the same fusion and
tie rule, so its results equal the SQLite path's. What it reads: the postings shards of the
query variants' terms, the filter file when a search filters, and the text fragments of the
fused hits only.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ragspine_lite.bundle.shards import ShardedBM25Index, ShardedBundle
from ragspine_lite.filtering.metadata_filter import MetadataFilter
from ragspine_lite.lexical.inverted_index import CandidateSet
from ragspine_lite.lexical.pipeline import (
    CHANNEL_BM25,
    ChannelHits,
    RetrievalResult,
    channel_hits,
    default_fusion,
    equality_filters,
    filtered_positions,
    fused_results,
    query_variants,
)
from ragspine_lite.lexical.retrieval import DEFAULT_TOP_K, QueryRewriter
from ragspine_lite.lexical.tokenizer import tokenize

__all__ = ["ShardedIndex"]


class ShardedIndex:
    """Search a :class:`ShardedBundle` (BM25; see the module docstring).

    ``index_text_fn`` is the index text the bundle was built with (its BM25 postings already
    hold it); it is kept so page documents can be indexed the same way.
    """

    def __init__(
        self,
        bundle: ShardedBundle,
        *,
        query_rewriter: QueryRewriter | None = None,
        top_k: int = DEFAULT_TOP_K,
        index_text_fn: Callable[[Any], str] | None = None,
    ) -> None:
        self.bundle = bundle
        self.bm25 = ShardedBM25Index(bundle)
        self.query_rewriter = query_rewriter
        self.top_k = top_k
        self.index_text_fn = index_text_fn
        self.fusion = default_fusion(None)
        self.last_channel: str | None = None

    def files_for(
        self,
        query: str,
        *,
        metadata_filter: MetadataFilter | None = None,
        top_k: int | None = None,
    ) -> list[str]:
        """The files a search for ``query`` reads and the cache lacks: the postings shards of
        its terms and, when it filters, the filter file; once those are all cached and
        ``top_k`` is given, the text fragments of its ``top_k`` hits (ranked from memory)."""
        terms = {t for q in query_variants(self.query_rewriter, query) for t in tokenize(q)}
        paths = [p for p in (self.bundle.term_path(t) for t in sorted(terms)) if p is not None]
        if metadata_filter is not None:
            paths.append(self.bundle.filter_path)
        missing = self.bundle.missing(paths)
        if missing or top_k is None:
            return missing
        hits = self._hits(query, {}, metadata_filter, top_k)
        ordered = self.fusion.fuse(hits, top_k) if hits else []
        return self.bundle.missing(self.bundle.fragment_path(int(key)) for key, _ in ordered)

    def retrieve(
        self,
        query: str,
        *,
        topic: str | None = None,
        entity: str | None = None,
        geography: str | None = None,
        period: str | None = None,
        language: str | None = None,
        top_k: int | None = None,
        metadata_filter: MetadataFilter | None = None,
        **_ignored: Any,
    ) -> list[RetrievalResult]:
        """Top results by ``(-fused_score, chunk_id)``; filters as NarrativeIndex's."""
        limit = self.top_k if top_k is None else top_k
        self.last_channel = CHANNEL_BM25
        filters = equality_filters(topic, entity, geography, period, language)
        hits = self._hits(query, filters, metadata_filter, limit)
        if hits is None:
            return []
        return fused_results(hits, self.fusion, limit, self._chunks_for)

    def _hits(
        self,
        query: str,
        filters: Mapping[str, str | None],
        metadata_filter: MetadataFilter | None,
        limit: int,
    ) -> list[ChannelHits] | None:
        """The BM25 rankings of the query variants (``None``: no document passes the filters)."""
        candidates = self._candidates(filters, metadata_filter)
        if candidates is not None and candidates.count == 0:
            return None
        queries = query_variants(self.query_rewriter, query)
        with self.bm25.reading():
            rankings = self.bm25.rank_variants(queries, candidates=candidates, limit=limit)
        lexical = [[(key, s) for _, key, s in ranking] for ranking in rankings]
        return channel_hits(queries, lexical)

    def _candidates(
        self, filters: Mapping[str, str | None], metadata_filter: MetadataFilter | None
    ) -> CandidateSet | None:
        """The docnos passing the filters (``None``: nothing filters)."""
        if metadata_filter is None and all(v is None for v in filters.values()):
            return None
        table = self.bundle.filter_rows()
        kept = filtered_positions(table.rows, filters, metadata_filter) or []
        passing = bytearray(len(table.rows))
        for i in kept:
            passing[i] = 1
        return self.bm25.candidates(d for d, row in enumerate(table.row_of) if passing[row])

    def _chunks_for(self, keys: Iterable[str]) -> dict[str, Any]:
        wanted = {key: int(key) for key in keys}
        chunks = self.bundle.chunks(wanted.values())
        return {key: copy.copy(chunks[d]) for key, d in wanted.items()}  # as a fresh read
