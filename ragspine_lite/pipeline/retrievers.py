"""Hybrid narrative retrieval: metadata pre-filter → BM25 (+ optional dense) → RRF → rerank.

Pure BM25 + RRF is the zero-dependency default and is byte-identical to a build that
never heard of embeddings; an :class:`EmbeddingBackend` switches the dense lane on. A query
the backend's vocabulary mostly does not know (``backend.coverage(query)`` below
``min_query_coverage``, e.g. Chinese for the English MiniLM) is searched with BM25 alone,
exactly as without a backend; ``last_channel`` tells which channel the last search used.
Every ordering is deterministic: ties are broken by ``chunk_id`` ascending.

BM25 goes through an inverted index (:mod:`ragspine_lite.lexical.inverted_index`) that
returns exactly what :func:`bm25_scores` over the candidates gives: in memory for a
:class:`HybridRetriever`, persisted in the chunk store's file for a :class:`NarrativeIndex`.

>>> from ragspine_lite.chunking.chunking import Chunk
>>> chunks = [
...     Chunk("d#c0", "d", 0, "revenue grew in hong kong", "d#para1", 1, 1),
...     Chunk("d#c1", "d", 1, "profit fell", "d#para2", 2, 2),
... ]
>>> [r.chunk.chunk_id for r in HybridRetriever(chunks).search("revenue")]
['d#c0']
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.chunking.chunk_store import ChunkStore, ChunkStoreError, StoredChunk
from ragspine_lite.chunking.chunking import Chunk, DocumentMeta, chunk_document
from ragspine_lite.common.glossary import DEFAULT_GLOSSARY, Glossary, find_terms
from ragspine_lite.common.validators import positive_int
from ragspine_lite.filtering.automatic import FilterExtractor, extract_filter
from ragspine_lite.filtering.metadata_filter import MetadataFilter
from ragspine_lite.lexical.inverted_index import StaleIndexError, StoreBM25Index
from ragspine_lite.lexical.scoring import (
    DEFAULT_BM25_B,
    DEFAULT_BM25_K1,
    DEFAULT_RRF_K,
    bm25_scores,
    cosine_similarity,
    rrf_fuse,
)
from ragspine_lite.pipeline.fusion import Fusion, default_fusion
from ragspine_lite.pipeline.lanes import (
    ChunkListLane,
    StoreLane,
    VectorStoreLane,
    embed_checked,
    vector_records,
)
from ragspine_lite.pipeline.search import LexicalLane, Pipeline, no_read
from ragspine_lite.pipeline.stages import (
    CHANNEL_BM25,
    CHANNEL_HYBRID,
    CHANNEL_OUTSIDE_VOCABULARY,
    DEFAULT_TOP_K,
    PostRetrievalStep,
    QueryRewriter,
    RetrievalResult,
    RetrieveOptions,
    filtered_positions,
    index_text,
    retrieve_keywords,
)
from ragspine_lite.rerank.listwise_rerank import ListwiseJudge, listwise_rerank
from ragspine_lite.text.words import tokenize
from ragspine_lite.vector.base import (
    DEFAULT_MIN_COVERAGE,
    EmbeddingBackend,
    check_min_coverage,
)
from ragspine_lite.vector.persistence_policy import (
    IsolationFirstPolicy,
    PersistencePolicy,
    withheld_from_vectors,
)
from ragspine_lite.vector.store import InProcessVectorStore, VectorStore

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

logger = logging.getLogger(__name__)

# How many filter sets NarrativeIndex keeps a retriever over the active rows for.
_ROWS_CACHE_SIZE = 4


@runtime_checkable
class RetrievableIndex(Protocol):
    """What the agent link needs from an index."""

    def retrieve(self, query: str, **options: Any) -> list[RetrievalResult]:
        """Results for ``query``; ``options`` are :class:`RetrieveOptions`' fields as keywords
        (``topic``, ``entity``, ``geography``, ``period``, ``language``, ``top_k``,
        ``rerank``, ``top_n``, ``metadata_filter``)."""
        ...


def _check_top_k(value: Any, name: str = "top_k") -> int:
    return positive_int(value, name)


def _check_optional_top(value: Any, name: str) -> int | None:
    return None if value is None else _check_top_k(value, name)


class GlossaryQueryRewriter:
    """Multi-query expansion from the glossary: metric/entity terms → codes and synonyms.

    Terms are matched on the lowercased query (ASCII terms on word boundaries, so "cn"
    never matches "concern"; other terms as substrings), METRIC then ENTITY in dict
    order. Round 1 replaces each matched span with its code, round 2 with every other
    synonym of that code; a variant is added only if new and while fewer than
    ``max_queries`` are held. The original query always comes first.

    >>> GlossaryQueryRewriter(max_queries=3).rewrite("hk revenue")
    ['hk revenue', 'hk REVENUE', 'ACME_HK revenue']
    """

    def __init__(self, max_queries: int = 5, glossary: Glossary | None = None) -> None:
        if isinstance(max_queries, bool) or not isinstance(max_queries, int) or max_queries < 1:
            raise ValueError(f"max_queries must be an int >= 1, got {max_queries!r}")
        self.max_queries = max_queries
        self.glossary = glossary if glossary is not None else DEFAULT_GLOSSARY

    def rewrite(self, query: str) -> list[str]:
        """The original query followed by up to ``max_queries - 1`` glossary variants."""
        out = [query]
        lowered = query.lower()
        maps = (self.glossary.metric_synonyms, self.glossary.entity_synonyms)
        matches = [(m, syn) for syn in maps for m in find_terms(lowered, syn)]

        def add(candidate: str) -> None:
            if len(out) < self.max_queries and candidate not in out:
                out.append(candidate)

        for m, _syn in matches:
            add(lowered[: m.start] + m.code + lowered[m.end :])
        for m, syn in matches:
            for term, code in syn.items():
                if code == m.code and term != m.term:
                    add(lowered[: m.start] + term + lowered[m.end :])
        return out


class _SearchSettings:
    """What :class:`HybridRetriever` and :class:`NarrativeIndex` keep alike: the backend, the
    rewriter, ``top_k``, the vector store (a new :class:`InProcessVectorStore` iff a backend
    is given and none injected), the index text, the coverage gate, the fusion (by default
    :func:`~ragspine_lite.pipeline.fusion.default_fusion` with ``rrf_k``), the post-retrieval
    steps and the last search's channel."""

    def _keep_settings(
        self,
        embedding_backend: EmbeddingBackend | None,
        query_rewriter: QueryRewriter | None,
        top_k: int,
        vector_store: VectorStore | None,
        index_text_fn: Callable[[Any], str] | None,
        min_query_coverage: float | None,
        fusion: Fusion | None,
        post_retrieval: Iterable[PostRetrievalStep],
        rrf_k: float = DEFAULT_RRF_K,
    ) -> None:
        self.embedding_backend = embedding_backend
        self.query_rewriter = query_rewriter
        self.top_k = _check_top_k(top_k)
        if vector_store is None and embedding_backend is not None:
            vector_store = InProcessVectorStore()
        self.vector_store = vector_store
        self.index_text_fn = index_text_fn
        self.min_query_coverage = check_min_coverage(min_query_coverage)
        self.fusion = fusion if fusion is not None else default_fusion(embedding_backend, rrf_k)
        self.post_retrieval: list[PostRetrievalStep] = list(post_retrieval)
        self.last_channel: str | None = None


