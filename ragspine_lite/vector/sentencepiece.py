"""Moved: the tokenizer lives in :mod:`ragspine_lite.text.sentencepiece` (this path works)."""

from __future__ import annotations

from ragspine_lite.text.sentencepiece import (
    MODEL_TYPES,
    PIECE_TYPES,
    SentencePieceModel,
    SentencePieceTokenizer,
    parse_model_proto,
)

__all__ = [
    "MODEL_TYPES",
    "PIECE_TYPES",
    "SentencePieceModel",
    "SentencePieceTokenizer",
    "parse_model_proto",
]
