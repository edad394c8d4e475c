"""Moved: the tokenizer lives in :mod:`ragspine_lite.text.sentencepiece`
(this path keeps working, with every public name)."""

from __future__ import annotations

from ragspine_lite.text import sentencepiece as _moved
from ragspine_lite.text.sentencepiece import *  # noqa: F403

__all__ = list(_moved.__all__)