class HybridRetriever(_SearchSettings):
    """BM25 (+ optional dense) retrieval over a fixed list of chunks, through the pipeline.

    A :class:`~ragspine_lite.pipeline.search.Pipeline` over a
    :class:`~ragspine_lite.pipeline.lanes.ChunkListLane` and, with a backend, a
    :class:`~ragspine_lite.pipeline.lanes.VectorStoreLane`; ``fusion`` defaults to
    :func:`~ragspine_lite.pipeline.fusion.default_fusion` (RRF with ``rrf_k`` unless the
    backend ships a calibration) and ``post_retrieval`` steps run on every search's results.

    ``vector_store`` is the injected store, else a new :class:`InProcessVectorStore` iff
    an ``embedding_backend`` is given, else ``None`` (pure BM25). With
    ``manage_vectors=False`` chunk vectors are assumed to be in the store already and
    only queries are embedded. ``embedding_cache`` maps ``chunk_id`` → chunk vector.

    ``min_query_coverage`` gates the dense lane per query for backends with a ``coverage``
    method: below it the query is searched with BM25 only (results identical to a retriever
    without a backend, nothing embedded); ``None`` turns the gate off. ``last_channel`` is
    the channel of the last search (:data:`CHANNEL_HYBRID`, :data:`CHANNEL_BM25`,
    :data:`CHANNEL_OUTSIDE_VOCABULARY`; ``None`` before the first).

    BM25 uses an in-memory :class:`InvertedIndex` built on the first search from the
    chunks' index texts as they are then (chunks are not expected to change afterwards);
    results equal :func:`bm25_scores` over the candidates, bit for bit.
    """

    def __init__(
        self,
        chunks: Iterable[StoredChunk | Chunk],
        *,
        embedding_backend: EmbeddingBackend | None = None,
        query_rewriter: QueryRewriter | None = None,
        k1: float = DEFAULT_BM25_K1,
        b: float = DEFAULT_BM25_B,
        rrf_k: float = DEFAULT_RRF_K,
        top_k: int = DEFAULT_TOP_K,
        embedding_cache: MutableMapping[str, list[float]] | None = None,
        vector_store: VectorStore | None = None,
        manage_vectors: bool = True,
        index_text_fn: Callable[[Any], str] | None = None,
        min_query_coverage: float | None = DEFAULT_MIN_COVERAGE,
        fusion: Fusion | None = None,
        post_retrieval: Iterable[PostRetrievalStep] = (),
    ) -> None:
        self.chunks = list(chunks)
        self.k1, self.b, self.rrf_k = k1, b, rrf_k
        self._keep_settings(
            embedding_backend, query_rewriter, top_k, vector_store, index_text_fn,
            min_query_coverage, fusion, post_retrieval, rrf_k,
        )
        self.embedding_cache: MutableMapping[str, list[float]] = (
            embedding_cache if embedding_cache is not None else {}
        )
        self.manage_vectors = manage_vectors
        self._lane: ChunkListLane | None = None

    def _lexical_lane(self) -> ChunkListLane:
        """The BM25 lane over ``chunks``, its index built on the first search."""
        if self._lane is None:
            self._lane = ChunkListLane(
                self.chunks, index_text_fn=self.index_text_fn, k1=self.k1, b=self.b
            )
        return self._lane

    @retrieve_keywords(reranks=False)
    def search(self, query: str, options: RetrieveOptions) -> list[RetrievalResult]:
        """Top results sorted by ``(-fused_score, chunk_id)``, at most ``top_k``.

        Keywords: the five filters (``""`` is a real filter), ``top_k`` and
        ``metadata_filter`` (:class:`RetrieveOptions`); the filters select candidates before
        anything is scored or embedded. Pure-BM25 mode returns only chunks with a BM25 hit;
        hybrid mode ranks every candidate on the vector lane too.
        """
        top_k = options.top_k
        limit = self.top_k if top_k is None else _check_top_k(top_k)
        backend, store = self.embedding_backend, self.vector_store
        dense = None
        if backend is not None and store is not None:
            dense = VectorStoreLane(
                backend, store, self.manage_vectors, self.index_text_fn, self.embedding_cache
            )
        pipeline = Pipeline(
            self.fusion, self.query_rewriter, backend, self.min_query_coverage, self.post_retrieval
        )
        self.last_channel = pipeline.channel(query, dense is not None)
        return pipeline.search(
            query,
            self._lexical_lane(),
            dense,
            limit=limit,
            filters=options.filters,
            metadata_filter=options.metadata_filter,
            channel=self.last_channel,
        )


