"""The vector store seam and its exact, pure-Python in-process implementation."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.common.registry import Registry
from ragspine_lite.vector._exact import (
    DEFAULT_QUERY_K,
    CheckedQuery,
    VectorHit,
    VectorRecord,
    _best,
    _check_query_dim,
    _check_where,
    _cosine,
    _matches,
    _norm,
    _stage_records,
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


@runtime_checkable
class VectorStore(Protocol):
    """Where dense vectors live; every implementation must pass the conformance tests."""

    def upsert(self, records: Iterable[VectorRecord]) -> int: ...

    def query(
        self,
        vector: Sequence[float],
        *,
        k: int = DEFAULT_QUERY_K,
        where: Mapping[str, str] | None = None,
    ) -> list[VectorHit]: ...

    def delete(self, *, where: Mapping[str, str]) -> int: ...

    def count(self) -> int: ...


class InProcessVectorStore(CheckedQuery):
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
        staged, dim = _stage_records(records, self._dim)
        for rid, vector, metadata in staged:
            self._rows[rid] = (vector, _norm(vector), metadata)
        if staged:
            self._dim = dim
        return len(staged)

    def _query(
        self, query: tuple[float, ...], k: int, where: Mapping[str, str] | None
    ) -> list[VectorHit]:
        if not self._rows:
            return []
        _check_query_dim(query, self._dim)
        qnorm = _norm(query)
        scored = [
            (_cosine(query, vec, qnorm, vnorm), rid, metadata)
            for rid, (vec, vnorm, metadata) in self._rows.items()
            if not where or _matches(metadata, where)
        ]
        return _best(scored, k)

    def delete(self, *, where: Mapping[str, str]) -> int:
        """Remove every record matching ``where`` (empty → all); returns how many."""
        where = _check_where(where, allow_none=False) or {}
        doomed = [rid for rid, row in self._rows.items() if _matches(row[2], where)]
        for rid in doomed:
            del self._rows[rid]
        return len(doomed)

    def count(self) -> int:
        """Number of stored records."""
        return len(self._rows)

    def __repr__(self) -> str:
        return f"InProcessVectorStore(count={len(self._rows)}, dim={self._dim})"


_SQLITE_VEC = "ragspine_lite.vector.adapters.sqlite_vec_store:SqliteVecVectorStore"
_PGVECTOR = "ragspine_lite.vector.adapters.pgvector_store:PgVectorVectorStore"
_QDRANT = "ragspine_lite.vector.adapters.qdrant_store:QdrantVectorStore"

def _lazy(target: str) -> Callable[..., Any]:
    """A factory importing ``"module:Class"`` when called (the module only: an adapter imports
    its SDK when instantiated, so registering never needs the ``[vector]`` extra)."""
    def build(**kwargs: Any) -> Any:
        module, _, name = target.partition(":")
        return getattr(importlib.import_module(module), name)(**kwargs)

    return build


STORES = Registry("vector_stores", env=VECTOR_STORE_ENV, spaces=False,
                  group=VECTOR_STORE_ENTRY_POINT_GROUP)
STORES.register("sqlite", _lazy("ragspine_lite.vector.sqlite_store:SqliteVectorStore"))
STORES.register("in_process", InProcessVectorStore, "inprocess", "memory")
STORES.register("sqlite_vec", _lazy(_SQLITE_VEC), "sqlitevec")
STORES.register("pgvector", _lazy(_PGVECTOR), "pg_vector")
STORES.register("qdrant", _lazy(_QDRANT))


def make_vector_store(spec: str | None = None, **kwargs: Any) -> VectorStore | None:
    """Build a vector store from ``spec`` (env ``RAGSPINE_VECTOR_STORE`` when ``None``).

    ``none`` (the default) → ``None``; ``in_process``/``in-process``/``inprocess``/``memory``
    → a new :class:`InProcessVectorStore`; ``sqlite`` → a ``SqliteVectorStore(**kwargs)``
    (``db_path``, ``model_id``, …); ``sqlite_vec``/``sqlite-vec``/``sqlitevec``,
    ``pgvector``/``pg_vector`` and ``qdrant`` → the adapters of
    :mod:`ragspine_lite.vector.adapters` (CPython, ``[vector]`` extra: a missing SDK is an
    ``ImportError`` naming it); otherwise an entry point of the group
    ``ragspine.vector_stores`` called with ``**kwargs``; unknown → ``ValueError``.
    """
    store: VectorStore | None = STORES.build(spec, **kwargs)
    return store
