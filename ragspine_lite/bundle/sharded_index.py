"""The retrieval pipeline over a format-2 bundle, reading only the files a query needs.

:class:`ShardedIndex` answers ``retrieve`` like
:class:`~ragspine_lite.lexical.retrieval.NarrativeIndex` over the exported chunk store: the
same stages (:mod:`ragspine_lite.lexical.pipeline`), the same BM25 scorer, the same fusion and
tie rule, so its results equal the SQLite path's. What it reads: the postings shards of the
query variants' terms, the filter file when a search filters, and the text fragments of the
fused hits only. With an embedding backend and a bundle with vectors it searches hybrid: the
dense lane (:class:`~ragspine_lite.bundle.dense.DenseLane`) scans the int8 vector shards with
a :class:`~ragspine_lite.bundle.dense.DenseScanner` (numpy or pure Python by default, the
worker's JavaScript one in the browser), the same integers the chunk store's int8 vectors give.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ragspine_lite.bundle.coarse import open_scanner
from ragspine_lite.bundle.dense import DenseLane, DenseRanking, DenseScanner
from ragspine_lite.bundle.shards import ShardedBM25Index, ShardedBundle, docno_key
from ragspine_lite.filtering.metadata_filter import MetadataFilter
from ragspine_lite.lexical.inverted_index import CandidateSet
from ragspine_lite.lexical.pipeline import (
    CHANNEL_HYBRID,
    ChannelHits,
    RetrievalResult,
    channel_hits,
    choose_channel,
    default_fusion,
    embed_queries,
    equality_filters,
    filtered_positions,
    fused_results,
    query_variants,
)
from ragspine_lite.lexical.retrieval import DEFAULT_TOP_K, QueryRewriter
from ragspine_lite.lexical.tokenizer import tokenize
from ragspine_lite.vector.embedding_backends import DEFAULT_MIN_COVERAGE, check_min_coverage

__all__ = ["LEXICAL_POOL", "ShardedIndex"]

#: BM25 hits a hybrid search scores before the dense hits (see :meth:`ShardedIndex._pooled`).
LEXICAL_POOL = 100


def _keyed(ranking: Iterable[tuple[int, str, float]]) -> list[tuple[str, float]]:
    return [(key, s) for _, key, s in ranking]


class ShardedIndex:
    """Search a :class:`ShardedBundle` (see the module docstring).

    ``index_text_fn`` is the index text the bundle was built with (its BM25 postings already
    hold it); it is kept so page documents can be indexed the same way. With an
    ``embedding_backend`` (and vectors in the bundle) searches are hybrid, gated by
    ``min_query_coverage`` and fused as NarrativeIndex fuses them; ``scanner`` scans the
    vectors (default: :func:`~ragspine_lite.bundle.coarse.open_scanner` over the bundle's
    files: exact shards or coarse lists).
    """

    def __init__(
        self,
        bundle: ShardedBundle,
        *,
        query_rewriter: QueryRewriter | None = None,
        top_k: int = DEFAULT_TOP_K,
        index_text_fn: Callable[[Any], str] | None = None,
        embedding_backend: Any = None,
        scanner: DenseScanner | None = None,
        min_query_coverage: float | None = DEFAULT_MIN_COVERAGE,
    ) -> None:
        self.bundle = bundle
        self.bm25 = ShardedBM25Index(bundle)
        self.query_rewriter = query_rewriter
        self.top_k = top_k
        self.index_text_fn = index_text_fn
        self.embedding_backend = embedding_backend
        self.dense: DenseLane | None = None
        if embedding_backend is not None and bundle.vectors is not None:
            vectors = bundle.vectors
            self.dense = DenseLane(vectors, scanner or open_scanner(bundle.files, vectors))
        self.min_query_coverage = check_min_coverage(min_query_coverage)
        self.fusion = default_fusion(embedding_backend)
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
        found = self._hits(query, {}, metadata_filter, top_k)
        ordered = self.fusion.fuse(found[0], top_k) if found else []
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
        self.last_channel = choose_channel(
            self.dense is not None, self.embedding_backend, query, self.min_query_coverage
        )
        filters = equality_filters(topic, entity, geography, period, language)
        hybrid = self.last_channel == CHANNEL_HYBRID
        found = self._hits(query, filters, metadata_filter, limit, hybrid=hybrid)
        if found is None:
            return []
        hits, dense = found
        keys: list[str] = []  # the results' keys, in order

        def chunks_for(ids: list[str]) -> dict[str, Any]:
            keys.extend(ids)
            return self._chunks_for(ids)

        results = fused_results(hits, self.fusion, limit, chunks_for)
        if dense:
            _add_vector_scores(results, keys, hits, dense)
        return results

    def _hits(
        self,
        query: str,
        filters: Mapping[str, str | None],
        metadata_filter: MetadataFilter | None,
        limit: int,
        *,
        hybrid: bool = False,
    ) -> tuple[list[ChannelHits], list[DenseRanking]] | None:
        """The BM25 (and, ``hybrid``, dense) rankings of the query variants, with the dense
        rankings (``None``: no document passes the filters)."""
        candidates = self._candidates(filters, metadata_filter)
        if candidates is not None and candidates.count == 0:
            return None
        queries = query_variants(self.query_rewriter, query)
        if not hybrid:
            with self.bm25.reading():
                rankings = self.bm25.rank_variants(queries, candidates=candidates, limit=limit)
            return channel_hits(queries, [_keyed(r) for r in rankings]), []
        dense = self._dense_rankings(queries, filters, candidates)
        vectors = [[(docno_key(d), c) for d, c in r.cosines(r.ranked)] for r in dense]
        lexical = None
        if len(queries) == 1 and getattr(self.fusion, "calibration", None) is not None:
            lexical = self._pooled(queries[0], candidates, vectors[0], limit)
        if lexical is None:  # every lexical hit counts
            with self.bm25.reading():
                rankings = self.bm25.rank_variants(queries, candidates=candidates)
            lexical = [_keyed(r) for r in rankings]
        return channel_hits(queries, lexical, vectors), dense

    def _pooled(
        self,
        query: str,
        candidates: CandidateSet | None,
        dense: list[tuple[str, float]],
        limit: int,
    ) -> list[list[tuple[str, float]]] | None:
        """The lexical ranking a calibrated fusion needs, without scoring every BM25 hit.

        The top ``max(LEXICAL_POOL, 2 * limit)`` hits (pruned) plus the exact BM25 of the
        dense hits outside them. Any other chunk has no dense evidence and at most the pool's
        last score, so it fuses to at most ``w · last / best``: when the ``limit``-th fused
        score is above that, the fused top ``limit`` is the full ranking's, bit for bit.
        ``None``: not proven, rank every hit.
        """
        tokens = tokenize(query)
        pool = max(LEXICAL_POOL, 2 * limit)
        with self.bm25.reading():
            top = self.bm25.rank(tokens, candidates=candidates, limit=pool)
            if len(top) < pool:
                return [_keyed(top)]  # every hit
            have = {d for d, _, _ in top}
            outside = [int(key) for key, _ in dense if int(key) not in have]
            extra = self.bm25.score(tokens, outside, candidates=candidates)
        lexical = sorted(_keyed(top + extra), key=lambda h: (-h[1], h[0]))
        fused = self.fusion.fuse(channel_hits([query], [lexical], [dense]), limit)
        weight = self.fusion.calibration.lexical_weight  # type: ignore[attr-defined]
        bound = weight * (top[-1][2] / top[0][2])
        return [lexical] if len(fused) == limit and fused[-1][1] > bound else None

    def dense_queries(self, query: str) -> list[str]:
        """The texts a :meth:`retrieve` of ``query`` embeds (``[]``: it takes a BM25 channel)."""
        channel = choose_channel(
            self.dense is not None, self.embedding_backend, query, self.min_query_coverage
        )
        return query_variants(self.query_rewriter, query) if channel == CHANNEL_HYBRID else []

    def _dense_rankings(
        self,
        queries: list[str],
        filters: Mapping[str, str | None],
        candidates: CandidateSet | None,
    ) -> list[DenseRanking]:
        """Per query variant, the dense rows the fusion reads, best first.

        As the chunk-store path: its store query asks for ``k =`` the candidate count among
        the rows passing the equality filters, then keeps the candidates. A calibrated
        fusion reads only cosines above its floor (an integer threshold for the scan); RRF
        reads the whole ranking.
        """
        assert self.dense is not None
        calibration = getattr(self.fusion, "calibration", None)
        floor = None if calibration is None else calibration.floor
        limit = among = keep = None
        if candidates is not None:
            limit, keep = candidates.count, candidates.mask.__getitem__
            if any(v is not None for v in filters.values()):
                where = self._candidates(filters, None)
                among = where.mask.__getitem__ if where is not None else None
        return [
            self.dense.rank(vector, floor=floor, limit=limit, among=among, keep=keep)
            for vector in embed_queries(self.embedding_backend, list(queries))
        ]

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


def _add_vector_scores(
    results: list[RetrievalResult],
    keys: list[str],
    hits: list[ChannelHits],
    dense: list[DenseRanking],
) -> None:
    """Give results without a dense hit (lexical hits below a calibrated floor) the vector
    score the chunk-store path reports: their best cosine over the variants' store queries.

    The fusion never read those cosines, so only the results' rows are scored (the chunk
    store scores every candidate).
    """
    scored = {key for h in hits for key, _ in h.dense or ()}
    todo = {int(key): r for key, r in zip(keys, results, strict=True) if key not in scored}
    seen: set[int] = set()
    for ranking in dense:
        for d, cosine in ranking.cosines(ranking.extra(todo)) if todo else ():
            if d not in seen or cosine > todo[d].vector_score:
                todo[d].vector_score = cosine
                seen.add(d)
