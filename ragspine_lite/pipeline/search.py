"""The one place a search runs its stages, over a lexical lane and an optional dense lane.

Every search of the package (:class:`~ragspine_lite.pipeline.retrievers.HybridRetriever`,
each path of :class:`~ragspine_lite.pipeline.retrievers.NarrativeIndex`, the browser bundle's
:class:`~ragspine_lite.bundle.sharded_index.ShardedIndex`; so the CLI, the remote endpoint and
the page too) is :meth:`Pipeline.search`:

1. **channel** (:meth:`Pipeline.channel`): hybrid when a dense lane is there and the query
   passes the backend's vocabulary gate, else BM25 (the very path of an index without one).
2. **candidates**: the lexical lane's documents passing the filters; none → no results.
3. **query variants** (:func:`~ragspine_lite.pipeline.stages.query_variants`).
4. **rankings**: per variant the lexical ranking and, hybrid, the dense ranking. A lone variant
   searched with BM25 alone over unique ids is cut to ``limit`` (fusion keeps its order); a
   hybrid calibrated search over a lane that can score a pool (:class:`PooledLexicalLane`)
   ranks a pool of BM25 hits (:func:`pooled_ranking`); otherwise every hit counts.
5. **fusion** (:mod:`~ragspine_lite.pipeline.fusion`) and, hybrid, **exact words**
   (:mod:`~ragspine_lite.pipeline.exact`, when the fusion carries the rule and the lane can
   tell which chunks hold a rare query word: :class:`ExactWordsLane`): those chunks are
   ranked however low BM25 put them, and gain the rule's bonus. Then the fused ids' chunks.
6. **post-retrieval chain** (:func:`~ragspine_lite.pipeline.stages.run_post_chain`).

Lanes are siblings with the same names (:mod:`ragspine_lite.pipeline.lanes`: a list of chunks,
the chunk store's index, a vector store; :mod:`ragspine_lite.bundle.sharded_index`: the
bundle's shards). Keys are the lane's ranking ids (chunk ids, or docno keys that sort alike).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.lexical.bm25_index import TermDocuments
from ragspine_lite.pipeline.exact import ExactWords
from ragspine_lite.pipeline.fusion import ChannelHits, Fusion, Hit, channel_hits
from ragspine_lite.pipeline.stages import (
    CHANNEL_HYBRID,
    PostRetrievalStep,
    RetrievalResult,
    choose_channel,
    query_variants,
    results_of,
    run_post_chain,
)

__all__ = [
    "LEXICAL_POOL",
    "Candidates",
    "DenseLane",
    "DenseRun",
    "ExactWordsLane",
    "LexicalLane",
    "Pipeline",
    "PooledLexicalLane",
    "pooled_ranking",
]

#: BM25 hits a pooled hybrid search scores before the dense hits (see :func:`pooled_ranking`).
LEXICAL_POOL = 100
#: A dense run with ``rescore`` reads the rows of each lexical ranking's top ``RESCORED · limit``
#: (their dense evidence; ``docs/hybrid.md``: recall of the coarse lists against exact).
RESCORED = 2


class Candidates(Protocol):
    """The documents a search may return (a lane's own type); ``count`` of them."""

    @property
    def count(self) -> int: ...


#: What a lane's ``candidates`` returned, handed back to the same lane: each lane has its own
#: type (a :class:`Candidates`, or ``None`` for every document).
LaneCandidates = Any


class LexicalLane(Protocol):
    """A BM25 index as one search sees it."""

    @property
    def unique_keys(self) -> bool:
        """Whether keys are unique (then a lone ranking may be cut before fusion)."""
        ...

    def reading(self) -> contextlib.AbstractContextManager[Any]:
        """One consistent read of the index, around rankings and chunks."""
        ...

    def candidates(
        self, filters: Mapping[str, str | None], metadata_filter: Any | None
    ) -> Candidates | None:
        """The documents passing the filters (``None``: every document)."""
        ...

    def rankings(
        self, queries: Sequence[str], candidates: LaneCandidates, limit: int | None
    ) -> list[list[Hit]]:
        """Per query, ``(key, bm25)`` of every hit by ``(-score, key)`` (the first ``limit``)."""
        ...

    def chunks_for(self, keys: list[str], candidates: LaneCandidates) -> Mapping[str, Any]:
        """key → the chunk a result carries (the caller's own copy)."""
        ...


@runtime_checkable
class PooledLexicalLane(LexicalLane, Protocol):
    """A lexical lane that can score some documents exactly (for :func:`pooled_ranking`)."""

    def scores(self, query: str, keys: list[str], candidates: LaneCandidates) -> list[Hit]:
        """``(key, bm25)`` of these documents' hits (any order)."""
        ...


@runtime_checkable
class ExactWordsLane(LexicalLane, Protocol):
    """A lexical lane that tells which documents hold a query's rare words (exact words)."""

    def term_documents(
        self, terms: Sequence[str], max_df: int, candidates: LaneCandidates
    ) -> list[TermDocuments]:
        """The ``terms`` the documents hold, with their document frequency over the
        candidates and, for those at most ``max_df`` documents hold, those documents' keys."""
        ...


class DenseRun(Protocol):
    """The dense side of one search: its rankings, and what the results still need.

    A run may also have ``rescore(keys)``: the lexical hits whose exact dense evidence
    the fusion reads, told before ``hits`` is read (a dense lane that does not scan every
    row: the bundle's coarse lists)."""

    @property
    def hits(self) -> list[list[Hit]]: ...

    def complete(self, results: list[RetrievalResult], keys: list[str]) -> None:
        """Give results the vector score the fusion did not read (``keys``: theirs)."""
        ...


class DenseLane(Protocol):
    """Vectors as one search sees them."""

    def rank(
        self,
        queries: list[str],
        candidates: LaneCandidates,
        filters: Mapping[str, str | None],
    ) -> DenseRun:
        """Embed the queries and rank the candidates' vectors, best first."""
        ...


@dataclass(frozen=True)
class Pipeline:
    """What a search is configured with; :meth:`search` runs the stages (module docstring)."""

    fusion: Fusion
    rewriter: Any | None = None
    backend: Any | None = None
    min_coverage: float | None = None
    steps: Sequence[PostRetrievalStep] = ()

    def channel(self, query: str, dense: bool) -> str:
        """The channel a search of ``query`` takes, ``dense`` when a dense lane is there."""
        return choose_channel(dense, self.backend, query, self.min_coverage)

    def variants(self, query: str) -> list[str]:
        """The query variants a search of ``query`` ranks, the original first."""
        return query_variants(self.rewriter, query)

    def dense_queries(self, query: str, dense: bool) -> list[str]:
        """The texts a search of ``query`` embeds (``[]``: it takes a BM25 channel)."""
        return self.variants(query) if self.channel(query, dense) == CHANNEL_HYBRID else []

    def search(
        self, query: str, lexical: LexicalLane, dense: DenseLane | None = None, **options: Any
    ) -> list[RetrievalResult]:
        """The results of ``query``: :meth:`retrieve`, then :meth:`post`."""
        return self.post(query, self.retrieve(query, lexical, dense, **options))

    def retrieve(
        self, query: str, lexical: LexicalLane, dense: DenseLane | None = None, **options: Any
    ) -> list[RetrievalResult]:
        """The fused results of ``query`` with their chunks, in one read of the lane
        (``options``: :meth:`rank`'s)."""
        with lexical.reading():
            found = self.rank(query, lexical, dense, **options)
            if found is None:
                return []
            hits, ordered, run, candidates = found
            keys = [key for key, _ in ordered]
            results = results_of(hits, ordered, lexical.chunks_for(keys, candidates))
        if run is not None:
            run.complete(results, keys)
        return results

    def post(self, query: str, results: list[RetrievalResult]) -> list[RetrievalResult]:
        """The post-retrieval chain (``steps``) over fused results."""
        return run_post_chain(query, results, self.steps)

    def rank(
        self,
        query: str,
        lexical: LexicalLane,
        dense: DenseLane | None = None,
        *,
        limit: int,
        filters: Mapping[str, str | None] | None = None,
        metadata_filter: Any | None = None,
        channel: str | None = None,
    ) -> tuple[list[ChannelHits], list[Hit], DenseRun | None, Candidates | None] | None:
        """Rankings and fused ``(key, score)`` of ``query``, before any chunk is read
        (``None``: no document passes the filters). ``dense`` is searched on the hybrid
        ``channel`` only (default: :meth:`channel`); ``filters`` are equality filters."""
        filters = filters or {}
        if channel is None:
            channel = self.channel(query, dense is not None)
        with lexical.reading():
            candidates = lexical.candidates(filters, metadata_filter)
            if candidates is not None and candidates.count == 0:
                return None
            queries = self.variants(query)
            run = None
            held: dict[str, int] = {}
            if dense is not None and channel == CHANNEL_HYBRID:
                run = dense.rank(queries, candidates, filters)
                held = self._held(query, lexical, candidates)
                lexical_hits = self._hybrid_lexical(
                    queries, lexical, candidates, run, limit, list(held)
                )
            else:
                prune = limit if len(queries) == 1 and lexical.unique_keys else None
                lexical_hits = lexical.rankings(queries, candidates, prune)
        hits = channel_hits(queries, lexical_hits, None if run is None else run.hits)
        return hits, self._fuse(hits, limit, held), run, candidates

    @property
    def exact_words(self) -> ExactWords | None:
        """The exact-words rule the fusion carries (``None``: none)."""
        return getattr(self.fusion, "exact_words", None)

    def _held(
        self, query: str, lexical: LexicalLane, candidates: Candidates | None
    ) -> dict[str, int]:
        """Exact words: key → how many of ``query``'s rare words it holds (hybrid only)."""
        rule = self.exact_words
        if rule is None or not isinstance(lexical, ExactWordsLane):
            return {}
        words = rule.words(query)
        return rule.held(lexical.term_documents(words, rule.max_df, candidates)) if words else {}

    def _fuse(self, hits: list[ChannelHits], limit: int, held: Mapping[str, int]) -> list[Hit]:
        """The fusion's top ``limit``; with chunks holding rare terms, every chunk fused, the
        exact-words bonus added, then cut."""
        rule = self.exact_words
        if not held or rule is None:
            return self.fusion.fuse(hits, limit)
        ranked = {key for h in hits for key, _ in (*h.lexical, *(h.dense or ()))}
        return rule.lift(self.fusion.fuse(hits, max(len(ranked), 1)), held, limit)

    def _hybrid_lexical(
        self,
        queries: list[str],
        lexical: LexicalLane,
        candidates: Candidates | None,
        run: DenseRun,
        limit: int,
        held: list[str],
    ) -> list[list[Hit]]:
        """The lexical rankings fused with the dense ones: a proven pool (with the ``held``
        keys, exact words, scored too), else every hit."""
        if len(queries) == 1 and isinstance(lexical, PooledLexicalLane):
            first = queries[0]
            pooled = pooled_ranking(
                self.fusion, lexical, first, candidates,
                lambda top: _dense_after(run, [top], limit)[0], limit, held,
            )
            if pooled is not None:
                return [pooled]
        rankings = lexical.rankings(queries, candidates, None)
        _dense_after(run, rankings, limit)
        return rankings


def _dense_after(run: DenseRun, rankings: list[list[Hit]], limit: int) -> list[list[Hit]]:
    """``run.hits`` once it was told each lexical ranking's top ``RESCORED · limit``."""
    rescore = getattr(run, "rescore", None)
    if rescore is not None:
        tops = (ranking[: RESCORED * limit] for ranking in rankings)
        rescore(dict.fromkeys(key for top in tops for key, _ in top))
    return run.hits


def pooled_ranking(
    fusion: Fusion,
    lexical: PooledLexicalLane,
    query: str,
    candidates: Candidates | None,
    dense: list[Hit] | Callable[[list[Hit]], list[Hit]],
    limit: int,
    held: Sequence[str] = (),
) -> list[Hit] | None:
    """The lexical ranking a calibrated fusion needs, without scoring every BM25 hit.

    The top ``max(LEXICAL_POOL, 2 * limit)`` hits (pruned) plus the exact BM25 of the dense
    hits (``dense``, or a function of that top giving them) and the ``held`` keys (chunks
    holding a rare query term) outside them. Any other
    chunk has no dense evidence, no exact-words bonus and at most the pool's last score, so
    it fuses to at most ``w · last / best``: when the ``limit``-th fused score is above
    that, the fused top ``limit`` is the full ranking's, bit for bit (the bonus only raises
    scores of chunks in the ranking). ``None``: not proven (or not a calibrated fusion),
    rank every hit.
    """
    calibration = getattr(fusion, "calibration", None)
    if calibration is None:
        return None
    pool = max(LEXICAL_POOL, 2 * limit)
    top = lexical.rankings([query], candidates, pool)[0]
    if callable(dense):
        dense = dense(top)
    if len(top) < pool:
        return top  # every hit
    have = {key for key, _ in top}
    missing = dict.fromkeys(key for key in (*(key for key, _ in dense), *held) if key not in have)
    extra = lexical.scores(query, list(missing), candidates)
    ranked = sorted(top + extra, key=lambda h: (-h[1], h[0]))
    fused = fusion.fuse(channel_hits([query], [ranked], [dense]), limit)
    bound = calibration.lexical_weight * (top[-1][1] / top[0][1])
    return ranked if len(fused) == limit and fused[-1][1] > bound else None


@contextlib.contextmanager
def no_read() -> Iterator[None]:
    """A lane's :meth:`LexicalLane.reading` when reads need no bracket."""
    yield
