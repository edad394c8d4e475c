"""Library routers: pick which libraries (indexes) a query should search.

A router returns library ids in preference order; ``[]`` means "no restriction"
(search everything), never "search nothing".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.common.registry import Registry
from ragspine_lite.text.words import tokenize

__all__ = [
    "LIBRARY_ROUTER_ENV",
    "KeywordLibraryRouter",
    "LibraryRouter",
    "RoutableLibrary",
    "make_library_router",
]

LIBRARY_ROUTER_ENV = "RAGSPINE_LIBRARY_ROUTER"


@runtime_checkable
class RoutableLibrary(Protocol):
    """Anything with a ``library_id`` and a human ``description`` to route on."""

    library_id: str
    description: str


@runtime_checkable
class LibraryRouter(Protocol):
    """``route(query, libraries)`` → preferred library ids; ``[]`` = no restriction."""

    def route(self, query: str, libraries: Sequence[RoutableLibrary]) -> list[str]: ...


@dataclass(frozen=True)
class KeywordLibraryRouter:
    """Route by token overlap between the query and each library's description.

    Score = ``len(set(tokenize(query)) & set(tokenize(description)))``; ids with a
    positive score, by descending score then library order; no overlap → ``[]``.

    >>> from types import SimpleNamespace as L
    >>> libs = [L(library_id="hr", description="HR policy leave"),
    ...         L(library_id="fin", description="finance revenue policy")]
    >>> KeywordLibraryRouter().route("revenue policy", libs)
    ['fin', 'hr']
    """

    def route(self, query: str, libraries: Sequence[RoutableLibrary]) -> list[str]:
        query_tokens = set(tokenize(query))
        if not query_tokens:
            return []
        scored: list[tuple[int, int, str]] = []
        for position, library in enumerate(libraries):
            score = len(query_tokens & set(tokenize(library.description)))
            if score > 0:
                scored.append((-score, position, library.library_id))
        scored.sort()
        return [library_id for _, _, library_id in scored]


LIBRARY_ROUTERS = Registry("library_routers", env=LIBRARY_ROUTER_ENV, spaces=False)
LIBRARY_ROUTERS.register("keyword", KeywordLibraryRouter, "description", "lexical")


def make_library_router(spec: str | None = None, **kwargs: Any) -> LibraryRouter | None:
    """Router for ``spec`` (``None`` → ``$RAGSPINE_LIBRARY_ROUTER``, unset → off).

    ``none`` (or blank) → ``None``; ``keyword``/``description``/``lexical`` →
    :class:`KeywordLibraryRouter`; ``-`` counts as ``_``.
    """
    router: LibraryRouter | None = LIBRARY_ROUTERS.build(spec, **kwargs)
    return router
