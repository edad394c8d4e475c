"""Library routing and multi-library retrieval fused with RRF."""

from __future__ import annotations

from ragspine_lite.routing.multi_index import (
    LIBRARY_ID_KEY,
    LibraryIndex,
    MultiIndexRetriever,
    NarrativeRetriever,
)
from ragspine_lite.routing.router import (
    LIBRARY_ROUTER_ENV,
    KeywordLibraryRouter,
    LibraryRouter,
    RoutableLibrary,
    make_library_router,
)

__all__ = [
    "LIBRARY_ID_KEY",
    "LIBRARY_ROUTER_ENV",
    "KeywordLibraryRouter",
    "LibraryIndex",
    "LibraryRouter",
    "MultiIndexRetriever",
    "NarrativeRetriever",
    "RoutableLibrary",
    "make_library_router",
]
