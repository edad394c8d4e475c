"""What every vector store shares (private): records and hits, the checks of a batch and of
a query, the ``math.fsum`` cosine and the exact top-k ordered by ``(-score, id)``.

The public names are re-exported by :mod:`ragspine_lite.vector.store`, where the seam lives.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DEFAULT_QUERY_K", "CheckedQuery", "VectorHit", "VectorRecord"]

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
    return _best(scored, k)


def _best(scored: Sequence[tuple[float, str, Mapping[str, str]]], k: int) -> list[VectorHit]:
    """The ``k`` best ``(score, id, metadata)`` as hits, ordered by ``(-score, id)``."""
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


def _check_query_dim(query: Sequence[float], dim: int | None) -> None:
    if len(query) != dim:
        raise ValueError(f"query dimension {len(query)} != store dimension {dim}")


class CheckedQuery:
    """The ``query`` of every store: the arguments are checked here (``k``, then ``where``,
    then the vector), the search itself is the store's :meth:`_query`."""

    def query(
        self,
        vector: Sequence[float],
        *,
        k: int = DEFAULT_QUERY_K,
        where: Mapping[str, str] | None = None,
    ) -> list[VectorHit]:
        """The ``k`` best records by cosine among those matching ``where``."""
        return self._query(*_query_args(vector, k, where))

    def _query(
        self, query: tuple[float, ...], k: int, where: Mapping[str, str] | None
    ) -> list[VectorHit]:
        raise NotImplementedError


def _query_args(
    vector: Sequence[float], k: object, where: object
) -> tuple[tuple[float, ...], int, Mapping[str, str] | None]:
    """``(query vector, k, where)`` checked, or ``ValueError`` naming the bad one."""
    checked_k = _check_k(k)
    checked_where = _check_where(where, allow_none=True)
    return _as_vector(vector, "query"), checked_k, checked_where
