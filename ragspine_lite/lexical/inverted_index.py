"""Exact Okapi BM25 over an inverted index, in memory or persisted beside the chunk store.

:func:`~ragspine_lite.lexical.scoring.bm25_scores` scores every document for every query
token. An index only decides *which* documents to score: each score is computed with the
very expression the reference uses and summed in the same (query) order, so ids, scores and
ties are bit-identical to the reference on the same candidates. Statistics (N, df, avgdl)
are over the candidates: with a candidate set, df is counted over it from the postings.

Top-k queries (:meth:`BM25Index.rank` with ``limit``) are pruned MaxScore-style: each term
has an upper bound from its largest tf and shortest document; terms are scanned highest
bound first, and once the terms left cannot lift an unseen document over the current k-th
score they are only looked up (cached docno → tf dicts) for the documents still in the
running. Survivors are rescored exactly, so pruning never changes a score.

:class:`InvertedIndex` is the in-memory index (docno = position in a list).
:class:`StoreBM25Index` lives in a :class:`~ragspine_lite.chunking.chunk_store.ChunkStore`'s
SQLite file (docno = ``narrative_chunk`` rowid), is attached with
:meth:`StoreBM25Index.attach` and updated inside the store's own write transactions.
Postings are packed ``uint32`` arrays in BLOBs, read per query term on demand.

>>> index = InvertedIndex(["a", "b"], [["x", "x", "y"], ["y", "z"]])
>>> [(cid, round(score, 6)) for _, cid, score in index.rank(["x"])]
[('a', 0.930399)]
"""

from __future__ import annotations

import contextlib
import logging
import math
import sqlite3
import sys
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from heapq import nlargest
from itertools import compress
from operator import itemgetter
from typing import Any

from ragspine_lite.chunking.chunk_store import ChunkRow, ChunkStore, ChunkStoreError
from ragspine_lite.lexical.scoring import DEFAULT_BM25_B, DEFAULT_BM25_K1
from ragspine_lite.text.words import tokenize

__all__ = [
    "BM25_INDEX_FORMAT",
    "BM25Index",
    "CandidateSet",
    "CorruptIndexError",
    "InvertedIndex",
    "Postings",
    "StaleIndexError",
    "StoreBM25Index",
]

logger = logging.getLogger(__name__)

#: Version of the persisted index layout (``lexical_*`` tables); a mismatch rebuilds it.
BM25_INDEX_FORMAT = 2

#: Postings held as docno → tf dicts for random access, per index (about 100 bytes each).
LOOKUP_CACHE_POSTINGS = 1_000_000

#: ``(docno, chunk_id, score)``, the unit :meth:`BM25Index.rank` returns.
Hit = tuple[int, str, float]

# Relative slack on every pruning comparison: far above float rounding (~1e-15), so pruning
# never drops a document the reference would rank, whatever order partial sums were added in.
_SAFE = 1.0 - 1e-9
# Probe candidates by binary search instead of scanning postings above this postings/candidate
# ratio (a bisect costs about this many scanned postings).
_PROBE_RATIO = 16

_UINT = "I"
if array(_UINT).itemsize != 4:  # pragma: no cover - every CPython/Pyodide target has 4
    raise ImportError("ragspine_lite.lexical.inverted_index needs a 4-byte array('I')")
_LITTLE_ENDIAN = sys.byteorder == "little"


def _pack(values: array) -> bytes:
    """``uint32`` little-endian bytes (the on-disk encoding)."""
    if _LITTLE_ENDIAN:
        return values.tobytes()
    swapped = array(_UINT, values)  # pragma: no cover - big-endian hosts only
    swapped.byteswap()  # pragma: no cover
    return swapped.tobytes()  # pragma: no cover


def _zeros(n: int) -> array:
    return array(_UINT, bytes(4 * n))


#: What to do about a damaged index (a :class:`CorruptIndexError` says it).
REBUILD_HINT = (
    "the file was damaged or edited; rebuild it from the documents (ingest them into a new "
    "database, or build the site again)"
)


def _unpack(blob: bytes | None, db_path: str = "", where: str = "") -> array:
    """Packed ``uint32`` entries; a blob that cannot be them is a :class:`CorruptIndexError`
    naming ``db_path`` and ``where`` in it (table, key, column)."""
    values = array(_UINT)
    if blob:
        if len(blob) % values.itemsize:
            raise CorruptIndexError(
                f"the BM25 index in {db_path!r} is damaged: {where} holds {len(blob)} bytes, "
                f"not a whole number of {values.itemsize}-byte entries; {REBUILD_HINT}"
            )
        values.frombytes(blob)
        if not _LITTLE_ENDIAN:  # pragma: no cover - big-endian hosts only
            values.byteswap()
    return values


class CorruptIndexError(ChunkStoreError):
    """A stored index value cannot be decoded: the database file is damaged or was edited."""


class StaleIndexError(ChunkStoreError):
    """The persisted index is missing or behind the store: run ``store.sync_indexers()``."""


class Postings:
    """One term's postings: ascending docnos and their tfs, the live df, and score bounds.

    ``docs`` may hold retired documents (skipped at query time); ``max_tf`` and ``min_len``
    bound every posting ever held, so they stay valid upper-bound inputs after retirements.
    """

    __slots__ = ("df", "docs", "max_tf", "min_len", "tf_by_doc", "tfs")

    def __init__(self, docs: array, tfs: array, df: int, max_tf: int, min_len: int) -> None:
        self.docs = docs
        self.tfs = tfs
        self.df = df
        self.max_tf = max_tf
        self.min_len = min_len
        self.tf_by_doc: dict[int, int] | None = None  # built for random access, see _lookup


class CandidateSet:
    """The documents allowed to score: a byte mask over docnos, their count and total length."""

    __slots__ = ("docnos", "mask", "total_length")

    def __init__(self, docnos: list[int], mask: bytearray, total_length: int) -> None:
        self.docnos = docnos
        self.mask = mask
        self.total_length = total_length

    @property
    def count(self) -> int:
        return len(self.docnos)

    def count_in(self, docs: array) -> int:
        """How many of ``docs`` (ascending) are candidates."""
        if len(self.docnos) * _PROBE_RATIO < len(docs):
            n = len(docs)
            hits = 0
            for d in self.docnos:
                i = bisect_left(docs, d)
                if i < n and docs[i] == d:
                    hits += 1
            return hits
        return sum(map(self.mask.__getitem__, docs))


