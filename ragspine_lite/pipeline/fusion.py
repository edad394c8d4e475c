"""Fusion: every query variant's channel rankings → one ranking by ``(-score, chunk_id)``.

The input is one :class:`ChannelHits` per query variant: its lexical ranking and, on the
hybrid channel, its dense ranking. A :class:`Fusion` returns ``[(chunk_id, fused_score)]``
sorted by ``(-fused_score, chunk_id)`` (the tie rule,
:func:`~ragspine_lite.lexical.scoring.rank_scores`), at most ``limit``; it may drop chunks
(an empty list is a valid answer) and must keep a lone lexical ranking's order.

:class:`RRFFusion` is API.md's rule. A backend that ships a :class:`DenseCalibration` as its
``calibration`` attribute (MiniLM and USE do, from their model config) is fused with
:class:`CalibratedFusion` by :func:`default_fusion`; any other backend keeps RRF.

Calibrated: per query variant, a lexical hit scores ``bm25 / best bm25`` (the best hit 1.0)
and a dense hit scores ``(cosine - floor) / (ceiling - floor)`` clipped to ``[0, 1]``; a
cosine at or below the model's ``floor`` is no evidence and adds nothing. A chunk's fused
score is ``w · lexical + (1 - w) · dense`` (each its best over the variants),
``w = lexical_weight``; chunks scoring 0 are dropped, so a query neither channel has evidence
for returns nothing. With ``w > 0.5`` the best lexical hit (``≥ w``) always beats a
dense-only chunk (``≤ 1 - w``), and a chunk both channels found adds both shares.

A calibrated fusion also carries the exact-words stage (``exact_words``, default
:class:`~ragspine_lite.pipeline.exact.ExactWords`; ``None`` turns it off): the pipeline adds
its bonus to the chunks holding a query word few chunks hold (:mod:`ragspine_lite.pipeline.exact`).
:meth:`CalibratedFusion.fuse` itself is the score-aware rule alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.lexical.scoring import DEFAULT_RRF_K, rank_scores, rrf_fuse
from ragspine_lite.pipeline.exact import DEFAULT_EXACT_WORDS, ExactWords
from ragspine_lite.vector.calibration import DEFAULT_LEXICAL_WEIGHT, DenseCalibration

__all__ = [
    "DEFAULT_LEXICAL_WEIGHT",
    "CalibratedFusion",
    "ChannelHits",
    "DenseCalibration",
    "ExactWords",
    "Fusion",
    "Hit",
    "RRFFusion",
    "channel_hits",
    "default_fusion",
]

Hit = tuple[str, float]


@dataclass(frozen=True)
class ChannelHits:
    """One query variant's rankings; ``dense`` is ``None`` off the hybrid channel."""

    query: str
    lexical: list[Hit]
    dense: list[Hit] | None = None


def channel_hits(
    queries: Sequence[str],
    lexical: Sequence[list[Hit]],
    dense: Sequence[list[Hit]] | None = None,
) -> list[ChannelHits]:
    """Pair each variant with its rankings."""
    return [
        ChannelHits(q, lexical[i], None if dense is None else dense[i])
        for i, q in enumerate(queries)
    ]


@runtime_checkable
class Fusion(Protocol):
    """Fuses every variant's rankings → ``[(chunk_id, score)]`` by ``(-score, id)``, ≤ ``limit``."""

    def fuse(self, hits: Sequence[ChannelHits], limit: int) -> list[Hit]: ...


@dataclass(frozen=True)
class RRFFusion:
    """API.md's fusion: RRF over lexical q1, dense q1, lexical q2, … (every ranked chunk counts).

    >>> RRFFusion(k=1).fuse([ChannelHits("q", [("a", 2.0), ("b", 1.0)], [("b", 0.9)])], 5)
    [('b', 0.8333333333333333), ('a', 0.5)]
    """

    k: float = DEFAULT_RRF_K

    def fuse(self, hits: Sequence[ChannelHits], limit: int) -> list[Hit]:
        rankings: list[list[str]] = []
        for h in hits:
            rankings.append([cid for cid, _ in h.lexical])
            if h.dense is not None:
                rankings.append([cid for cid, _ in h.dense])
        return rank_scores(rrf_fuse(rankings, k=self.k), limit)


@dataclass(frozen=True)
class CalibratedFusion:
    """Score-aware fusion with the calibrated dense floor (see the module docstring).

    Without a dense channel (BM25 mode, a query outside the model's vocabulary) it is exactly
    :class:`RRFFusion` with ``rrf_k``. ``exact_words`` is the stage the pipeline runs around
    it on the hybrid channel (:mod:`ragspine_lite.pipeline.exact`; ``None``: off).

    >>> fusion = CalibratedFusion(DenseCalibration(floor=0.3, ceiling=0.7))
    >>> fusion.fuse([ChannelHits("q", [("a", 4.0), ("b", 2.0)], [("c", 0.9), ("a", 0.5)])], 10)
    [('a', 0.8), ('c', 0.4), ('b', 0.3)]
    >>> fusion.fuse([ChannelHits("zzz", [], [("c", 0.2)])], 10)
    []
    """

    calibration: DenseCalibration
    rrf_k: float = DEFAULT_RRF_K
    exact_words: ExactWords | None = DEFAULT_EXACT_WORDS

    def fuse(self, hits: Sequence[ChannelHits], limit: int) -> list[Hit]:
        if all(h.dense is None for h in hits):
            return RRFFusion(self.rrf_k).fuse(hits, limit)
        lexical: dict[str, float] = {}
        dense: dict[str, float] = {}
        for h in hits:
            if h.lexical:
                best = h.lexical[0][1]
                for cid, s in h.lexical:
                    lexical[cid] = max(lexical.get(cid, 0.0), s / best)
            for cid, s in h.dense or ():
                evidence = self.calibration.dense_score(s)
                if evidence == 0.0:
                    break  # best first: the rest are below the floor too
                dense[cid] = max(dense.get(cid, 0.0), evidence)
        w = self.calibration.lexical_weight
        fused = {cid: w * v for cid, v in lexical.items()}
        for cid, v in dense.items():
            fused[cid] = fused.get(cid, 0.0) + (1.0 - w) * v
        return rank_scores(fused, limit)


def default_fusion(backend: Any, rrf_k: float = DEFAULT_RRF_K) -> Fusion:
    """The fusion for ``backend``: calibrated when it ships a ``calibration``, else RRF."""
    calibration = getattr(backend, "calibration", None)
    if calibration is None:
        return RRFFusion(rrf_k)
    return CalibratedFusion(calibration, rrf_k=rrf_k)
