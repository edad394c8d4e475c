"""Moved: the stages live in :mod:`ragspine_lite.pipeline` (this path keeps working)."""

from __future__ import annotations

from ragspine_lite.pipeline.fusion import (
    ChannelHits,
    Fusion,
    RRFFusion,
    channel_hits,
    default_fusion,
)
from ragspine_lite.pipeline.stages import (
    CHANNEL_BM25,
    CHANNEL_HYBRID,
    CHANNEL_OUTSIDE_VOCABULARY,
    FILTER_DIMS,
    PostRetrievalStep,
    RetrievalResult,
    choose_channel,
    embed_queries,
    equality_filters,
    filtered_positions,
    fused_results,
    index_text,
    query_variants,
    run_post_chain,
)

__all__ = [
    "CHANNEL_BM25",
    "CHANNEL_HYBRID",
    "CHANNEL_OUTSIDE_VOCABULARY",
    "FILTER_DIMS",
    "ChannelHits",
    "Fusion",
    "PostRetrievalStep",
    "RRFFusion",
    "RetrievalResult",
    "channel_hits",
    "choose_channel",
    "default_fusion",
    "embed_queries",
    "equality_filters",
    "filtered_positions",
    "fused_results",
    "index_text",
    "query_variants",
    "run_post_chain",
]
