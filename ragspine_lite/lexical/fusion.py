"""The calibrated fusion: dense evidence only above a model's calibrated floor, lexical first.

A backend that ships a :class:`DenseCalibration` as its ``calibration`` attribute (MiniLM and
USE do, from their model config) is fused with :class:`CalibratedFusion` by
:func:`~ragspine_lite.lexical.pipeline.default_fusion`; any other backend keeps API.md's RRF.

Per query variant, a lexical hit scores ``bm25 / best bm25`` (the best hit 1.0) and a dense hit
scores ``(cosine - floor) / (ceiling - floor)`` clipped to ``[0, 1]``; a cosine at or below the
model's ``floor`` is no evidence and adds nothing. A chunk's fused score is
``w · lexical + (1 - w) · dense`` (each its best over the variants), ``w = lexical_weight``;
chunks scoring 0 are dropped, so a query neither channel has evidence for returns nothing.
With ``w > 0.5`` the best lexical hit (``≥ w``) always beats a dense-only chunk (``≤ 1 - w``),
and a chunk both channels found adds both shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragspine_lite.lexical.pipeline import ChannelHits, RRFFusion
from ragspine_lite.lexical.scoring import DEFAULT_RRF_K, rank_scores
from ragspine_lite.vector.calibration import DEFAULT_LEXICAL_WEIGHT, DenseCalibration

__all__ = ["DEFAULT_LEXICAL_WEIGHT", "CalibratedFusion", "DenseCalibration"]


@dataclass(frozen=True)
class CalibratedFusion:
    """Score-aware fusion with the calibrated dense floor (see the module docstring).

    Without a dense channel (BM25 mode, a query outside the model's vocabulary) it is exactly
    :class:`~ragspine_lite.lexical.pipeline.RRFFusion` with ``rrf_k``.

    >>> fusion = CalibratedFusion(DenseCalibration(floor=0.3, ceiling=0.7))
    >>> fusion.fuse([ChannelHits("q", [("a", 4.0), ("b", 2.0)], [("c", 0.9), ("a", 0.5)])], 10)
    [('a', 0.8), ('c', 0.4), ('b', 0.3)]
    >>> fusion.fuse([ChannelHits("zzz", [], [("c", 0.2)])], 10)
    []
    """

    calibration: DenseCalibration
    rrf_k: float = DEFAULT_RRF_K

    def fuse(self, hits: Sequence[ChannelHits], limit: int) -> list[tuple[str, float]]:
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
