"""The BM25 scorer every index shares: :class:`BM25Index` ranks and scores from postings
(exact, MaxScore-pruned for top-k: :class:`_TopQuery`), subclasses say where postings live.
See :mod:`ragspine_lite.lexical.inverted_index` for the invariant and the design."""

from __future__ import annotations

import contextlib
import math
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from heapq import nlargest
from itertools import compress
from operator import itemgetter
from typing import Any, NamedTuple

from ragspine_lite.lexical.scoring import DEFAULT_BM25_B, DEFAULT_BM25_K1, bm25_idf
from ragspine_lite.text.words import tokenize

__all__ = [
    "LOOKUP_CACHE_POSTINGS",
    "UINT",
    "BM25Index",
    "CandidateSet",
    "Hit",
    "Postings",
    "TermDocuments",
]

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

#: The array typecode of docnos, tfs and lengths (4 bytes on every CPython/Pyodide target).
UINT = "I"
if array(UINT).itemsize != 4:  # pragma: no cover - every CPython/Pyodide target has 4
    raise ImportError("ragspine_lite.lexical needs a 4-byte array('I')")


@dataclass(slots=True, eq=False)
class Postings:
    """One term's postings: ascending docnos and their tfs, the live df, and score bounds.

    ``docs`` may hold retired documents (skipped at query time); ``max_tf`` and ``min_len``
    bound every posting ever held, so they stay valid upper-bound inputs after retirements.
    ``idf``: the stored IDF under every live document (a bundle's, written at build time),
    else ``None`` (computed per query).
    """

    docs: array
    tfs: array
    df: int
    max_tf: int
    min_len: int
    idf: float | None = None
    tf_by_doc: dict[int, int] | None = field(default=None, init=False)  # see _lookup


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


class TermDocuments(NamedTuple):
    """A query term as :meth:`BM25Index.term_documents` sees it: its document frequency and,
    for a rare term, the ids of the documents holding it (ascending; ``[]`` otherwise)."""

    term: str
    df: int
    ids: list[str]


class _Term:
    """A query term as scored: ``qtf * idf``, its postings and its score bound."""

    __slots__ = ("postings", "ub", "wq")

    def __init__(self, wq: float, postings: Postings) -> None:
        self.wq = wq
        self.postings = postings
        self.ub = 0.0


class _Query(NamedTuple):
    """A query ready to score: its terms, the BM25 parameters and statistics, and which
    documents may score (``cand``, ``None``: every live one; ``mask``: the live ones)."""

    terms: list[_Term]
    k1: float
    b: float
    avgdl: float
    cand: CandidateSet | None
    mask: bytearray | None


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

    def _held(self, term: str, cand: CandidateSet | None) -> tuple[Postings, int] | None:
        """``term``'s postings and document frequency over ``cand`` (``None``: every live
        document); ``None`` when no such document holds it."""
        postings = self._postings(term)
        if postings is None:
            return None
        df = postings.df if cand is None else cand.count_in(postings.docs)
        return (postings, df) if df else None

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
        query = _Query(terms, k1, b, avgdl, cand, mask)
        scored = self._top(query, limit) if prunable and limit is not None else self._all(query)
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
            found = self._held(term, cand)
            if found is None:
                continue
            postings, df = found
            stored = postings.idf if cand is None else None
            idf = bm25_idf(n, df) if stored is None else stored
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

    def term_documents(
        self,
        query_tokens: Sequence[str],
        max_df: int,
        *,
        candidates: CandidateSet | None = None,
    ) -> list[TermDocuments]:
        """Each distinct query term some document holds, in query order: its document
        frequency as BM25's IDF counts it (over ``candidates``, default every live document)
        and, when that is at most ``max_df``, the ids of the documents holding it.

        Integers only, from the postings a search of these tokens reads anyway.
        """
        with self.reading():
            cand = None if candidates is not None and candidates.count == self.n_docs else (
                candidates
            )
            mask = cand.mask if cand is not None else self._live_mask()
            out: list[TermDocuments] = []
            for term in dict.fromkeys(query_tokens):
                found = self._held(term, cand)
                if found is None:
                    continue
                postings, df = found
                held: list[str] = []
                if df <= max_df:
                    docnos = [d for d, _ in self._pairs(postings, cand, mask)]
                    ids = self._chunk_ids(docnos)
                    held = sorted({ids[d] for d in docnos})
                out.append(TermDocuments(term, df, held))
        return out

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

    def _all(self, query: _Query) -> list[tuple[int, float]]:
        """Every hit, scored term by term in query order: the reference's exact sums."""
        terms, k1, b, avgdl, cand, mask = query
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

    def _top(self, query: _Query, limit: int) -> list[tuple[int, float]]:
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
        top = _TopQuery(self, query, limit)
        top.seed()
        i = top.scan()
        complete = list(top.finish(i))
        # Exact scores: the reference's expression and order, for the few that can make it.
        scored = self._exact(query.terms, complete, query.k1, query.b, query.avgdl)
        if len(scored) > limit:
            # Keep every document tied with the limit-th score: chunk ids break those ties.
            kth = nlargest(limit, map(itemgetter(1), scored))[-1]
            scored = [h for h in scored if h[1] >= kth]
        return [h for h in scored if h[1] > 0]


