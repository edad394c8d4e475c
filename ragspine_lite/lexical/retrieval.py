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

import copy
import logging
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.chunking.chunk_store import ChunkStore, ChunkStoreError, StoredChunk
from ragspine_lite.chunking.chunking import Chunk, DocumentMeta, chunk_document
from ragspine_lite.common.glossary import DEFAULT_GLOSSARY, Glossary, find_terms
from ragspine_lite.filtering.automatic import FilterExtractor, extract_filter
from ragspine_lite.filtering.metadata_filter import MetadataFilter
from ragspine_lite.lexical.inverted_index import (
    BM25Index,
    InvertedIndex,
    StaleIndexError,
    StoreBM25Index,
)
from ragspine_lite.lexical.pipeline import (
    CHANNEL_BM25,
    CHANNEL_HYBRID,
    CHANNEL_OUTSIDE_VOCABULARY,
    FILTER_DIMS,
    Fusion,
    PostRetrievalStep,
    RetrievalResult,
    channel_hits,
    choose_channel,
    default_fusion,
    embed_queries,
    equality_filters,
    filtered_positions,
    fused_results,
    index_text,
    query_variants,
    run_post_chain,
)
from ragspine_lite.lexical.scoring import (
    DEFAULT_BM25_B,
    DEFAULT_BM25_K1,
    DEFAULT_RRF_K,
    bm25_scores,
    cosine_similarity,
    rrf_fuse,
)
from ragspine_lite.lexical.tokenizer import tokenize
from ragspine_lite.rerank.listwise_rerank import ListwiseJudge, listwise_rerank
from ragspine_lite.vector.embedding_backends import (
    DEFAULT_MIN_COVERAGE,
    EmbeddingBackend,
    check_min_coverage,
)
from ragspine_lite.vector.persistence_policy import (
    IsolationFirstPolicy,
    PersistencePolicy,
    withheld_from_vectors,
)
from ragspine_lite.vector.store import InProcessVectorStore, VectorRecord, VectorStore

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

DEFAULT_TOP_K = 50

# How many filter sets NarrativeIndex keeps a retriever over the active rows for.
_ROWS_CACHE_SIZE = 4


@runtime_checkable
class QueryRewriter(Protocol):
    """Expands a query into variants; the result must include the original query."""

    def rewrite(self, query: str) -> list[str]: ...


@runtime_checkable
class RetrievableIndex(Protocol):
    """What the agent link needs from an index."""

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
        rerank: bool = True,
        top_n: int | None = None,
        metadata_filter: MetadataFilter | None = None,
    ) -> list[RetrievalResult]: ...


def _check_top_k(value: Any, name: str = "top_k") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return value


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


def _as_str(value: Any) -> str:
    return "" if value is None else str(value)


def _vector_metadata(chunk: Any) -> dict[str, str]:
    """Store metadata: the five filter dimensions (``None`` → ``""``) plus ``doc_id``."""
    meta = {dim: _as_str(getattr(chunk, dim, None)) for dim in FILTER_DIMS}
    meta["doc_id"] = _as_str(getattr(chunk, "doc_id", None))
    return meta


def _embed(backend: EmbeddingBackend, texts: list[str]) -> list[Any]:
    vectors = list(backend.embed_texts(texts))
    if len(vectors) != len(texts):
        raise ValueError(
            f"embedding backend returned {len(vectors)!r} vectors for {len(texts)!r} texts"
        )
    return vectors


def _records(chunks: list[Any], vectors: list[Any]) -> list[VectorRecord]:
    return [
        VectorRecord(
            id=c.chunk_id,
            vector=tuple(float(x) for x in vec),
            metadata=_vector_metadata(c),
        )
        for c, vec in zip(chunks, vectors, strict=True)
    ]


