"""Reranking: the listwise judge seam with RESTRICTED exit #1, and ``make_reranker``."""

from __future__ import annotations

from ragspine_lite.rerank.colbert import maxsim
from ragspine_lite.rerank.factory import REMOTE_PREFIX, RERANKER_ENV, RERANKERS, make_reranker
from ragspine_lite.rerank.listwise_rerank import (
    DEFAULT_TOP_N,
    RESTRICTED_SENSITIVITY,
    ListwiseJudge,
    build_listwise_prompt,
    listwise_rerank,
    parse_listwise_response,
)
from ragspine_lite.rerank.sparse import sparse_dot

__all__ = [
    "DEFAULT_TOP_N",
    "REMOTE_PREFIX",
    "RERANKERS",
    "RERANKER_ENV",
    "RESTRICTED_SENSITIVITY",
    "ListwiseJudge",
    "build_listwise_prompt",
    "listwise_rerank",
    "make_reranker",
    "maxsim",
    "parse_listwise_response",
    "sparse_dot",
]
