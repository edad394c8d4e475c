"""Moved: the tokenizer lives in :mod:`ragspine_lite.text.wordpiece` (this path keeps working)."""

from __future__ import annotations

from ragspine_lite.text.wordpiece import (
    DEFAULT_MAX_INPUT_CHARS_PER_WORD,
    BatchEncoding,
    Encoding,
    WordPieceTokenizer,
    is_cjk_ideograph,
    load_vocab,
)

__all__ = [
    "DEFAULT_MAX_INPUT_CHARS_PER_WORD",
    "BatchEncoding",
    "Encoding",
    "WordPieceTokenizer",
    "is_cjk_ideograph",
    "load_vocab",
]
