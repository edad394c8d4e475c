"""Visual page retrieval (ColPali-style multi-vector MaxSim) with RESTRICTED page exclusion.

The package's names are those of :mod:`ragspine_lite.vision.colpali`.
"""

from __future__ import annotations

from ragspine_lite.vision import colpali
from ragspine_lite.vision.colpali import *  # noqa: F403

__all__ = colpali.__all__
