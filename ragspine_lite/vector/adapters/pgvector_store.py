"""A vector store on PostgreSQL with the pgvector extension, through pg8000 (exact).

Rows are ``(id TEXT PRIMARY KEY, embedding vector(N), meta JSONB)``. A named table is
persistent and gets an HNSW ``vector_cosine_ops`` index (``m``, ``ef_construction``), so
several processes (e.g. endpoint replicas) can share one; ``table=None`` gives a session
TEMP table ``rv_<uuid4 hex>`` that disappears with the connection. ``where`` is pushed into
SQL (``meta->>key = value``, AND). Up to ``pool_ceiling`` matching rows are all re-ranked;
beyond, ``ORDER BY embedding <=> q LIMIT pool`` narrows the pool, with
``hnsw.ef_search = max(ef_search, pool)`` clamped to 1..1000 (an HNSW scan returns at most
``ef_search`` rows). Vectors are read back as float32 (``vector_send``), so the exact
re-rank scores what is stored.
"""

from __future__ import annotations

import contextlib
import json
import sys
import uuid
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ragspine_lite.common.settings import env_value
from ragspine_lite.vector._exact import VectorRecord, _check_where
from ragspine_lite.vector.adapters import (
    DEFAULT_POOL_CEILING,
    ExternalStore,
    check_name,
    import_sdk,
)
from ragspine_lite.vector.sqlite_store import VectorStoreError
from ragspine_lite.vector.store_env import PG_URL_ENV

__all__ = ["PG_URL_ENV", "PgVectorVectorStore", "pg_connect_args"]

_ROWS_PER_STATEMENT = 1000
_HNSW_MAX_DIM = 2000  # pgvector indexes at most this many dimensions


def pg_connect_args(dsn: str) -> dict[str, Any]:
    """pg8000 ``connect`` keywords for ``postgresql://user[:pass]@host:port/db``; a
    ``?host=/dir`` query names a Unix-socket directory."""
    parts = urlsplit(dsn)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(
            f"a Postgres URL starts with postgresql://, got scheme {parts.scheme!r}"
        )
    query = parse_qs(parts.query)
    user = unquote(parts.username or "postgres")
    args: dict[str, Any] = {"user": user, "database": unquote(parts.path.lstrip("/")) or user}
    if parts.password:
        args["password"] = unquote(parts.password)
    host = query.get("host", [""])[0] or parts.hostname or "localhost"
    port = parts.port or int(query.get("port", ["5432"])[0])
    if host.startswith("/"):
        args["unix_sock"] = f"{host}/.s.PGSQL.{port}"
    else:
        args["host"], args["port"] = host, port
    return args


def _vector_text(vector: Sequence[float]) -> str:
    """pgvector's text form of the float32 rounding (so Postgres stores exactly that)."""
    return "[" + ",".join(map(repr, array("f", vector))) + "]"


def _from_send(blob: bytes) -> array:  # type: ignore[type-arg]
    """The float32 values of ``vector_send`` output (2+2 header bytes, big-endian floats)."""
    values = array("f")
    values.frombytes(bytes(blob[4:]))
    if sys.byteorder == "little":
        values.byteswap()
    return values


def _where_sql(where: Mapping[str, str] | None) -> tuple[str, list[str]]:
    if not where:
        return "", []
    clauses = " AND ".join("meta->>%s = %s" for _ in where)
    return f" WHERE {clauses}", [x for kv in where.items() for x in kv]


