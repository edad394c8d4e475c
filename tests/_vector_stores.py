"""Every vector store the conformance suite runs over, opened fresh or reopened."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ragspine_lite.vector.store import InProcessVectorStore, VectorRecord

#: name → (exact?, CPython-only?)
KINDS = {
    "in_process": (True, False),
    "sqlite": (True, False),
    "sqlite_vec": (True, True),
    "qdrant": (False, True),
    "pgvector": (True, True),
}


@dataclass
class Opener:
    """Opens the store ``kind`` on storage of its own (``reopen`` gives a second instance
    on the same storage, ``None`` for the in-process store)."""

    kind: str
    where: Path
    pg_url: str | None = None
    table: str = ""

    def __post_init__(self) -> None:
        self.table = f"t_{uuid.uuid4().hex[:12]}"
        self.opened: list[Any] = []

    @property
    def exact(self) -> bool:
        return KINDS[self.kind][0]

    def open(self, **kwargs: Any) -> Any:
        store = self._make(**kwargs)
        self.opened.append(store)
        return store

    def _make(self, **kwargs: Any) -> Any:
        if self.kind == "in_process":
            return InProcessVectorStore()
        if self.kind == "sqlite":
            from ragspine_lite.vector.persistence_policy import PersistEverythingPolicy
            from ragspine_lite.vector.sqlite_store import SqliteVectorStore

            return SqliteVectorStore(self.where / "v.db", model_id="m",
                                     persistence_policy=PersistEverythingPolicy(), **kwargs)
        if self.kind == "sqlite_vec":
            from ragspine_lite.vector.adapters.sqlite_vec_store import SqliteVecVectorStore

            return SqliteVecVectorStore(self.where / "vec.db", **kwargs)
        if self.kind == "qdrant":
            from ragspine_lite.vector.adapters.qdrant_store import QdrantVectorStore

            for store in self.opened:  # local mode locks its directory: one client at a time
                store.close()
            return QdrantVectorStore(self.where / "qdrant", **kwargs)
        from ragspine_lite.vector.adapters.pgvector_store import PgVectorVectorStore

        return PgVectorVectorStore(self.pg_url, self.table, **kwargs)

    def reopen(self, **kwargs: Any) -> Any:
        return None if self.kind == "in_process" else self.open(**kwargs)

    def close_all(self) -> None:
        for store in self.opened:
            close = getattr(store, "close", None)
            if close is not None:
                close()


def opener_for(request: Any, kind: str, tmp_path: Path) -> Opener:
    """An :class:`Opener`, skipping when the store's SDK (or Postgres) is missing."""
    if kind in ("sqlite_vec", "qdrant", "pgvector"):
        sdk = {"sqlite_vec": "sqlite_vec", "qdrant": "qdrant_client", "pgvector": "pg8000"}[kind]
        pytest.importorskip(sdk, reason="pip install 'ragspine-lite[vector]'")
    url = request.getfixturevalue("pg_url") if kind == "pgvector" else None
    return Opener(kind, tmp_path, url)


def f32(x: float) -> float:
    """``x`` on a grid of 1/1024: exact in float32, so every store keeps it unchanged."""
    return round(x * 1024) / 1024


def corpus(n: int, dim: int, seed: int = 7) -> list[VectorRecord]:
    """``n`` float32-exact records of uneven length, three metadata keys (one sometimes
    missing)."""
    rng = random.Random(seed)
    records = []
    for i in range(n):
        scale = rng.choice((0.5, 1.0, 1.5, 2.0))
        vector = tuple(f32(rng.gauss(0, 1) * scale) for _ in range(dim))
        meta = {"group": f"g{i % 3}", "parity": "even" if i % 2 == 0 else "odd"}
        if i % 5:
            meta["doc_id"] = f"d{i % 7}"
        records.append(VectorRecord(f"r{i:04d}", vector, meta))
    return records


def queries(count: int, dim: int, seed: int = 11) -> list[tuple[float, ...]]:
    rng = random.Random(seed)
    return [tuple(f32(rng.gauss(0, 1)) for _ in range(dim)) for _ in range(count)]


def as_tuples(hits: list[Any]) -> list[tuple[str, str, dict[str, str]]]:
    """Hits as ``(id, score.hex(), metadata)``: equal only when byte-identical."""
    return [(h.id, h.score.hex(), dict(h.metadata)) for h in hits]
