"""Moved: the BM25 tokenizer lives in :mod:`ragspine_lite.text.words`
(this path keeps working, with every public name)."""

from __future__ import annotations

from ragspine_lite.text import words as _moved
from ragspine_lite.text.words import *  # noqa: F403

__all__ = list(_moved.__all__)
