"""Moved: the BM25 tokenizer lives in :mod:`ragspine_lite.text.words` (this path keeps working)."""

from __future__ import annotations

from ragspine_lite.text.words import (
    tokenize,
)

__all__ = [
    "tokenize",
]
