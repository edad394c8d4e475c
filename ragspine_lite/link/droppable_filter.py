"""Opt-in layers over a link exit whose index holds a fixed filter (a command line's
``--filter``): corrective retrieval may drop the filter, and the layers see it as theirs.

:class:`DroppableFilter` turns the index's fixed ``metadata_filter`` into the ``filters``
argument the layers pass down (``None``: search without it); :class:`DefaultFilters` calls
the top layer with those filters unless its caller passes its own.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DefaultFilters", "DroppableFilter"]


class DroppableFilter:
    """A link exit with its index's fixed filter as a droppable ``filters`` argument.

    The layers pass ``filters`` down; corrective retrieval drops them by passing ``None``,
    which here means searching without the index's fixed conditions.
    """

    def __init__(self, link: Any, index: Any) -> None:
        self.link = link
        self.index = index
        self.metadata_filter = index.metadata_filter

    def retrieve(
        self, query: str, *, filters: dict[str, str] | None = None, top_k: int = 50
    ) -> list[dict[str, object]]:
        self.index.metadata_filter = self.metadata_filter if filters else None
        try:
            return self.link.retrieve(query, top_k=top_k)
        finally:
            self.index.metadata_filter = self.metadata_filter


class DefaultFilters:
    """The top layer, called with ``filters`` unless a caller passes its own."""

    def __init__(self, top: Any, filters: dict[str, str] | None) -> None:
        self.top = top
        self.filters = filters

    def retrieve(
        self, query: str, *, filters: dict[str, str] | None = None, top_k: int = 50
    ) -> list[dict[str, object]]:
        return self.top.retrieve(query, filters=filters or self.filters, top_k=top_k)
