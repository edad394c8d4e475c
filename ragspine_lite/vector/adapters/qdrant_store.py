"""A vector store on Qdrant, in the client's local mode (no server; approximate).

Vectors are rounded to float32 before they are written (the local mode's files would keep
float64), and the collection uses ``Distance.DOT`` so they come back unchanged for the exact
re-rank; the dot-product pool can miss cosine neighbours of vectors of unequal
length, hence "approximate". Point ids are ``uuid5`` of the record id (Qdrant wants integers
or UUIDs); the payload keeps ``{"__id__": id, "__meta__": metadata}`` and hits carry the
original id. ``where`` is pushed down as ``__meta__.<key>`` match filters.
"""

from __future__ import annotations

import uuid
from array import array
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ragspine_lite.vector._exact import VectorRecord, _check_where
from ragspine_lite.vector.adapters import (
    DEFAULT_POOL_CEILING,
    ExternalStore,
    check_name,
    import_sdk,
)
from ragspine_lite.vector.sqlite_store import VectorStoreError

__all__ = ["DEFAULT_COLLECTION", "QdrantVectorStore", "point_id"]

DEFAULT_COLLECTION = "rv_items"
_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "ragspine.retrieval.vector.qdrant")
_PAGE = 4096


def point_id(record_id: str) -> str:
    """The Qdrant point id of a record id (a stable ``uuid5``)."""
    return str(uuid.uuid5(_ID_NAMESPACE, record_id))


class QdrantVectorStore(ExternalStore):
    """Vectors in a local Qdrant collection: ``path=None`` keeps it in memory, a directory
    persists it (and is locked until :meth:`close`). ``ef_search > 0`` sets ``hnsw_ef``."""

    def __init__(
        self,
        path: str | Path | None = None,
        collection: str = DEFAULT_COLLECTION,
        *,
        ef_search: int = 0,
        pool_ceiling: int = DEFAULT_POOL_CEILING,
    ) -> None:
        super().__init__(ef_search, pool_ceiling)
        self.collection = check_name(collection, "collection")
        self.path = None if path is None else str(path)
        client_mod = import_sdk("qdrant_client", "qdrant-client")
        self._models = import_sdk("qdrant_client.models", "qdrant-client")
        if self.path is None:
            self._client = client_mod.QdrantClient(location=":memory:")
        else:
            self._client = client_mod.QdrantClient(path=self.path)
        if self._client.collection_exists(self.collection):
            info = self._client.get_collection(self.collection)
            self._dim = int(info.config.params.vectors.size)

    def _where_repr(self) -> str:
        return f"{self.path or ':memory:'!r}, collection={self.collection!r}"

    def _filter(self, where: Mapping[str, str] | None) -> Any:
        if not where:
            return None
        m = self._models
        return m.Filter(must=[
            m.FieldCondition(key=f"__meta__.{key}", match=m.MatchValue(value=value))
            for key, value in where.items()
        ])

    def _client_open(self) -> Any:
        if self._closed:
            raise VectorStoreError(f"vector store collection {self.collection!r} is closed")
        return self._client

    def upsert(self, records: Iterable[VectorRecord]) -> int:
        """Insert or replace records by id; returns how many were given."""
        batch, given, dim = self._stage(records)
        if not batch:
            return 0
        client, m = self._client_open(), self._models
        if self._dim is None:
            client.create_collection(
                self.collection, vectors_config=m.VectorParams(size=dim, distance=m.Distance.DOT)
            )
        points = [
            m.PointStruct(id=point_id(rid), vector=array("f", vec).tolist(),
                          payload={"__id__": rid, "__meta__": md})
            for rid, (vec, md) in batch.items()
        ]
        for start in range(0, len(points), _PAGE):
            client.upsert(self.collection, points=points[start : start + _PAGE], wait=True)
        self._dim = dim
        return given

    def _scroll(self, where: Mapping[str, str] | None, *, vectors: bool) -> Iterator[Any]:
        """Every point matching ``where``, page by page."""
        offset = None
        while True:
            points, offset = self._client_open().scroll(
                self.collection, scroll_filter=self._filter(where), limit=_PAGE,
                offset=offset, with_payload=True, with_vectors=vectors,
            )
            yield from points
            if offset is None:
                return

    def _all_rows(self, where: Mapping[str, str] | None) -> Iterator[tuple[str, Any, Any]]:
        return self._unwrap(self._scroll(where, vectors=True))

    def _nearest(
        self, query: tuple[float, ...], pool: int, where: Mapping[str, str] | None
    ) -> Iterator[tuple[str, Any, Any]]:
        params = None
        if self.ef_search > 0:
            params = self._models.SearchParams(hnsw_ef=self.ef_search)
        return self._unwrap(self._client_open().query_points(
            self.collection, query=list(query), query_filter=self._filter(where),
            search_params=params, limit=pool, with_payload=True, with_vectors=True,
        ).points)

    @staticmethod
    def _unwrap(points: Iterable[Any]) -> Iterator[tuple[str, Any, Any]]:
        return ((p.payload["__id__"], p.vector, p.payload["__meta__"]) for p in points)

    def metadata_by_id(self) -> dict[str, dict[str, str]]:
        """Every stored id → its metadata."""
        if self._dim is None:
            return {}
        return {p.payload["__id__"]: dict(p.payload["__meta__"])
                for p in self._scroll(None, vectors=False)}

    def delete(self, *, where: Mapping[str, str]) -> int:
        """Remove every record matching ``where`` (empty → all); returns how many."""
        where = _check_where(where, allow_none=False) or {}
        if self._dim is None:
            return 0
        return self._delete_points([p.id for p in self._scroll(where, vectors=False)])

    def delete_ids(self, ids: Iterable[str]) -> int:
        """Remove the records with these ids; returns how many existed."""
        wanted = [point_id(rid) for rid in dict.fromkeys(ids)]
        if not wanted or self._dim is None:
            return 0
        found = self._client_open().retrieve(self.collection, ids=wanted, with_payload=False)
        return self._delete_points([p.id for p in found])

    def _delete_points(self, ids: list[Any]) -> int:
        if ids:
            self._client_open().delete(
                self.collection, points_selector=self._models.PointIdsList(points=ids), wait=True
            )
        return len(ids)

    def count(self) -> int:
        """Number of stored records."""
        if self._dim is None:
            return 0
        return int(self._client_open().count(self.collection, exact=True).count)

    def _release(self) -> None:
        self._client.close()