class _Term:
    """A query term as scored: ``qtf * idf``, its postings and its score bound."""

    __slots__ = ("postings", "ub", "wq")

    def __init__(self, wq: float, postings: Postings) -> None:
        self.wq = wq
        self.postings = postings
        self.ub = 0.0


class BM25Index:
    """Exact BM25 ranking over postings; subclasses say where postings, lengths and ids live.

    A subclass sets ``n_docs``/``total_length`` (live documents) and implements
    ``_postings``, ``_lengths``, ``_live_mask`` and ``_chunk_ids``; :meth:`reading` brackets
    a consistent read.
    """

    n_docs: int = 0
    total_length: int = 0
    lookup_cache_postings: int = LOOKUP_CACHE_POSTINGS
    #: Documents holding the two top terms that a top-k query completes to seed theta.
    seed_pool: int = 64
    #: How many times a top-k query may raise theta by completing its best partial documents
    #: (each costs a pass over the accumulator) before scanning a costly term.
    max_estimates: int = 1
    # Postings holding a tf_by_doc dict, least recently used first (bounds their memory).
    _lookups: dict[int, Postings] | None = None
    _lookups_size = 0

    def _lookup(self, p: Postings) -> dict[int, int]:
        """``p`` as a docno → tf dict, built on first use and kept within the cache budget."""
        cache = self._lookups
        if cache is None:
            cache = self._lookups = {}
        table = p.tf_by_doc
        if table is None:
            table = p.tf_by_doc = dict(zip(p.docs, p.tfs, strict=True))
            self._lookups_size += len(table)
            while cache and self._lookups_size > self.lookup_cache_postings:
                old = cache.pop(next(iter(cache)))
                if old.tf_by_doc is not None:
                    self._lookups_size -= len(old.tf_by_doc)
                    old.tf_by_doc = None
        else:
            cache.pop(id(p), None)
        cache[id(p)] = p  # the entry keeps p alive, so its id cannot be reused meanwhile
        return table

    def _drop_lookups(self) -> None:
        for p in (self._lookups or {}).values():
            p.tf_by_doc = None
        self._lookups = None
        self._lookups_size = 0

    def _table(self, p: Postings) -> dict[int, int] | None:
        """``p`` as a cached docno → tf dict, or ``None`` when too big to cache."""
        if len(p.docs) <= self.lookup_cache_postings // 8:
            return self._lookup(p)
        return None

    def _tf_of(self, p: Postings) -> Callable[[int], int | None]:
        """A docno → tf (or ``None``) function: a cached dict, or binary search when huge."""
        table = self._table(p)
        if table is not None:
            return table.get
        docs, tfs, n = p.docs, p.tfs, len(p.docs)

        def tf_of(d: int) -> int | None:
            k = bisect_left(docs, d)
            return tfs[k] if k < n and docs[k] == d else None

        return tf_of

    def _lookup_plan(
        self, order: list[_Term], rest: list[float], i: int, k1p: float
    ) -> list[tuple[Callable[[int], int | None], float, float]]:
        """For order[i:]: (tf lookup, weight, bound of this term and those after it)."""
        return [(self._tf_of(t.postings), t.wq * k1p, rest[j]) for j, t in
                enumerate(order[i:], start=i)]

    # -- provided by subclasses ----------------------------------------------------------------

    def _postings(self, term: str) -> Postings | None:
        raise NotImplementedError

    def _lengths(self) -> Sequence[int]:
        """Token count by docno (0 for slots that are not live documents)."""
        raise NotImplementedError

    def _live_mask(self) -> bytearray | None:
        """A mask of live docnos when some postings belong to retired documents, else ``None``."""
        return None

    def _chunk_ids(self, docnos: Iterable[int]) -> dict[int, str]:
        raise NotImplementedError

    @property
    def has_duplicate_chunk_ids(self) -> bool:
        """Whether two live documents share a chunk id (then callers fusing rankings need
        every hit, not a top-k)."""
        raise NotImplementedError

    @contextlib.contextmanager
    def reading(self) -> Iterator[BM25Index]:
        """One consistent read (a no-op for in-memory indexes)."""
        yield self

    # -- public --------------------------------------------------------------------------------

    def candidates(self, docnos: Iterable[int]) -> CandidateSet:
        """A :class:`CandidateSet` of these live docnos (duplicates collapse)."""
        with self.reading():
            lengths = self._lengths()
            unique = sorted(set(docnos))
            mask = bytearray(len(lengths))
            for d in unique:
                mask[d] = 1
            return CandidateSet(unique, mask, sum(map(lengths.__getitem__, unique)))

    def rank(
        self,
        query_tokens: Sequence[str],
        *,
        k1: float = DEFAULT_BM25_K1,
        b: float = DEFAULT_BM25_B,
        candidates: CandidateSet | None = None,
        limit: int | None = None,
    ) -> list[Hit]:
        """Documents with BM25 > 0 as ``(docno, chunk_id, score)`` sorted by (-score, chunk_id).

        ``candidates`` ``None`` means every live document. With ``limit``, exactly the first
        ``limit`` of that full ranking (pruned; k1 >= 0 and 0 <= b <= 1 assumed, else the
        full ranking is computed and cut).
        """
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit < 1):
            raise ValueError(f"limit must be None or an int >= 1, got {limit!r}")
        with self.reading():
            return self._rank(list(query_tokens), float(k1), float(b), candidates, limit)

    def rank_variants(
        self,
        queries: Sequence[str],
        *,
        candidates: CandidateSet | None = None,
        limit: int | None = None,
    ) -> list[list[Hit]]:
        """:meth:`rank` of each query variant's tokens. Only a lone variant is cut to
        ``limit``: several are fused, and then every hit counts."""
        prune = limit if len(queries) == 1 else None
        return [self.rank(tokenize(q), candidates=candidates, limit=prune) for q in queries]

    # -- scoring -------------------------------------------------------------------------------

    def _rank(
        self,
        tokens: list[str],
        k1: float,
        b: float,
        cand: CandidateSet | None,
        limit: int | None,
    ) -> list[Hit]:
        if cand is not None and cand.count == self.n_docs:
            cand = None  # the candidates are all live documents: use the global statistics
        avgdl, terms = self._query_terms(tokens, cand)
        if not terms:
            return []
        mask = cand.mask if cand is not None else self._live_mask()
        prunable = (
            limit is not None and math.isfinite(k1) and k1 >= 0.0 and 0.0 <= b <= 1.0
        )
        if prunable and limit is not None:
            scored = self._top(terms, k1, b, avgdl, cand, mask, limit)
        else:
            scored = self._all(terms, k1, b, avgdl, cand, mask)
        ids = self._chunk_ids([d for d, _ in scored])
        hits = [(d, ids[d], s) for d, s in scored]
        hits.sort(key=lambda h: (-h[2], h[1]))
        return hits if limit is None else hits[:limit]

    def _query_terms(
        self, tokens: list[str], cand: CandidateSet | None
    ) -> tuple[float, list[_Term]]:
        """``(avgdl, query terms with postings)`` under the statistics of ``cand`` (``None``:
        every live document); no terms when nothing can score."""
        n = self.n_docs if cand is None else cand.count
        if n == 0 or not tokens:
            return 0.0, []
        avgdl = (self.total_length if cand is None else cand.total_length) / n
        terms: list[_Term] = []
        for term, qtf in Counter(tokens).items():
            postings = self._postings(term)
            if postings is None:
                continue
            df = postings.df if cand is None else cand.count_in(postings.docs)
            if df == 0:
                continue
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            terms.append(_Term(qtf * idf, postings))
        return avgdl, terms

    def _exact(
        self, terms: list[_Term], docs: Iterable[int], k1: float, b: float, avgdl: float
    ) -> list[tuple[int, float]]:
        """``(docno, score)`` of ``docs``: the reference's expression, summed in query order."""
        lengths = self._lengths()
        k1p = k1 + 1.0
        omb = 1.0 - b
        columns = [(t.wq, self._tf_of(t.postings)) for t in terms]  # query order
        scored = []
        for d in docs:
            total = 0.0
            for wq, tf_of in columns:
                f = tf_of(d)
                if f is not None:
                    total += wq * f * k1p / (f + k1 * (omb + b * lengths[d] / avgdl))
            scored.append((d, total))
        return scored

    def score(
        self,
        query_tokens: Sequence[str],
        docnos: Iterable[int],
        *,
        k1: float = DEFAULT_BM25_K1,
        b: float = DEFAULT_BM25_B,
        candidates: CandidateSet | None = None,
    ) -> list[Hit]:
        """These docnos' BM25 > 0 as :meth:`rank` scores them (the statistics of
        ``candidates``, default every live document), bit for bit, in no set order."""
        with self.reading():
            cand = None if candidates is not None and candidates.count == self.n_docs else (
                candidates
            )
            avgdl, terms = self._query_terms(list(query_tokens), cand)
            scored = self._exact(terms, docnos, float(k1), float(b), avgdl) if terms else []
            ids = self._chunk_ids([d for d, s in scored if s > 0])
        return [(d, ids[d], s) for d, s in scored if s > 0]

    def _pairs(
        self, p: Postings, cand: CandidateSet | None, mask: bytearray | None
    ) -> Iterable[tuple[int, int]]:
        """The (docno, tf) postings of candidate (or live) documents."""
        docs, tfs = p.docs, p.tfs
        if cand is not None and cand.count * _PROBE_RATIO < len(docs):
            out = []
            n = len(docs)
            for d in cand.docnos:
                i = bisect_left(docs, d)
                if i < n and docs[i] == d:
                    out.append((d, tfs[i]))
            return out
        if mask is not None:
            return compress(zip(docs, tfs, strict=True), map(mask.__getitem__, docs))
        return zip(docs, tfs, strict=True)

    def _norms(
        self, k1: float, b: float, avgdl: float, cand: CandidateSet | None
    ) -> Sequence[float] | None:
        """``k1 * norm`` by docno for the global statistics (cached), else ``None``.

        Each value is the reference's own intermediate ``k1 * (1.0 - b + b * dl / avgdl)``,
        so contributions computed from it are bit-identical.
        """
        if cand is not None:
            return None
        key = (k1, b, avgdl, self._norms_key())
        if self._norm_cache is None or self._norm_cache[0] != key:
            omb = 1.0 - b
            values = array("d", [k1 * (omb + b * x / avgdl) for x in self._lengths()])
            self._norm_cache = (key, values)
        return self._norm_cache[1]

    _norm_cache: tuple[tuple[Any, ...], array] | None = None

    def _norms_key(self) -> Any:
        """Changes whenever document lengths do (cache key for :meth:`_norms`)."""
        return None

    def _all(
        self,
        terms: list[_Term],
        k1: float,
        b: float,
        avgdl: float,
        cand: CandidateSet | None,
        mask: bytearray | None,
    ) -> list[tuple[int, float]]:
        """Every hit, scored term by term in query order: the reference's exact sums."""
        lengths = self._lengths()
        kd = self._norms(k1, b, avgdl, cand)
        k1p = k1 + 1.0
        omb = 1.0 - b
        acc: dict[int, float] = {}
        get = acc.get
        for t in terms:
            wq = t.wq
            pairs = self._pairs(t.postings, cand, mask)
            if kd is not None:
                for d, f in pairs:
                    acc[d] = get(d, 0.0) + wq * f * k1p / (f + kd[d])
            else:
                for d, f in pairs:
                    acc[d] = get(d, 0.0) + wq * f * k1p / (f + k1 * (omb + b * lengths[d] / avgdl))
        return [(d, s) for d, s in acc.items() if s > 0]

    def _top(
        self,
        terms: list[_Term],
        k1: float,
        b: float,
        avgdl: float,
        cand: CandidateSet | None,
        mask: bytearray | None,
        limit: int,
    ) -> list[tuple[int, float]]:
        """Candidates for the top ``limit`` (ties at the cut included), with exact scores.

        ``theta`` is a lower bound of the limit-th final score: seeded by completing a few
        documents that hold both top terms, raised by completing the best partial sums
        before a costly term. Phase 1 scans terms, highest bound first, accumulating partial
        sums, until the terms left cannot lift an unseen document to ``theta``; a document
        whose bound is already below it is never accumulated. Phase 2 adds the remaining
        terms by lookup to the documents that can still reach ``theta``, dropping the rest
        after each term. The survivors are rescored exactly, in query order; partial sums
        (added in another order) only ever steer pruning, always with slack.
        """
        lengths = self._lengths()
        kd = self._norms(k1, b, avgdl, cand)
        k1p = k1 + 1.0
        omb = 1.0 - b
        k0 = k1 * omb
        kl = k1 * b / avgdl
        for t in terms:
            p = t.postings
            t.ub = t.wq * p.max_tf * k1p / (p.max_tf + k1 * (omb + b * p.min_len / avgdl))
        order = sorted(terms, key=lambda t: -t.ub)
        m = len(order)
        rest = [0.0] * (m + 1)  # rest[i]: the most that order[i:] can add to a document
        for i in range(m - 1, -1, -1):
            rest[i] = rest[i + 1] + order[i].ub

        def completed(d: int, s: float, stop: float) -> float | None:
            """Partial sum ``s`` of ``d`` plus terms order[i:]; ``None`` once below ``stop``."""
            kn = kd[d] if kd is not None else k0 + kl * lengths[d]
            for tf_of, w, bound in lookups:
                if s + bound < stop:
                    return None
                f = tf_of(d)
                if f is not None:
                    s += w * f / (f + kn)
            return s

        acc: dict[int, float] = {}
        theta = 0.0
        # Seed theta before any scan: documents holding both top terms score high, and
        # completing a few of them by lookups lets pruning start at once.
        first = self._table(order[0].postings) if m > 1 else None
        second = self._table(order[1].postings) if m > 1 else None
        if first is not None and second is not None:
            both = first.keys() & second.keys()
            if mask is not None:
                both = {d for d in both if mask[d]}
            if len(both) >= limit:
                pool = max(self.seed_pool, limit)
                if len(both) > pool:
                    both = nlargest(pool, both, key=lambda d: first[d] + second[d])
                lookups = self._lookup_plan(order, rest, 0, k1p)
                theta = nlargest(limit, [completed(d, 0.0, -1.0) or 0.0 for d in both])[-1]
        i = 0
        estimates = 0
        # Documents proven unable to reach theta. A document first met at order[i] scores at
        # most its contribution there plus rest[i + 1]; below theta it is never accumulated
        # (and stays out: a later term must not re-enter it with an understated partial sum).
        dead: set[int] = set()
        while i < m:
            t = order[i]
            w = t.wq * k1p
            get = acc.get
            floor = theta * _SAFE - rest[i + 1]
            pairs = self._pairs(t.postings, cand, mask)
            for d, f in pairs:
                c = w * f / (f + (kd[d] if kd is not None else k0 + kl * lengths[d]))
                s = get(d)
                if s is not None:
                    acc[d] = s + c
                elif c >= floor and d not in dead:
                    acc[d] = c
                else:
                    dead.add(d)
            i += 1
            if i == m:
                break
            if rest[i] < theta * _SAFE:
                break
            if (estimates < self.max_estimates and len(acc) >= limit
                    and len(order[i].postings.docs) > 2 * limit * (m - i)):
                estimates += 1
                # The next term is costly: first raise theta by completing the best partials.
                lookups = self._lookup_plan(order, rest, i, k1p)
                best = nlargest(limit, acc.items(), key=itemgetter(1))
                done = [completed(d, s, -1.0) or 0.0 for d, s in best]
                theta = max(theta, min(done))
                if rest[i] < theta * _SAFE:
                    break
        # Phase 2: only accumulated documents can still make it; add the remaining terms
        # to those that can still reach theta, term by term (C-level set intersections).
        live = {d: s for d, s in acc.items() if s >= theta * _SAFE - rest[i]}
        for j in range(i, m):
            t = order[j]
            w = t.wq * k1p
            table = self._table(t.postings)
            if table is not None:
                for d in live.keys() & table.keys():
                    f = table[d]
                    live[d] += w * f / (f + (kd[d] if kd is not None else k0 + kl * lengths[d]))
            else:
                tf_of = self._tf_of(t.postings)
                for d in live:
                    f = tf_of(d)
                    if f is not None:
                        live[d] += w * f / (f + (kd[d] if kd is not None else k0 + kl * lengths[d]))
            if len(live) > limit:
                theta = max(theta, nlargest(limit, live.values())[-1])
            floor = theta * _SAFE - rest[j + 1]
            live = {d: s for d, s in live.items() if s >= floor}
        complete = list(live)
        # Exact scores: the reference's expression and order, for the few that can make it.
        scored = self._exact(terms, complete, k1, b, avgdl)
        if len(scored) > limit:
            # Keep every document tied with the limit-th score: chunk ids break those ties.
            kth = nlargest(limit, map(itemgetter(1), scored))[-1]
            scored = [h for h in scored if h[1] >= kth]
        return [h for h in scored if h[1] > 0]