class PgVectorVectorStore(ExternalStore):
    """Vectors in a Postgres table; ``dsn`` or ``$RAGSPINE_PG_URL`` (neither → ``ValueError``).

    ``m`` / ``ef_construction`` shape the HNSW index of a named ``table``; ``ef_search`` and
    ``pool_ceiling`` follow the pool rule of :mod:`ragspine_lite.vector.adapters`.
    """

    def __init__(
        self,
        dsn: str | None = None,
        table: str | None = None,
        *,
        m: int = 16,
        ef_construction: int = 64,
        ef_search: int = 100,
        pool_ceiling: int = DEFAULT_POOL_CEILING,
    ) -> None:
        super().__init__(ef_search, pool_ceiling)
        pg8000 = import_sdk("pg8000.dbapi", "pg8000")
        dsn = dsn or env_value(PG_URL_ENV, "").strip()
        if not dsn:
            raise ValueError(f"pgvector needs a Postgres URL: pass dsn= or set {PG_URL_ENV}")
        self.temporary = table is None
        self.table = f"rv_{uuid.uuid4().hex}" if table is None else check_name(table, "table")
        self.m, self.ef_construction = int(m), int(ef_construction)
        self._errors: tuple[type[Exception], ...] = (pg8000.Error, OSError)
        args = pg_connect_args(dsn)
        self._host = args.get("host") or args["unix_sock"]
        try:
            self._conn = pg8000.connect(**args)
        except self._errors as exc:
            raise VectorStoreError(f"connecting to Postgres at {self._host!r} failed: "
                                   f"{type(exc).__name__}") from exc
        self._dim = self._recorded_dim()

    def _where_repr(self) -> str:
        return f"host={self._host!r}, table={self.table!r}"

    @contextlib.contextmanager
    def _tx(self, action: str) -> Iterator[Any]:
        """A cursor inside one transaction: committed on success, rolled back on error."""
        if self._closed:
            raise VectorStoreError(f"vector store table {self.table!r} is closed")
        try:
            cur = self._conn.cursor()
            yield cur
            self._conn.commit()
        except self._errors as exc:
            with contextlib.suppress(*self._errors):
                self._conn.rollback()
            raise VectorStoreError(f"{action} on table {self.table!r} failed: {exc}") from exc

    def _recorded_dim(self) -> int | None:
        with self._tx("reading the schema") as cur:
            cur.execute(
                "SELECT atttypmod FROM pg_attribute "
                "WHERE attrelid = to_regclass(%s) AND attname = 'embedding'",
                (self.table,),
            )
            row = cur.fetchone()
        return None if row is None else int(row[0])

    def _create_table(self, cur: Any, dim: int) -> None:
        cur.execute("SELECT 1 FROM pg_type WHERE typname = 'vector'")
        if cur.fetchone() is None:
            cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
        kind = "TEMP TABLE" if self.temporary else "TABLE IF NOT EXISTS"
        cur.execute(
            f"CREATE {kind} {self.table} (id TEXT PRIMARY KEY, "
            f"embedding vector({dim}) NOT NULL, meta JSONB NOT NULL)"
        )
        if not self.temporary and dim <= _HNSW_MAX_DIM:
            cur.execute(
                f"CREATE INDEX IF NOT EXISTS {self.table}_hnsw ON {self.table} "
                f"USING hnsw (embedding vector_cosine_ops) "
                f"WITH (m = {self.m}, ef_construction = {self.ef_construction})"
            )

    def upsert(self, records: Iterable[VectorRecord]) -> int:
        """Insert or replace records by id, in one transaction; returns how many were given."""
        batch, given, dim = self._stage(records)
        if not batch:
            return 0
        rows = list(batch.items())
        with self._tx("upsert") as cur:
            if self._dim is None:
                self._create_table(cur, dim)  # type: ignore[arg-type]
            for start in range(0, len(rows), _ROWS_PER_STATEMENT):
                part = rows[start : start + _ROWS_PER_STATEMENT]
                cur.execute(
                    f"INSERT INTO {self.table} (id, embedding, meta) "
                    "SELECT u.id, u.e::vector, u.m::jsonb "
                    "FROM unnest(%s::text[], %s::text[], %s::text[]) AS u(id, e, m) "
                    "ON CONFLICT (id) DO UPDATE SET embedding = EXCLUDED.embedding, "
                    "meta = EXCLUDED.meta",
                    (
                        [rid for rid, _ in part],
                        [_vector_text(vec) for _, (vec, _md) in part],
                        [json.dumps(md, sort_keys=True) for _, (_vec, md) in part],
                    ),
                )
        self._dim = dim
        return given

    def _has_table(self) -> bool:
        if self._dim is None and not self.temporary:
            self._dim = self._recorded_dim()  # another process may have created it
        return self._dim is not None

    def _candidates(
        self, query: tuple[float, ...], k: int, where: Mapping[str, str] | None
    ) -> Iterator[tuple[str, Any, dict[str, str]]]:
        if not self._has_table():
            return iter(())
        clause, params = _where_sql(where)
        select = f"SELECT id, vector_send(embedding), meta FROM {self.table}{clause}"
        with self._tx("query") as cur:
            limit = max(k, self.ef_search, self.pool_ceiling)
            cur.execute(f"SELECT count(*) FROM (SELECT 1 FROM {self.table}{clause} "
                        f"LIMIT {limit + 1}) AS bounded", params)
            count = int(cur.fetchone()[0])
            pool = self._pool(k, count)
            if pool >= count:
                cur.execute(select, params)
            else:
                cur.execute(f"SET LOCAL hnsw.ef_search = {min(max(pool, 1), 1000)}")
                cur.execute(f"{select} ORDER BY embedding <=> %s::vector LIMIT {pool}",
                            [*params, _vector_text(query)])
            rows = cur.fetchall()
        return ((rid, _from_send(blob), meta) for rid, blob, meta in rows)

    def metadata_by_id(self) -> dict[str, dict[str, str]]:
        """Every stored id → its metadata."""
        if not self._has_table():
            return {}
        with self._tx("reading metadata") as cur:
            cur.execute(f"SELECT id, meta FROM {self.table}")
            return {rid: dict(meta) for rid, meta in cur.fetchall()}

    def delete(self, *, where: Mapping[str, str]) -> int:
        """Remove every record matching ``where`` (empty → all); returns how many."""
        where = _check_where(where, allow_none=False) or {}
        if not self._has_table():
            return 0
        clause, params = _where_sql(where)
        with self._tx("delete") as cur:
            cur.execute(f"DELETE FROM {self.table}{clause}", params)
            return int(cur.rowcount)

    def delete_ids(self, ids: Iterable[str]) -> int:
        """Remove the records with these ids; returns how many existed."""
        wanted = list(dict.fromkeys(ids))
        if not wanted or not self._has_table():
            return 0
        with self._tx("delete") as cur:
            cur.execute(f"DELETE FROM {self.table} WHERE id = ANY(%s::text[])", (wanted,))
            return int(cur.rowcount)

    def count(self) -> int:
        """Number of stored records."""
        if not self._has_table():
            return 0
        with self._tx("count") as cur:
            cur.execute(f"SELECT count(*) FROM {self.table}")
            return int(cur.fetchone()[0])

    def _release(self) -> None:
        with contextlib.suppress(*self._errors):
            self._conn.close()
