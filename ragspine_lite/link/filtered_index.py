"""An index with a fixed metadata filter, ahead of the link exit: what the CLI and the bundle
runtime hand to :class:`~ragspine_lite.link.narrative_link.NarrativeIndexRetriever`.

:class:`FilteredIndex` applies one ``MetadataFilter`` to every ``retrieve`` and records the
RESTRICTED chunk ids it met (only their number leaves it: the link exit drops the results
themselves). With ``restricted_absent`` it ranks as if RESTRICTED chunks were not there: an
``sensitivity != RESTRICTED`` condition joins the filter before ranking (an ``or`` filter is
left to the exit), so they cannot push open results down. With a ``fallback`` index, a
failure of ``index`` (a hybrid one: its model may be unable to run) is logged once and the
query answered by ``fallback``; ``failure`` keeps why.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from ragspine_lite.common.sensitivity import RESTRICTED, is_restricted
from ragspine_lite.filtering.automatic import extract_filter
from ragspine_lite.filtering.metadata_filter import FilterCondition, MetadataFilter

__all__ = ["FilteredIndex", "OpenOnlyIndex", "without_restricted"]

_LOGGER = logging.getLogger(__name__)


def without_restricted(metadata_filter: MetadataFilter | None) -> MetadataFilter | None:
    """``metadata_filter`` and ``sensitivity != RESTRICTED`` (an ``or`` filter: unchanged)."""
    if metadata_filter is not None and metadata_filter.combine != "and":
        return metadata_filter
    open_only = FilterCondition("sensitivity", "ne", RESTRICTED)
    kept = metadata_filter.conditions if metadata_filter is not None else ()
    return MetadataFilter((*kept, open_only))


class FilteredIndex:
    """One index (and its ``fallback``) behind a fixed filter (see the module docstring)."""

    def __init__(
        self,
        index: Any,
        fallback: Any | None = None,
        *,
        metadata_filter: MetadataFilter | None = None,
        restricted_absent: bool = False,
    ) -> None:
        self.index = index
        self.fallback = fallback
        self.metadata_filter = metadata_filter
        self.restricted_absent = restricted_absent
        self.held: set[str] = set()  # RESTRICTED chunk ids met since the search began
        self.failure: str | None = None
        self._logged = False

    def _filter(self, query: str, given: MetadataFilter | None) -> MetadataFilter | None:
        chosen = self.metadata_filter or given
        if not self.restricted_absent:
            return chosen
        if chosen is None:  # what the index would extract itself, given no filter
            chosen = extract_filter(getattr(self.index, "filter_extractor", None), query)
        return without_restricted(chosen)

    def retrieve(self, query: str, **kwargs: Any) -> list[Any]:
        chosen = self._filter(query, kwargs.get("metadata_filter"))
        if chosen is not None:
            kwargs["metadata_filter"] = chosen
        self.failure = None
        try:
            results = self.index.retrieve(query, **kwargs)
        except (sqlite3.Error, ValueError):
            raise
        except Exception as exc:
            if self.fallback is None:
                raise
            self.failure = f"{type(exc).__name__}: {exc}"
            if not self._logged:
                self._logged = True
                _LOGGER.warning("dense search failed (%s); using BM25 only", self.failure)
            results = self.fallback.retrieve(query, **kwargs)
        self.held.update(r.chunk.chunk_id for r in results if is_restricted(r.chunk.sensitivity))
        return results

    @property
    def held_back(self) -> int:
        return len(self.held)


class OpenOnlyIndex(FilteredIndex):
    """The index an exit (the CLI, the endpoint) searches: a fixed metadata filter, and
    RESTRICTED chunks filtered out before ranking, so they cannot push open results down and
    nothing about them leaves, not even their number (the link exit drops any that a label
    written by an older version let through)."""

    def __init__(self, index: Any, metadata_filter: MetadataFilter | None = None) -> None:
        super().__init__(index, metadata_filter=metadata_filter, restricted_absent=True)
