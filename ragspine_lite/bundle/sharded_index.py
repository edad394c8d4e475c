"""The retrieval pipeline over a format-5 bundle, reading only the files a query needs.

:class:`ShardedIndex` answers ``retrieve`` like
:class:`~ragspine_lite.lexical.retrieval.NarrativeIndex` over the exported chunk store: the
same :class:`~ragspine_lite.pipeline.search.Pipeline` over sibling lanes (:class:`ShardLane`,
:class:`ShardDenseLane`), the same BM25 scorer, the same fusion and
tie rule, so its results equal the SQLite path's. What it reads: the postings shards of the
query variants' terms, the filter file when a search filters, and the text fragments of the
fused hits only. With an embedding backend and a bundle with vectors it searches hybrid: the
dense lane (:class:`~ragspine_lite.bundle.dense.DenseLane`) scans the int8 vector shards with
a :class:`~ragspine_lite.bundle.dense.DenseScanner` (numpy or pure Python by default, the
worker's JavaScript one in the browser), the same integers the chunk store's int8 vectors give.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ragspine_lite.bundle.coarse import open_scanner
from ragspine_lite.bundle.dense import DenseLane, DenseRanking, DenseScanner
from ragspine_lite.bundle.shards import MissingFile, ShardedBM25Index, ShardedBundle, docno_key
from ragspine_lite.filtering.metadata_filter import MetadataFilter
from ragspine_lite.lexical.bm25_index import TermDocuments
from ragspine_lite.lexical.inverted_index import CandidateSet
from ragspine_lite.pipeline.fusion import Fusion, Hit, default_fusion
from ragspine_lite.pipeline.search import LEXICAL_POOL, RESCORED, Pipeline
from ragspine_lite.pipeline.stages import (
    CHANNEL_BM25,
    CHANNEL_HYBRID,
    DEFAULT_TOP_K,
    PostRetrievalStep,
    QueryRewriter,
    RetrievalResult,
    RetrieveOptions,
    embed_queries,
    filtered_positions,
    retrieve_keywords,
)
from ragspine_lite.text.words import tokenize
from ragspine_lite.vector.base import DEFAULT_MIN_COVERAGE, check_min_coverage

__all__ = ["LEXICAL_POOL", "ShardDenseLane", "ShardLane", "ShardedIndex"]


def _keyed(ranking: Iterable[tuple[int, str, float]]) -> list[Hit]:
    return [(key, s) for _, key, s in ranking]


class ShardLane:
    """The bundle's BM25 postings as a lexical lane (keys: :func:`docno_key` strings)."""

    unique_keys = True  # docno keys

    def __init__(self, bundle: ShardedBundle) -> None:
        self.bundle = bundle
        self.bm25 = ShardedBM25Index(bundle)

    def reading(self) -> Any:
        return self.bm25.reading()

    def candidates(
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

    def rankings(
        self, queries: Sequence[str], candidates: CandidateSet | None, limit: int | None
    ) -> list[list[Hit]]:
        with self.bm25.reading():
            rankings = self.bm25.rank_variants(queries, candidates=candidates, limit=limit)
        return [_keyed(r) for r in rankings]

    def scores(self, query: str, keys: list[str], candidates: CandidateSet | None) -> list[Hit]:
        with self.bm25.reading():
            hits = self.bm25.score(tokenize(query), map(int, keys), candidates=candidates)
        return _keyed(hits)

    def term_documents(
        self, terms: Sequence[str], max_df: int, candidates: CandidateSet | None
    ) -> list[TermDocuments]:
        """``terms`` as the postings count them over the candidates (exact words)."""
        with self.bm25.reading():
            return self.bm25.term_documents(terms, max_df, candidates=candidates)

    def chunks_for(self, keys: list[str], candidates: CandidateSet | None) -> dict[str, Any]:
        wanted = {key: int(key) for key in keys}
        self._ahead(self.bundle.fragment_path(d) for d in wanted.values())
        chunks = self.bundle.chunks(wanted.values())
        return {key: copy.copy(chunks[d]) for key, d in wanted.items()}  # as a fresh read

    def _ahead(self, paths: Iterable[str]) -> None:
        """Fetch the files not read yet together, when the bundle's files can (the worker's
        ``fetchAll``, awaited under JSPI: e.g. the fragments of hits only the dense lane
        found, which the search could not know beforehand); otherwise each is read when
        needed. The same bytes either way."""
        from ragspine_lite._compat import IN_PYODIDE, await_js

        fetch_all: Any = getattr(self.bundle.files, "fetchAll", None)
        missing = self.bundle.missing(paths) if IN_PYODIDE and fetch_all is not None else []
        if not missing:
            return
        from pyodide.ffi import to_js

        done, found = await_js(fetch_all(to_js(missing)))
        for path, data in zip(missing, found if done else (), strict=False):
            self.bundle.provide(path, data)


class _ShardRun:
    """One search's dense rankings: ``hits`` for the fusion (scanned when first read, after
    :meth:`rescore`), ``rankings`` to score more."""

    def __init__(self, rankings: list[DenseRanking]) -> None:
        self.rankings = rankings
        self._hits: list[list[Hit]] | None = None

    def rescore(self, keys: Iterable[str]) -> None:
        """Lexical hits whose exact dense evidence the fusion reads (a coarse scan may not
        read their rows); before :attr:`hits` is read."""
        docnos = [int(key) for key in keys]
        for ranking in self.rankings:
            ranking.rescore(docnos)

    @property
    def hits(self) -> list[list[Hit]]:
        if self._hits is None:
            self._hits = [[(docno_key(d), c) for d, c in r.cosines(r.ranked)]
                          for r in self.rankings]
        return self._hits

    def complete(self, results: list[RetrievalResult], keys: list[str]) -> None:
        """Give results without a dense hit (lexical hits below a calibrated floor) the
        vector score the chunk-store path reports: their best cosine over the variants'
        store queries.

        The fusion never read those cosines, so only the results' rows are scored (the chunk
        store scores every candidate).
        """
        scored = {key for ranking in self.hits for key, _ in ranking}
        todo = {int(key): r for key, r in zip(keys, results, strict=True) if key not in scored}
        seen: set[int] = set()
        for ranking in self.rankings:
            for d, cosine in ranking.cosines(ranking.extra(todo)) if todo else ():
                if d not in seen or cosine > todo[d].vector_score:
                    todo[d].vector_score = cosine
                    seen.add(d)


class ShardDenseLane:
    """The bundle's int8 vector shards as a dense lane, scanned by ``vectors.scanner``."""

    def __init__(
        self, lexical: ShardLane, vectors: DenseLane, backend: Any, fusion: Fusion
    ) -> None:
        self.lexical, self.vectors, self.backend, self.fusion = lexical, vectors, backend, fusion

    def rank(
        self,
        queries: list[str],
        candidates: CandidateSet | None,
        filters: Mapping[str, str | None],
    ) -> _ShardRun:
        """Per query variant, the dense rows the fusion reads, best first.

        As the chunk-store path: its store query asks for ``k =`` the candidate count among
        the rows passing the equality filters, then keeps the candidates. A calibrated
        fusion reads only cosines above its floor (an integer threshold for the scan); RRF
        reads the whole ranking.
        """
        calibration = getattr(self.fusion, "calibration", None)
        floor = None if calibration is None else calibration.floor
        limit = among = keep = None
        if candidates is not None:
            limit, keep = candidates.count, candidates.mask.__getitem__
            if any(v is not None for v in filters.values()):
                where = self.lexical.candidates(filters, None)
                among = where.mask.__getitem__ if where is not None else None
        return _ShardRun([
            self.vectors.rank(vector, floor=floor, limit=limit, among=among, keep=keep)
            for vector in embed_queries(self.backend, list(queries))
        ])


class ShardedIndex:
    """Search a :class:`ShardedBundle` (see the module docstring).

    ``index_text_fn`` is the index text the bundle was built with (its BM25 postings already
    hold it); it is kept so page documents can be indexed the same way. With an
    ``embedding_backend`` (and vectors in the bundle) searches are hybrid, gated by
    ``min_query_coverage`` and fused as NarrativeIndex fuses them; ``scanner`` scans the
    vectors (default: :func:`~ragspine_lite.bundle.coarse.open_scanner` over the bundle's
    files: exact shards or coarse lists). ``post_retrieval`` steps run on every search's
    results, as NarrativeIndex's.
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
        post_retrieval: Iterable[PostRetrievalStep] = (),
    ) -> None:
        self.bundle = bundle
        self.lane = ShardLane(bundle)
        self.bm25 = self.lane.bm25
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
        self.post_retrieval: list[PostRetrievalStep] = list(post_retrieval)
        self.last_channel: str | None = None

    def _pipeline(self) -> Pipeline:
        return Pipeline(
            self.fusion,
            self.query_rewriter,
            self.embedding_backend,
            self.min_query_coverage,
            self.post_retrieval,
        )

    def _dense_lane(self) -> ShardDenseLane | None:
        if self.dense is None:
            return None
        return ShardDenseLane(self.lane, self.dense, self.embedding_backend, self.fusion)

    def files_for(
        self,
        query: str,
        *,
        metadata_filter: MetadataFilter | None = None,
        top_k: int | None = None,
    ) -> list[str]:
        """The files a search for ``query`` reads and the cache lacks: the postings shards of
        its terms and, when it filters, the filter and token-count files; once those are all
        cached and ``top_k`` is given, a length file its ranking reads (one per call, ranked
        from memory), then the text fragments of its ``top_k`` hits: the fused ones once its
        query vectors are cached (a hybrid search; the scanner reads the vectors itself),
        else the BM25 ones (most of a hybrid search's results are among them)."""
        pipeline = self._pipeline()
        terms = {t for q in pipeline.variants(query) for t in tokenize(q)}
        paths = [p for p in (self.bundle.term_path(t) for t in sorted(terms)) if p is not None]
        if metadata_filter is not None:
            paths += [self.bundle.filter_path, self.bundle.lengths_path]
        missing = self.bundle.missing(paths)
        if missing or top_k is None:
            return missing
        dense = self._dense_lane() if self._primed(query) else None
        try:
            ordered = self._top(query, metadata_filter, top_k, dense)
        except MissingFile as missing_file:
            return [missing_file.path]
        return self.bundle.missing(self.bundle.fragment_path(int(key)) for key, _ in ordered)

    def _primed(self, query: str) -> list[str]:
        """The texts a hybrid search of ``query`` embeds when the backend has them all cached
        (its ``plan`` asks for nothing), else ``[]`` (also on a BM25 channel)."""
        plan = getattr(self.embedding_backend, "plan", None)
        if self.dense is None or plan is None:
            return []
        queries = self.dense_queries(query)
        return queries if queries and not plan(queries)["texts"] else []

    def _top(
        self,
        query: str,
        metadata_filter: MetadataFilter | None,
        limit: int,
        dense: ShardDenseLane | None = None,
    ) -> list[Hit]:
        """The top ``limit`` of ``query`` (fused with ``dense``, else BM25), ranked from the
        files in memory (a missing one raises :class:`MissingFile`)."""
        channel = CHANNEL_BM25 if dense is None else CHANNEL_HYBRID
        with self.bundle.planning():
            found = self._pipeline().rank(query, self.lane, dense, limit=limit,
                                          metadata_filter=metadata_filter, channel=channel)
        return found[1] if found is not None else []

    def vectors_for(
        self, query: str, *, metadata_filter: MetadataFilter | None = None, top_k: int
    ) -> tuple[list[bytes], list[int]]:
        """What a hybrid search of ``query`` hands the vector scanner, known before it runs
        when its query vectors are cached: each variant's int8 codes and the docnos of its
        BM25 top ``RESCORED · top_k``, whose dense evidence the fusion reads. ``([], [])`` on
        a BM25 channel or without those vectors; raises :class:`MissingFile` for a file the
        BM25 ranking reads and the cache lacks."""
        queries = self._primed(query)
        if not queries or self.dense is None:
            return [], []
        top = self._top(query, metadata_filter, RESCORED * top_k)
        codec = self.dense.codec
        codes = [codec.encode(tuple(float(x) for x in vector))
                 for vector in embed_queries(self.embedding_backend, queries)]
        return codes, [int(key) for key, _ in top]

    @retrieve_keywords()
    def retrieve(self, query: str, options: RetrieveOptions) -> list[RetrievalResult]:
        """Top results by ``(-fused_score, chunk_id)``; keywords as NarrativeIndex's (it never
        reranks: ``rerank`` and ``top_n`` change nothing)."""
        limit = self.top_k if options.top_k is None else options.top_k
        pipeline = self._pipeline()
        self.last_channel = pipeline.channel(query, self.dense is not None)
        return pipeline.search(
            query,
            self.lane,
            self._dense_lane(),
            limit=limit,
            filters=options.filters,
            metadata_filter=options.metadata_filter,
            channel=self.last_channel,
        )

    def dense_queries(self, query: str) -> list[str]:
        """The texts a :meth:`retrieve` of ``query`` embeds (``[]``: it takes a BM25 channel)."""
        return self._pipeline().dense_queries(query, self.dense is not None)
