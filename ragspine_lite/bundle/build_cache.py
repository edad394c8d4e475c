"""What a rebuild reuses: every document's parse and chunks, the chunks' vectors, and the index
the previous build wrote.

A site build keeps ``.OUT.cache/build.db`` beside ``--out`` (SQLite, never part of the site):

- ``files``: each document file's size, times and inode with its key below, so that a file
  that was not touched is not read again (:meth:`BuildCache.key`);
- ``parsed``: each document's metadata and sections, and its body apart (read only when a
  build needs it), keyed by the sha256 of its bytes, its path and the load settings;
- ``chunks``: each exported document's chunks, keyed by what they are made from (its body,
  metadata, sections and URL, and the chunk settings: :mod:`ragspine_lite.bundle.incremental`),
  their texts apart: a build holds its chunks without their texts (:class:`CachedChunk`) and
  reads those in batches, in the order it uses them (:class:`ChunkTexts`);
- ``vectors``: a hybrid build's float vectors, keyed by the model id and the embedded text;
- ``state``: the previous build's postings and the content of its index files
  (:class:`~ragspine_lite.bundle.incremental.IndexState`), in a file of its own
  (``state-index-….bin``) that the table names.

Every key is salted with the package's sources and the interpreter's version (entries are
``marshal`` data, whose format may change between versions): a changed parser or chunker, or
another Python, never reuses anything. RESTRICTED documents are never written to it (their
parse, chunks and text are neither cached nor embedded), and deleted rows are overwritten
(``secure_delete``). The whole build is one transaction: :meth:`BuildCache.close` commits it
once the site is in place and drops the entries this build did not use; a failed or refused
build calls :meth:`BuildCache.abort`, which leaves the cache as it was. ``--clean``
(``build_site(clean=True)``) deletes the cache first.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import astuple, fields
from pathlib import Path
from typing import Any

from ragspine_lite.chunking.chunk_store import StoredChunk
from ragspine_lite.chunking.chunking import DocumentMeta
from ragspine_lite.chunking.sources import Section
from ragspine_lite.common.sensitivity import is_restricted

__all__ = [
    "CACHE_FILE",
    "BuildCache",
    "CachedChunk",
    "ChunkTexts",
    "ParseCache",
    "cache_dir",
    "cached_stdlib",
    "cached_wheel",
    "package_digest",
]

CACHE_FILE = "build.db"
#: The layout of :data:`CACHE_FILE` (``PRAGMA user_version``); a cache of another is emptied.
SCHEMA = 4
#: Chunk entries read from the cache at a time.
BATCH = 128
_FIELD_NAMES = tuple(f.name for f in fields(StoredChunk))
#: Where a chunk row (:class:`StoredChunk`'s fields) has its text.
_TEXT_AT = _FIELD_NAMES.index("text")
#: A file changed less than this before a build started may change again unseen within its
#: timestamp's resolution: its key is not recorded for the next build to reuse.
STAT_SLACK_NS = 2_000_000_000
#: What names a state's file in the state table, and how its file is called.
STATE_FILE_MARK = b"file:"
STATE_PREFIX = "state-"
#: A parse: its body (or what reads it from the cache), metadata and sections.
Parsed = tuple["str | CachedBody", DocumentMeta, list[Section]]
#: The tables of :data:`CACHE_FILE` whose unused rows a build drops.
TABLES = ("parsed", "chunks", "vectors")


def cache_dir(target: Path) -> Path:
    """``.NAME.cache`` beside the site folder ``target``."""
    return target.parent / f".{target.name}.cache"


_DIGEST: list[str] = []


def package_digest() -> str:
    """The sha256 of this ragspine_lite's Python sources: a changed parser never reuses a parse."""
    if not _DIGEST:
        root = Path(__file__).resolve().parents[1]
        digest = hashlib.sha256()
        for path in sorted(root.rglob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
            digest.update(path.read_bytes())
        _DIGEST.append(digest.hexdigest())
    return _DIGEST[0]


class BuildCache:
    """The cache of one build: :meth:`get`/:meth:`put` parses, :meth:`chunks`/
    :meth:`put_chunks`, :meth:`vectors`/:meth:`put_vectors`, :meth:`state`/:meth:`put_state`."""

    def __init__(self, folder: Path, settings: dict[str, Any]) -> None:
        self.folder, self.new = folder, not folder.exists()
        folder.mkdir(parents=True, exist_ok=True)
        python = [*sys.version_info[:2], marshal.version]
        self.salt = json.dumps([package_digest(), settings, python], sort_keys=True)
        self.stamp = hashlib.sha256(self.salt.encode("utf-8")).hexdigest()[:16] + " "
        self.started = time.time_ns()
        self.conn = sqlite3.connect(folder / CACHE_FILE, isolation_level=None)
        self.conn.execute("PRAGMA secure_delete = ON")  # a dropped row leaves no text behind
        if self.conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA:
            _create_tables(self.conn)
        self.conn.execute("BEGIN")  # one transaction: committed by close
        self.used: dict[str, set[str]] = {table: set() for table in TABLES}
        self.seen = dict(self.conn.execute("SELECT path, stat FROM files"))
        self.stats: dict[str, str] = {}
        self.parsed: set[str] = set()  # the keys of the parses cached after this build
        self.reader = ChunkTexts(self)
        self.hits = 0

    @staticmethod
    def clear(folder: Path) -> None:
        shutil.rmtree(folder, ignore_errors=True)

    # -- parses ------------------------------------------------------------------------------

    def key(self, path: Path, rel: str) -> str:
        """The sha256 of the file's bytes, its path and the load settings; the previous
        build's, without reading the file, while its size, times and inode are those that
        build recorded (and were older than that build: :func:`_stat_line`) and the package's
        sources and the settings are the same."""
        stat = os.stat(path)
        line = self.stamp + _stat_line(stat)
        known = self.seen.get(rel, "")
        if known.startswith(line):
            key = known[len(line):]
        else:
            digest = hashlib.sha256(self.salt.encode("utf-8"))
            digest.update(rel.encode("utf-8") + b"\0" + path.read_bytes())
            key = digest.hexdigest()
        if stat.st_ctime_ns < self.started - STAT_SLACK_NS:
            self.stats[rel] = line + key
        return key

    def get(self, key: str) -> Parsed | None:
        return self.get_many([key])[0]

    def get_many(self, keys: Sequence[str]) -> list[Parsed | None]:
        """The cached parse of each key (``None`` where there is none), in one read; a
        parse's body is read from the cache when asked for (:meth:`body`)."""
        wanted = set(keys)
        self.used["parsed"] |= wanted
        found = {k: _parsed(self, k, head) for k, head in self.conn.execute(
            "SELECT key, head FROM parsed") if k in wanted}
        self.hits += len(found)
        self.parsed |= found.keys()
        return [found.get(key) for key in keys]

    def body(self, key: str) -> str:
        """The body of the cached parse ``key``."""
        row = self.conn.execute("SELECT body FROM parsed WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise KeyError(f"no cached parse {key!r}")
        return str(row[0])

    def put(self, key: str, parsed: Parsed) -> Parsed:
        """Cache a parse; → the parse with its body read from the cache (a RESTRICTED one,
        never written, as it is)."""
        body, meta, sections = parsed
        if is_restricted(meta.sensitivity):
            return parsed  # nothing RESTRICTED is written outside the build's memory
        head = marshal.dumps((astuple(meta), [astuple(s) for s in sections]))
        self.conn.execute("INSERT OR REPLACE INTO parsed VALUES (?, ?, ?)", (key, head, body))
        self.parsed.add(key)
        return CachedBody(self, key), meta, sections

    # -- chunks, vectors ---------------------------------------------------------------------

    def chunks(self, keys: Sequence[str]) -> dict[str, Any]:
        """The cached chunk entries of ``keys`` (at most :data:`BATCH`) that exist, their rows
        without the texts (:meth:`stored` makes their chunks); all become used."""
        self.used["chunks"].update(keys)
        return {k: marshal.loads(v) for k, v in self._batch("value", keys)}

    def chunk_entry(self, key: str) -> Any | None:
        """One chunk entry with its texts, not marked used (a previous build's, to compare
        with)."""
        row = self.conn.execute("SELECT value, texts FROM chunks WHERE key = ?",
                                (key,)).fetchone()
        if row is None:
            return None
        entry, texts = marshal.loads(row[0]), marshal.loads(row[1])
        entry["rows"] = [_with_text(r, t) for r, t in zip(entry["rows"], texts, strict=True)]
        return entry

    def put_chunks(self, key: str, entry: Any) -> Any:
        """Cache a (non-RESTRICTED) document's chunk entry (strings, numbers, lists, tuples;
        ``rows``: each chunk's :class:`StoredChunk` fields), its texts apart; → the entry as
        :meth:`chunks` gives it."""
        self.used["chunks"].add(key)
        texts = [row[_TEXT_AT] for row in entry["rows"]]
        bare = {**entry, "rows": [_with_text(row, None) for row in entry["rows"]]}
        self.conn.execute("INSERT OR REPLACE INTO chunks VALUES (?, ?, ?)",
                          (key, marshal.dumps(bare), marshal.dumps(texts)))
        return bare

    def texts(self, keys: Sequence[str]) -> dict[str, list[str]]:
        """The chunk texts of the entries ``keys`` (at most :data:`BATCH`), in one read."""
        return {k: marshal.loads(v) for k, v in self._batch("texts", keys)}

    def _batch(self, column: str, keys: Sequence[str]) -> Iterable[tuple[str, bytes]]:
        marks = ",".join("?" * len(keys))
        return self.conn.execute(f"SELECT key, {column} FROM chunks WHERE key IN ({marks})",
                                 list(keys))

    def stored(self, key: str, entry: Any) -> list[StoredChunk]:
        """The chunks of the entry ``key`` (from :meth:`chunks`), their texts left in the
        cache (:class:`CachedChunk`)."""
        return [CachedChunk(self.reader, key, i, *row) for i, row in enumerate(entry["rows"])]

    def vectors(self, keys: Sequence[str]) -> dict[str, list[float]]:
        """The cached vectors of ``keys`` that exist (all become used)."""
        self.used["vectors"].update(keys)
        found: dict[str, list[float]] = {}
        for start in range(0, len(keys), 500):
            batch = list(keys[start:start + 500])
            marks = ",".join("?" * len(batch))
            for key, blob in self.conn.execute(
                f"SELECT key, value FROM vectors WHERE key IN ({marks})", batch
            ):
                found[key] = _floats(blob)
        return found

    def put_vectors(self, items: Iterable[tuple[str, Sequence[float]]]) -> None:
        rows = [(key, _blob(vector)) for key, vector in items]
        self.used["vectors"].update(key for key, _ in rows)
        self.conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)

    # -- the previous index ------------------------------------------------------------------

    def state(self, name: str) -> bytes | None:
        row = self.conn.execute("SELECT value FROM state WHERE name = ?", (name,)).fetchone()
        return None if row is None else bytes(row[0])

    def put_state(self, name: str, value: bytes | None) -> None:
        """Replace (``None``: forget) the state ``name``, committed with the build."""
        self.conn.execute("DELETE FROM state WHERE name = ?", (name,))
        if value is not None:
            self.conn.execute("INSERT INTO state VALUES (?, ?)", (name, value))

    def state_file(self, name: str) -> Path | None:
        """The file holding the state ``name`` (:meth:`new_state_file`), if there is one."""
        value = self.state(name) or b""
        if not value.startswith(STATE_FILE_MARK):
            return None
        path = self.folder / value[len(STATE_FILE_MARK):].decode("utf-8")
        return path if path.is_file() else None

    def new_state_file(self, name: str) -> Path:
        """A new, empty file for the state ``name``, kept apart from the database (large, and
        written in one go): it replaces the previous one when the build commits, and is
        deleted if the build fails."""
        fd, made = tempfile.mkstemp(prefix=f"{STATE_PREFIX}{name}-", suffix=".bin",
                                    dir=self.folder)
        os.close(fd)
        path = Path(made)
        self.put_state(name, STATE_FILE_MARK + path.name.encode("utf-8"))
        return path

    def _state_files(self) -> set[Path]:
        """The state files of the cache's folder that no state names."""
        named = {self.state_file(n) for (n,) in self.conn.execute("SELECT name FROM state")}
        return set(self.folder.glob(f"{STATE_PREFIX}*.bin")) - named

    def made(self, name: str, inputs: Sequence[bytes], make: Callable[[], bytes]) -> bytes:
        """The bytes ``make()`` gives for ``inputs`` (the package's sources always among
        them): cached under ``name``, made again when an input changed."""
        digest = hashlib.sha256(self.salt.encode("utf-8"))
        for item in inputs:
            digest.update(hashlib.sha256(item).digest())
        key = digest.hexdigest().encode("ascii")
        blob = self.state(name)
        if blob is not None and blob[:len(key)] == key:
            return blob[len(key):]
        data = make()
        self.put_state(name, key + data)
        return data

    # -- the end of a build ------------------------------------------------------------------

    def close(self) -> None:
        """Forget what this build did not use; commit; close the database."""
        try:
            for table in TABLES:
                unused = [(k,) for (k,) in self.conn.execute(f"SELECT key FROM {table}")
                          if k not in self.used[table]]
                self.conn.executemany(f"DELETE FROM {table} WHERE key = ?", unused)
            self._keep_stats()
            self.conn.execute("COMMIT")
            stale = self._state_files()
        finally:
            self.conn.close()
        for path in stale:  # replaced by this build's
            path.unlink(missing_ok=True)

    def _keep_stats(self) -> None:
        """Record the files whose parse is cached (never a RESTRICTED one's path)."""
        stats = {p: line for p, line in self.stats.items()
                 if line.rpartition(" ")[2] in self.parsed}
        self.conn.executemany("DELETE FROM files WHERE path = ?",
                              [(p,) for p in self.seen if p not in stats])
        self.conn.executemany("INSERT OR REPLACE INTO files VALUES (?, ?)",
                              [(p, v) for p, v in stats.items() if self.seen.get(p) != v])

    def abort(self) -> None:
        """A failed or refused build: keep the cache as it was (and leave nothing if it is new)."""
        try:
            self.conn.execute("ROLLBACK")
            for path in self._state_files():  # this build's
                path.unlink(missing_ok=True)
        finally:
            self.conn.close()
            if self.new:
                self.clear(self.folder)


def _parsed(cache: BuildCache, key: str, head: bytes) -> Parsed:
    meta, sections = marshal.loads(head)
    return CachedBody(cache, key), DocumentMeta(*meta), [Section(*s) for s in sections]


class CachedBody:
    """The body of a cached parse, read from the cache each time it is asked for."""

    __slots__ = ("cache", "key")

    def __init__(self, cache: BuildCache, key: str) -> None:
        self.cache, self.key = cache, key

    def __call__(self) -> str:
        return self.cache.body(self.key)


class ChunkTexts:
    """The texts of cached chunks, read from the cache a batch of entries at a time: those
    the build will ask for next (:meth:`plan`), else the one asked for."""

    def __init__(self, cache: BuildCache) -> None:
        self.cache = cache
        self.order: list[str] = []
        self.at: dict[str, int] = {}
        self.loaded: dict[str, list[str]] = {}

    def plan(self, keys: Iterable[str]) -> None:
        """The entries' keys in the order their chunks will be read (repeats allowed)."""
        self.order = list(dict.fromkeys(keys))
        self.at = {key: i for i, key in enumerate(self.order)}

    def read(self, key: str, i: int) -> str:
        texts = self.loaded.get(key)
        if texts is None:
            start = self.at.get(key)
            batch = [key] if start is None else self.order[start:start + BATCH]
            self.loaded = self.cache.texts(batch)  # one batch held at a time
            texts = self.loaded[key]
        return texts[i]


class CachedChunk(StoredChunk):
    """A :class:`StoredChunk` whose text stays in the build cache: ``text`` reads it each
    time (a build holds no chunk text it is not working on). Its fields are slots (no
    dictionary per chunk)."""

    __slots__ = (*(name for name in _FIELD_NAMES if name != "text"), "reader", "key", "at")

    def __init__(self, reader: ChunkTexts, key: str, at: int, *fields: Any) -> None:
        self.reader, self.key, self.at = reader, key, at
        super().__init__(*fields)

    @property  # type: ignore[override]
    def text(self) -> str:
        return self.reader.read(self.key, self.at)

    @text.setter
    def text(self, value: Any) -> None:
        pass  # read from the cache


def _with_text(row: Sequence[Any], text: Any) -> tuple[Any, ...]:
    """A chunk row (:class:`StoredChunk` fields) with ``text`` as its text."""
    return (*row[:_TEXT_AT], text, *row[_TEXT_AT + 1:])


def _stat_line(stat: os.stat_result) -> str:
    """What a file's key is reused for: its size, modification and change times, inode."""
    return f"{stat.st_size} {stat.st_mtime_ns} {stat.st_ctime_ns} {stat.st_ino} "


def _create_tables(conn: sqlite3.Connection) -> None:
    """This version's tables (a cache of another version is emptied)."""
    for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        conn.execute(f"DROP TABLE {table}")
    conn.execute("CREATE TABLE files (path TEXT PRIMARY KEY, stat TEXT)")
    conn.execute("CREATE TABLE parsed (key TEXT PRIMARY KEY, head BLOB, body TEXT)")
    conn.execute("CREATE TABLE chunks (key TEXT PRIMARY KEY, value BLOB, texts BLOB)")
    conn.execute("CREATE TABLE vectors (key TEXT PRIMARY KEY, value BLOB)")
    conn.execute("CREATE TABLE state (name TEXT PRIMARY KEY, value BLOB)")
    conn.execute(f"PRAGMA user_version = {SCHEMA}")


def cached_wheel(cache: BuildCache | None, folder: Path) -> Path:
    """The ragspine_lite wheel :func:`~.site_files.pack_wheel` packs into ``folder``, from the
    cache while the package's sources are the same."""
    from ragspine_lite.bundle.site_files import pack_wheel

    def packed() -> bytes:
        wheel = pack_wheel(folder)
        return wheel.name.encode("utf-8") + b"\n" + wheel.read_bytes()

    if cache is None:
        return pack_wheel(folder)
    name, _, data = cache.made("wheel", [], packed).partition(b"\n")
    target = folder / name.decode("utf-8")
    if not target.exists():
        folder.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return target


def cached_stdlib(cache: BuildCache | None, pyodide_dir: Path, target: Path,
                  wheels: list[Path]) -> None:
    """:func:`~.stdlib.write_site_stdlib`, from the cache while Pyodide's archive and the
    wheels are the same."""
    from ragspine_lite.bundle.stdlib import STDLIB_NAME, write_site_stdlib

    def trimmed() -> bytes:
        write_site_stdlib(pyodide_dir, target, wheels)
        return (target / STDLIB_NAME).read_bytes()

    if cache is None:
        write_site_stdlib(pyodide_dir, target, wheels)
        return
    inputs = [(pyodide_dir / STDLIB_NAME).read_bytes(), *(w.read_bytes() for w in wheels)]
    (target / STDLIB_NAME).write_bytes(cache.made("stdlib", inputs, trimmed))


def cached_precompressed(cache: BuildCache | None, path: Path) -> None:
    """:func:`~.site_files.write_precompressed`, from the cache while ``path``'s bytes (and
    whether ``brotli`` is importable) are the same: a rebuild does not compress them again."""
    import importlib.util

    from ragspine_lite.bundle.site_files import compressed_siblings, write_precompressed

    if cache is None:
        write_precompressed(path)
        return

    def siblings(data: bytes) -> dict[str, bytes]:
        brotli = b"brotli" if importlib.util.find_spec("brotli") else b""
        blob = cache.made(f"siblings {path.name}", [data, brotli],
                          lambda: marshal.dumps(compressed_siblings(data)))
        return dict(marshal.loads(blob))

    write_precompressed(path, siblings)


#: The name this cache had when it held parses only.
ParseCache = BuildCache


def _blob(vector: Sequence[float]) -> bytes:
    """A vector's exact floats: float32 when that loses nothing (ONNX models), else float64."""
    single = array("f", vector)
    if list(single) == list(vector):
        return b"f" + single.tobytes()
    return b"d" + array("d", vector).tobytes()


def _floats(blob: bytes) -> list[float]:
    values = array("f" if blob[:1] == b"f" else "d")
    values.frombytes(blob[1:])
    return values.tolist()
