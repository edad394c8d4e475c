"""The agent link: snippet dicts with full lineage, RESTRICTED exit #2, LLM listwise judge.

The package's names are those of :mod:`ragspine_lite.link.narrative_link`.
"""

from __future__ import annotations

from ragspine_lite.link import narrative_link
from ragspine_lite.link.narrative_link import *  # noqa: F403

__all__ = narrative_link.__all__
