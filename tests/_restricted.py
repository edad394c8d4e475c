"""Below-the-exit probes: proof that a test's RESTRICTED document did match its query."""

from __future__ import annotations

from typing import Any

from ragspine_lite.common.sensitivity import is_restricted


def matches_restricted(searcher: Any, query: str) -> bool:
    """Whether the page documents' index itself (no exit) has a RESTRICTED hit for ``query``."""
    hits = searcher._page.index.retrieve(query, top_k=50, rerank=False)
    return any(is_restricted(r.chunk.sensitivity) for r in hits)