class HybridRetriever:
    """BM25 (+ optional dense) retrieval over a fixed list of chunks, through the pipeline.

    The stages are :mod:`ragspine_lite.lexical.pipeline`'s; ``fusion`` defaults to
    :func:`~ragspine_lite.lexical.pipeline.default_fusion` (RRF with ``rrf_k`` unless the
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
        self.embedding_backend = embedding_backend
        self.query_rewriter = query_rewriter
        self.k1 = k1
        self.b = b
        self.rrf_k = rrf_k
        self.top_k = _check_top_k(top_k)
        self.embedding_cache: MutableMapping[str, list[float]] = (
            embedding_cache if embedding_cache is not None else {}
        )
        if vector_store is None and embedding_backend is not None:
            vector_store = InProcessVectorStore()
        self.vector_store = vector_store
        self.manage_vectors = manage_vectors
        self.index_text_fn = index_text_fn
        self.min_query_coverage = check_min_coverage(min_query_coverage)
        self.fusion: Fusion = fusion if fusion is not None else default_fusion(
            embedding_backend, rrf_k
        )
        self.post_retrieval: list[PostRetrievalStep] = list(post_retrieval)
        self.last_channel: str | None = None
        # The BM25 index: built from ``chunks`` on the first search (the chunks are taken as
        # they are then), or an injected store index with one docno per chunk.
        self._lexical: BM25Index | None = None
        self._lexical_docnos: list[int] | None = None
        self._lexical_positions: dict[int, int] = {}

    # -- pieces -----------------------------------------------------------------------

    def _attach_lexical_index(self, index: BM25Index, docnos: Sequence[int]) -> None:
        """Score BM25 with ``index`` (e.g. a store's), where ``chunks[i]`` is ``docnos[i]``."""
        if len(docnos) != len(self.chunks):
            raise ValueError(
                f"need one docno per chunk: got {len(docnos)!r} for {len(self.chunks)!r} chunks"
            )
        self._lexical = index
        self._lexical_docnos = list(docnos)
        self._lexical_positions = {d: i for i, d in enumerate(self._lexical_docnos)}

    def _lexical_index(self) -> BM25Index:
        if self._lexical is None:
            self._lexical = InvertedIndex(
                [c.chunk_id for c in self.chunks],
                (tokenize(index_text(self.index_text_fn, c)) for c in self.chunks),
            )
        return self._lexical

    def _indexed_rankings(
        self, queries: list[str], positions: list[int] | None, limit: int | None
    ) -> list[list[tuple[int, str, float]]]:
        """Per query, the BM25 hits as ``(position, chunk_id, score)`` by (-score, chunk_id).

        Okapi statistics (idf, avgdl) are over the candidates only, exactly as
        :func:`bm25_scores` over them. ``positions`` ``None`` means every chunk; with ``limit``
        only the first ``limit``.
        """
        index = self._lexical_index()
        docnos = self._lexical_docnos
        with index.reading():
            if docnos is None:
                cand = None if positions is None else index.candidates(positions)
            else:
                chosen = docnos if positions is None else [docnos[i] for i in positions]
                cand = index.candidates(chosen)
            out = []
            for q in queries:
                hits = index.rank(tokenize(q), k1=self.k1, b=self.b, candidates=cand, limit=limit)
                if docnos is not None:
                    where = self._lexical_positions
                    hits = [(where[d], cid, s) for d, cid, s in hits]
                out.append(hits)
        return out

    def _sync_vectors(
        self,
        backend: EmbeddingBackend,
        store: VectorStore,
        candidates: list[Any],
        texts: list[str],
    ) -> None:
        """Embed candidates missing from the cache, then upsert every embedded candidate.

        A backend that sends text off host, or an external store, never gets RESTRICTED
        chunks (:func:`withheld_from_vectors`): they get no vector and compete on BM25 only.
        """
        keep = [i for i, c in enumerate(candidates) if not withheld_from_vectors(c, backend, store)]
        if len(keep) < len(candidates):
            candidates, texts = [candidates[i] for i in keep], [texts[i] for i in keep]
        missing = [i for i, c in enumerate(candidates) if c.chunk_id not in self.embedding_cache]
        if missing:
            vectors = _embed(backend, [texts[i] for i in missing])
            for i, vec in zip(missing, vectors, strict=True):
                self.embedding_cache[candidates[i].chunk_id] = list(vec)
        store.upsert(_records(candidates, [self.embedding_cache[c.chunk_id] for c in candidates]))

    # -- search -----------------------------------------------------------------------

    def search(
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
    ) -> list[RetrievalResult]:
        """Top results sorted by ``(-fused_score, chunk_id)``, at most ``top_k``.

        Filters (``""`` is a real filter) and ``metadata_filter`` select candidates
        before anything is scored or embedded. Pure-BM25 mode returns only chunks with a
        BM25 hit; hybrid mode ranks every candidate on the vector lane too.
        """
        limit = self.top_k if top_k is None else _check_top_k(top_k)
        filters = equality_filters(topic, entity, geography, period, language)
        positions = filtered_positions(self.chunks, filters, metadata_filter)
        backend, store = self.embedding_backend, self.vector_store
        self.last_channel = choose_channel(
            backend is not None and store is not None, backend, query, self.min_query_coverage
        )
        if (len(self.chunks) if positions is None else len(positions)) == 0:
            return []
        dense = self.last_channel == CHANNEL_HYBRID
        queries = query_variants(self.query_rewriter, query)
        index = self._lexical_index()
        # One BM25 ranking fused alone keeps its order, so its top ``limit`` is all fusion
        # needs; with several rankings, or duplicate ids adding up, every hit counts.
        prune = len(queries) == 1 and not dense and not index.has_duplicate_chunk_ids
        hits = self._indexed_rankings(queries, positions, limit if prune else None)
        by_id: dict[str, Any] = {}  # id → the first candidate with it
        candidates: list[Any] = []
        if dense or index.has_duplicate_chunk_ids:
            candidates = (
                list(self.chunks) if positions is None else [self.chunks[i] for i in positions]
            )
            for c in candidates:
                by_id.setdefault(c.chunk_id, c)
        else:  # ids are unique: each hit's chunk is the one chunk with that id
            for ranking in hits:
                for pos, cid, _ in ranking:
                    by_id[cid] = self.chunks[pos]
        vectors = self._dense_rankings(queries, candidates, filters) if dense else None
        lexical = [[(cid, s) for _, cid, s in ranking] for ranking in hits]
        results = fused_results(
            channel_hits(queries, lexical, vectors), self.fusion, limit, lambda _ids: by_id
        )
        return run_post_chain(query, results, self.post_retrieval)

    def _dense_rankings(
        self, queries: list[str], candidates: list[Any], filters: Mapping[str, str | None]
    ) -> list[list[tuple[str, float]]]:
        """Per query, every candidate with a vector as ``(chunk_id, cosine)``, best first."""
        backend, store = self.embedding_backend, self.vector_store
        assert backend is not None and store is not None
        candidate_ids = {c.chunk_id for c in candidates}
        where = {k: str(v) for k, v in filters.items() if v is not None} or None
        if self.manage_vectors:
            texts = [index_text(self.index_text_fn, c) for c in candidates]
            self._sync_vectors(backend, store, candidates, texts)
        # A store with query_scores gives query()'s hits without the metadata copies.
        scores = getattr(store, "query_scores", None)
        out = []
        for qvec in embed_queries(backend, list(queries)):
            qv = tuple(float(x) for x in qvec)
            if scores is not None:
                found = scores(qv, k=len(candidates), where=where)
            else:
                found = [(h.id, h.score) for h in store.query(qv, k=len(candidates), where=where)]
            out.append([hit for hit in found if hit[0] in candidate_ids])
        return out


class NarrativeIndex:
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
        self.embedding_backend = embedding_backend
        self.query_rewriter = query_rewriter
        self.judge = judge
        self.max_chars = max_chars
        self.overlap_chars = overlap_chars
        self.top_k = _check_top_k(top_k)
        self.rerank_top_n = _check_top_k(rerank_top_n, "rerank_top_n")
        if vector_store is None and embedding_backend is not None:
            vector_store = InProcessVectorStore()
        self.vector_store = vector_store
        self.persistence_policy = (
            persistence_policy if persistence_policy is not None else IsolationFirstPolicy()
        )
        self.index_text_fn = index_text_fn
        self.filter_extractor = filter_extractor
        self.chunker = chunker
        self.min_query_coverage = check_min_coverage(min_query_coverage)
        self.fusion: Fusion = fusion if fusion is not None else default_fusion(embedding_backend)
        self.post_retrieval: list[PostRetrievalStep] = list(post_retrieval)
        self.last_channel: str | None = None
        self._bm25: StoreBM25Index | None = (
            StoreBM25Index.attach(store) if index_text_fn is None else None
        )
        self._bm25_unavailable_logged = False
        # _search_rows: filter set → retriever over those active rows, valid for one store
        # generation and one set of the settings it was built from.
        self._rows_cache: dict[tuple[Any, ...], HybridRetriever] = {}
        self._rows_generation: int | None = None
        self._rows_settings: tuple[Any, ...] = (None,) * 7
        # _search_bm25: (filters, metadata filter) → its candidates, for one store generation.
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
                vectors = _embed(self.embedding_backend, texts)  # type: ignore[arg-type]
                self.vector_store.upsert(_records(keep, vectors))
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
        rerank: bool = True,
        top_n: int | None = None,
        metadata_filter: MetadataFilter | None = None,
    ) -> list[RetrievalResult]:
        """Search the active chunks; with a judge (and ``rerank``) listwise-rerank the top.

        ``metadata_filter`` wins over the ``filter_extractor``; with a judge at most
        ``top_n or rerank_top_n`` results come back.
        """
        limit = self.top_k if top_k is None else _check_top_k(top_k)
        n = _check_optional_top(top_n, "top_n")
        mf = metadata_filter
        if mf is None:
            # A failing or empty extractor gives None: candidates stay the explicit filters.
            mf = extract_filter(self.filter_extractor, query)
        filters = equality_filters(topic, entity, geography, period, language)
        dense = self.embedding_backend is not None and self.vector_store is not None
        self.last_channel = choose_channel(
            dense, self.embedding_backend, query, self.min_query_coverage
        )
        # Gated out: the very path (and objects) of an index without a dense lane.
        gated = self.last_channel == CHANNEL_OUTSIDE_VOCABULARY
        bm25 = self._persisted_bm25()
        if bm25 is not None and (self.vector_store is None or gated):
            with bm25.reading():
                if not bm25.has_duplicate_chunk_ids:
                    results = self._search_bm25(bm25, query, filters, mf, limit)
                else:
                    results = self._search_rows(bm25, query, filters, mf, limit, gated=gated)
        elif bm25 is not None:
            with bm25.reading():
                results = self._search_rows(bm25, query, filters, mf, limit)
        else:  # an index_text_fn, or no usable store index: BM25 in memory, kept per filter set
            results = self._search_rows(None, query, filters, mf, limit, gated=gated)
        steps = self.post_retrieval
        if rerank and self.judge is not None:
            steps = [_ListwiseRerankStep(self.judge, n or self.rerank_top_n), *steps]
        return run_post_chain(query, results, steps)

    def dense_queries(self, query: str) -> list[str]:
        """The texts a :meth:`retrieve` of ``query`` embeds (``[]``: it takes a BM25 channel)."""
        dense = self.embedding_backend is not None and self.vector_store is not None
        channel = choose_channel(dense, self.embedding_backend, query, self.min_query_coverage)
        return query_variants(self.query_rewriter, query) if channel == CHANNEL_HYBRID else []

    def _retriever(self, chunks: list[StoredChunk], *, gated: bool = False) -> HybridRetriever:
        """A one-search retriever; ``gated`` leaves the dense lane out (the gate already ran)."""
        return HybridRetriever(
            chunks,
            embedding_backend=None if gated else self.embedding_backend,
            query_rewriter=self.query_rewriter,
            top_k=self.top_k,
            vector_store=None if gated else self.vector_store,
            manage_vectors=False,
            index_text_fn=self.index_text_fn,
            min_query_coverage=None,
            fusion=self.fusion,
        )

    def _search_rows(
        self,
        bm25: StoreBM25Index | None,
        query: str,
        filters: Mapping[str, str | None],
        mf: MetadataFilter | None,
        limit: int,
        *,
        gated: bool = False,
    ) -> list[RetrievalResult]:
        """A :class:`HybridRetriever` over the active rows, scoring BM25 with the store index
        (``bm25``), or with its own in-memory index over their index texts (``None``).

        The rows and their retriever are kept per filter set while the store's write counter
        (``generation``, read in the same snapshot as the index) and this index's settings stay
        the same; each result gets its own copy of the chunk, as a fresh read would give.
        """
        retriever = self._rows_retriever(bm25, filters, gated)
        results = retriever.search(query, top_k=limit, metadata_filter=mf)
        for r in results:
            r.chunk = copy.copy(r.chunk)
        return results

    def _rows_retriever(
        self, bm25: StoreBM25Index | None, filters: Mapping[str, str | None], gated: bool
    ) -> HybridRetriever:
        """The (cached) retriever over the active rows passing ``filters``."""
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
        key = (gated, tuple(sorted(filters.items())))
        retriever = cached.get(key)
        if retriever is None:
            rows = self.store.iter_chunk_rows(**filters)
            retriever = self._retriever([c for _, c in rows], gated=gated)
            if bm25 is not None:
                retriever._attach_lexical_index(bm25, [rowid for rowid, _ in rows])
            while len(cached) >= _ROWS_CACHE_SIZE:
                del cached[next(iter(cached))]  # the oldest filter set
            cached[key] = retriever
        return retriever

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

    def _search_bm25(
        self,
        bm25: StoreBM25Index,
        query: str,
        filters: Mapping[str, str | None],
        mf: MetadataFilter | None,
        limit: int,
    ) -> list[RetrievalResult]:
        """Pure BM25 straight from the store index: only the results' rows are read.

        Same results as :meth:`_search_rows` (ids are unique here, so each hit's chunk is
        the row it came from).
        """
        eq = {k: v for k, v in filters.items() if v is not None}
        if mf is not None:
            cand = self._filtered_candidates(bm25, filters, mf)
        elif eq:
            cand = bm25.candidates(self.store.active_rowids(**filters))
        else:
            cand = None
        if cand is not None and cand.count == 0:
            return []
        queries = query_variants(self.query_rewriter, query)
        hits = bm25.rank_variants(queries, candidates=cand, limit=limit)
        rowid_of = {cid: d for ranking in hits for d, cid, _ in ranking}
        lexical = [[(cid, s) for _, cid, s in ranking] for ranking in hits]

        def chunks_for(ids: list[str]) -> dict[str, Any]:
            rows = self.store.chunks_by_rowid(rowid_of[cid] for cid in ids)
            return {cid: rows[rowid_of[cid]] for cid in ids}

        return fused_results(channel_hits(queries, lexical), self.fusion, limit, chunks_for)


@dataclass(frozen=True)
class _ListwiseRerankStep:
    """NarrativeIndex's judge as the first post-retrieval step."""

    judge: ListwiseJudge
    top_n: int

    def __call__(self, query: str, results: list[RetrievalResult]) -> list[RetrievalResult]:
        return listwise_rerank(query, results, self.judge, top_n=self.top_n)
