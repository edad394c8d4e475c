"""Moved: the tokenizer lives in :mod:`ragspine_lite.text.wordpiece`
(this path keeps working, with every public name)."""

from __future__ import annotations

from ragspine_lite.text import wordpiece as _moved
from ragspine_lite.text.wordpiece import *  # noqa: F403

__all__ = list(_moved.__all__)
