"""The exact, pure-Python in-process vector store and ``make_vector_store``; the seam itself
is :mod:`ragspine_lite.vector.records` (re-exported here)."""

from __future__ import annotations

import heapq
import importlib.metadata
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ragspine_lite.vector.records import (
    DEFAULT_QUERY_K,
    VectorHit,
    VectorRecord,
    VectorStore,
    as_vector,
    check_k,
    check_where,
    metadata_matches,
    stage_records,
    vector_norm,
)

__all__ = [
    "DEFAULT_QUERY_K",
    "VECTOR_STORE_ENTRY_POINT_GROUP",
    "VECTOR_STORE_ENV",
    "InProcessVectorStore",
    "VectorHit",
    "VectorRecord",
    "VectorStore",
    "make_vector_store",
]

VECTOR_STORE_ENV = "RAGSPINE_VECTOR_STORE"
VECTOR_STORE_ENTRY_POINT_GROUP = "ragspine.vector_stores"


class InProcessVectorStore:
    """Exact cosine search over an in-memory dict; pure Python, deterministic.

    The first vector ever stored fixes the dimension for the life of the store. Scores are
    ``math.fsum`` cosines (a zero vector scores ``0.0`` and is still returned); hits are
    ordered by ``(-score, id)``. ``where`` filters (AND of exact equality) are applied before
    scoring. The store never strips RESTRICTED records: that is the exits' job.
    """

    def __init__(self) -> None:
        # id -> (vector, norm, metadata)
        self._rows: dict[str, tuple[tuple[float, ...], float, dict[str, str]]] = {}
        self._dim: int | None = None

    @property
    def dim(self) -> int | None:
        """The fixed dimension, or ``None`` before the first upsert."""
        return self._dim

    def upsert(self, records: Iterable[VectorRecord]) -> int:
        """Insert or replace records by id; returns how many were given.

        The whole batch is validated first: one bad record rejects all of them.
        """
        staged, dim = stage_records(records, self._dim)
        for rid, vector, metadata in staged:
            self._rows[rid] = (vector, vector_norm(vector), metadata)
        if staged:
            self._dim = dim
        return len(staged)

    def query(
        self,
        vector: Sequence[float],
        *,
        k: int = DEFAULT_QUERY_K,
        where: Mapping[str, str] | None = None,
    ) -> list[VectorHit]:
        """The ``k`` best records by cosine among those matching ``where``."""
        k = check_k(k)
        where = check_where(where, allow_none=True)
        query = as_vector(vector, "query")
        if not self._rows:
            return []
        if len(query) != self._dim:
            raise ValueError(f"query dimension {len(query)} != store dimension {self._dim}")
        qnorm = vector_norm(query)
        scored: list[tuple[float, str, dict[str, str]]] = []
        for rid, (vec, vnorm, metadata) in self._rows.items():
            if where and not metadata_matches(metadata, where):
                continue
            if qnorm == 0.0 or vnorm == 0.0:
                score = 0.0
            else:
                score = math.fsum(x * y for x, y in zip(query, vec, strict=True)) / (qnorm * vnorm)
            scored.append((score, rid, metadata))
        best = heapq.nsmallest(k, scored, key=lambda t: (-t[0], t[1]))
        return [VectorHit(id=rid, score=score, metadata=dict(md)) for score, rid, md in best]

    def delete(self, *, where: Mapping[str, str]) -> int:
        """Remove every record matching ``where`` (empty → all); returns how many."""
        where = check_where(where, allow_none=False)
        doomed = [rid for rid, row in self._rows.items() if metadata_matches(row[2], where or {})]
        for rid in doomed:
            del self._rows[rid]
        return len(doomed)

    def count(self) -> int:
        """Number of stored records."""
        return len(self._rows)

    def __repr__(self) -> str:
        return f"InProcessVectorStore(count={len(self._rows)}, dim={self._dim})"


def _sqlite_store(**kwargs: Any) -> VectorStore:
    """:class:`ragspine_lite.vector.sqlite_store.SqliteVectorStore`, imported when asked for."""
    from ragspine_lite.vector.sqlite_store import SqliteVectorStore

    return SqliteVectorStore(**kwargs)


_BUILTIN_STORES: dict[str, Callable[..., Any]] = {
    "sqlite": _sqlite_store,
    "in_process": InProcessVectorStore,
    "in-process": InProcessVectorStore,
    "inprocess": InProcessVectorStore,
    "memory": InProcessVectorStore,
}


def _discover_entry_points() -> dict[str, Any]:
    """Entry points of :data:`VECTOR_STORE_ENTRY_POINT_GROUP`, keyed by normalised name.

    A broken installation yields ``{}``; on duplicate names the first one wins.
    """
    try:
        eps = importlib.metadata.entry_points(group=VECTOR_STORE_ENTRY_POINT_GROUP)
    except Exception:
        return {}
    found: dict[str, Any] = {}
    for ep in eps:
        found.setdefault(str(ep.name).strip().lower(), ep)
    return found


def _resolve_factory(normalized: str) -> Callable[..., Any]:
    """Builtin class or loaded entry-point target for a normalised spec; builtins win."""
    builtin = _BUILTIN_STORES.get(normalized)
    if builtin is not None:
        return builtin
    discovered = _discover_entry_points()
    ep = discovered.get(normalized)
    if ep is not None:
        return ep.load()
    raise ValueError(
        f"unknown vector store {normalized!r}; builtin names: "
        f"{', '.join(['none', *sorted(_BUILTIN_STORES)])}; "
        f"entry points ({VECTOR_STORE_ENTRY_POINT_GROUP}): "
        f"{', '.join(sorted(discovered)) or '(none)'}"
    )


def make_vector_store(spec: str | None = None, **kwargs: Any) -> VectorStore | None:
    """Build a vector store from ``spec`` (env ``RAGSPINE_VECTOR_STORE`` when ``None``).

    ``none`` (the default) → ``None``; ``in_process``/``in-process``/``inprocess``/``memory``
    → a new :class:`InProcessVectorStore`; ``sqlite`` → a ``SqliteVectorStore(**kwargs)``
    (``db_path``, ``model_id``, …); otherwise an entry point of the group
    ``ragspine.vector_stores`` called with ``**kwargs``; unknown → ``ValueError``.
    """
    if spec is None:
        spec = os.environ.get(VECTOR_STORE_ENV, "none")
    normalized = str(spec).strip().lower()
    if normalized == "none":
        return None
    return _resolve_factory(normalized)(**kwargs)