# ---------------------------------------------------------------------------------- in memory


class InvertedIndex(BM25Index):
    """An in-memory index over a fixed list of token lists; docno = position in that list.

    >>> InvertedIndex.from_texts(["a", "b"], ["revenue grew", "profit fell"]).n_docs
    2
    """

    def __init__(self, chunk_ids: Sequence[str], token_lists: Iterable[Sequence[str]]) -> None:
        self.chunk_ids = list(chunk_ids)
        lengths = array(_UINT)
        docs: dict[str, array] = {}
        tfs: dict[str, array] = {}
        for docno, tokens in enumerate(token_lists):
            lengths.append(len(tokens))
            for term, f in Counter(tokens).items():
                d = docs.get(term)
                if d is None:
                    d = docs[term] = array(_UINT)
                    tfs[term] = array(_UINT)
                d.append(docno)
                tfs[term].append(f)
        if len(lengths) != len(self.chunk_ids):
            raise ValueError(
                f"InvertedIndex needs one token list per chunk id: got {len(lengths)!r} "
                f"token lists for {len(self.chunk_ids)!r} ids"
            )
        self.lengths = lengths
        self.n_docs = len(lengths)
        self.total_length = sum(lengths)
        self._index = {
            term: Postings(d, tfs[term], len(d), max(tfs[term]), min(map(lengths.__getitem__, d)))
            for term, d in docs.items()
        }
        self._duplicates = len(set(self.chunk_ids)) != len(self.chunk_ids)

    @classmethod
    def from_texts(
        cls,
        chunk_ids: Sequence[str],
        texts: Iterable[str],
        tokenizer: Callable[[str], list[str]] = tokenize,
    ) -> InvertedIndex:
        """Tokenize ``texts`` (one per chunk id) and index them."""
        return cls(chunk_ids, (tokenizer(t) for t in texts))

    @property
    def has_duplicate_chunk_ids(self) -> bool:
        return self._duplicates

    @property
    def vocabulary_size(self) -> int:
        return len(self._index)

    def _postings(self, term: str) -> Postings | None:
        return self._index.get(term)

    def _lengths(self) -> Sequence[int]:
        return self.lengths

    def _chunk_ids(self, docnos: Iterable[int]) -> dict[int, str]:
        ids = self.chunk_ids
        return {d: ids[d] for d in docnos}


