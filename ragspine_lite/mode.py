"""Retrieval mode: ``economy`` (pure BM25, no embeddings) or ``hybrid`` (BM25 + dense).

The mode is decided at the service/CLI edge; :func:`resolve_embedding_backend` is the
one place that turns it into an embedding backend, so economy mode never even
constructs one.

>>> make_retrieval_mode("BM25") is ECONOMY, make_retrieval_mode("auto") is HYBRID
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragspine_lite.common.registry import Registry

__all__ = [
    "ECONOMY",
    "HYBRID",
    "RETRIEVAL_MODE_ENV",
    "RetrievalMode",
    "make_retrieval_mode",
    "resolve_embedding_backend",
]

RETRIEVAL_MODE_ENV = "RAGSPINE_RETRIEVAL_MODE"


@dataclass(frozen=True)
class RetrievalMode:
    """A named mode; ``uses_embedding`` says whether the dense channel is wired."""

    name: str
    uses_embedding: bool


ECONOMY = RetrievalMode("economy", False)
HYBRID = RetrievalMode("hybrid", True)

MODES = Registry(
    "retrieval_modes", env=RETRIEVAL_MODE_ENV, default="auto", off=(), spaces=False,
    label="retrieval mode",
)
MODES.register("economy", lambda: ECONOMY, "bm25", "lexical", "keyword")
MODES.register("hybrid", lambda: HYBRID, "none", "auto", "vector", "dense")


def make_retrieval_mode(spec: str | None = None) -> RetrievalMode:
    """The mode singleton for ``spec`` (``None`` → ``$RAGSPINE_RETRIEVAL_MODE``, else ``auto``).

    ``economy``/``bm25``/``lexical``/``keyword`` → :data:`ECONOMY`;
    ``none``/``auto``/``hybrid``/``vector``/``dense`` → :data:`HYBRID`; ``-`` counts as ``_``.
    """
    mode: RetrievalMode = MODES.build(spec)
    return mode


def resolve_embedding_backend(mode: RetrievalMode, spec: str | None = None) -> Any:
    """The embedding backend ``mode`` calls for: ``None`` in economy mode.

    Economy mode returns ``None`` without importing or calling the embedding factory;
    otherwise this is ``make_embedding_backend(spec)`` (which may itself return
    ``None``, e.g. for ``"none"``, or ``"auto"`` without a local model).
    """
    if not mode.uses_embedding:
        return None
    from ragspine_lite.vector.embedding_backends import make_embedding_backend

    return make_embedding_backend(spec)
