"""Search several libraries (each behind its own retriever) and fuse them with RRF.

Every snippet comes back as a copy tagged with the ``library_id`` it came from. This
layer never reads chunks: it only fuses what each library's retriever already
returned, so RESTRICTED stripping stays the job of those retrievers (the link exit).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ragspine_lite.lexical.scoring import DEFAULT_RRF_K, rank_scores, rrf_fuse
from ragspine_lite.routing.router import LibraryRouter

__all__ = [
    "LIBRARY_ID_KEY",
    "FunctionRetriever",
    "LibraryIndex",
    "MultiIndexRetriever",
    "NarrativeRetriever",
]

LIBRARY_ID_KEY = "library_id"

logger = logging.getLogger(__name__)


@runtime_checkable
class NarrativeRetriever(Protocol):
    """The agent-facing retriever contract (re-declared here to keep imports acyclic)."""

    def retrieve(
        self, query: str, *, filters: dict[str, str] | None = None, top_k: int = 50
    ) -> list[dict[str, object]]: ...


@dataclass(frozen=True)
class FunctionRetriever:
    """A library's retriever made of ``search(query, top_k) -> snippets`` (the function
    applies its own filters: the ones a multi-library search passes are not its business)."""

    search: Callable[[str, int], list[dict[str, object]]]

    def retrieve(
        self, query: str, *, filters: dict[str, str] | None = None, top_k: int = 50
    ) -> list[dict[str, object]]:
        return self.search(query, top_k)


@dataclass
class LibraryIndex:
    """One searchable library: an id, a description for routing, and its retriever."""

    library_id: str
    description: str
    retriever: NarrativeRetriever


@dataclass
class MultiIndexRetriever:
    """Route a query to libraries, query each, and fuse the rankings with RRF.

    Libraries are the router's known ids in router order; with no router, a router
    that raises, or one that returns nothing usable, all libraries are searched (a
    routing failure is logged, never raised). Ties after fusion go to the earlier
    library, then the library's own rank.
    """

    libraries: Sequence[LibraryIndex]
    router: LibraryRouter | None = None
    top_k: int = 50
    rrf_k: float = float(DEFAULT_RRF_K)

    def __post_init__(self) -> None:
        self.libraries = list(self.libraries)
        seen: set[str] = set()
        for library in self.libraries:
            if library.library_id in seen:
                raise ValueError(f"duplicate library_id {library.library_id!r}")
            seen.add(library.library_id)

    def select_libraries(self, query: str) -> list[LibraryIndex]:
        """The libraries ``query`` will search, in search (and tie-break) order."""
        everything = list(self.libraries)
        if self.router is None:
            return everything
        by_id = {library.library_id: library for library in everything}
        try:
            routed = self.router.route(query, everything)
            chosen: dict[str, LibraryIndex] = {}
            for library_id in routed or ():
                library = by_id.get(library_id) if isinstance(library_id, str) else None
                if library is None:
                    logger.debug("router returned unknown library id %r; ignored", library_id)
                else:
                    chosen.setdefault(library_id, library)
        except Exception:
            logger.warning("library routing failed; searching all libraries", exc_info=True)
            return everything
        return list(chosen.values()) or everything

    def retrieve(
        self,
        query: str,
        *,
        filters: dict[str, str] | None = None,
        top_k: int | None = None,
    ) -> list[dict[str, object]]:
        """Fused, ``library_id``-tagged snippet copies, at most ``top_k`` of them."""
        limit = top_k or self.top_k
        rankings: list[list[str]] = []
        by_key: dict[str, dict[str, object]] = {}
        for order, library in enumerate(self.select_libraries(query)):
            ranking: list[str] = []
            snippets = library.retriever.retrieve(query, filters=filters, top_k=limit)
            for i, snippet in enumerate(snippets):
                chunk_id = snippet.get("chunk_id") if isinstance(snippet, Mapping) else None
                local_id = chunk_id or f"idx{i}"
                key = f"{order:06d}\x1f{library.library_id}\x1f{local_id}"
                if key in by_key:  # a repeated chunk keeps its best (first) rank
                    continue
                tagged = dict(snippet)
                tagged[LIBRARY_ID_KEY] = library.library_id
                by_key[key] = tagged
                ranking.append(key)
            rankings.append(ranking)
        return [by_key[key] for key, _ in rank_scores(rrf_fuse(rankings, k=self.rrf_k), limit)]
