"""Reranking: the listwise judge seam with RESTRICTED exit #1."""

from __future__ import annotations

from ragspine_lite.rerank.listwise_rerank import (
    DEFAULT_TOP_N,
    RESTRICTED_SENSITIVITY,
    ListwiseJudge,
    build_listwise_prompt,
    listwise_rerank,
    parse_listwise_response,
)

__all__ = [
    "DEFAULT_TOP_N",
    "RESTRICTED_SENSITIVITY",
    "ListwiseJudge",
    "build_listwise_prompt",
    "listwise_rerank",
    "parse_listwise_response",
]