# ------------------------------------------------------------------------------------- SQLite

_TERM = "lexical_term"  # term → live df and score bounds (small rows, updated per write)
_MAIN = "lexical_main"  # term → main postings as packed BLOBs (rewritten only by merges)
_DELTA = "lexical_delta"  # postings of documents added since the last merge, one row each
_DELTA_DOC = "lexical_doc"  # lengths of those documents
_DEAD = "lexical_dead"  # main documents retired since the last merge
_STAT = "lexical_stat"  # counters, the synced generation, the main lengths BLOB
_CHUNKS = "narrative_chunk"
_META = "ragspine_meta"
_FORMAT_KEY = "lexical_index_format"

_DDL = (
    f"CREATE TABLE IF NOT EXISTS {_TERM} (term TEXT PRIMARY KEY, df INTEGER NOT NULL, "
    "max_tf INTEGER NOT NULL, min_len INTEGER NOT NULL) WITHOUT ROWID",
    # A rowid table: big BLOBs live in overflow pages, outside the b-tree of small rows.
    f"CREATE TABLE IF NOT EXISTS {_MAIN} (term TEXT PRIMARY KEY, docs BLOB NOT NULL, "
    "tfs BLOB NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {_DELTA} (term TEXT NOT NULL, docno INTEGER NOT NULL, "
    "tf INTEGER NOT NULL, PRIMARY KEY (term, docno)) WITHOUT ROWID",
    f"CREATE TABLE IF NOT EXISTS {_DELTA_DOC} (docno INTEGER PRIMARY KEY, "
    "length INTEGER NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {_DEAD} (docno INTEGER PRIMARY KEY)",
    f"CREATE TABLE IF NOT EXISTS {_STAT} (key TEXT PRIMARY KEY, value)",
)
_TABLES = (_TERM, _MAIN, _DELTA, _DELTA_DOC, _DEAD, _STAT)
_COUNTERS = (
    "generation",  # the store generation this index reflects
    "docs",  # live documents
    "total_length",  # their total token count
    "main_postings",  # postings in the packed main segment (dead ones included)
    "delta_postings",  # rows in lexical_delta
    "dead_postings",  # postings of dead main documents
    "main_version",  # bumped whenever the main segment is rewritten
    "duplicate_rows",  # live rows whose chunk id another live row also has
)

