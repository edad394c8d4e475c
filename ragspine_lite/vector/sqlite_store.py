"""A persistent :class:`~ragspine_lite.vector.store.VectorStore` on SQLite (stdlib only).

Vectors live in their own table (default ``ragspine_vector``), so they can sit in the same
file as a chunk store without touching its tables. Each row belongs to one embedding model:
a store instance sees only the rows of its ``model_id``, whose dimension is recorded in
``ragspine_vector_model`` when the first vector arrives. Vectors are packed as little-endian
float32 (``array('f')``), so scores are float32-exact cosines computed with ``math.fsum``.

``quantization="int8"`` opts a model into integer vectors instead (see
:mod:`ragspine_lite.vector.quantize`): one signed byte per dimension (25 % of float32) at a
scale calibrated on the model's first written batch and recorded in ``ragspine_vector_int8``
(a table created by the first int8 write), scored by exact integer dot products (numpy when
importable, else pure Python; the same integers either way) and reported on the cosine
scale, ``dot / scale²``. A reopen finds the mode on its own; asking for the other mode is a
:class:`VectorStoreError`. The default float32 path is unchanged.

The persistence policy is honoured on write: a record whose metadata carries a
``sensitivity`` the policy does not allow (RESTRICTED, by default) is never written, and an
older row with its id is removed.

>>> s = SqliteVectorStore(":memory:", model_id="demo")
>>> s.upsert([VectorRecord("a", (1.0, 0.0)), VectorRecord("b", (0.0, 1.0))])
2
>>> [h.id for h in s.query([1.0, 0.2])]
['a', 'b']
"""

from __future__ import annotations

import json
import math
import operator
import re
import sqlite3
import sys
from array import array
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ragspine_lite.common.errors import RagspineError
from ragspine_lite.common.sqlite import SqliteFile
from ragspine_lite.vector._exact import (
    DEFAULT_QUERY_K,
    CheckedQuery,
    VectorHit,
    VectorRecord,
    _check_query_dim,
    _check_str_metadata,
    _check_where,
    _matches,
    _norm,
    _query_args,
    _stage_records,
)
from ragspine_lite.vector.persistence_policy import IsolationFirstPolicy, PersistencePolicy
from ragspine_lite.vector.quantize import Int8Codec, Int8Matrix, calibrate_scale

__all__ = [
    "DEFAULT_VECTOR_MODEL_ID",
    "DEFAULT_VECTOR_TABLE",
    "SqliteVectorStore",
    "VectorStoreError",
    "embedding_model_id",
]

DEFAULT_VECTOR_TABLE = "ragspine_vector"
DEFAULT_VECTOR_MODEL_ID = "default"
QUANTIZATIONS = ("float32", "int8")
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


class VectorStoreError(RagspineError):
    """A storage failure inside a vector store (this SQLite one or an adapter's engine; the
    cause is chained)."""


def embedding_model_id(backend: Any) -> str:
    """A stable id for the vectors ``backend`` makes (what a persistent store keys rows by).

    ``backend.model_id`` when it has one; else the class name plus its ``dim`` if any
    (``DeterministicEmbeddingBackend(dim=256)`` → ``"DeterministicEmbeddingBackend/256"``).
    """
    model_id = getattr(backend, "model_id", None)
    if isinstance(model_id, str) and model_id.strip():
        return model_id
    name = type(backend).__name__
    dim = getattr(backend, "dim", None)
    return f"{name}/{dim}" if isinstance(dim, int) and not isinstance(dim, bool) else name


def _pack(vector: tuple[float, ...]) -> bytes:
    packed = array("f", vector)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def _unpack(blob: bytes) -> array:  # type: ignore[type-arg]
    values = array("f")
    values.frombytes(blob)
    if sys.byteorder == "big":
        values.byteswap()
    return values


