"""A vector store on sqlite-vec's ``vec0`` virtual table (one SQLite file, exact).

Rows are ``(id TEXT PRIMARY KEY, embedding float[N] distance_metric=cosine, +meta TEXT)``:
float32 vectors, metadata as JSON. ``vec0`` answers a KNN by a full float32 scan, so the pool
it hands to the exact re-rank is the true float32-cosine neighbourhood (the docs call this
store exact). ``where`` applies in the re-rank only. Loading the extension needs a sqlite3
with ``enable_load_extension``; many Python builds lack it, so the bundled SQLite of
``sqlean.py`` (part of the ``[vector]`` extra) is used instead when needed.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ragspine_lite.vector._exact import VectorRecord, _check_where, _matches
from ragspine_lite.vector.adapters import (
    DEFAULT_POOL_CEILING,
    VECTOR_EXTRA,
    ExternalStore,
    check_name,
    import_sdk,
)
from ragspine_lite.vector.sqlite_store import VectorStoreError, _pack, _unpack

__all__ = ["DEFAULT_TABLE", "VEC0_MAX_K", "SqliteVecVectorStore", "connect_with_vec"]

DEFAULT_TABLE = "vec_items"
#: The largest ``k`` a vec0 KNN query accepts.
VEC0_MAX_K = 4096
_DIM_IN_SCHEMA = re.compile(r"float\[(\d+)\]")


def connect_with_vec(db_path: str) -> tuple[Any, type[Exception]]:
    """A SQLite connection with sqlite-vec loaded, and that driver's error class.

    The stdlib ``sqlite3`` when it can load extensions, else ``sqlean`` (sqlean.py); neither
    → ``ImportError`` naming the fix. A file that cannot be opened → :class:`VectorStoreError`.
    """
    sqlite_vec = import_sdk("sqlite_vec", "sqlite-vec")
    driver: Any = sqlite3
    if not _loads_extensions(sqlite3):
        try:
            driver = importlib.import_module("sqlean")
        except ImportError:
            raise ImportError(
                "this Python's sqlite3 cannot load SQLite extensions (no "
                "enable_load_extension), which sqlite-vec needs: pip install "
                f"'ragspine-lite[{VECTOR_EXTRA}]' (it brings sqlean.py, an extension-capable "
                "SQLite) or use a Python built with loadable SQLite extensions"
            ) from None
    try:
        conn = driver.connect(db_path)
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
    except driver.Error as exc:
        raise VectorStoreError(f"opening {db_path!r} with sqlite-vec failed: {exc}") from exc
    return conn, driver.Error


def _loads_extensions(driver: Any) -> bool:
    """Whether ``driver`` (the stdlib sqlite3) can load an extension here."""
    if not hasattr(driver.Connection, "enable_load_extension"):
        return False
    probe = driver.connect(":memory:")
    try:
        probe.enable_load_extension(True)  # built with SQLITE_OMIT_LOAD_EXTENSION: refused
        return True
    except driver.Error:
        return False
    finally:
        probe.close()


class SqliteVecVectorStore(ExternalStore):
    """Vectors in a sqlite-vec ``vec0`` table of ``db_path`` (``":memory:"`` by default).

    ``ef_search`` raises the KNN pool (``0``: the pool rule alone); up to ``pool_ceiling``
    rows every row is re-ranked, beyond it a KNN of at most :data:`VEC0_MAX_K` narrows the
    pool. ``table`` names the ``vec0`` table.
    """

    def __init__(
        self,
        db_path: str | Path = ":memory:",
        *,
        ef_search: int = 0,
        pool_ceiling: int = DEFAULT_POOL_CEILING,
        table: str = DEFAULT_TABLE,
    ) -> None:
        super().__init__(ef_search, pool_ceiling)
        self.table = check_name(table, "table")
        self.db_path = str(db_path)
        self._conn, self._error = connect_with_vec(self.db_path)
        self._dim = self._recorded_dim()

    def _where_repr(self) -> str:
        return f"{self.db_path!r}, table={self.table!r}"

    @contextlib.contextmanager
    def _sql(self, action: str, *, write: bool = False) -> Iterator[Any]:
        """The connection (in a transaction when ``write``); driver errors → VectorStoreError."""
        if self._closed:
            raise VectorStoreError(f"vector store {self.db_path!r} is closed")
        try:
            if write:
                with self._conn:
                    yield self._conn
            else:
                yield self._conn
        except self._error as exc:
            raise VectorStoreError(f"{action} on {self.db_path!r} failed: {exc}") from exc

    def _recorded_dim(self) -> int | None:
        """The dimension of an existing table: from its schema, else from a stored blob."""
        with self._sql("reading the schema") as conn:
            row = conn.execute(
                "SELECT sql FROM sqlite_master WHERE name = ?", (self.table,)
            ).fetchone()
            if row is None:
                return None
            found = _DIM_IN_SCHEMA.search(row[0] or "")
            if found:
                return int(found.group(1))
            blob = conn.execute(f"SELECT embedding FROM {self.table} LIMIT 1").fetchone()
        return None if blob is None else len(blob[0]) // 4

    def upsert(self, records: Iterable[VectorRecord]) -> int:
        """Insert or replace records by id (DELETE + INSERT); returns how many were given."""
        batch, given, dim = self._stage(records)
        if not batch:
            return 0
        with self._sql("upsert", write=True) as conn:
            if self._dim is None:
                conn.execute(
                    f"CREATE VIRTUAL TABLE IF NOT EXISTS {self.table} USING vec0("
                    f"id TEXT PRIMARY KEY, embedding float[{dim}] distance_metric=cosine, "
                    "+meta TEXT)"
                )
            ids = [(rid,) for rid in batch]
            conn.executemany(f"DELETE FROM {self.table} WHERE id = ?", ids)
            conn.executemany(
                f"INSERT INTO {self.table} (id, embedding, meta) VALUES (?, ?, ?)",
                [(rid, _pack(vec), json.dumps(md, sort_keys=True))
                 for rid, (vec, md) in batch.items()],
            )
        self._dim = dim
        return given

    def _all_rows(self, where: Mapping[str, str] | None) -> list[tuple[str, Any, Any]]:
        with self._sql("query") as conn:
            rows = conn.execute(f"SELECT id, embedding, meta FROM {self.table}").fetchall()
        return [(rid, _unpack(blob), json.loads(meta)) for rid, blob, meta in rows]

    def _nearest(
        self, query: tuple[float, ...], pool: int, where: Mapping[str, str] | None
    ) -> list[tuple[str, Any, Any]]:
        """A ``vec0`` KNN of ``pool`` (at most :data:`VEC0_MAX_K`); ``where`` is left to
        the re-rank; a larger pool than a KNN allows reads every row instead."""
        if pool > VEC0_MAX_K:
            return self._all_rows(where)
        with self._sql("query") as conn:
            rows = conn.execute(
                f"SELECT id, embedding, meta FROM {self.table} "
                "WHERE embedding MATCH ? AND k = ? ORDER BY distance",
                (_pack(query), pool),
            ).fetchall()
        return [(rid, _unpack(blob), json.loads(meta)) for rid, blob, meta in rows]

    def _has_table(self) -> bool:
        """Whether the table exists (another connection may have made it since)."""
        if self._dim is None:
            self._dim = self._recorded_dim()
        return self._dim is not None

    def metadata_by_id(self) -> dict[str, dict[str, str]]:
        """Every stored id → its metadata."""
        if not self._has_table():
            return {}
        with self._sql("reading metadata") as conn:
            rows = conn.execute(f"SELECT id, meta FROM {self.table}").fetchall()
        return {rid: json.loads(meta) for rid, meta in rows}

    def delete(self, *, where: Mapping[str, str]) -> int:
        """Remove every record matching ``where`` (empty → all); returns how many."""
        where = _check_where(where, allow_none=False) or {}
        return self.delete_ids(
            rid for rid, md in self.metadata_by_id().items() if _matches(md, where)
        )

    def delete_ids(self, ids: Iterable[str]) -> int:
        """Remove the records with these ids; returns how many existed."""
        wanted = list(dict.fromkeys(ids))
        if not wanted or not self._has_table():
            return 0
        with self._sql("delete", write=True) as conn:
            before = self._count(conn)
            conn.executemany(f"DELETE FROM {self.table} WHERE id = ?", [(r,) for r in wanted])
            return before - self._count(conn)

    def _count(self, conn: Any) -> int:
        return int(conn.execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0])

    def count(self) -> int:
        """Number of stored records."""
        if not self._has_table():
            return 0
        with self._sql("count") as conn:
            return self._count(conn)

    def _release(self) -> None:
        self._conn.close()
