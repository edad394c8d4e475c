"""Moved: the retrievers live in :mod:`ragspine_lite.pipeline.retrievers`
(this path keeps working, with every public name)."""

from __future__ import annotations

from ragspine_lite.pipeline import retrievers as _moved
from ragspine_lite.pipeline.retrievers import *  # noqa: F403

__all__ = list(_moved.__all__)