class SqliteVectorStore(CheckedQuery, SqliteFile):
    """Exact cosine search over vectors kept in a SQLite table; pure Python.

    ``db_path`` is a file path or ``":memory:"``; ``model_id`` selects this store's rows;
    ``table`` is the row table's name (letters, digits, ``_``); ``persistence_policy``
    defaults to :class:`IsolationFirstPolicy`. Semantics follow
    :class:`~ragspine_lite.vector.store.InProcessVectorStore` (ordering ``(-score, id)``,
    ``where`` = AND of exact equality, zero vectors score ``0.0``), except that
    :meth:`upsert` returns how many records were *written* (policy-held ones are not) and
    scores are computed on the stored float32 values. Rows are cached in memory and reloaded
    when the file changes underneath (``PRAGMA data_version``). ``read_only=True`` opens an
    existing file and refuses every write (:class:`VectorStoreError`).

    ``quantization``: ``None`` (default) keeps the mode recorded for this model, float32 for
    a new one; ``"int8"`` or ``"float32"`` asks for that mode and raises
    :class:`VectorStoreError` if the model's vectors were written in the other. In int8 mode
    scores are dequantised integer dots (``dot / scale²``), still on the cosine scale the
    fusion expects, ranked by ``(-dot, id)``.
    """

    _what = "vector store"
    _error = VectorStoreError

    def __init__(
        self,
        db_path: str | Path = ":memory:",
        *,
        model_id: str = DEFAULT_VECTOR_MODEL_ID,
        table: str = DEFAULT_VECTOR_TABLE,
        persistence_policy: PersistencePolicy | None = None,
        read_only: bool = False,
        quantization: str | None = None,
    ) -> None:
        if quantization is not None and quantization not in QUANTIZATIONS:
            raise ValueError(
                f"quantization must be one of {QUANTIZATIONS} or None, got {quantization!r}"
            )
        if not isinstance(model_id, str) or not model_id.strip():
            raise ValueError(f"model_id must be a non-empty str, got {model_id!r}")
        if not isinstance(table, str) or not _TABLE_NAME.fullmatch(table):
            raise ValueError(
                f"table must be a SQL identifier (letters, digits, '_'), got {table!r}"
            )
        self.model_id = model_id
        self.table = table
        self.model_table = f"{table}_model"
        self.int8_table = f"{table}_int8"
        self.persistence_policy = (
            persistence_policy if persistence_policy is not None else IsolationFirstPolicy()
        )
        self._open(db_path, read_only)
        # id -> (vector, norm, metadata); None = not loaded (or stale)
        self._rows: dict[str, tuple[array, float, dict[str, str]]] | None = None  # type: ignore[type-arg]
        self._data_version: int | None = None
        self._matrix: Int8Matrix | None = None
        if not self.read_only:
            self._init_schema()
        self._codec = self._recorded_codec()
        recorded = self._recorded_quantization()
        if quantization is not None and recorded is not None and quantization != recorded:
            raise VectorStoreError(
                f"vector store {self.db_path!r} holds {recorded} vectors for model "
                f"{model_id!r}; quantization={quantization!r} does not match"
            )
        self.quantization: str = recorded or quantization or "float32"

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"count={self.count()}, dim={self.dim}"
        if self.quantization != "float32":
            state += f", quantization={self.quantization!r}"
        return f"SqliteVectorStore({self.db_path!r}, model_id={self.model_id!r}, {state})"

    def _drop_row_cache(self) -> None:
        self._rows = None
        self._matrix = None

    _rolled_back = _drop_row_cache

    def _init_schema(self) -> None:
        with self._transaction("init_schema") as conn:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.model_table} "
                "(model_id TEXT PRIMARY KEY, dim INTEGER NOT NULL)"
            )
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} ("
                "model_id TEXT NOT NULL, id TEXT NOT NULL, vector BLOB NOT NULL, "
                "metadata TEXT NOT NULL, PRIMARY KEY (model_id, id))"
            )

    def _recorded_codec(self) -> Int8Codec | None:
        """The int8 codec recorded for this model (``None``: float32 or nothing yet)."""
        conn = self._connection()
        try:
            if not conn.execute(  # the table exists once an int8 model was written
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                (self.int8_table,),
            ).fetchone():
                return None
            row = conn.execute(
                f"SELECT scale FROM {self.int8_table} WHERE model_id = ?", (self.model_id,)
            ).fetchone()
        except sqlite3.Error as exc:
            raise VectorStoreError(f"reading {self.db_path!r} failed: {exc}") from exc
        return None if row is None else Int8Codec(row[0])

    def _recorded_quantization(self) -> str | None:
        if self._codec is not None:
            return "int8"
        return None if self.dim is None else "float32"

    # -- cache -------------------------------------------------------------------------

    def _current_version(self) -> int:
        return int(self._connection().execute("PRAGMA data_version").fetchone()[0])

    def _load(self) -> dict[str, tuple[array, float, dict[str, str]]]:  # type: ignore[type-arg]
        try:
            version = self._current_version()
            if self._rows is not None and version == self._data_version:
                return self._rows
            rows = self._connection().execute(
                f"SELECT id, vector, metadata FROM {self.table} WHERE model_id = ?",
                (self.model_id,),
            ).fetchall()
        except sqlite3.Error as exc:
            raise VectorStoreError(f"reading vectors from {self.db_path!r} failed: {exc}") from exc
        loaded = {}
        int8_dim = None if self._codec is None else self.dim
        for rid, blob, metadata in rows:
            if int8_dim is not None:  # int8 codes; the matrix is built on first query
                self._check_blob(rid, blob, len(blob) != int8_dim, f"{int8_dim} int8 codes")
                loaded[rid] = (blob, 0.0, json.loads(metadata))
                continue
            self._check_blob(rid, blob, len(blob) % 4 != 0, "a whole number of 4-byte floats")
            vec = _unpack(blob)
            loaded[rid] = (vec, _norm(vec), json.loads(metadata))
        self._rows, self._data_version, self._matrix = loaded, version, None
        return loaded

    def _check_blob(self, rid: str, blob: bytes, damaged: bool, unit: str) -> None:
        if damaged:
            raise VectorStoreError(
                f"the vector table {self.table!r} in {self.db_path!r} is damaged: the vector "
                f"of {rid!r} holds {len(blob)} bytes, not {unit}; "
                "the file was damaged or edited, rebuild its vectors from the documents"
            )

    def _read(self, sql: str, params: Sequence[Any], failure: str) -> list[Any]:
        """The rows of one statement; a SQLite error → ``VectorStoreError(f"{failure}: …")``."""
        try:
            return self._connection().execute(sql, tuple(params)).fetchall()
        except sqlite3.Error as exc:
            raise VectorStoreError(f"{failure}: {exc}") from exc

    @property
    def dim(self) -> int | None:
        """The recorded dimension of this model's vectors, or ``None`` before any."""
        rows = self._read(
            f"SELECT dim FROM {self.model_table} WHERE model_id = ?",
            (self.model_id,),
            f"reading {self.db_path!r} failed",
        )
        return int(rows[0][0]) if rows else None

    def models(self) -> dict[str, int]:
        """Every model with recorded vectors in this file → its dimension."""
        rows = self._read(
            f"SELECT model_id, dim FROM {self.model_table} ORDER BY model_id",
            (),
            f"reading {self.db_path!r} failed",
        )
        return {model: int(dim) for model, dim in rows}

    # -- the VectorStore protocol ----------------------------------------------------------

    def _persistable(self, metadata: Mapping[str, str]) -> bool:
        if "sensitivity" not in metadata:
            return True
        return bool(
            self.persistence_policy.persistable(SimpleNamespace(sensitivity=metadata["sensitivity"]))
        )

    def upsert(self, records: Iterable[VectorRecord]) -> int:
        """Insert or replace records by id; returns how many were written.

        The whole batch is validated first (one bad record rejects all of them). Records the
        persistence policy holds back are not written and their old rows are deleted.
        """
        staged, dim = _stage_records(records, self.dim)
        _check_str_metadata(staged)
        if not staged:
            return 0
        written = 0
        with self._transaction("upsert") as conn:
            conn.execute(
                f"INSERT OR IGNORE INTO {self.model_table} (model_id, dim) VALUES (?, ?)",
                (self.model_id, dim),
            )
            codec = self._int8_codec(conn, staged)
            for rid, vector, metadata in staged:
                if not self._persistable(metadata):
                    conn.execute(
                        f"DELETE FROM {self.table} WHERE model_id = ? AND id = ?",
                        (self.model_id, rid),
                    )
                    continue
                conn.execute(
                    f"INSERT OR REPLACE INTO {self.table} (model_id, id, vector, metadata) "
                    "VALUES (?, ?, ?, ?)",
                    (
                        self.model_id,
                        rid,
                        _pack(vector) if codec is None else codec.encode(vector),
                        json.dumps(metadata, sort_keys=True),
                    ),
                )
                written += 1
        self._codec = codec
        self._drop_row_cache()
        return written

    def _int8_codec(
        self, conn: sqlite3.Connection, staged: list[tuple[str, tuple[float, ...], dict[str, Any]]]
    ) -> Int8Codec | None:
        """This model's int8 codec (``None`` in float32 mode), calibrating it on a first write.

        The scale comes from the persistable vectors of the first batch, so nothing held
        back by the persistence policy shapes what is stored.
        """
        if self.quantization != "int8":
            return None
        recorded = self._recorded_codec()  # inside the transaction: another writer's wins
        if recorded is not None:
            return recorded
        scale = calibrate_scale(v for _rid, v, meta in staged if self._persistable(meta))
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {self.int8_table} "
            "(model_id TEXT PRIMARY KEY, scale REAL NOT NULL)"
        )
        conn.execute(
            f"INSERT INTO {self.int8_table} (model_id, scale) VALUES (?, ?)",
            (self.model_id, scale),
        )
        return Int8Codec(scale)

    def _ranked(
        self, query: tuple[float, ...], k: int, where: Mapping[str, str] | None
    ) -> list[tuple[float, str]]:
        """The ``k`` best as ``(-score, id)``, best first (the order of ``(-score, id)``)."""
        rows = self._load()
        if not rows:
            return []
        _check_query_dim(query, self.dim)
        if self._codec is not None:
            return self._ranked_int8(self._codec, query, k, where, rows)
        qnorm = _norm(query)
        mul = operator.mul
        fsum = math.fsum
        scored: list[tuple[float, str]] = []
        append = scored.append
        for rid, (vec, vnorm, metadata) in rows.items():
            if where and not _matches(metadata, where):
                continue
            if qnorm == 0.0 or vnorm == 0.0:
                append((-0.0, rid))
            else:
                append((-(fsum(map(mul, query, vec)) / (qnorm * vnorm)), rid))
        # Negation is exact and ids are unique, so this is the order of (-score, id).
        scored.sort()
        del scored[k:]
        return scored

    def _ranked_int8(
        self,
        codec: Int8Codec,
        query: tuple[float, ...],
        k: int,
        where: Mapping[str, str] | None,
        rows: dict[str, tuple[Any, float, dict[str, str]]],
    ) -> list[tuple[float, str]]:
        if self._matrix is None:
            self._matrix = Int8Matrix(list(rows), [row[0] for row in rows.values()], len(query))
        matrix = self._matrix
        picked = None
        if where:
            picked = [i for i, rid in enumerate(matrix.ids) if _matches(rows[rid][2], where)]
        best = matrix.top_k(codec.encode(query), k, picked)
        return [(-codec.cosine(dot), rid) for dot, rid in best]

    def _query(
        self, query: tuple[float, ...], k: int, where: Mapping[str, str] | None
    ) -> list[VectorHit]:
        ranked = self._ranked(query, k, where)
        rows = self._rows or {}
        return [VectorHit(id=rid, score=-neg, metadata=dict(rows[rid][2])) for neg, rid in ranked]

    def query_scores(
        self,
        vector: Sequence[float],
        *,
        k: int = DEFAULT_QUERY_K,
        where: Mapping[str, str] | None = None,
    ) -> list[tuple[str, float]]:
        """:meth:`query` as ``(id, score)`` pairs: the same hits, in order, without metadata."""
        return [(rid, -neg) for neg, rid in self._ranked(*_query_args(vector, k, where))]

    def delete(self, *, where: Mapping[str, str]) -> int:
        """Remove this model's records matching ``where`` (empty → all of them)."""
        where = _check_where(where, allow_none=False) or {}
        doomed = [rid for rid, row in self._load().items() if _matches(row[2], where)]
        return self.delete_ids(doomed)

    def delete_ids(self, ids: Iterable[str]) -> int:
        """Remove this model's records with these ids; returns how many existed."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return 0
        removed = 0
        with self._transaction("delete") as conn:
            for rid in wanted:
                cur = conn.execute(
                    f"DELETE FROM {self.table} WHERE model_id = ? AND id = ?",
                    (self.model_id, rid),
                )
                removed += cur.rowcount
        self._rows = None
        return removed

    def count(self) -> int:
        """Number of this model's stored records."""
        rows = self._read(
            f"SELECT COUNT(*) FROM {self.table} WHERE model_id = ?",
            (self.model_id,),
            f"counting vectors in {self.db_path!r} failed",
        )
        return int(rows[0][0])

    def int8_codes(self) -> tuple[Int8Codec, dict[str, bytes]]:
        """This model's codec and every stored id → its int8 codes (int8 mode only).

        What a bundle copies into its vector shards, so every scan sees the same integers.
        """
        if self._codec is None:
            raise VectorStoreError(
                f"vector store {self.db_path!r} holds no int8 vectors for model "
                f"{self.model_id!r} (mode {self.quantization}): write them with "
                "quantization='int8'"
            )
        return self._codec, {rid: bytes(row[0]) for rid, row in self._load().items()}

    def metadata_by_id(self) -> dict[str, dict[str, str]]:
        """Every stored id of this model → a copy of its metadata."""
        return {rid: dict(row[2]) for rid, row in self._load().items()}
