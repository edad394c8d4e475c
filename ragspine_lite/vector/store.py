"""The vector store seam and its exact, pure-Python in-process implementation."""

from __future__ import annotations

import heapq
import importlib
import importlib.metadata
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.common.settings import env_value

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

DEFAULT_QUERY_K = 50
VECTOR_STORE_ENV = "RAGSPINE_VECTOR_STORE"
VECTOR_STORE_ENTRY_POINT_GROUP = "ragspine.vector_stores"


@dataclass(frozen=True)
class VectorRecord:
    """One stored vector: ``id``, the vector, and flat string metadata."""

    id: str
    vector: tuple[float, ...]
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class VectorHit:
    """One query result: the record ``id``, its cosine ``score`` and its metadata."""

    id: str
    score: float
    metadata: Mapping[str, str]


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


def _as_vector(values: Iterable[Any], what: str) -> tuple[float, ...]:
    """Finite floats as a tuple; anything else → ``ValueError``."""
    out: list[float] = []
    for x in values:
        if isinstance(x, (str, bytes)):
            raise ValueError(f"{what}: vector component {x!r} is not a number")
        try:
            v = float(x)
        except (TypeError, ValueError):
            raise ValueError(f"{what}: vector component {x!r} is not a number") from None
        if not math.isfinite(v):
            raise ValueError(f"{what}: vector component {x!r} is not finite")
        out.append(v)
    return tuple(out)


def _stage_records(
    records: Iterable[Any], dim: int | None
) -> tuple[list[tuple[str, tuple[float, ...], dict[str, Any]]], int | None]:
    """Validate a whole upsert batch first: ``(id, vector, metadata)`` triples and the dim.

    One bad record rejects the batch (``ValueError`` naming it); the first vector fixes
    the dimension when the store has none yet.
    """
    staged: list[tuple[str, tuple[float, ...], dict[str, Any]]] = []
    for record in records:
        rid = getattr(record, "id", None)
        if not isinstance(rid, str):
            raise ValueError(f"vector record id must be a str, got {rid!r}")
        vector = _as_vector(getattr(record, "vector", ()), f"record {rid!r}")
        if not vector:
            raise ValueError(f"record {rid!r}: empty vector")
        if dim is None:
            dim = len(vector)
        elif len(vector) != dim:
            raise ValueError(
                f"record {rid!r}: dimension {len(vector)} != store dimension {dim}; "
                "batch rejected"
            )
        metadata = getattr(record, "metadata", {})
        if not isinstance(metadata, Mapping):
            raise ValueError(f"record {rid!r}: metadata must be a mapping, got {metadata!r}")
        staged.append((rid, vector, dict(metadata)))
    return staged, dim


def _check_str_metadata(staged: list[tuple[str, tuple[float, ...], dict[str, Any]]]) -> None:
    """A persistent store keeps flat ``str → str`` metadata: anything else → ``ValueError``."""
    for rid, _vector, metadata in staged:
        for key, value in metadata.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ValueError(
                    f"record {rid!r}: metadata must map str to str, got {key!r}: {value!r}"
                )


def _norm(vector: Sequence[float]) -> float:
    return math.sqrt(math.fsum(x * x for x in vector))


def _cosine(
    query: Sequence[float],
    vector: Sequence[float],
    qnorm: float | None = None,
    vnorm: float | None = None,
) -> float:
    """The ``math.fsum`` cosine (norms given when already known); a zero vector → ``0.0``."""
    qn = _norm(query) if qnorm is None else qnorm
    vn = _norm(vector) if vnorm is None else vnorm
    if qn == 0.0 or vn == 0.0:
        return 0.0
    return math.fsum(x * y for x, y in zip(query, vector, strict=True)) / (qn * vn)


def _pool_size(k: int, ef: int, count: int, ceiling: int) -> int:
    """How many candidates a native (ANN) search hands to :func:`_rerank`."""
    return max(k, ef, min(count, ceiling))


def _rerank(
    candidates: Iterable[tuple[str, Sequence[float], Mapping[str, str]]],
    query: Sequence[float],
    *,
    k: int,
    where: Mapping[str, str] | None,
) -> list[VectorHit]:
    """Filter ``(id, vector, metadata)`` candidates by ``where``, score each by exact cosine,
    order by ``(-score, id)`` and keep ``k``: what every store returns, whatever narrowed
    the pool."""
    qnorm = _norm(query)
    scored = [
        (_cosine(query, vec, qnorm), rid, md)
        for rid, vec, md in candidates
        if not where or _matches(md, where)
    ]
    best = heapq.nsmallest(k, scored, key=lambda t: (-t[0], t[1]))
    return [VectorHit(id=rid, score=score, metadata=dict(md)) for score, rid, md in best]


def _check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    return k


def _check_where(where: object, *, allow_none: bool) -> Mapping[str, str] | None:
    if where is None and allow_none:
        return None
    if not isinstance(where, Mapping):
        raise ValueError(f"where must be a mapping of metadata key to value, got {where!r}")
    return where


def _matches(metadata: Mapping[str, str], where: Mapping[str, str]) -> bool:
    """AND of exact equality; a record missing a key does not match."""
    return all(key in metadata and metadata[key] == value for key, value in where.items())


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
        staged, dim = _stage_records(records, self._dim)
        for rid, vector, metadata in staged:
            self._rows[rid] = (vector, _norm(vector), metadata)
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
        k = _check_k(k)
        where = _check_where(where, allow_none=True)
        query = _as_vector(vector, "query")
        if not self._rows:
            return []
        if len(query) != self._dim:
            raise ValueError(f"query dimension {len(query)} != store dimension {self._dim}")
        qnorm = _norm(query)
        scored = [
            (_cosine(query, vec, qnorm, vnorm), rid, metadata)
            for rid, (vec, vnorm, metadata) in self._rows.items()
            if not where or _matches(metadata, where)
        ]
        best = heapq.nsmallest(k, scored, key=lambda t: (-t[0], t[1]))
        return [VectorHit(id=rid, score=score, metadata=dict(md)) for score, rid, md in best]

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

#: Name → the class, or ``"module:Class"`` imported when resolved (the module only: an
#: adapter imports its SDK when instantiated, so resolving never needs the ``[vector]`` extra).
_BUILTIN_STORES: dict[str, Callable[..., Any] | str] = {
    "sqlite": "ragspine_lite.vector.sqlite_store:SqliteVectorStore",
    "in_process": InProcessVectorStore,
    "in-process": InProcessVectorStore,
    "inprocess": InProcessVectorStore,
    "memory": InProcessVectorStore,
    "sqlite_vec": _SQLITE_VEC,
    "sqlite-vec": _SQLITE_VEC,
    "sqlitevec": _SQLITE_VEC,
    "pgvector": _PGVECTOR,
    "pg_vector": _PGVECTOR,
    "qdrant": _QDRANT,
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
    if isinstance(builtin, str):
        module, _, name = builtin.partition(":")
        return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]
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
    (``db_path``, ``model_id``, …); ``sqlite_vec``/``sqlite-vec``/``sqlitevec``,
    ``pgvector``/``pg_vector`` and ``qdrant`` → the adapters of
    :mod:`ragspine_lite.vector.adapters` (CPython, ``[vector]`` extra: a missing SDK is an
    ``ImportError`` naming it); otherwise an entry point of the group
    ``ragspine.vector_stores`` called with ``**kwargs``; unknown → ``ValueError``.
    """
    if spec is None:
        spec = env_value(VECTOR_STORE_ENV, "none")
    normalized = str(spec).strip().lower()
    if normalized == "none":
        return None
    return _resolve_factory(normalized)(**kwargs)