class _TopQuery:
    """One pruned top-``limit`` query of :meth:`BM25Index._top`: its constants (terms by
    bound, the bounds of what is left, length normalisers) and its state (partial sums
    ``acc``, the threshold ``theta``)."""

    def __init__(self, index: BM25Index, query: _Query, limit: int) -> None:
        terms, k1, b, avgdl, cand, mask = query
        self.index, self.cand, self.mask, self.limit = index, cand, mask, limit
        self.lengths = index._lengths()
        self.kd = index._norms(k1, b, avgdl, cand)
        self.k1p = k1 + 1.0
        omb = 1.0 - b
        self.k0 = k1 * omb
        self.kl = k1 * b / avgdl
        for t in terms:
            p = t.postings
            t.ub = t.wq * p.max_tf * self.k1p / (p.max_tf + k1 * (omb + b * p.min_len / avgdl))
        self.order = order = sorted(terms, key=lambda t: -t.ub)
        m = len(order)
        self.rest = rest = [0.0] * (m + 1)  # rest[i]: the most that order[i:] can add
        for i in range(m - 1, -1, -1):
            rest[i] = rest[i + 1] + order[i].ub
        self.acc: dict[int, float] = {}
        self.theta = 0.0

    def completed(self, lookups: list[Any], d: int, s: float) -> float:
        """Partial sum ``s`` of ``d`` plus the terms of ``lookups`` (0.0 when nothing)."""
        kd, lengths = self.kd, self.lengths
        kn = kd[d] if kd is not None else self.k0 + self.kl * lengths[d]
        for tf_of, w, _bound in lookups:
            f = tf_of(d)
            if f is not None:
                s += w * f / (f + kn)
        return s or 0.0

    def seed(self) -> None:
        """Seed theta before any scan: documents holding both top terms score high, and
        completing a few of them by lookups lets pruning start at once."""
        order, limit, index = self.order, self.limit, self.index
        if len(order) < 2:
            return
        first, second = index._table(order[0].postings), index._table(order[1].postings)
        if first is None or second is None:
            return
        both: Collection[int] = first.keys() & second.keys()
        if self.mask is not None:
            both = {d for d in both if self.mask[d]}
        if len(both) < limit:
            return
        pool = max(index.seed_pool, limit)
        if len(both) > pool:
            both = nlargest(pool, both, key=lambda d: first[d] + second[d])
        lookups = index._lookup_plan(order, self.rest, 0, self.k1p)
        self.theta = nlargest(limit, [self.completed(lookups, d, 0.0) for d in both])[-1]

    def scan(self) -> int:
        """Phase 1: accumulate terms, highest bound first, while an unseen document could
        still reach theta; returns how many terms were scanned."""
        order, rest, m = self.order, self.rest, len(self.order)
        i = 0
        estimates = 0
        # Documents proven unable to reach theta. A document first met at order[i] scores at
        # most its contribution there plus rest[i + 1]; below theta it is never accumulated
        # (and stays out: a later term must not re-enter it with an understated partial sum).
        dead: set[int] = set()
        while i < m:
            self._accumulate(order[i], self.theta * _SAFE - rest[i + 1], dead)
            i += 1
            if i == m or rest[i] < self.theta * _SAFE:
                break
            if (estimates < self.index.max_estimates and len(self.acc) >= self.limit
                    and len(order[i].postings.docs) > 2 * self.limit * (m - i)):
                estimates += 1
                self._raise_theta(i)  # the next term is costly: raise theta first
                if rest[i] < self.theta * _SAFE:
                    break
        return i

    def _accumulate(self, t: _Term, floor: float, dead: set[int]) -> None:
        """Add term ``t`` to the partial sums; a new document below ``floor`` is dead."""
        acc, kd, lengths, k0, kl = self.acc, self.kd, self.lengths, self.k0, self.kl
        w = t.wq * self.k1p
        get = acc.get
        for d, f in self.index._pairs(t.postings, self.cand, self.mask):
            c = w * f / (f + (kd[d] if kd is not None else k0 + kl * lengths[d]))
            s = get(d)
            if s is not None:
                acc[d] = s + c
            elif c >= floor and d not in dead:
                acc[d] = c
            else:
                dead.add(d)

    def _raise_theta(self, i: int) -> None:
        """Complete the best partial sums over order[i:]; theta is at least their least."""
        lookups = self.index._lookup_plan(self.order, self.rest, i, self.k1p)
        best = nlargest(self.limit, self.acc.items(), key=itemgetter(1))
        self.theta = max(self.theta, min(self.completed(lookups, d, s) for d, s in best))

    def finish(self, i: int) -> dict[int, float]:
        """Phase 2: only accumulated documents can still make it; add order[i:] to those
        that can still reach theta, term by term (C-level set intersections)."""
        live = {d: s for d, s in self.acc.items() if s >= self.theta * _SAFE - self.rest[i]}
        for j in range(i, len(self.order)):
            self._add_by_lookup(self.order[j], live)
            if len(live) > self.limit:
                self.theta = max(self.theta, nlargest(self.limit, live.values())[-1])
            floor = self.theta * _SAFE - self.rest[j + 1]
            live = {d: s for d, s in live.items() if s >= floor}
        return live

    def _add_by_lookup(self, t: _Term, live: dict[int, float]) -> None:
        kd, lengths, k0, kl = self.kd, self.lengths, self.k0, self.kl
        w = t.wq * self.k1p
        table = self.index._table(t.postings)
        if table is not None:
            for d in live.keys() & table.keys():
                f = table[d]
                live[d] += w * f / (f + (kd[d] if kd is not None else k0 + kl * lengths[d]))
        else:
            tf_of = self.index._tf_of(t.postings)
            for d in live:
                tf = tf_of(d)
                if tf is not None:
                    live[d] += w * tf / (tf + (kd[d] if kd is not None else k0 + kl * lengths[d]))
