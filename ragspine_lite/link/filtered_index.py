"""An index behind a fixed metadata filter, with a fallback: what the bundle runtime puts in
front of each library before the link exit.

:class:`FilteredIndex` applies one ``MetadataFilter`` (``None``: the caller's) to every
``retrieve``. With a ``fallback`` index, a failure of ``index`` (a hybrid one: its model may
be unable to run) is logged once and the query answered by ``fallback``; ``failure`` keeps
why. Ranking as if RESTRICTED chunks were absent is
:class:`~ragspine_lite.link.narrative_link.OpenOnlyIndex`'s job.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from ragspine_lite.filtering.metadata_filter import MetadataFilter

__all__ = ["FilteredIndex"]

_LOGGER = logging.getLogger(__name__)


class FilteredIndex:
    """One index (and its ``fallback``) behind a fixed filter (see the module docstring)."""

    def __init__(
        self,
        index: Any,
        fallback: Any | None = None,
        *,
        metadata_filter: MetadataFilter | None = None,
    ) -> None:
        self.index = index
        self.fallback = fallback
        self.metadata_filter = metadata_filter
        self.failure: str | None = None
        self._logged = False

    def retrieve(self, query: str, **kwargs: Any) -> list[Any]:
        if self.metadata_filter is not None:
            kwargs["metadata_filter"] = self.metadata_filter
        self.failure = None
        try:
            return self.index.retrieve(query, **kwargs)
        except (sqlite3.Error, ValueError):
            raise
        except Exception as exc:
            if self.fallback is None:
                raise
            self.failure = f"{type(exc).__name__}: {exc}"
            if not self._logged:
                self._logged = True
                _LOGGER.warning("dense search failed (%s); using BM25 only", self.failure)
            return self.fallback.retrieve(query, **kwargs)
