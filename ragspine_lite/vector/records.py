"""The vector store seam: records, hits, the ``VectorStore`` Protocol and the checks every
store shares (:mod:`~ragspine_lite.vector.store` and :mod:`~ragspine_lite.vector.sqlite_store`
implement it)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "DEFAULT_QUERY_K",
    "VectorHit",
    "VectorRecord",
    "VectorStore",
    "as_vector",
    "check_k",
    "check_where",
    "metadata_matches",
    "stage_records",
    "vector_norm",
]

DEFAULT_QUERY_K = 50


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


def as_vector(values: Iterable[Any], what: str) -> tuple[float, ...]:
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



def stage_records(
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
        vector = as_vector(getattr(record, "vector", ()), f"record {rid!r}")
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

def vector_norm(vector: Sequence[float]) -> float:
    return math.sqrt(math.fsum(x * x for x in vector))


def check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    return k


def check_where(where: object, *, allow_none: bool) -> Mapping[str, str] | None:
    if where is None and allow_none:
        return None
    if not isinstance(where, Mapping):
        raise ValueError(f"where must be a mapping of metadata key to value, got {where!r}")
    return where


def metadata_matches(metadata: Mapping[str, str], where: Mapping[str, str]) -> bool:
    """AND of exact equality; a record missing a key does not match."""
    return all(key in metadata and metadata[key] == value for key, value in where.items())