#: Fold the delta into the packed main segment once it (plus retired postings) exceeds both
#: this many postings and this fraction of the main segment.
MERGE_MIN_POSTINGS = 250_000
MERGE_RATIO = 0.25
#: A write touching more rows than both of these rebuilds the index in one pass instead.
REBUILD_MIN_ROWS = 2_000
REBUILD_RATIO = 0.5
#: Decoded main postings a store index keeps in memory (about 8 bytes each).
CACHE_POSTINGS = 4_000_000


def _doc_counts(text: str) -> tuple[int, Counter[str]]:
    tokens = tokenize(text)
    return len(tokens), Counter(tokens)


class StoreBM25Index(BM25Index):
    """The BM25 index persisted in a chunk store's file; docno = ``narrative_chunk`` rowid.

    Attach it with :meth:`attach` (one per store): the store then updates it inside every
    ``replace_doc_chunks`` transaction. Only active chunks are indexed, their ``text`` as
    :func:`~ragspine_lite.text.words.tokenize` splits it. Layout: a packed *main*
    segment (one row per term, postings as ``uint32`` BLOBs), a *delta* of rows for documents
    added since the last merge, and tombstones for retired main documents; the delta is
    folded into the main segment when it grows past a quarter of it. Opening reads nothing
    but counters; postings are fetched per query term and cached (bounded).
    """

    name = "bm25"

    def __init__(
        self,
        store: ChunkStore,
        *,
        merge_min_postings: int = MERGE_MIN_POSTINGS,
        merge_ratio: float = MERGE_RATIO,
        cache_postings: int = CACHE_POSTINGS,
    ) -> None:
        self.store = store
        self.merge_min_postings = merge_min_postings
        self.merge_ratio = merge_ratio
        self.cache_postings = cache_postings
        self._conn: sqlite3.Connection | None = None
        self._generation = -1
        self._main_version = -1
        self._stats: dict[str, int] = {}
        self._main_lengths = array(_UINT)
        self._lengths_all: array = self._main_lengths
        self._dead: set[int] = set()
        self._mask: bytearray | None = None
        self._terms: dict[str, Postings | None] = {}  # this generation
        self._main: dict[str, tuple[array, array]] = {}  # this main version, LRU
        self._main_cached = 0

    @classmethod
    def attach(cls, store: ChunkStore, **options: Any) -> StoreBM25Index:
        """The store's BM25 index, attaching a new one (with ``options``) if it has none yet."""
        attached = store.attach_indexer(cls(store, **options))
        if not isinstance(attached, StoreBM25Index):
            raise TypeError(
                f"indexer {cls.name!r} of {store!r} is a {type(attached).__name__}, "
                "not a StoreBM25Index"
            )
        return attached

    # -- ChunkIndexer hooks ----------------------------------------------------------------

    def is_current(self, conn: sqlite3.Connection, generation: int) -> bool:
        try:
            fmt = conn.execute(
                f"SELECT value FROM {_META} WHERE key = ?", (_FORMAT_KEY,)
            ).fetchone()
            synced = conn.execute(
                f"SELECT value FROM {_STAT} WHERE key = 'generation'"
            ).fetchone()
        except sqlite3.OperationalError:
            return False
        return (
            fmt is not None
            and str(fmt[0]) == str(BM25_INDEX_FORMAT)
            and synced is not None
            and int(synced[0]) == generation
        )

    def ensure(self, conn: sqlite3.Connection, generation: int) -> None:
        if not self.is_current(conn, generation):
            self._rebuild(conn, generation)

    def on_replace(
        self,
        conn: sqlite3.Connection,
        retired: Sequence[ChunkRow],
        added: Sequence[ChunkRow],
        generation: int,
    ) -> None:
        if not self.is_current(conn, generation - 1):
            self._rebuild(conn, generation)  # behind (or missing): the new state, from scratch
            return
        stats = _read_stats(conn)
        if len(added) + len(retired) > max(REBUILD_MIN_ROWS, REBUILD_RATIO * stats["docs"]):
            self._rebuild(conn, generation)  # a bulk write: one pass beats row-by-row updates
            return
        term_sql = f"UPDATE {_TERM} SET df = df - 1 WHERE term = ?"
        for row in retired:
            length, counts = _doc_counts(row.text)
            in_delta = conn.execute(
                f"DELETE FROM {_DELTA_DOC} WHERE docno = ?", (row.rowid,)
            ).rowcount
            if in_delta:
                conn.executemany(
                    f"DELETE FROM {_DELTA} WHERE term = ? AND docno = ?",
                    ((term, row.rowid) for term in counts),
                )
                stats["delta_postings"] -= len(counts)
            else:
                conn.execute(f"INSERT INTO {_DEAD} (docno) VALUES (?)", (row.rowid,))
                stats["dead_postings"] += len(counts)
            conn.executemany(term_sql, ((term,) for term in counts))
            stats["docs"] -= 1
            stats["total_length"] -= length
        upsert = (
            f"INSERT INTO {_TERM} (term, df, max_tf, min_len) "
            "VALUES (?, 1, ?, ?) ON CONFLICT(term) DO UPDATE SET df = df + 1, "
            "max_tf = MAX(max_tf, excluded.max_tf), min_len = MIN(min_len, excluded.min_len)"
        )
        for row in added:
            length, counts = _doc_counts(row.text)
            conn.execute(
                f"INSERT INTO {_DELTA_DOC} (docno, length) VALUES (?, ?)", (row.rowid, length)
            )
            conn.executemany(
                f"INSERT INTO {_DELTA} (term, docno, tf) VALUES (?, ?, ?)",
                ((term, row.rowid, f) for term, f in counts.items()),
            )
            conn.executemany(upsert, ((term, f, length) for term, f in counts.items()))
            stats["delta_postings"] += len(counts)
            stats["docs"] += 1
            stats["total_length"] += length
        stats["duplicate_rows"] += _duplicate_change(conn, retired, added)
        stats["generation"] = generation
        pending = stats["delta_postings"] + stats["dead_postings"]
        if pending > max(self.merge_min_postings, self.merge_ratio * stats["main_postings"]):
            self._merge(conn, stats)
        _write_stats(conn, stats)

    # -- building and merging --------------------------------------------------------------

    def _rebuild(self, conn: sqlite3.Connection, generation: int) -> None:
        """Index every active chunk from scratch (first use, a v1 store, or missed writes)."""
        count = conn.execute(f"SELECT COUNT(*) FROM {_CHUNKS} WHERE active = 1").fetchone()[0]
        logger.info(
            "building the BM25 index of chunk store %r: %d active chunks "
            "(index missing, of another format, or behind the store)",
            self.store.db_path, count,
        )
        for table in _TABLES:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        for ddl in _DDL:
            conn.execute(ddl)
        docs: dict[str, array] = {}
        tfs: dict[str, array] = {}
        lengths = array(_UINT)
        total = 0
        n_docs = 0
        postings = 0
        for rowid, text in conn.execute(
            f"SELECT rowid, text FROM {_CHUNKS} WHERE +active = 1 ORDER BY rowid"  # table order
        ):
            tokens = tokenize(text)
            if rowid >= len(lengths):
                lengths.extend(_zeros(rowid + 1 - len(lengths)))
            lengths[rowid] = len(tokens)
            total += len(tokens)
            n_docs += 1
            counts = Counter(tokens)
            postings += len(counts)
            for term, f in counts.items():
                d = docs.get(term)
                if d is None:
                    d = docs[term] = array(_UINT)
                    tfs[term] = array(_UINT)
                d.append(rowid)
                tfs[term].append(f)
        conn.executemany(
            f"INSERT INTO {_TERM} (term, df, max_tf, min_len) VALUES (?, ?, ?, ?)",
            ((term, len(d), max(tfs[term]), min(map(lengths.__getitem__, d)))
             for term, d in docs.items()),
        )
        conn.executemany(
            f"INSERT INTO {_MAIN} (term, docs, tfs) VALUES (?, ?, ?)",
            ((term, _pack(d), _pack(tfs[term])) for term, d in docs.items()),
        )
        duplicates = conn.execute(
            f"SELECT COALESCE(SUM(n), 0) FROM (SELECT COUNT(*) AS n FROM {_CHUNKS} "
            "WHERE active = 1 GROUP BY chunk_id HAVING COUNT(*) > 1)"
        ).fetchone()[0]
        stats = dict.fromkeys(_COUNTERS, 0)
        stats.update(
            generation=generation, docs=n_docs, total_length=total, main_postings=postings,
            main_version=self._main_version + 1, duplicate_rows=int(duplicates),
        )
        _write_stats(conn, stats)
        conn.execute(
            f"INSERT INTO {_STAT} (key, value) VALUES ('main_lengths', ?)", (_pack(lengths),)
        )
        conn.execute(
            f"INSERT INTO {_META} (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (_FORMAT_KEY, str(BM25_INDEX_FORMAT)),
        )
        self._forget()

    def _merge(self, conn: sqlite3.Connection, stats: dict[str, int]) -> None:
        """Fold the delta into the main segment and drop retired documents' postings."""
        dead = {r[0] for r in conn.execute(f"SELECT docno FROM {_DEAD}")}
        touched: set[str] = set()
        for (text,) in _texts_of(conn, sorted(dead)):
            touched.update(tokenize(text))
        delta: dict[str, tuple[list[int], list[int]]] = {}
        for term, docno, tf in conn.execute(
            f"SELECT term, docno, tf FROM {_DELTA} ORDER BY term, docno"
        ):
            entry = delta.get(term)
            if entry is None:
                entry = delta[term] = ([], [])
            entry[0].append(docno)
            entry[1].append(tf)
        lengths = self._unpack_stat(conn, "main_lengths")
        new_docs = conn.execute(f"SELECT docno, length FROM {_DELTA_DOC} ORDER BY docno").fetchall()
        if new_docs:
            end = new_docs[-1][0] + 1
            if end > len(lengths):
                lengths.extend(_zeros(end - len(lengths)))
            for docno, length in new_docs:
                lengths[docno] = length
        for docno in dead:
            lengths[docno] = 0
        postings = stats["main_postings"]
        read = f"SELECT docs, tfs FROM {_MAIN} WHERE term = ?"
        for term in sorted(touched | delta.keys()):
            row = conn.execute(read, (term,)).fetchone()
            docs, tfs = self._unpack_main(term, row)
            postings -= len(docs)
            if term in touched and dead:
                keep = [d not in dead for d in docs]
                docs = array(_UINT, compress(docs, keep))
                tfs = array(_UINT, compress(tfs, keep))
            extra = delta.get(term)
            if extra is not None:  # delta docnos are newer rowids: appending keeps order
                docs.extend(extra[0])
                tfs.extend(extra[1])
            postings += len(docs)
            if docs:
                conn.execute(
                    f"UPDATE {_TERM} SET df = ?, max_tf = ?, min_len = ? WHERE term = ?",
                    (len(docs), max(tfs), min(map(lengths.__getitem__, docs)), term),
                )
                conn.execute(
                    f"INSERT INTO {_MAIN} (term, docs, tfs) VALUES (?, ?, ?) ON CONFLICT(term) "
                    "DO UPDATE SET docs = excluded.docs, tfs = excluded.tfs",
                    (term, _pack(docs), _pack(tfs)),
                )
            else:
                conn.execute(f"DELETE FROM {_TERM} WHERE term = ?", (term,))
                conn.execute(f"DELETE FROM {_MAIN} WHERE term = ?", (term,))
        conn.execute(f"DELETE FROM {_DELTA}")
        conn.execute(f"DELETE FROM {_DELTA_DOC}")
        conn.execute(f"DELETE FROM {_DEAD}")
        conn.execute(
            f"UPDATE {_STAT} SET value = ? WHERE key = 'main_lengths'", (_pack(lengths),)
        )
        stats.update(
            main_postings=postings, delta_postings=0, dead_postings=0,
            main_version=stats["main_version"] + 1,
        )
        self._forget()

    def _forget(self) -> None:
        """Drop every cached read (after this object rewrote the index)."""
        self._generation = -1
        self._main_version = -1
        self._main.clear()
        self._main_cached = 0
        self._terms.clear()
        self._drop_lookups()

    # -- reading ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def reading(self) -> Iterator[StoreBM25Index]:
        """One consistent read of the store (refreshing caches if the store changed).

        Raises :class:`ChunkStoreError` if the index is missing or behind the store
        (call :meth:`ChunkStore.sync_indexers` first).
        """
        if self._conn is not None:
            yield self
            return
        with self.store.snapshot() as conn:
            self._refresh(conn)
            self._conn = conn
            try:
                yield self
            finally:
                self._conn = None

    def _refresh(self, conn: sqlite3.Connection) -> None:
        row = conn.execute(f"SELECT value FROM {_META} WHERE key = 'generation'").fetchone()
        generation = int(row[0]) if row is not None else 0
        if generation == self._generation:
            return
        if not self.is_current(conn, generation):
            raise StaleIndexError(
                f"the BM25 index of {self.store.db_path!r} is missing or behind the store; "
                "call sync_indexers() (or init_schema()) on a writable store first"
            )
        stats = _read_stats(conn)
        if stats["main_version"] != self._main_version:
            self._main.clear()
            self._main_cached = 0
            self._main_lengths = self._unpack_stat(conn, "main_lengths")
            self._main_version = stats["main_version"]
        self._stats = stats
        self.n_docs = stats["docs"]
        self.total_length = stats["total_length"]
        self._dead = {r[0] for r in conn.execute(f"SELECT docno FROM {_DEAD}")}
        new_docs = conn.execute(f"SELECT docno, length FROM {_DELTA_DOC} ORDER BY docno").fetchall()
        lengths = self._main_lengths
        if new_docs:
            lengths = array(_UINT, lengths)
            end = new_docs[-1][0] + 1
            if end > len(lengths):
                lengths.extend(_zeros(end - len(lengths)))
            for docno, length in new_docs:
                lengths[docno] = length
        self._lengths_all = lengths
        self._mask = None
        self._terms.clear()
        self._drop_lookups()
        self._generation = generation

    def _read_conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("StoreBM25Index read outside reading()")
        return self._conn

    @property
    def has_duplicate_chunk_ids(self) -> bool:
        with self.reading():
            return self._stats.get("duplicate_rows", 0) > 0

    def _lengths(self) -> Sequence[int]:
        return self._lengths_all

    def _norms_key(self) -> Any:
        return (self._generation, id(self._lengths_all))

    def _live_mask(self) -> bytearray | None:
        if not self._dead:
            return None
        if self._mask is None:
            mask = bytearray(b"\x01") * len(self._lengths_all)
            for d in self._dead:
                mask[d] = 0
            self._mask = mask
        return self._mask

    def _postings(self, term: str) -> Postings | None:
        if term in self._terms:
            return self._terms[term]
        conn = self._read_conn()
        row = conn.execute(
            f"SELECT df, max_tf, min_len FROM {_TERM} WHERE term = ?", (term,)
        ).fetchone()
        postings = None
        if row is not None:
            docs, tfs = self._main_postings(conn, term)
            delta = conn.execute(
                f"SELECT docno, tf FROM {_DELTA} WHERE term = ?", (term,)
            ).fetchall()
            if delta:
                docs = array(_UINT, docs)
                tfs = array(_UINT, tfs)
                docs.extend(r[0] for r in delta)
                tfs.extend(r[1] for r in delta)
            postings = Postings(docs, tfs, row[0], row[1], row[2])
        self._terms[term] = postings
        return postings

    def _main_postings(self, conn: sqlite3.Connection, term: str) -> tuple[array, array]:
        hit = self._main.pop(term, None)
        if hit is None:
            row = conn.execute(f"SELECT docs, tfs FROM {_MAIN} WHERE term = ?", (term,)).fetchone()
            hit = self._unpack_main(term, row)
            self._main_cached += len(hit[0])
            while self._main and self._main_cached > self.cache_postings:
                oldest = next(iter(self._main))
                self._main_cached -= len(self._main.pop(oldest)[0])
        self._main[term] = hit  # most recently used last
        return hit

    def _unpack_main(self, term: str, row: tuple[bytes, bytes] | None) -> tuple[array, array]:
        """A ``lexical_main`` row's (docs, tfs); none for a term without main postings."""
        if row is None:
            return _zeros(0), _zeros(0)
        db, where = str(self.store.db_path), f"table {_MAIN}, term {term!r}, column"
        return _unpack(row[0], db, f"{where} docs"), _unpack(row[1], db, f"{where} tfs")

    def _unpack_stat(self, conn: sqlite3.Connection, key: str) -> array:
        where = f"table {_STAT}, key {key!r}"
        return _unpack(_stat_blob(conn, key), str(self.store.db_path), where)

    def _chunk_ids(self, docnos: Iterable[int]) -> dict[int, str]:
        conn = self._read_conn()
        wanted = list(docnos)
        out: dict[int, str] = {}
        for start in range(0, len(wanted), 900):
            part = wanted[start : start + 900]
            out.update(
                conn.execute(
                    f"SELECT rowid, chunk_id FROM {_CHUNKS} "
                    f"WHERE rowid IN ({', '.join('?' for _ in part)})",
                    part,
                ).fetchall()
            )
        return out

    def size_bytes(self) -> int:
        """Bytes the index occupies in the file (its tables' pages), when SQLite reports it."""
        with self.reading():
            conn = self._read_conn()
            try:
                names = ", ".join(f"'{t}'" for t in _TABLES)
                row = conn.execute(
                    f"SELECT SUM(pgsize) FROM dbstat WHERE name IN ({names}) "
                    f"OR name LIKE 'sqlite_autoindex_lexical%'"
                ).fetchone()
                return int(row[0] or 0)
            except sqlite3.Error:  # no dbstat virtual table in this SQLite build
                blobs = conn.execute(
                    f"SELECT COALESCE(SUM(LENGTH(docs) + LENGTH(tfs)), 0) FROM {_MAIN}"
                ).fetchone()[0]
                return int(blobs)


