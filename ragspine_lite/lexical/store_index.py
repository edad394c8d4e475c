"""The BM25 index persisted beside a chunk store: :class:`StoreBM25Index` (docno =
``narrative_chunk`` rowid), attached with :meth:`StoreBM25Index.attach` and updated inside
the store's own write transactions. Postings are packed ``uint32`` arrays in BLOBs, read per
query term on demand; see :mod:`ragspine_lite.lexical.inverted_index` for the design."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import sys
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from itertools import compress
from typing import Any

from ragspine_lite.chunking.chunk_store import ChunkRow, ChunkStore, ChunkStoreError
from ragspine_lite.lexical.bm25_index import UINT, BM25Index, Postings
from ragspine_lite.text.words import tokenize

__all__ = [
    "BM25_INDEX_FORMAT",
    "REBUILD_HINT",
    "CorruptIndexError",
    "StaleIndexError",
    "StoreBM25Index",
]

# The logger keeps the name it had before this module was split out of inverted_index.
logger = logging.getLogger("ragspine_lite.lexical.inverted_index")

#: Version of the persisted index layout (``lexical_*`` tables); a mismatch rebuilds it.
BM25_INDEX_FORMAT = 2

_LITTLE_ENDIAN = sys.byteorder == "little"


def _pack(values: array) -> bytes:
    """``uint32`` little-endian bytes (the on-disk encoding)."""
    if _LITTLE_ENDIAN:
        return values.tobytes()
    swapped = array(UINT, values)  # pragma: no cover - big-endian hosts only
    swapped.byteswap()  # pragma: no cover
    return swapped.tobytes()  # pragma: no cover


def _zeros(n: int) -> array:
    return array(UINT, bytes(4 * n))


#: What to do about a damaged index (a :class:`CorruptIndexError` says it).
REBUILD_HINT = (
    "the file was damaged or edited; rebuild it from the documents (ingest them into a new "
    "database, or build the site again)"
)


def _unpack(blob: bytes | None, db_path: str = "", where: str = "") -> array:
    """Packed ``uint32`` entries; a blob that cannot be them is a :class:`CorruptIndexError`
    naming ``db_path`` and ``where`` in it (table, key, column)."""
    values = array(UINT)
    if blob:
        if len(blob) % values.itemsize:
            raise CorruptIndexError(
                f"the BM25 index in {db_path!r} is damaged: {where} holds {len(blob)} bytes, "
                f"not a whole number of {values.itemsize}-byte entries; {REBUILD_HINT}"
            )
        values.frombytes(blob)
        if not _LITTLE_ENDIAN:  # pragma: no cover - big-endian hosts only
            values.byteswap()
    return values


class CorruptIndexError(ChunkStoreError):
    """A stored index value cannot be decoded: the database file is damaged or was edited."""


class StaleIndexError(ChunkStoreError):
    """The persisted index is missing or behind the store: run ``store.sync_indexers()``."""



# ------------------------------------------------------------------------------------- SQLite

_TERM = "lexical_term"  # term → live df and score bounds (small rows, updated per write)
_MAIN = "lexical_main"  # term → main postings as packed BLOBs (rewritten only by merges)
_DELTA = "lexical_delta"  # postings of documents added since the last merge, one row each
_DELTA_DOC = "lexical_doc"  # lengths of those documents
_DEAD = "lexical_dead"  # main documents retired since the last merge
_STAT = "lexical_stat"  # counters, the synced generation, the main lengths BLOB
_CHUNKS = "narrative_chunk"
_META = "ragspine_meta"
_FORMAT_KEY = "lexical_index_format"

_DDL = (
    f"CREATE TABLE IF NOT EXISTS {_TERM} (term TEXT PRIMARY KEY, df INTEGER NOT NULL, "
    "max_tf INTEGER NOT NULL, min_len INTEGER NOT NULL) WITHOUT ROWID",
    # A rowid table: big BLOBs live in overflow pages, outside the b-tree of small rows.
    f"CREATE TABLE IF NOT EXISTS {_MAIN} (term TEXT PRIMARY KEY, docs BLOB NOT NULL, "
    "tfs BLOB NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {_DELTA} (term TEXT NOT NULL, docno INTEGER NOT NULL, "
    "tf INTEGER NOT NULL, PRIMARY KEY (term, docno)) WITHOUT ROWID",
    f"CREATE TABLE IF NOT EXISTS {_DELTA_DOC} (docno INTEGER PRIMARY KEY, "
    "length INTEGER NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {_DEAD} (docno INTEGER PRIMARY KEY)",
    f"CREATE TABLE IF NOT EXISTS {_STAT} (key TEXT PRIMARY KEY, value)",
)
_TABLES = (_TERM, _MAIN, _DELTA, _DELTA_DOC, _DEAD, _STAT)
_COUNTERS = (
    "generation",  # the store generation this index reflects
    "docs",  # live documents
    "total_length",  # their total token count
    "main_postings",  # postings in the packed main segment (dead ones included)
    "delta_postings",  # rows in lexical_delta
    "dead_postings",  # postings of dead main documents
    "main_version",  # bumped whenever the main segment is rewritten
    "duplicate_rows",  # live rows whose chunk id another live row also has
)

#: Fold the delta into the packed main segment once it (plus retired postings) exceeds both
#: this many postings and this fraction of the main segment.
MERGE_MIN_POSTINGS = 250_000
MERGE_RATIO = 0.25
#: A write touching more rows than both of these rebuilds the index in one pass instead.
REBUILD_MIN_ROWS = 2_000
REBUILD_RATIO = 0.5
#: Decoded main postings a store index keeps in memory (about 8 bytes each).
CACHE_POSTINGS = 4_000_000


def _doc_counts(text: str) -> tuple[int, Counter[str]]:
    tokens = tokenize(text)
    return len(tokens), Counter(tokens)


class StoreBM25Index(BM25Index):
    """The BM25 index persisted in a chunk store's file; docno = ``narrative_chunk`` rowid.

    Attach it with :meth:`attach` (one per store): the store then updates it inside every
    ``replace_doc_chunks`` transaction. Only active chunks are indexed, their ``text`` as
    :func:`~ragspine_lite.text.words.tokenize` splits it. Layout: a packed *main*
    segment (one row per term, postings as ``uint32`` BLOBs), a *delta* of rows for documents
    added since the last merge, and tombstones for retired main documents; the delta is
    folded into the main segment when it grows past a quarter of it. Opening reads nothing
    but counters; postings are fetched per query term and cached (bounded).
    """

    name = "bm25"

    def __init__(
        self,
        store: ChunkStore,
        *,
        merge_min_postings: int = MERGE_MIN_POSTINGS,
        merge_ratio: float = MERGE_RATIO,
        cache_postings: int = CACHE_POSTINGS,
    ) -> None:
        self.store = store
        self.merge_min_postings = merge_min_postings
        self.merge_ratio = merge_ratio
        self.cache_postings = cache_postings
        self._conn: sqlite3.Connection | None = None
        self._generation = -1
        self._main_version = -1
        self._stats: dict[str, int] = {}
        self._main_lengths = array(UINT)
        self._lengths_all: array = self._main_lengths
        self._dead: set[int] = set()
        self._mask: bytearray | None = None
        self._terms: dict[str, Postings | None] = {}  # this generation
        self._main: dict[str, tuple[array, array]] = {}  # this main version, LRU
        self._main_cached = 0

    @classmethod
    def attach(cls, store: ChunkStore, **options: Any) -> StoreBM25Index:
        """The store's BM25 index, attaching a new one (with ``options``) if it has none yet."""
        attached = store.attach_indexer(cls(store, **options))
        if not isinstance(attached, StoreBM25Index):
            raise TypeError(
                f"indexer {cls.name!r} of {store!r} is a {type(attached).__name__}, "
                "not a StoreBM25Index"
            )
        return attached

    # -- ChunkIndexer hooks ----------------------------------------------------------------

    def is_current(self, conn: sqlite3.Connection, generation: int) -> bool:
        try:
            fmt = conn.execute(
                f"SELECT value FROM {_META} WHERE key = ?", (_FORMAT_KEY,)
            ).fetchone()
            synced = conn.execute(
                f"SELECT value FROM {_STAT} WHERE key = 'generation'"
            ).fetchone()
        except sqlite3.OperationalError:
            return False
        return (
            fmt is not None
            and str(fmt[0]) == str(BM25_INDEX_FORMAT)
            and synced is not None
            and int(synced[0]) == generation
        )

    def ensure(self, conn: sqlite3.Connection, generation: int) -> None:
        if not self.is_current(conn, generation):
            self._rebuild(conn, generation)

    def on_replace(
        self,
        conn: sqlite3.Connection,
        retired: Sequence[ChunkRow],
        added: Sequence[ChunkRow],
        generation: int,
    ) -> None:
        if not self.is_current(conn, generation - 1):
            self._rebuild(conn, generation)  # behind (or missing): the new state, from scratch
            return
        stats = _read_stats(conn)
        if len(added) + len(retired) > max(REBUILD_MIN_ROWS, REBUILD_RATIO * stats["docs"]):
            self._rebuild(conn, generation)  # a bulk write: one pass beats row-by-row updates
            return
        term_sql = f"UPDATE {_TERM} SET df = df - 1 WHERE term = ?"
        for row in retired:
            length, counts = _doc_counts(row.text)
            in_delta = conn.execute(
                f"DELETE FROM {_DELTA_DOC} WHERE docno = ?", (row.rowid,)
            ).rowcount
            if in_delta:
                conn.executemany(
                    f"DELETE FROM {_DELTA} WHERE term = ? AND docno = ?",
                    ((term, row.rowid) for term in counts),
                )
                stats["delta_postings"] -= len(counts)
            else:
                conn.execute(f"INSERT INTO {_DEAD} (docno) VALUES (?)", (row.rowid,))
                stats["dead_postings"] += len(counts)
            conn.executemany(term_sql, ((term,) for term in counts))
            stats["docs"] -= 1
            stats["total_length"] -= length
        upsert = (
            f"INSERT INTO {_TERM} (term, df, max_tf, min_len) "
            "VALUES (?, 1, ?, ?) ON CONFLICT(term) DO UPDATE SET df = df + 1, "
            "max_tf = MAX(max_tf, excluded.max_tf), min_len = MIN(min_len, excluded.min_len)"
        )
        for row in added:
            length, counts = _doc_counts(row.text)
            conn.execute(
                f"INSERT INTO {_DELTA_DOC} (docno, length) VALUES (?, ?)", (row.rowid, length)
            )
            conn.executemany(
                f"INSERT INTO {_DELTA} (term, docno, tf) VALUES (?, ?, ?)",
                ((term, row.rowid, f) for term, f in counts.items()),
            )
            conn.executemany(upsert, ((term, f, length) for term, f in counts.items()))
            stats["delta_postings"] += len(counts)
            stats["docs"] += 1
            stats["total_length"] += length
        stats["duplicate_rows"] += _duplicate_change(conn, retired, added)
        stats["generation"] = generation
        pending = stats["delta_postings"] + stats["dead_postings"]
        if pending > max(self.merge_min_postings, self.merge_ratio * stats["main_postings"]):
            self._merge(conn, stats)
        _write_stats(conn, stats)

    # -- building and merging --------------------------------------------------------------

    def _rebuild(self, conn: sqlite3.Connection, generation: int) -> None:
        """Index every active chunk from scratch (first use, a v1 store, or missed writes)."""
        count = conn.execute(f"SELECT COUNT(*) FROM {_CHUNKS} WHERE active = 1").fetchone()[0]
        logger.info(
            "building the BM25 index of chunk store %r: %d active chunks "
            "(index missing, of another format, or behind the store)",
            self.store.db_path, count,
        )
        for table in _TABLES:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        for ddl in _DDL:
            conn.execute(ddl)
        segment = _Segment()
        for rowid, text in conn.execute(
            f"SELECT rowid, text FROM {_CHUNKS} WHERE +active = 1 ORDER BY rowid"  # table order
        ):
            segment.add(rowid, tokenize(text))
        docs, tfs, lengths = segment.docs, segment.tfs, segment.lengths
        conn.executemany(
            f"INSERT INTO {_TERM} (term, df, max_tf, min_len) VALUES (?, ?, ?, ?)",
            ((term, len(d), max(tfs[term]), min(map(lengths.__getitem__, d)))
             for term, d in docs.items()),
        )
        conn.executemany(
            f"INSERT INTO {_MAIN} (term, docs, tfs) VALUES (?, ?, ?)",
            ((term, _pack(d), _pack(tfs[term])) for term, d in docs.items()),
        )
        duplicates = conn.execute(
            f"SELECT COALESCE(SUM(n), 0) FROM (SELECT COUNT(*) AS n FROM {_CHUNKS} "
            "WHERE active = 1 GROUP BY chunk_id HAVING COUNT(*) > 1)"
        ).fetchone()[0]
        stats = dict.fromkeys(_COUNTERS, 0)
        stats.update(
            generation=generation, docs=segment.n_docs, total_length=segment.total,
            main_postings=segment.postings, main_version=self._main_version + 1,
            duplicate_rows=int(duplicates),
        )
        _write_stats(conn, stats)
        conn.execute(
            f"INSERT INTO {_STAT} (key, value) VALUES ('main_lengths', ?)", (_pack(lengths),)
        )
        conn.execute(
            f"INSERT INTO {_META} (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (_FORMAT_KEY, str(BM25_INDEX_FORMAT)),
        )
        self._forget()

    def _merge(self, conn: sqlite3.Connection, stats: dict[str, int]) -> None:
        """Fold the delta into the main segment and drop retired documents' postings."""
        dead = {r[0] for r in conn.execute(f"SELECT docno FROM {_DEAD}")}
        touched: set[str] = set()
        for (text,) in _texts_of(conn, sorted(dead)):
            touched.update(tokenize(text))
        delta = _delta_postings(conn)
        lengths = self._merged_lengths(conn, dead)
        postings = stats["main_postings"]
        read = f"SELECT docs, tfs FROM {_MAIN} WHERE term = ?"
        for term in sorted(touched | delta.keys()):
            row = conn.execute(read, (term,)).fetchone()
            docs, tfs = self._unpack_main(term, row)
            postings -= len(docs)
            if term in touched and dead:
                keep = [d not in dead for d in docs]
                docs = array(UINT, compress(docs, keep))
                tfs = array(UINT, compress(tfs, keep))
            extra = delta.get(term)
            if extra is not None:  # delta docnos are newer rowids: appending keeps order
                docs.extend(extra[0])
                tfs.extend(extra[1])
            postings += len(docs)
            _write_merged_term(conn, term, docs, tfs, lengths)
        conn.execute(f"DELETE FROM {_DELTA}")
        conn.execute(f"DELETE FROM {_DELTA_DOC}")
        conn.execute(f"DELETE FROM {_DEAD}")
        conn.execute(
            f"UPDATE {_STAT} SET value = ? WHERE key = 'main_lengths'", (_pack(lengths),)
        )
        stats.update(
            main_postings=postings, delta_postings=0, dead_postings=0,
            main_version=stats["main_version"] + 1,
        )
        self._forget()

    def _merged_lengths(self, conn: sqlite3.Connection, dead: set[int]) -> array:
        """The main segment's document lengths with the delta's documents in, the dead out."""
        lengths = self._unpack_stat(conn, "main_lengths")
        new_docs = conn.execute(f"SELECT docno, length FROM {_DELTA_DOC} ORDER BY docno").fetchall()
        if new_docs:
            end = new_docs[-1][0] + 1
            if end > len(lengths):
                lengths.extend(_zeros(end - len(lengths)))
            for docno, length in new_docs:
                lengths[docno] = length
        for docno in dead:
            lengths[docno] = 0
        return lengths

    def _forget(self) -> None:
        """Drop every cached read (after this object rewrote the index)."""
        self._generation = -1
        self._main_version = -1
        self._main.clear()
        self._main_cached = 0
        self._terms.clear()
        self._drop_lookups()

    # -- reading ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def reading(self) -> Iterator[StoreBM25Index]:
        """One consistent read of the store (refreshing caches if the store changed).

        Raises :class:`ChunkStoreError` if the index is missing or behind the store
        (call :meth:`ChunkStore.sync_indexers` first).
        """
        if self._conn is not None:
            yield self
            return
        with self.store.snapshot() as conn:
            self._refresh(conn)
            self._conn = conn
            try:
                yield self
            finally:
                self._conn = None

    def _refresh(self, conn: sqlite3.Connection) -> None:
        row = conn.execute(f"SELECT value FROM {_META} WHERE key = 'generation'").fetchone()
        generation = int(row[0]) if row is not None else 0
        if generation == self._generation:
            return
        if not self.is_current(conn, generation):
            raise StaleIndexError(
                f"the BM25 index of {self.store.db_path!r} is missing or behind the store; "
                "call sync_indexers() (or init_schema()) on a writable store first"
            )
        stats = _read_stats(conn)
        if stats["main_version"] != self._main_version:
            self._main.clear()
            self._main_cached = 0
            self._main_lengths = self._unpack_stat(conn, "main_lengths")
            self._main_version = stats["main_version"]
        self._stats = stats
        self.n_docs = stats["docs"]
        self.total_length = stats["total_length"]
        self._dead = {r[0] for r in conn.execute(f"SELECT docno FROM {_DEAD}")}
        new_docs = conn.execute(f"SELECT docno, length FROM {_DELTA_DOC} ORDER BY docno").fetchall()
        lengths = self._main_lengths
        if new_docs:
            lengths = array(UINT, lengths)
            end = new_docs[-1][0] + 1
            if end > len(lengths):
                lengths.extend(_zeros(end - len(lengths)))
            for docno, length in new_docs:
                lengths[docno] = length
        self._lengths_all = lengths
        self._mask = None
        self._terms.clear()
        self._drop_lookups()
        self._generation = generation

    def _read_conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("StoreBM25Index read outside reading()")
        return self._conn

    @property
    def has_duplicate_chunk_ids(self) -> bool:
        with self.reading():
            return self._stats.get("duplicate_rows", 0) > 0

    def _lengths(self) -> Sequence[int]:
        return self._lengths_all

    def _norms_key(self) -> Any:
        return (self._generation, id(self._lengths_all))

    def _live_mask(self) -> bytearray | None:
        if not self._dead:
            return None
        if self._mask is None:
            mask = bytearray(b"\x01") * len(self._lengths_all)
            for d in self._dead:
                mask[d] = 0
            self._mask = mask
        return self._mask

    def _postings(self, term: str) -> Postings | None:
        if term in self._terms:
            return self._terms[term]
        conn = self._read_conn()
        row = conn.execute(
            f"SELECT df, max_tf, min_len FROM {_TERM} WHERE term = ?", (term,)
        ).fetchone()
        postings = None
        if row is not None:
            docs, tfs = self._main_postings(conn, term)
            delta = conn.execute(
                f"SELECT docno, tf FROM {_DELTA} WHERE term = ?", (term,)
            ).fetchall()
            if delta:
                docs = array(UINT, docs)
                tfs = array(UINT, tfs)
                docs.extend(r[0] for r in delta)
                tfs.extend(r[1] for r in delta)
            postings = Postings(docs, tfs, row[0], row[1], row[2])
        self._terms[term] = postings
        return postings

    def _main_postings(self, conn: sqlite3.Connection, term: str) -> tuple[array, array]:
        hit = self._main.pop(term, None)
        if hit is None:
            row = conn.execute(f"SELECT docs, tfs FROM {_MAIN} WHERE term = ?", (term,)).fetchone()
            hit = self._unpack_main(term, row)
            self._main_cached += len(hit[0])
            while self._main and self._main_cached > self.cache_postings:
                oldest = next(iter(self._main))
                self._main_cached -= len(self._main.pop(oldest)[0])
        self._main[term] = hit  # most recently used last
        return hit

    def _unpack_main(self, term: str, row: tuple[bytes, bytes] | None) -> tuple[array, array]:
        """A ``lexical_main`` row's (docs, tfs); none for a term without main postings."""
        if row is None:
            return _zeros(0), _zeros(0)
        db, where = str(self.store.db_path), f"table {_MAIN}, term {term!r}, column"
        return _unpack(row[0], db, f"{where} docs"), _unpack(row[1], db, f"{where} tfs")

    def _unpack_stat(self, conn: sqlite3.Connection, key: str) -> array:
        where = f"table {_STAT}, key {key!r}"
        return _unpack(_stat_blob(conn, key), str(self.store.db_path), where)

    def _chunk_ids(self, docnos: Iterable[int]) -> dict[int, str]:
        conn = self._read_conn()
        wanted = list(docnos)
        out: dict[int, str] = {}
        for start in range(0, len(wanted), 900):
            part = wanted[start : start + 900]
            out.update(
                conn.execute(
                    f"SELECT rowid, chunk_id FROM {_CHUNKS} "
                    f"WHERE rowid IN ({', '.join('?' for _ in part)})",
                    part,
                ).fetchall()
            )
        return out

    def size_bytes(self) -> int:
        """Bytes the index occupies in the file (its tables' pages), when SQLite reports it."""
        with self.reading():
            conn = self._read_conn()
            try:
                names = ", ".join(f"'{t}'" for t in _TABLES)
                row = conn.execute(
                    f"SELECT SUM(pgsize) FROM dbstat WHERE name IN ({names}) "
                    f"OR name LIKE 'sqlite_autoindex_lexical%'"
                ).fetchone()
                return int(row[0] or 0)
            except sqlite3.Error:  # no dbstat virtual table in this SQLite build
                blobs = conn.execute(
                    f"SELECT COALESCE(SUM(LENGTH(docs) + LENGTH(tfs)), 0) FROM {_MAIN}"
                ).fetchone()[0]
                return int(blobs)


