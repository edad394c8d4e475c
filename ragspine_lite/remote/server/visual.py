"""The endpoint's visual page indexes: one per client, named by an unguessable id, bounded.

``/v1/visual/pages`` without an ``index`` makes a new index and answers its id; a client
passes that id to add more pages and to ``/v1/visual/search``, so clients never see each
other's pages. At most ``max_pages`` pages are kept over all indexes: to make room the least
recently used other indexes are dropped (their ids then answer ``unknown_index``).
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from ragspine_lite.remote.wire import WireError

__all__ = ["VisualIndexes"]


class VisualIndexes:
    """Visual page indexes by id (``make()`` builds an empty one), ``max_pages`` in all."""

    def __init__(self, make: Callable[[], Any], max_pages: int) -> None:
        self.make = make
        self.max_pages = max_pages
        self._indexes: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._indexes)

    def pages(self) -> int:
        """Pages kept over all indexes."""
        with self._lock:
            return sum(len(index) for index in self._indexes.values())

    def _get(self, index_id: str) -> Any:
        index = self._indexes.get(index_id)
        if index is None:
            raise WireError(
                "unknown visual index: register pages first (POST /v1/visual/pages without "
                "an index makes one; an index unused for long may be dropped to make room)",
                code="unknown_index",
            )
        self._indexes.move_to_end(index_id)
        return index

    def get(self, index_id: str) -> Any:
        """The index named ``index_id`` (now the most recently used one)."""
        with self._lock:
            return self._get(index_id)

    def _make_room(self, keep: str, wanted: int) -> None:
        total = sum(len(index) for index in self._indexes.values())
        while total + wanted > self.max_pages:
            oldest = next((k for k in self._indexes if k != keep), None)
            if oldest is None:
                raise WireError(
                    f"the visual index would hold {total + wanted} pages; the endpoint keeps "
                    f"at most {self.max_pages} (--max-visual-pages)", code="too_many_items",
                )
            total -= len(self._indexes.pop(oldest))

    def add(self, index_id: str | None, pages: Sequence[Any]) -> tuple[str, int, int]:
        """Add ``pages`` to ``index_id`` (``None``: a new index) → ``(id, added, total)``."""
        with self._lock:
            if index_id is None:
                index_id, index = secrets.token_urlsafe(18), self.make()
                self._indexes[index_id] = index
            else:
                index = self._get(index_id)
            try:
                self._make_room(index_id, len(pages))
                added = index.add_pages(pages)
            except Exception:
                if not len(index):
                    self._indexes.pop(index_id, None)
                raise
            return index_id, added, len(index)
