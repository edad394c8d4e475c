"""Vector stores on other engines: sqlite-vec, pgvector (Postgres) and Qdrant (CPython only).

Each adapter imports its SDK when it is instantiated (``pip install 'ragspine-lite[vector]'``);
a missing SDK is an ``ImportError`` naming the extra. The core never imports this package:
:func:`~ragspine_lite.vector.store.make_vector_store` resolves ``sqlite_vec``, ``pgvector``
and ``qdrant`` (and their aliases) to the classes here.

The shared semantics are the in-process store's: the first non-empty batch fixes the
dimension (a reopen restores it), ``where`` is an AND of exact equality over metadata, and the
final top-k is always an exact ``math.fsum`` cosine re-rank of the stored (float32) vectors,
ordered by ``(-score, id)``; the engine's own search only narrows the pool
(:func:`~ragspine_lite.vector._exact._pool_size`), or every row is re-ranked when the store
holds no more than ``pool_ceiling``. Stores keep what they are given, RESTRICTED included
(the exits strip it); :attr:`external_store` tells the writers
(:func:`~ragspine_lite.vector.persistence_policy.withheld_from_vectors`) never to hand them a
RESTRICTED chunk.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType
from typing import Any

from ragspine_lite.vector._exact import (
    CheckedQuery,
    VectorHit,
    VectorRecord,
    _check_query_dim,
    _check_str_metadata,
    _pool_size,
    _rerank,
    _stage_records,
)

__all__ = ["DEFAULT_POOL_CEILING", "VECTOR_EXTRA", "import_sdk"]

VECTOR_EXTRA = "vector"
DEFAULT_POOL_CEILING = 4096
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def import_sdk(module: str, package: str) -> ModuleType:
    """Import an adapter's SDK, or an ``ImportError`` saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{package} not installed: pip install 'ragspine-lite[{VECTOR_EXTRA}]' "
            f"(or pip install {package})"
        ) from exc


def check_name(value: object, what: str) -> str:
    """A table/collection name: letters, digits and ``_``, not starting with a digit."""
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ValueError(f"{what} must match ^[A-Za-z_][A-Za-z0-9_]*$, got {value!r}")
    return value


def _non_negative(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return value


class ExternalStore(CheckedQuery):
    """What the three adapters share: validation, the pool rule, the lifecycle."""

    #: A store outside this package's own engines: RESTRICTED chunks are never written to it.
    external_store = True
    _dim: int | None = None
    _closed = False

    def __init__(self, ef_search: int, pool_ceiling: int) -> None:
        self.ef_search = _non_negative("ef_search", ef_search)
        self.pool_ceiling = _non_negative("pool_ceiling", pool_ceiling)

    @property
    def dim(self) -> int | None:
        """The fixed dimension, or ``None`` before the first vector."""
        return self._dim

    def _stage(
        self, records: Iterable[VectorRecord]
    ) -> tuple[dict[str, tuple[tuple[float, ...], dict[str, str]]], int, int | None]:
        """The validated batch: id → (vector, metadata) (the last of a repeated id wins),
        how many records were given, and the dimension."""
        staged, dim = _stage_records(records, self._dim)
        _check_str_metadata(staged)
        return {rid: (vec, md) for rid, vec, md in staged}, len(staged), dim

    def _pool(self, k: int, count: int) -> int:
        return _pool_size(k, self.ef_search, count, self.pool_ceiling)

    def _query(
        self, query: tuple[float, ...], k: int, where: Mapping[str, str] | None
    ) -> list[VectorHit]:
        """The ``k`` best records by exact cosine among those matching ``where``."""
        if self._dim is not None:
            _check_query_dim(query, self._dim)
        return _rerank(self._candidates(query, k, where), query, k=k, where=where)

    def _candidates(
        self, query: tuple[float, ...], k: int, where: Mapping[str, str] | None
    ) -> Iterable[tuple[str, Sequence[float], Mapping[str, str]]]:
        """The pool the engine hands to the re-rank: ``(id, stored vector, metadata)``;
        every row when the pool would hold them all."""
        count = self.count()
        if not count:
            return ()
        pool = self._pool(k, count)
        return self._all_rows(where) if pool >= count else self._nearest(query, pool, where)

    def _all_rows(
        self, where: Mapping[str, str] | None
    ) -> Iterable[tuple[str, Sequence[float], Mapping[str, str]]]:
        raise NotImplementedError

    def _nearest(
        self, query: tuple[float, ...], pool: int, where: Mapping[str, str] | None
    ) -> Iterable[tuple[str, Sequence[float], Mapping[str, str]]]:
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Release the connection; calling it again does nothing."""
        if not self._closed:
            self._closed = True
            self._release()

    def _release(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"count={self.count()}, dim={self._dim}"
        return f"{type(self).__name__}({self._where_repr()}, {state})"

    def _where_repr(self) -> str:
        raise NotImplementedError

    def count(self) -> int:
        raise NotImplementedError