def _read_stats(conn: sqlite3.Connection) -> dict[str, int]:
    rows = dict(
        conn.execute(
            f"SELECT key, value FROM {_STAT} WHERE key IN ({', '.join('?' for _ in _COUNTERS)})",
            _COUNTERS,
        ).fetchall()
    )
    return {key: int(rows.get(key, 0)) for key in _COUNTERS}


def _write_stats(conn: sqlite3.Connection, stats: dict[str, int]) -> None:
    conn.executemany(
        f"INSERT INTO {_STAT} (key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        ((key, int(stats[key])) for key in _COUNTERS),
    )


def _stat_blob(conn: sqlite3.Connection, key: str) -> bytes | None:
    row = conn.execute(f"SELECT value FROM {_STAT} WHERE key = ?", (key,)).fetchone()
    return None if row is None else row[0]


class _Segment:
    """A main segment being built: per term its docnos and term frequencies (ascending
    docnos), every document's length, and the totals the stats record."""

    def __init__(self) -> None:
        self.docs: dict[str, array] = {}
        self.tfs: dict[str, array] = {}
        self.lengths = array(UINT)
        self.total = 0
        self.n_docs = 0
        self.postings = 0

    def add(self, rowid: int, tokens: list[str]) -> None:
        """Index one document (``rowid`` above every one added before)."""
        lengths = self.lengths
        if rowid >= len(lengths):
            lengths.extend(_zeros(rowid + 1 - len(lengths)))
        lengths[rowid] = len(tokens)
        self.total += len(tokens)
        self.n_docs += 1
        counts = Counter(tokens)
        self.postings += len(counts)
        for term, f in counts.items():
            d = self.docs.get(term)
            if d is None:
                d = self.docs[term] = array(UINT)
                self.tfs[term] = array(UINT)
            d.append(rowid)
            self.tfs[term].append(f)


