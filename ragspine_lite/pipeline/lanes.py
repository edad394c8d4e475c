"""The lanes :class:`~ragspine_lite.pipeline.search.Pipeline` searches, over chunks in hand.

Siblings with the same names (the bundle's shards are a third, in
:mod:`ragspine_lite.bundle.sharded_index`):

- :class:`ChunkListLane`: a list of chunks, scored by an in-memory
  :class:`~ragspine_lite.lexical.inverted_index.InvertedIndex` built from their index texts on
  the first search, or by a store's index given one docno per chunk. Keys are chunk ids.
- :class:`StoreLane`: the chunk store's persisted BM25 index straight, reading only the
  results' rows (ids unique). One lane per search, BM25 only (so no exact-words stage).
- :class:`VectorStoreLane`: a :class:`~ragspine_lite.vector.store.VectorStore` ranking the
  candidates of a :class:`ChunkListLane`; it embeds the chunks first when it manages them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragspine_lite.lexical.bm25_index import TermDocuments
from ragspine_lite.lexical.inverted_index import BM25Index, CandidateSet, InvertedIndex
from ragspine_lite.lexical.scoring import DEFAULT_BM25_B, DEFAULT_BM25_K1
from ragspine_lite.pipeline.fusion import Hit
from ragspine_lite.pipeline.stages import (
    FILTER_DIMS,
    RetrievalResult,
    embed_queries,
    filtered_positions,
    index_text,
)
from ragspine_lite.text.words import tokenize
from ragspine_lite.vector.persistence_policy import withheld_from_vectors
from ragspine_lite.vector.store import VectorRecord, VectorStore

__all__ = [
    "ChunkListLane",
    "Selection",
    "StoreLane",
    "VectorStoreLane",
    "embed_checked",
    "vector_records",
]


@dataclass(frozen=True)
class Selection:
    """A :class:`ChunkListLane`'s candidates: their ``chunks``, and the index's set."""

    chunks: list[Any]
    index_set: CandidateSet | None

    @property
    def count(self) -> int:
        return len(self.chunks)


class ChunkListLane:
    """BM25 over a fixed list of chunks (see the module docstring).

    ``index``/``docnos``: score with this index (e.g. a store's), where ``chunks[i]`` is
    ``docnos[i]``; else an in-memory index over ``index_text_fn``'s texts, built on the first
    search. ``copies``: results carry copies of the chunks, as a fresh read would give.
    """

    def __init__(
        self,
        chunks: Sequence[Any],
        *,
        index_text_fn: Callable[[Any], str] | None = None,
        index: BM25Index | None = None,
        docnos: Sequence[int] | None = None,
        k1: float = DEFAULT_BM25_K1,
        b: float = DEFAULT_BM25_B,
        copies: bool = False,
    ) -> None:
        self.chunks = list(chunks)
        if (index is None) != (docnos is None):
            raise ValueError("give an index together with its docnos, or neither")
        if docnos is not None and len(docnos) != len(self.chunks):
            raise ValueError(
                f"need one docno per chunk: got {len(docnos)!r} for {len(self.chunks)!r} chunks"
            )
        self.index_text_fn = index_text_fn
        self._index = index
        self._docnos = None if docnos is None else list(docnos)
        self.k1, self.b, self.copies = k1, b, copies
        self._by_id: dict[str, Any] | None = None

    @property
    def index(self) -> BM25Index:
        if self._index is None:
            self._index = InvertedIndex(
                [c.chunk_id for c in self.chunks],
                (tokenize(index_text(self.index_text_fn, c)) for c in self.chunks),
            )
        return self._index

    @property
    def unique_keys(self) -> bool:
        return not self.index.has_duplicate_chunk_ids

    def reading(self) -> Any:
        return self.index.reading()

    def candidates(
        self, filters: Mapping[str, str | None], metadata_filter: Any | None
    ) -> Selection:
        """The chunks passing the filters; BM25 statistics are over them only."""
        positions = filtered_positions(self.chunks, filters, metadata_filter)
        chunks = self.chunks if positions is None else [self.chunks[i] for i in positions]
        if not chunks:
            return Selection([], None)
        index, docnos = self.index, self._docnos
        if docnos is None:
            chosen = None if positions is None else index.candidates(positions)
        else:
            chosen = index.candidates(
                docnos if positions is None else [docnos[i] for i in positions]
            )
        return Selection(chunks, chosen)

    def rankings(
        self, queries: Sequence[str], candidates: Selection | None, limit: int | None
    ) -> list[list[Hit]]:
        chosen = None if candidates is None else candidates.index_set
        return [
            [
                (cid, s)
                for _, cid, s in self.index.rank(
                    tokenize(q), k1=self.k1, b=self.b, candidates=chosen, limit=limit
                )
            ]
            for q in queries
        ]

    def term_documents(
        self, terms: Sequence[str], max_df: int, candidates: Selection | None
    ) -> list[TermDocuments]:
        """``terms`` as the index counts them over the candidates (exact words)."""
        chosen = None if candidates is None else candidates.index_set
        return self.index.term_documents(terms, max_df, candidates=chosen)

    def chunks_for(self, keys: list[str], candidates: Selection | None) -> dict[str, Any]:
        """Each key's chunk: the one chunk with that id, or (ids repeating) the first
        candidate with it."""
        if self.unique_keys:
            if self._by_id is None:
                self._by_id = {c.chunk_id: c for c in self.chunks}
            by_id = self._by_id
        else:
            by_id = {}
            for c in self.chunks if candidates is None else candidates.chunks:
                by_id.setdefault(c.chunk_id, c)
        if self.copies:
            return {key: copy.copy(by_id[key]) for key in keys}
        return {key: by_id[key] for key in keys}


class StoreLane:
    """Pure BM25 straight from a chunk store's index (ids unique): only results' rows are
    read. Made for one search (it remembers the rows its rankings came from)."""

    unique_keys = True

    def __init__(
        self, store: Any, index: BM25Index, filtered: Callable[..., CandidateSet] | None = None
    ) -> None:
        self.store = store
        self.bm25 = index
        self.filtered = filtered  # (filters, metadata_filter) → candidates, e.g. cached
        self._rowid_of: dict[str, int] = {}

    def reading(self) -> Any:
        return self.bm25.reading()

    def candidates(
        self, filters: Mapping[str, str | None], metadata_filter: Any | None
    ) -> CandidateSet | None:
        if metadata_filter is not None and self.filtered is not None:
            return self.filtered(filters, metadata_filter)
        if metadata_filter is not None:
            rows = self.store.iter_chunk_rows(**filters)
            kept = filtered_positions([c for _, c in rows], {}, metadata_filter) or []
            return self.bm25.candidates(rows[i][0] for i in kept)
        if any(v is not None for v in filters.values()):
            return self.bm25.candidates(self.store.active_rowids(**filters))
        return None

    def rankings(
        self, queries: Sequence[str], candidates: CandidateSet | None, limit: int | None
    ) -> list[list[Hit]]:
        hits = self.bm25.rank_variants(queries, candidates=candidates, limit=limit)
        self._rowid_of = {cid: d for ranking in hits for d, cid, _ in ranking}
        return [[(cid, s) for _, cid, s in ranking] for ranking in hits]

    def chunks_for(self, keys: list[str], candidates: CandidateSet | None) -> dict[str, Any]:
        rows = self.store.chunks_by_rowid(self._rowid_of[cid] for cid in keys)
        return {cid: rows[self._rowid_of[cid]] for cid in keys}


def _as_str(value: Any) -> str:
    return "" if value is None else str(value)


def _vector_metadata(chunk: Any) -> dict[str, str]:
    """Store metadata: the five filter dimensions (``None`` → ``""``) plus ``doc_id``."""
    meta = {dim: _as_str(getattr(chunk, dim, None)) for dim in FILTER_DIMS}
    meta["doc_id"] = _as_str(getattr(chunk, "doc_id", None))
    return meta


def embed_checked(backend: Any, texts: list[str]) -> list[Any]:
    """``backend.embed_texts(texts)``, checked to give one vector per text."""
    vectors = list(backend.embed_texts(texts))
    if len(vectors) != len(texts):
        raise ValueError(
            f"embedding backend returned {len(vectors)!r} vectors for {len(texts)!r} texts"
        )
    return vectors


def vector_records(chunks: list[Any], vectors: list[Any]) -> list[VectorRecord]:
    """The store records of ``chunks`` with these vectors (ids, floats, filter metadata)."""
    return [
        VectorRecord(
            id=c.chunk_id,
            vector=tuple(float(x) for x in vec),
            metadata=_vector_metadata(c),
        )
        for c, vec in zip(chunks, vectors, strict=True)
    ]


@dataclass
class _StoreRun:
    hits: list[list[Hit]] = field(default_factory=list)

    def complete(self, results: list[RetrievalResult], keys: list[str]) -> None:
        """Nothing to add: every candidate with a vector was ranked."""


@dataclass
class VectorStoreLane:
    """Dense rankings from a vector store, over a :class:`ChunkListLane`'s candidates.

    With ``manage_vectors`` the candidates missing from ``embedding_cache`` are embedded
    and every embedded candidate upserted first; a backend that sends text off host, or an
    external store, never gets RESTRICTED chunks (``withheld_from_vectors``: they compete on
    BM25 only).
    """

    backend: Any
    store: VectorStore
    manage_vectors: bool = False
    index_text_fn: Callable[[Any], str] | None = None
    embedding_cache: MutableMapping[str, list[float]] = field(default_factory=dict)

    def rank(
        self,
        queries: list[str],
        candidates: Selection | None,
        filters: Mapping[str, str | None],
    ) -> _StoreRun:
        """Per query, every candidate with a vector as ``(chunk_id, cosine)``, best first."""
        chunks = [] if candidates is None else candidates.chunks
        candidate_ids = {c.chunk_id for c in chunks}
        where = {k: str(v) for k, v in filters.items() if v is not None} or None
        if self.manage_vectors:
            self._sync(chunks)
        # A store with query_scores gives query()'s hits without the metadata copies.
        scores = getattr(self.store, "query_scores", None)
        out = []
        for qvec in embed_queries(self.backend, list(queries)):
            qv = tuple(float(x) for x in qvec)
            if scores is not None:
                found = scores(qv, k=len(chunks), where=where)
            else:
                found = [(h.id, h.score) for h in self.store.query(qv, k=len(chunks), where=where)]
            out.append([hit for hit in found if hit[0] in candidate_ids])
        return _StoreRun(out)

    def _sync(self, chunks: Iterable[Any]) -> None:
        """Embed the chunks missing from the cache, then upsert every embedded one."""
        chunks = [c for c in chunks if not withheld_from_vectors(c, self.backend, self.store)]
        cache = self.embedding_cache
        missing = [c for c in chunks if c.chunk_id not in cache]
        if missing:
            texts = [index_text(self.index_text_fn, c) for c in missing]
            for c, vec in zip(missing, embed_checked(self.backend, texts), strict=True):
                cache[c.chunk_id] = list(vec)
        self.store.upsert(vector_records(chunks, [cache[c.chunk_id] for c in chunks]))
