"""Moved: the stages live in :mod:`ragspine_lite.pipeline.stages` and the fusion rules in
:mod:`ragspine_lite.pipeline.fusion` (this path keeps working, with every public name)."""

from __future__ import annotations

from ragspine_lite.pipeline import fusion as _fusion
from ragspine_lite.pipeline import stages as _stages
from ragspine_lite.pipeline.fusion import *  # noqa: F403
from ragspine_lite.pipeline.stages import *  # noqa: F403

__all__ = sorted({*_fusion.__all__, *_stages.__all__})
