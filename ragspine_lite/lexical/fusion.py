"""Moved: fusion lives in :mod:`ragspine_lite.pipeline.fusion` (this path keeps working)."""

from __future__ import annotations

from ragspine_lite.pipeline.fusion import DEFAULT_LEXICAL_WEIGHT, CalibratedFusion, DenseCalibration

__all__ = ["DEFAULT_LEXICAL_WEIGHT", "CalibratedFusion", "DenseCalibration"]
