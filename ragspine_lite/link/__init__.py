"""The agent link: snippet dicts with full lineage, RESTRICTED exit #2, LLM listwise judge."""

from __future__ import annotations

from ragspine_lite.link.narrative_link import (
    JUDGE_SYSTEM_PROMPT,
    NarrativeIndexRetriever,
    NarrativeRetriever,
    OpenOnlyIndex,
    ProviderListwiseJudge,
    VisibleFilter,
    build_narrative_retriever,
)

__all__ = [
    "JUDGE_SYSTEM_PROMPT",
    "NarrativeIndexRetriever",
    "NarrativeRetriever",
    "OpenOnlyIndex",
    "ProviderListwiseJudge",
    "VisibleFilter",
    "build_narrative_retriever",
]