def _delta_postings(conn: sqlite3.Connection) -> dict[str, tuple[list[int], list[int]]]:
    """The delta segment as term → (docnos, term frequencies), docnos ascending."""
    delta: dict[str, tuple[list[int], list[int]]] = {}
    for term, docno, tf in conn.execute(
        f"SELECT term, docno, tf FROM {_DELTA} ORDER BY term, docno"
    ):
        entry = delta.get(term)
        if entry is None:
            entry = delta[term] = ([], [])
        entry[0].append(docno)
        entry[1].append(tf)
    return delta


def _write_merged_term(
    conn: sqlite3.Connection, term: str, docs: array, tfs: array, lengths: array
) -> None:
    """Store one term's merged postings (and its statistics), or drop a term left with none."""
    if docs:
        conn.execute(
            f"UPDATE {_TERM} SET df = ?, max_tf = ?, min_len = ? WHERE term = ?",
            (len(docs), max(tfs), min(map(lengths.__getitem__, docs)), term),
        )
        conn.execute(
            f"INSERT INTO {_MAIN} (term, docs, tfs) VALUES (?, ?, ?) ON CONFLICT(term) "
            "DO UPDATE SET docs = excluded.docs, tfs = excluded.tfs",
            (term, _pack(docs), _pack(tfs)),
        )
    else:
        conn.execute(f"DELETE FROM {_TERM} WHERE term = ?", (term,))
        conn.execute(f"DELETE FROM {_MAIN} WHERE term = ?", (term,))


