"""Hybrid narrative retrieval: metadata pre-filter → BM25 (+ optional dense) → RRF → rerank.

Pure BM25 + RRF is the zero-dependency default and is byte-identical to a build that
never heard of embeddings; an :class:`EmbeddingBackend` switches the dense lane on.
Every ordering is deterministic: ties are broken by ``chunk_id`` ascending.

>>> from ragspine_lite.chunking.chunking import Chunk
>>> chunks = [
...     Chunk("d#c0", "d", 0, "revenue grew in hong kong", "d#para1", 1, 1),
...     Chunk("d#c1", "d", 1, "profit fell", "d#para2", 2, 2),
... ]
>>> [r.chunk.chunk_id for r in HybridRetriever(chunks).search("revenue")]
['d#c0']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.chunking.chunk_store import ChunkStore, StoredChunk
from ragspine_lite.chunking.chunking import Chunk, DocumentMeta, chunk_document
from ragspine_lite.common.glossary import DEFAULT_GLOSSARY, Glossary, find_terms
from ragspine_lite.filtering.automatic import FilterExtractor, extract_filter
from ragspine_lite.filtering.metadata_filter import MetadataFilter
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
from ragspine_lite.vector.embedding_backends import EmbeddingBackend
from ragspine_lite.vector.persistence_policy import IsolationFirstPolicy, PersistencePolicy
from ragspine_lite.vector.store import InProcessVectorStore, VectorRecord, VectorStore

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

DEFAULT_TOP_K = 50

# The five chunk attributes that act as equality filters (and as vector metadata).
_FILTER_DIMS = ("topic", "entity", "geography", "period", "language")


@runtime_checkable
class QueryRewriter(Protocol):
    """Expands a query into variants; the result must include the original query."""

    def rewrite(self, query: str) -> list[str]: ...


@dataclass
class RetrievalResult:
    """One retrieved chunk with its scores.

    ``fused_score`` is the RRF score (the sort key); ``bm25_score`` and ``vector_score``
    are the best score of that chunk over all query variants (``0.0`` when none).
    """

    chunk: StoredChunk | Chunk
    bm25_score: float
    vector_score: float
    fused_score: float


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
    meta = {dim: _as_str(getattr(chunk, dim, None)) for dim in _FILTER_DIMS}
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
    """BM25 (+ optional dense) retrieval fused with RRF over a fixed list of chunks.

    ``vector_store`` is the injected store, else a new :class:`InProcessVectorStore` iff
    an ``embedding_backend`` is given, else ``None`` (pure BM25). With
    ``manage_vectors=False`` chunk vectors are assumed to be in the store already and
    only queries are embedded. ``embedding_cache`` maps ``chunk_id`` → chunk vector.
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
        # index text → tokens; tokenize is a pure function of the text, so this never
        # changes a result, it only avoids re-tokenising the corpus on every search.
        self._token_cache: dict[str, list[str]] = {}

    # -- pieces -----------------------------------------------------------------------

    def _index_text(self, chunk: Any) -> str:
        return self.index_text_fn(chunk) if self.index_text_fn is not None else chunk.text

    def _candidates(
        self, filters: Mapping[str, str | None], metadata_filter: MetadataFilter | None
    ) -> list[Any]:
        active = {k: v for k, v in filters.items() if v is not None}
        out = [
            c for c in self.chunks if all(getattr(c, k, None) == v for k, v in active.items())
        ]
        if metadata_filter is not None:
            out = metadata_filter.apply(out)
        return out

    def _queries(self, query: str) -> list[str]:
        variants = self.query_rewriter.rewrite(query) if self.query_rewriter else [query]
        return list(dict.fromkeys(variants))

    def _tokens(self, text: str) -> list[str]:
        tokens = self._token_cache.get(text)
        if tokens is None:
            tokens = self._token_cache[text] = tokenize(text)
        return tokens

    def _bm25_rankings(
        self, queries: list[str], candidates: list[Any], texts: list[str]
    ) -> list[list[tuple[str, float]]]:
        """Per query, the candidates with BM25 > 0 as ``(chunk_id, score)``, by (-score, id).

        The single BM25 path: Okapi statistics (idf, avgdl) are over the candidates only.
        A faster index may replace this method if it returns exactly the same lists.
        """
        docs_tokens = [self._tokens(t) for t in texts]
        ids = [c.chunk_id for c in candidates]
        out = []
        for q in queries:
            scores = bm25_scores(tokenize(q), docs_tokens, k1=self.k1, b=self.b)
            hits = [(cid, s) for cid, s in zip(ids, scores, strict=True) if s > 0]
            hits.sort(key=lambda hit: (-hit[1], hit[0]))
            out.append(hits)
        return out

    def _sync_vectors(
        self,
        backend: EmbeddingBackend,
        store: VectorStore,
        candidates: list[Any],
        texts: list[str],
    ) -> None:
        """Embed candidates missing from the cache, then upsert every candidate."""
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
        filters = {
            "topic": topic,
            "entity": entity,
            "geography": geography,
            "period": period,
            "language": language,
        }
        candidates = self._candidates(filters, metadata_filter)
        if not candidates:
            return []
        queries = self._queries(query)
        texts = [self._index_text(c) for c in candidates]
        candidate_ids = {c.chunk_id for c in candidates}
        by_id: dict[str, Any] = {}
        for c in candidates:
            by_id.setdefault(c.chunk_id, c)

        backend, store = self.embedding_backend, self.vector_store
        where = {k: str(v) for k, v in filters.items() if v is not None} or None
        if backend is not None and store is not None and self.manage_vectors:
            self._sync_vectors(backend, store, candidates, texts)

        rankings: list[list[str]] = []
        best_bm25: dict[str, float] = {}
        best_vec: dict[str, float] = {}
        bm25_rankings = self._bm25_rankings(queries, candidates, texts)
        for q, hits in zip(queries, bm25_rankings, strict=True):
            rankings.append([cid for cid, _ in hits])
            for cid, s in hits:
                if s > best_bm25.get(cid, 0.0):
                    best_bm25[cid] = s
            if backend is not None and store is not None:
                qvec = backend.embed_texts([q])[0]
                found = store.query(
                    tuple(float(x) for x in qvec), k=len(candidates), where=where
                )
                vec_hits = [h for h in found if h.id in candidate_ids]
                rankings.append([h.id for h in vec_hits])
                for h in vec_hits:
                    if h.id not in best_vec or h.score > best_vec[h.id]:
                        best_vec[h.id] = h.score

        fused = rrf_fuse(rankings, k=self.rrf_k)
        ordered = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        return [
            RetrievalResult(
                chunk=by_id[cid],
                bm25_score=best_bm25.get(cid, 0.0),
                vector_score=best_vec.get(cid, 0.0),
                fused_score=score,
            )
            for cid, score in ordered
        ]