class NarrativeIndex(_SearchSettings):
    """A versioned :class:`ChunkStore` plus its vectors, searchable with optional rerank.

    ``ingest`` chunks a document, replaces its active chunks and swaps its vectors
    (doc-scoped delete, then only ``persistence_policy.persistable`` chunks are embedded
    and upserted — RESTRICTED is not persisted by default). ``retrieve`` never
    re-embeds chunks: only queries are embedded.

    BM25 is served by the store's persisted index (:class:`StoreBM25Index`, attached here
    and kept current inside every write; a store whose index is missing or behind gets it
    built on the first retrieve). With an ``index_text_fn`` the indexed text differs from
    ``chunk.text``, so BM25 then runs over the active chunks in memory, as it always did.

    ``min_query_coverage``, ``last_channel``, ``fusion`` and ``post_retrieval`` work as in
    :class:`HybridRetriever` (a query outside the backend's vocabulary takes exactly the
    pure-BM25 path); a judge's listwise rerank runs before the ``post_retrieval`` steps.
    """

    def __init__(
        self,
        store: ChunkStore,
        *,
        embedding_backend: EmbeddingBackend | None = None,
        query_rewriter: QueryRewriter | None = None,
        judge: ListwiseJudge | None = None,
        max_chars: int = 480,
        overlap_chars: int = 80,
        top_k: int = DEFAULT_TOP_K,
        rerank_top_n: int = 10,
        vector_store: VectorStore | None = None,
        persistence_policy: PersistencePolicy | None = None,
        index_text_fn: Callable[[Any], str] | None = None,
        filter_extractor: FilterExtractor | None = None,
        chunker: Any | None = None,
        min_query_coverage: float | None = DEFAULT_MIN_COVERAGE,
        fusion: Fusion | None = None,
        post_retrieval: Iterable[PostRetrievalStep] = (),
    ) -> None:
        self.store = store
        self._keep_settings(
            embedding_backend, query_rewriter, top_k, vector_store, index_text_fn,
            min_query_coverage, fusion, post_retrieval,
        )
        self.judge = judge
        self.max_chars, self.overlap_chars = max_chars, overlap_chars
        self.rerank_top_n = _check_top_k(rerank_top_n, "rerank_top_n")
        self.persistence_policy = (
            persistence_policy if persistence_policy is not None else IsolationFirstPolicy()
        )
        self.filter_extractor = filter_extractor
        self.chunker = chunker
        self._bm25: StoreBM25Index | None = (
            StoreBM25Index.attach(store) if index_text_fn is None else None
        )
        self._bm25_unavailable_logged = False
        # _rows_lane: filter set → the lane over those active rows, valid for one store
        # generation and one set of the settings it was built from.
        self._rows_cache: dict[tuple[Any, ...], ChunkListLane] = {}
        self._rows_generation: int | None = None
        self._rows_settings: tuple[Any, ...] = (None,) * 7
        # _filtered_candidates: (filters, metadata filter) → its candidates, for one generation.
        self._candidates_cache: dict[tuple[Any, ...], Any] = {}
        self._candidates_generation: int | None = None

    def _persisted_bm25(self) -> StoreBM25Index | None:
        """The store's BM25 index, up to date, or ``None`` if it cannot be used."""
        if self._bm25 is None:
            return None
        try:
            with self._bm25.reading():
                return self._bm25  # current: the common case costs one read
        except StaleIndexError:
            pass
        try:
            self.store.sync_indexers()
        except ChunkStoreError:
            if not self._bm25_unavailable_logged:
                logger.warning(
                    "the BM25 index of %r cannot be built (read-only store?); "
                    "scoring the active chunks in memory instead",
                    self.store.db_path,
                    exc_info=True,
                )
                self._bm25_unavailable_logged = True
            return None
        return self._bm25

    def ingest(self, text: str, meta: DocumentMeta, valid_as_of: str = "") -> int:
        """Chunk ``text``, make it the document's active version, swap its vectors."""
        chunks = self._chunk(text, meta)
        count = self.store.replace_doc_chunks(meta.doc_id, chunks, valid_as_of)
        if self.vector_store is not None:
            self.vector_store.delete(where={"doc_id": meta.doc_id})
            keep = self._vector_chunks(chunks)
            if keep:
                texts = [index_text(self.index_text_fn, c) for c in keep]
                vectors = embed_checked(self.embedding_backend, texts)  # type: ignore[arg-type]
                self.vector_store.upsert(vector_records(keep, vectors))
        return count

    def texts_to_embed(self, text: str, meta: DocumentMeta) -> list[str]:
        """The index texts :meth:`ingest` of this document would embed (nothing is written)."""
        if self.vector_store is None:
            return []
        keep = self._vector_chunks(self._chunk(text, meta))
        return [index_text(self.index_text_fn, c) for c in keep]

    def _chunk(self, text: str, meta: DocumentMeta) -> list[Chunk]:
        chunk = self.chunker.chunk if self.chunker is not None else chunk_document
        return chunk(text, meta, max_chars=self.max_chars, overlap_chars=self.overlap_chars)

    def _vector_chunks(self, chunks: list[Chunk]) -> list[Chunk]:
        """The chunks that get a vector: persistable ones, never RESTRICTED sent off host or
        written to an external store."""
        if self.embedding_backend is None:
            return []
        return [
            c
            for c in chunks
            if self.persistence_policy.persistable(c)
            and not withheld_from_vectors(c, self.embedding_backend, self.vector_store)
        ]

    @retrieve_keywords()
    def retrieve(self, query: str, options: RetrieveOptions) -> list[RetrievalResult]:
        """Search the active chunks; with a judge (and ``rerank``) listwise-rerank the top.
        Keywords: :class:`RetrieveOptions`' fields.

        ``metadata_filter`` wins over the ``filter_extractor``; with a judge at most
        ``top_n or rerank_top_n`` results come back. The lexical lane is the store's index
        straight when it can serve alone (BM25 only, ids unique), else the active rows
        passing the filters (kept per filter set), scored by the store's index or, with an
        ``index_text_fn`` or no usable store index, in memory.
        """
        limit = self.top_k if options.top_k is None else _check_top_k(options.top_k)
        n = _check_optional_top(options.top_n, "top_n")
        mf = options.metadata_filter
        if mf is None:
            # A failing or empty extractor gives None: candidates stay the explicit filters.
            mf = extract_filter(self.filter_extractor, query)
        filters = options.filters
        steps = self.post_retrieval
        if options.rerank and self.judge is not None:
            steps = [_ListwiseRerankStep(self.judge, n or self.rerank_top_n), *steps]
        pipeline = self._pipeline(steps)
        self.last_channel = pipeline.channel(query, self._dense_on())
        dense = None
        if self.last_channel == CHANNEL_HYBRID and self.vector_store is not None:
            dense = VectorStoreLane(
                self.embedding_backend, self.vector_store, index_text_fn=self.index_text_fn
            )
        bm25 = self._persisted_bm25()
        with bm25.reading() if bm25 is not None else no_read():
            lane: LexicalLane
            if bm25 is not None and dense is None and not bm25.has_duplicate_chunk_ids:
                lane = StoreLane(
                    self.store, bm25, lambda f, m: self._filtered_candidates(bm25, f, m)
                )
                lane_filters = filters
            else:  # the rows passing the equality filters are the lane: none left to apply
                lane, lane_filters = self._rows_lane(bm25, filters), None
            results = pipeline.retrieve(
                query, lane, dense, limit=limit, filters=lane_filters, metadata_filter=mf,
                channel=self.last_channel,
            )
        return pipeline.post(query, results)

    def _pipeline(self, steps: Sequence[PostRetrievalStep] = ()) -> Pipeline:
        return Pipeline(
            self.fusion, self.query_rewriter, self.embedding_backend, self.min_query_coverage, steps
        )

    def _dense_on(self) -> bool:
        return self.embedding_backend is not None and self.vector_store is not None

    def dense_queries(self, query: str) -> list[str]:
        """The texts a :meth:`retrieve` of ``query`` embeds (``[]``: it takes a BM25 channel)."""
        return self._pipeline().dense_queries(query, self._dense_on())

    def _rows_lane(
        self, bm25: StoreBM25Index | None, filters: Mapping[str, str | None]
    ) -> ChunkListLane:
        """The (cached) lane over the active rows passing ``filters``, scored with the store
        index (``bm25``) or with its own in-memory index over their index texts (``None``).

        Kept per filter set while the store's write counter (``generation``, read in the same
        snapshot as the index) and this index's settings stay the same; each result gets its
        own copy of the chunk, as a fresh read would give.
        """
        generation = self.store.generation()
        settings = (
            bm25,
            self.embedding_backend,
            self.query_rewriter,
            self.vector_store,
            self.index_text_fn,
            self.top_k,
            self.fusion,
        )
        cached = self._rows_cache
        if generation != self._rows_generation or any(
            a is not b for a, b in zip(settings, self._rows_settings, strict=True)
        ):
            cached.clear()
            self._rows_generation, self._rows_settings = generation, settings
        key = tuple(sorted(filters.items()))
        lane = cached.get(key)
        if lane is None:
            rows = self.store.iter_chunk_rows(**filters)
            lane = ChunkListLane(
                [c for _, c in rows],
                index_text_fn=self.index_text_fn,
                index=bm25,
                docnos=None if bm25 is None else [rowid for rowid, _ in rows],
                copies=True,
            )
            while len(cached) >= _ROWS_CACHE_SIZE:
                del cached[next(iter(cached))]  # the oldest filter set
            cached[key] = lane
        return lane

    def _filtered_candidates(
        self, bm25: StoreBM25Index, filters: Mapping[str, str | None], mf: MetadataFilter
    ) -> Any:
        """The store index's candidates passing ``filters`` and ``mf``, kept per (hashable)
        filter pair while the store's write counter stays (a filter on every search, such as
        the link's RESTRICTED one, then costs one scan of the rows per store version)."""
        generation = self.store.generation()
        if generation != self._candidates_generation:
            self._candidates_cache.clear()
            self._candidates_generation = generation
        try:
            key: tuple[Any, ...] | None = (tuple(sorted(filters.items())), mf)
            cand = self._candidates_cache.get(key)  # type: ignore[arg-type]
        except TypeError:  # e.g. an "in" filter given a list: not cached
            key, cand = None, None
        if cand is None:
            rows = self.store.iter_chunk_rows(**filters)
            kept = filtered_positions([c for _, c in rows], {}, mf) or []
            cand = bm25.candidates(rows[i][0] for i in kept)
            if key is not None:
                while len(self._candidates_cache) >= _ROWS_CACHE_SIZE:
                    del self._candidates_cache[next(iter(self._candidates_cache))]
                self._candidates_cache[key] = cand
        return cand


@dataclass(frozen=True)
class _ListwiseRerankStep:
    """NarrativeIndex's judge as the first post-retrieval step."""

    judge: ListwiseJudge
    top_n: int

    def __call__(self, query: str, results: list[RetrievalResult]) -> list[RetrievalResult]:
        return listwise_rerank(query, results, self.judge, top_n=self.top_n)