def _texts_of(conn: sqlite3.Connection, rowids: list[int]) -> Iterator[tuple[str]]:
    for start in range(0, len(rowids), 900):
        part = rowids[start : start + 900]
        yield from conn.execute(
            f"SELECT text FROM {_CHUNKS} WHERE rowid IN ({', '.join('?' for _ in part)})", part
        )


def _duplicate_change(
    conn: sqlite3.Connection, retired: Sequence[ChunkRow], added: Sequence[ChunkRow]
) -> int:
    """How one write changed the number of live rows sharing a chunk id with another."""
    delta: Counter[str] = Counter(r.chunk_id for r in added)
    delta.subtract(r.chunk_id for r in retired)
    ids = sorted(delta)
    after: dict[str, int] = {}
    for start in range(0, len(ids), 900):
        part = ids[start : start + 900]
        # With one id SQLite rewrites IN (?) to "= ?" and, without statistics, scans the
        # (active, ...) index instead of the partial chunk-id index: repeat the id.
        part = part * 2 if len(part) == 1 else part
        after.update(
            conn.execute(
                f"SELECT chunk_id, COUNT(*) FROM {_CHUNKS} WHERE active = 1 AND chunk_id IN "
                f"({', '.join('?' for _ in part)}) GROUP BY chunk_id",
                part,
            ).fetchall()
        )

    def shared(n: int) -> int:
        return n if n > 1 else 0

    return sum(shared(after.get(c, 0)) - shared(after.get(c, 0) - delta[c]) for c in ids)