class NarrativeIndex:
    """A versioned :class:`ChunkStore` plus its vectors, searchable with optional rerank.

    ``ingest`` chunks a document, replaces its active chunks and swaps its vectors
    (doc-scoped delete, then only ``persistence_policy.persistable`` chunks are embedded
    and upserted — RESTRICTED is not persisted by default). ``retrieve`` never
    re-embeds chunks: only queries are embedded.
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

    def _index_text(self, chunk: Any) -> str:
        return self.index_text_fn(chunk) if self.index_text_fn is not None else chunk.text

    def ingest(self, text: str, meta: DocumentMeta, valid_as_of: str = "") -> int:
        """Chunk ``text``, make it the document's active version, swap its vectors."""
        if self.chunker is not None:
            chunks = self.chunker.chunk(
                text, meta, max_chars=self.max_chars, overlap_chars=self.overlap_chars
            )
        else:
            chunks = chunk_document(
                text, meta, max_chars=self.max_chars, overlap_chars=self.overlap_chars
            )
        count = self.store.replace_doc_chunks(meta.doc_id, chunks, valid_as_of)
        if self.vector_store is not None:
            self.vector_store.delete(where={"doc_id": meta.doc_id})
            if self.embedding_backend is not None:
                keep = [c for c in chunks if self.persistence_policy.persistable(c)]
                if keep:
                    vectors = _embed(self.embedding_backend, [self._index_text(c) for c in keep])
                    self.vector_store.upsert(_records(keep, vectors))
        return count

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
        candidates = self.store.iter_chunks(
            topic=topic, entity=entity, geography=geography, period=period, language=language
        )
        retriever = HybridRetriever(
            candidates,
            embedding_backend=self.embedding_backend,
            query_rewriter=self.query_rewriter,
            top_k=self.top_k,
            vector_store=self.vector_store,
            manage_vectors=False,
            index_text_fn=self.index_text_fn,
        )
        results = retriever.search(query, top_k=limit, metadata_filter=mf)
        if rerank and self.judge is not None:
            results = listwise_rerank(query, results, self.judge, top_n=n or self.rerank_top_n)
        return results
