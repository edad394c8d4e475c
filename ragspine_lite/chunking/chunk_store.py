"""Versioned SQLite chunk store (stdlib ``sqlite3`` only).

Every ingest of a document writes a new version and retires the previous one, so the active
set always equals the latest batch while older versions stay readable with
``include_inactive=True``. SQL is parameterised throughout; ``execute_read`` is the one
free-form entry point and refuses anything that writes.

Side indexes (the BM25 index of :mod:`ragspine_lite.lexical.inverted_index`) live in the same
file and are injected with :meth:`ChunkStore.attach_indexer`: the store calls them inside its
own write transactions, so chunks and index always commit or roll back together. Every write
bumps a ``generation`` counter in ``ragspine_meta``; an index that missed writes (made while it
was not attached) sees that it is behind and rebuilds itself on :meth:`ChunkStore.sync_indexers`.

>>> with ChunkStore(":memory:") as store:
...     store.init_schema()
...     store.replace_doc_chunks("d", [Chunk("d#c0", "d", 0, "hi", "d#para1", 1, 1)])
...     [c.version for c in store.iter_chunks()]
1
[1]
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ragspine_lite.chunking.chunking import Chunk
from ragspine_lite.common.errors import RagspineError
from ragspine_lite.common.sensitivity import canonical_sensitivity
from ragspine_lite.common.sqlite import SqliteFile

__all__ = [
    "SCHEMA_VERSION",
    "ChunkIndexer",
    "ChunkRow",
    "ChunkStore",
    "ChunkStoreError",
    "StoredChunk",
]

logger = logging.getLogger(__name__)

#: Version of the on-disk layout, recorded in ``ragspine_meta``; bump it with every migration.
#: 1: ``narrative_chunk`` and its two indexes. 2 (additive): the ``generation`` write counter
#: and the partial index ``ix_narrative_chunk_id`` on active chunk ids (side indexes use both).
SCHEMA_VERSION = 2

_TABLE = "narrative_chunk"
_META_TABLE = "ragspine_meta"
_GENERATION_KEY = "generation"
# Keys the store and its side indexes manage; write_meta refuses them.
_RESERVED_META_KEYS = frozenset({"schema_version", _GENERATION_KEY, "lexical_index_format"})

# (column, declaration) in table order. Columns with a DEFAULT can be added to an older table.
_COLUMNS: tuple[tuple[str, str], ...] = (
    ("chunk_id", "TEXT NOT NULL"),
    ("doc_id", "TEXT NOT NULL"),
    ("seq", "INTEGER NOT NULL"),
    ("text", "TEXT NOT NULL"),
    ("source_locator", "TEXT NOT NULL"),
    ("para_start", "INTEGER NOT NULL"),
    ("para_end", "INTEGER NOT NULL"),
    ("title", "TEXT NOT NULL DEFAULT ''"),
    ("topic", "TEXT NOT NULL DEFAULT ''"),
    ("entity", "TEXT NOT NULL DEFAULT ''"),
    ("geography", "TEXT NOT NULL DEFAULT ''"),
    ("period", "TEXT NOT NULL DEFAULT ''"),
    ("language", "TEXT NOT NULL DEFAULT ''"),
    ("sensitivity", "TEXT NOT NULL DEFAULT 'INTERNAL'"),
    ("parent_id", "TEXT NOT NULL DEFAULT ''"),
    ("heading", "TEXT NOT NULL DEFAULT ''"),
    ("window_text", "TEXT NOT NULL DEFAULT ''"),
    ("parent_locator", "TEXT NOT NULL DEFAULT ''"),
    ("valid_as_of", "TEXT NOT NULL DEFAULT ''"),
    ("ingested_at", "TEXT NOT NULL"),
    ("version", "INTEGER NOT NULL"),
    ("active", "INTEGER NOT NULL"),
)
_COLUMN_NAMES = tuple(name for name, _ in _COLUMNS)
_CHUNK_FIELDS = tuple(f.name for f in fields(Chunk))
_INT_FIELDS = frozenset({"seq", "para_start", "para_end"})
_SENSITIVITY_AT = _CHUNK_FIELDS.index("sensitivity")
_FILTER_COLUMNS = ("doc_id", "topic", "entity", "geography", "period", "language")

_INSERT_SQL = (
    f"INSERT INTO {_TABLE} ({', '.join(_COLUMN_NAMES)}) "
    f"VALUES ({', '.join('?' for _ in _COLUMN_NAMES)})"
)
_SELECT_COLUMNS = ", ".join(_COLUMN_NAMES)

# Authorizer actions execute_read allows; every other action (writes, DDL, ATTACH,
# transactions, most pragmas) is denied.
_READ_ACTIONS = frozenset(
    getattr(sqlite3, name)
    for name in ("SQLITE_SELECT", "SQLITE_READ", "SQLITE_FUNCTION", "SQLITE_RECURSIVE")
    if hasattr(sqlite3, name)
)
# Pragmas that only report; the second set only when queried, never when assigned.
_READ_PRAGMAS = frozenset(
    {
        "table_info",
        "table_xinfo",
        "table_list",
        "index_list",
        "index_info",
        "index_xinfo",
        "foreign_key_list",
        "database_list",
        "collation_list",
        "function_list",
        "compile_options",
    }
)
_QUERY_ONLY_PRAGMAS = frozenset(
    {
        "user_version",
        "schema_version",
        "application_id",
        "page_count",
        "page_size",
        "freelist_count",
        "encoding",
        "data_version",
    }
)
_ACTION_NAMES = {
    getattr(sqlite3, name): name.removeprefix("SQLITE_").replace("_", " ")
    for name in (
        "SQLITE_INSERT",
        "SQLITE_UPDATE",
        "SQLITE_DELETE",
        "SQLITE_CREATE_TABLE",
        "SQLITE_CREATE_INDEX",
        "SQLITE_CREATE_VIEW",
        "SQLITE_CREATE_TRIGGER",
        "SQLITE_CREATE_TEMP_TABLE",
        "SQLITE_CREATE_TEMP_INDEX",
        "SQLITE_CREATE_TEMP_VIEW",
        "SQLITE_CREATE_TEMP_TRIGGER",
        "SQLITE_CREATE_VTABLE",
        "SQLITE_DROP_TABLE",
        "SQLITE_DROP_INDEX",
        "SQLITE_DROP_VIEW",
        "SQLITE_DROP_TRIGGER",
        "SQLITE_DROP_TEMP_TABLE",
        "SQLITE_DROP_TEMP_INDEX",
        "SQLITE_DROP_TEMP_VIEW",
        "SQLITE_DROP_TEMP_TRIGGER",
        "SQLITE_DROP_VTABLE",
        "SQLITE_ALTER_TABLE",
        "SQLITE_REINDEX",
        "SQLITE_ANALYZE",
        "SQLITE_ATTACH",
        "SQLITE_DETACH",
        "SQLITE_TRANSACTION",
        "SQLITE_SAVEPOINT",
        "SQLITE_PRAGMA",
    )
    if hasattr(sqlite3, name)
}


class ChunkStoreError(RagspineError):
    """The chunk store could not do what was asked (SQLite failure, closed store, write refused)."""


class ChunkRow(NamedTuple):
    """What a side index learns about one row: its ``rowid`` (stable), chunk id and text."""

    rowid: int
    chunk_id: str
    text: str


@runtime_checkable
class ChunkIndexer(Protocol):
    """A side index kept in the store's SQLite file, updated inside the store's transactions.

    ``name`` identifies it: a store holds at most one indexer per name. Each method gets the
    store's connection; ``ensure`` and ``on_replace`` run inside a write transaction that the
    store commits or rolls back as a whole, ``is_current`` only reads. ``generation`` is the
    store's write counter (after the write, for ``on_replace``).
    """

    name: str

    def is_current(self, conn: sqlite3.Connection, generation: int) -> bool:
        """Whether the index exists and reflects the store at ``generation``."""
        ...

    def ensure(self, conn: sqlite3.Connection, generation: int) -> None:
        """Create or migrate its tables and bring itself up to ``generation``."""
        ...

    def on_replace(
        self,
        conn: sqlite3.Connection,
        retired: Sequence[ChunkRow],
        added: Sequence[ChunkRow],
        generation: int,
    ) -> None:
        """Apply one write: ``retired`` rows left the active set, ``added`` rows joined it."""
        ...


@dataclass
class StoredChunk(Chunk):
    """A :class:`Chunk` as persisted: every chunk field, then the ingest bookkeeping."""

    valid_as_of: str = ""
    ingested_at: str = ""
    version: int = 1
    active: bool = True


class ChunkStore(SqliteFile):
    """Versioned chunk store over one SQLite database (a path or ``":memory:"``).

    Call :meth:`init_schema` once before writing. Usable as a context manager; the connection
    is also closed when the store is garbage-collected. SQLite failures surface as
    :class:`ChunkStoreError` with the original exception chained. ``read_only=True`` opens an
    existing file (``FileNotFoundError`` otherwise) that nothing can write to: every write
    raises :class:`ChunkStoreError` before touching it.
    """

    _what = "chunk store"
    _error = ChunkStoreError

    def __init__(self, db_path: str | Path, *, read_only: bool = False) -> None:
        self._open(db_path, read_only).row_factory = sqlite3.Row
        self._indexers: dict[str, ChunkIndexer] = {}

    def __repr__(self) -> str:
        state = "closed" if self.closed else "read-only" if self.read_only else "open"
        return f"ChunkStore({self.db_path!r}, {state})"

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every statement inside sees one state of the file.

        For side indexes and callers that read several statements in a row; do not write
        through the connection it yields. Nested use joins the outer transaction.
        """
        conn = self._connection()
        if conn.in_transaction:
            yield conn
            return
        try:
            conn.execute("BEGIN")
            yield conn
        except sqlite3.Error as exc:
            raise self._read_error("read", exc) from exc
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")

    def _read(self, sql: str, params: Sequence[Any], action: str) -> list[sqlite3.Row]:
        conn = self._connection()
        try:
            return conn.execute(sql, tuple(params)).fetchall()
        except sqlite3.Error as exc:
            raise self._read_error(action, exc) from exc

    def _read_error(self, action: str, exc: sqlite3.Error) -> ChunkStoreError:
        """``action`` failed on this file (a hint when the schema is missing)."""
        hint = " (call init_schema() first)" if "no such table" in str(exc) else ""
        return ChunkStoreError(f"{action} failed on {self.db_path!r}: {exc}{hint}")

    # -- schema ------------------------------------------------------------------------------

    def init_schema(self) -> None:
        """Create the table, indexes and version record; add columns an older table lacks.

        Idempotent. Raises :class:`ChunkStoreError` if the database was written by a newer
        schema version than this package knows.
        """
        with self._transaction("init_schema") as conn:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {_META_TABLE} "
                "(key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            row = conn.execute(
                f"SELECT value FROM {_META_TABLE} WHERE key = 'schema_version'"
            ).fetchone()
            stored = _parse_version(row["value"]) if row is not None else 0
            if stored > SCHEMA_VERSION:
                raise ChunkStoreError(
                    f"chunk store {self.db_path!r} has schema version {stored}, newer than "
                    f"this ragspine_lite supports ({SCHEMA_VERSION}); upgrade ragspine_lite"
                )
            self._create_chunk_table(conn)
            conn.execute(
                f"CREATE UNIQUE INDEX IF NOT EXISTS ux_narrative_chunk "
                f"ON {_TABLE} (doc_id, version, seq)"
            )
            conn.execute(
                f"CREATE INDEX IF NOT EXISTS ix_narrative_chunk_active "
                f"ON {_TABLE} (active, doc_id, seq)"
            )
            if 0 < stored < SCHEMA_VERSION:
                logger.info(
                    "chunk store %r: migrating schema version %d -> %d (additive)",
                    self.db_path, stored, SCHEMA_VERSION,
                )
            # Version 2: active chunk ids are looked up by side indexes (duplicate tracking).
            conn.execute(
                f"CREATE INDEX IF NOT EXISTS ix_narrative_chunk_id "
                f"ON {_TABLE} (chunk_id) WHERE active = 1"
            )
            conn.execute(
                f"INSERT INTO {_META_TABLE} (key, value) VALUES (?, '0') "
                "ON CONFLICT(key) DO NOTHING",
                (_GENERATION_KEY,),
            )
            conn.execute(
                f"INSERT INTO {_META_TABLE} (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )
            generation = _read_generation(conn)
            for indexer in self._indexers.values():
                indexer.ensure(conn, generation)

    def _create_chunk_table(self, conn: sqlite3.Connection) -> None:
        """The chunk table, with every column an older table lacks added (when it can be)."""
        columns = ",\n    ".join(f"{name} {decl}" for name, decl in _COLUMNS)
        conn.execute(f"CREATE TABLE IF NOT EXISTS {_TABLE} (\n    {columns}\n)")
        existing = {r["name"] for r in conn.execute(f"PRAGMA table_info({_TABLE})")}
        for name, decl in _COLUMNS:
            if name in existing:
                continue
            if "DEFAULT" not in decl:
                raise ChunkStoreError(
                    f"table {_TABLE!r} in {self.db_path!r} lacks required column "
                    f"{name!r}, which cannot be added to existing rows; rebuild the store"
                )
            conn.execute(f"ALTER TABLE {_TABLE} ADD COLUMN {name} {decl}")

    def generation(self) -> int:
        """The write counter: bumped by every :meth:`replace_doc_chunks` (0 before any)."""
        with self.snapshot() as conn:
            return _read_generation(conn)

    # -- side indexes ------------------------------------------------------------------------

    def attach_indexer(self, indexer: ChunkIndexer) -> ChunkIndexer:
        """Have ``indexer`` updated inside every later write; returns the attached one.

        If an indexer of the same ``name`` is attached already, that one is kept and returned,
        so two readers of one store share one index. Attaching never writes: an index that is
        missing or behind is built by :meth:`sync_indexers` (or :meth:`init_schema`, or the
        next write).
        """
        if not isinstance(indexer, ChunkIndexer):
            raise TypeError(f"indexer must implement ChunkIndexer, got {type(indexer).__name__}")
        return self._indexers.setdefault(indexer.name, indexer)

    def indexer(self, name: str) -> ChunkIndexer | None:
        """The attached indexer called ``name``, or ``None``."""
        return self._indexers.get(name)

    def sync_indexers(self) -> None:
        """Bring every attached index up to date; writes (one transaction) only if one is behind.

        Raises :class:`ChunkStoreError` if an index must be built but the database refuses
        writes (e.g. opened read-only).
        """
        if not self._indexers:
            return
        with self.snapshot() as conn:
            generation = _read_generation(conn)
            behind = [ix for ix in self._indexers.values() if not ix.is_current(conn, generation)]
        if not behind:
            return
        with self._transaction("sync_indexers") as conn:
            generation = _read_generation(conn)
            for indexer in behind:
                indexer.ensure(conn, generation)

    def schema_version(self) -> int:
        """The schema version recorded in the database (0 before :meth:`init_schema`)."""
        try:
            rows = self._read(
                f"SELECT value FROM {_META_TABLE} WHERE key = 'schema_version'",
                (),
                "schema_version",
            )
        except ChunkStoreError as exc:
            if "no such table" in str(exc):
                return 0
            raise
        return _parse_version(rows[0]["value"]) if rows else 0

    def read_meta(self, key: str) -> str | None:
        """A setting recorded with :meth:`write_meta` (``None`` if absent or no schema yet)."""
        try:
            rows = self._read(
                f"SELECT value FROM {_META_TABLE} WHERE key = ?", (key,), "read_meta"
            )
        except ChunkStoreError as exc:
            if "no such table" in str(exc):
                return None
            raise
        return str(rows[0]["value"]) if rows else None

    def write_meta(self, key: str, value: str) -> None:
        """Record a setting in ``ragspine_meta`` (e.g. which index text built the store).

        The store's own bookkeeping keys cannot be written.
        """
        if key in _RESERVED_META_KEYS:
            raise ValueError(f"meta key {key!r} is reserved by the chunk store")
        with self._transaction("write_meta") as conn:
            conn.execute(
                f"INSERT INTO {_META_TABLE} (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, str(value)),
            )

    # -- writes ------------------------------------------------------------------------------

    def replace_doc_chunks(
        self, doc_id: str, chunks: Iterable[Chunk], valid_as_of: str = ""
    ) -> int:
        """Write ``chunks`` as the new active version of ``doc_id``; return how many.

        The version is one more than the highest ever stored for the document; its previously
        active rows become inactive. An empty list retires the document from the active set.
        All of it happens in one transaction: on any failure the previous version stays intact.
        """
        return self.replace_docs([(doc_id, chunks)], valid_as_of)

    def replace_docs(
        self, docs: Iterable[tuple[str, Iterable[Chunk]]], valid_as_of: str = ""
    ) -> int:
        """:meth:`replace_doc_chunks` for many ``(doc_id, chunks)`` in one transaction.

        Each document is replaced in turn exactly as :meth:`replace_doc_chunks` would; either
        all of them are written or, on any failure, none. Returns the number of chunks written.
        One transaction (one sync to disk) makes bulk loads much faster.
        """
        if not isinstance(valid_as_of, str):
            raise ValueError(f"valid_as_of must be a str, got {valid_as_of!r}")
        items = _checked_docs(docs)
        if not items:
            return 0
        ingested_at = datetime.now(UTC).isoformat()
        action = (
            f"replace_doc_chunks({items[0][0]!r})" if len(items) == 1
            else f"replace_docs({len(items)} documents)"
        )
        with self._transaction(action) as conn:
            indexers = list(self._indexers.values())
            retired: list[ChunkRow] = []
            last_rowid = 0
            if indexers:
                last_rowid = conn.execute(f"SELECT MAX(rowid) FROM {_TABLE}").fetchone()[0] or 0
            for doc_id, batch in items:
                if indexers:
                    retired.extend(
                        _chunk_rows(
                            conn.execute(
                                f"SELECT rowid, chunk_id, text FROM {_TABLE} "
                                "WHERE doc_id = ? AND active = 1 AND rowid <= ? ORDER BY rowid",
                                (doc_id, last_rowid),
                            )
                        )
                    )
                self._write_version(conn, doc_id, batch, valid_as_of, ingested_at)
            conn.execute(
                f"INSERT INTO {_META_TABLE} (key, value) VALUES (?, '1') ON CONFLICT(key) "
                "DO UPDATE SET value = CAST(value AS INTEGER) + 1",
                (_GENERATION_KEY,),
            )
            if indexers:
                _notify(conn, indexers, sorted(retired, key=lambda r: r.rowid), last_rowid)
        return sum(len(batch) for _doc_id, batch in items)

    def _write_version(
        self,
        conn: sqlite3.Connection,
        doc_id: str,
        batch: list[Chunk],
        valid_as_of: str,
        ingested_at: str,
    ) -> None:
        """Retire ``doc_id``'s active rows and insert ``batch`` as its next version."""
        row = conn.execute(
            f"SELECT COALESCE(MAX(version), 0) AS v FROM {_TABLE} WHERE doc_id = ?", (doc_id,)
        ).fetchone()
        version = int(row["v"]) + 1
        conn.execute(f"UPDATE {_TABLE} SET active = 0 WHERE doc_id = ? AND active = 1", (doc_id,))
        conn.executemany(
            _INSERT_SQL, (self._row(chunk, valid_as_of, ingested_at, version) for chunk in batch)
        )

    @staticmethod
    def _row(
        chunk: Chunk | StoredChunk, valid_as_of: str, ingested_at: str, version: int
    ) -> tuple[Any, ...]:
        """Column values for one new row, in table order; a known label is stored canonical."""
        values = [getattr(chunk, name) for name in _CHUNK_FIELDS]
        values[_SENSITIVITY_AT] = canonical_sensitivity(chunk.sensitivity) or chunk.sensitivity
        return (*values, valid_as_of, ingested_at, version, 1)

    # -- reads -------------------------------------------------------------------------------

    def iter_chunks(
        self,
        *,
        doc_id: str | None = None,
        topic: str | None = None,
        entity: str | None = None,
        geography: str | None = None,
        period: str | None = None,
        language: str | None = None,
        include_inactive: bool = False,
    ) -> list[StoredChunk]:
        """Chunks matching every non-``None`` filter (``""`` is a real filter).

        Active rows only unless ``include_inactive``; ordered by ``doc_id, seq, version``.
        """
        where, params = _where(
            _FILTER_COLUMNS,
            (doc_id, topic, entity, geography, period, language),
            active_only=not include_inactive,
        )
        rows = self._read(
            f"SELECT {_SELECT_COLUMNS} FROM {_TABLE}{where} ORDER BY doc_id, seq, version",
            params,
            "iter_chunks",
        )
        return [_stored_chunk(row) for row in rows]

    def iter_chunk_rows(
        self,
        *,
        topic: str | None = None,
        entity: str | None = None,
        geography: str | None = None,
        period: str | None = None,
        language: str | None = None,
    ) -> list[tuple[int, StoredChunk]]:
        """Active chunks as ``(rowid, chunk)``, filtered and ordered like :meth:`iter_chunks`.

        The ``rowid`` is the row's stable number in the file (side indexes key on it).
        """
        where, params = _active_where(topic, entity, geography, period, language)
        rows = self._read(
            f"SELECT rowid AS _rowid, {_SELECT_COLUMNS} FROM {_TABLE}{where} "
            "ORDER BY doc_id, seq, version",
            params,
            "iter_chunk_rows",
        )
        return [(int(row[0]), _stored_chunk(row, 1)) for row in rows]

    def active_rowids(
        self,
        *,
        topic: str | None = None,
        entity: str | None = None,
        geography: str | None = None,
        period: str | None = None,
        language: str | None = None,
    ) -> list[int]:
        """The rowids of the active chunks matching every non-``None`` filter, ascending."""
        where, params = _active_where(topic, entity, geography, period, language)
        rows = self._read(
            f"SELECT rowid FROM {_TABLE}{where} ORDER BY rowid", params, "active_rowids"
        )
        return [int(row[0]) for row in rows]

    def chunks_by_rowid(self, rowids: Iterable[int]) -> dict[int, StoredChunk]:
        """The chunks (active or not) stored under these rowids; unknown rowids are left out."""
        wanted = sorted(set(rowids))
        out: dict[int, StoredChunk] = {}
        for start in range(0, len(wanted), _MAX_PARAMS):
            part = wanted[start : start + _MAX_PARAMS]
            rows = self._read(
                f"SELECT rowid AS _rowid, {_SELECT_COLUMNS} FROM {_TABLE} "
                f"WHERE rowid IN ({', '.join('?' for _ in part)})",
                part,
                "chunks_by_rowid",
            )
            out.update((int(row[0]), _stored_chunk(row, 1)) for row in rows)
        return out

    def count(self, include_inactive: bool = False) -> int:
        """Number of active rows (all rows with ``include_inactive``)."""
        where = "" if include_inactive else " WHERE active = 1"
        rows = self._read(f"SELECT COUNT(*) AS n FROM {_TABLE}{where}", (), "count")
        return int(rows[0]["n"])

    def execute_read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run one read-only statement; rows are addressable by column name.

        Any statement that would write, change the schema, attach a database or control a
        transaction is refused with :class:`ChunkStoreError` before it runs.
        """
        if not isinstance(sql, str):
            raise TypeError(f"sql must be str, got {type(sql).__name__}")
        conn = self._connection()
        refused: list[str] = []

        def authorize(action: int, arg1: str | None, arg2: str | None, *_: object) -> int:
            if action in _READ_ACTIONS:
                return sqlite3.SQLITE_OK
            if action == sqlite3.SQLITE_PRAGMA and arg1 is not None:
                name = arg1.lower()
                if name in _READ_PRAGMAS or (name in _QUERY_ONLY_PRAGMAS and arg2 is None):
                    return sqlite3.SQLITE_OK
            if str(arg1).startswith(("sqlite_master", "sqlite_temp_master")):
                # DDL touches SQLite's catalogue first; say what that means.
                refused.append("a schema change")
            else:
                label = _ACTION_NAMES.get(action, f"action {action}")
                refused.append(f"{label} {arg1!r}" if arg1 else label)
            return sqlite3.SQLITE_DENY

        # Setting an authorizer expires cached statements, so even a statement prepared
        # earlier by this store is re-checked here.
        conn.set_authorizer(authorize)
        try:
            return conn.execute(sql, tuple(params)).fetchall()
        except (sqlite3.Error, sqlite3.Warning) as exc:
            if refused:
                raise ChunkStoreError(
                    f"execute_read only runs read-only statements; refused {refused[0]} "
                    f"in {sql!r}"
                ) from exc
            raise ChunkStoreError(f"execute_read failed for {sql!r}: {exc}") from exc
        finally:
            conn.set_authorizer(None)


# Host parameters per statement: below SQLite's historical limit of 999.
_MAX_PARAMS = 900


def _where(
    columns: Sequence[str], values: Sequence[str | None], *, active_only: bool = True
) -> tuple[str, list[str]]:
    """``WHERE`` clause and parameters: each column equal to its non-``None`` value (``""`` is
    a real filter), and active rows only when ``active_only``; ``""`` when nothing applies."""
    clauses = [f"{column} = ?" for column, value in zip(columns, values, strict=True)
               if value is not None]
    params = [value for value in values if value is not None]
    if active_only:
        clauses.insert(0, "active = 1")
    return (f" WHERE {' AND '.join(clauses)}" if clauses else ""), params


def _active_where(*values: str | None) -> tuple[str, list[str]]:
    """``WHERE`` clause and parameters: active rows equal to each non-``None`` metadata value."""
    return _where(_FILTER_COLUMNS[1:], values)


def _checked_docs(docs: Iterable[tuple[str, Iterable[Chunk]]]) -> list[tuple[str, list[Chunk]]]:
    """``(doc_id, chunks)`` pairs as lists, every id and chunk checked before any write."""
    items: list[tuple[str, list[Chunk]]] = []
    for doc_id, chunks in docs:
        if not isinstance(doc_id, str) or not doc_id.strip():
            raise ValueError(f"doc_id must be a non-empty str, got {doc_id!r}")
        if isinstance(chunks, (str, bytes)):
            raise TypeError(f"chunks must be a list of Chunk, got {type(chunks).__name__}")
        batch = list(chunks)
        for index, chunk in enumerate(batch):
            _check_chunk(index, chunk)
        items.append((doc_id, batch))
    return items


def _notify(
    conn: sqlite3.Connection,
    indexers: list[ChunkIndexer],
    retired: list[ChunkRow],
    last_rowid: int,
) -> None:
    """Hand one write to the side indexes: ``retired`` rows, and the rows added past
    ``last_rowid`` (the maximum before the write)."""
    # Rows are never deleted, so the new rows are exactly those past the old maximum; rows
    # both added and retired within this write concern nobody.
    # "+active": read the rowid range, not the (active, ...) index of every row.
    added = _chunk_rows(
        conn.execute(
            f"SELECT rowid, chunk_id, text FROM {_TABLE} "
            "WHERE rowid > ? AND +active = 1 ORDER BY rowid",
            (last_rowid,),
        )
    )
    generation = _read_generation(conn)
    for indexer in indexers:
        indexer.on_replace(conn, retired, added, generation)


def _chunk_rows(cursor: Iterable[Any]) -> list[ChunkRow]:
    return [ChunkRow(int(r[0]), r[1], r[2]) for r in cursor]


def _read_generation(conn: sqlite3.Connection) -> int:
    """The store's write counter (0 when never written, or before ``init_schema``)."""
    try:
        row = conn.execute(
            f"SELECT value FROM {_META_TABLE} WHERE key = ?", (_GENERATION_KEY,)
        ).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return 0
        raise
    return _parse_version(row[0]) if row is not None else 0


def _parse_version(value: object) -> int:
    try:
        return int(str(value))
    except ValueError as exc:
        raise ChunkStoreError(f"unreadable schema_version {value!r} in {_META_TABLE}") from exc


def _check_chunk(index: int, chunk: object) -> None:
    """Reject anything that is not a well-typed Chunk before the transaction starts."""
    if not isinstance(chunk, Chunk):
        raise TypeError(f"chunks[{index}] must be a Chunk, got {type(chunk).__name__}")
    for name in _CHUNK_FIELDS:
        value = getattr(chunk, name)
        if name in _INT_FIELDS:
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"chunks[{index}].{name} must be int, got {value!r}")
        elif not isinstance(value, str):
            raise TypeError(f"chunks[{index}].{name} must be str, got {value!r}")


def _stored_chunk(row: sqlite3.Row, offset: int = 0) -> StoredChunk:
    """The chunk in ``row``, whose columns from ``offset`` on are the table's, in order."""
    values = list(row)[offset:]
    values[-1] = bool(values[-1])  # active
    return StoredChunk(*values)