def _read_stats(conn: sqlite3.Connection) -> dict[str, int]:
    rows = dict(
        conn.execute(
            f"SELECT key, value FROM {_STAT} WHERE key IN ({', '.join('?' for _ in _COUNTERS)})",
            _COUNTERS,
        ).fetchall()
    )
    return {key: int(rows.get(key, 0)) for key in _COUNTERS}


def _write_stats(conn: sqlite3.Connection, stats: dict[str, int]) -> None:
    conn.executemany(
        f"INSERT INTO {_STAT} (key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        ((key, int(stats[key])) for key in _COUNTERS),
    )


def _stat_blob(conn: sqlite3.Connection, key: str) -> bytes | None:
    row = conn.execute(f"SELECT value FROM {_STAT} WHERE key = ?", (key,)).fetchone()
    return None if row is None else row[0]


def _texts_of(conn: sqlite3.Connection, rowids: list[int]) -> Iterator[tuple[str]]:
    for start in range(0, len(rowids), 900):
        part = rowids[start : start + 900]
        yield from conn.execute(
            f"SELECT text FROM {_CHUNKS} WHERE rowid IN ({', '.join('?' for _ in part)})", part
        )


def _duplicate_change(
    conn: sqlite3.Connection, retired: Sequence[ChunkRow], added: Sequence[ChunkRow]
) -> int:
    """How one write changed the number of live rows sharing a chunk id with another."""
    delta: Counter[str] = Counter(r.chunk_id for r in added)
    delta.subtract(r.chunk_id for r in retired)
    ids = sorted(delta)
    after: dict[str, int] = {}
    for start in range(0, len(ids), 900):
        part = ids[start : start + 900]
        # With one id SQLite rewrites IN (?) to "= ?" and, without statistics, scans the
        # (active, ...) index instead of the partial chunk-id index: repeat the id.
        part = part * 2 if len(part) == 1 else part
        after.update(
            conn.execute(
                f"SELECT chunk_id, COUNT(*) FROM {_CHUNKS} WHERE active = 1 AND chunk_id IN "
                f"({', '.join('?' for _ in part)}) GROUP BY chunk_id",
                part,
            ).fetchall()
        )

    def shared(n: int) -> int:
        return n if n > 1 else 0

    return sum(shared(after.get(c, 0)) - shared(after.get(c, 0) - delta[c]) for c in ids)
