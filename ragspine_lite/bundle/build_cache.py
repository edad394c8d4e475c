"""What a rebuild reuses: every document's parse and chunks, the chunks' vectors, and the index
the previous build wrote.

A site build keeps ``.OUT.cache/build.db`` beside ``--out`` (SQLite, never part of the site):

- ``parsed``: each document's body, metadata and sections, keyed by the sha256 of its bytes, its
  path and the load settings (:meth:`BuildCache.key`);
- ``chunks``: each exported document's chunks, keyed by what they are made from (its body,
  metadata, sections and URL, and the chunk settings: :mod:`ragspine_lite.bundle.incremental`);
- ``vectors``: a hybrid build's float vectors, keyed by the model id and the embedded text;
- ``state``: the previous build's postings and the content of its index files
  (:class:`~ragspine_lite.bundle.incremental.IndexState`).

Every key is salted with the package's sources: a changed parser or chunker never reuses
anything. RESTRICTED documents are never written to it (their parse, chunks and text are
neither cached nor embedded), and deleted rows are overwritten (``secure_delete``). The whole
build is one transaction: :meth:`BuildCache.close` commits it once the site is in place and
drops the entries this build did not use; a failed or refused build calls
:meth:`BuildCache.abort`, which leaves the cache as it was. ``--clean``
(``build_site(clean=True)``) deletes the cache first.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ragspine_lite.chunking.chunking import DocumentMeta
from ragspine_lite.chunking.sources import Section
from ragspine_lite.common.sensitivity import is_restricted

__all__ = [
    "CACHE_FILE",
    "BuildCache",
    "ParseCache",
    "cache_dir",
    "cached_stdlib",
    "cached_wheel",
    "package_digest",
]

CACHE_FILE = "build.db"
Parsed = tuple[str, DocumentMeta, list[Section]]
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
        self.salt = json.dumps([package_digest(), settings], sort_keys=True)
        self.conn = sqlite3.connect(folder / CACHE_FILE, isolation_level=None)
        self.conn.execute("PRAGMA secure_delete = ON")  # a dropped row leaves no text behind
        for table in TABLES:
            self.conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, "
                              "value BLOB)")
        self.conn.execute("CREATE TABLE IF NOT EXISTS state (name TEXT PRIMARY KEY, value BLOB)")
        self.conn.execute("BEGIN")  # one transaction: committed by close
        self.used: dict[str, set[str]] = {table: set() for table in TABLES}
        self.hits = 0

    @staticmethod
    def clear(folder: Path) -> None:
        shutil.rmtree(folder, ignore_errors=True)

    # -- parses ------------------------------------------------------------------------------

    def key(self, path: Path, rel: str) -> str:
        """The sha256 of the file's bytes, its path and the load settings."""
        digest = hashlib.sha256(self.salt.encode("utf-8"))
        digest.update(rel.encode("utf-8") + b"\0" + path.read_bytes())
        return digest.hexdigest()

    def get(self, key: str) -> Parsed | None:
        return self.get_many([key])[0]

    def get_many(self, keys: Sequence[str]) -> list[Parsed | None]:
        """The cached parse of each key (``None`` where there is none), in one read."""
        wanted = set(keys)
        self.used["parsed"] |= wanted
        found = {k: _parsed(v) for k, v in self.conn.execute("SELECT key, value FROM parsed")
                 if k in wanted}
        self.hits += len(found)
        return [found.get(key) for key in keys]

    def put(self, key: str, parsed: Parsed) -> None:
        body, meta, sections = parsed
        if is_restricted(meta.sensitivity):
            return  # nothing RESTRICTED is written outside the build's memory
        doc = json.dumps([body, asdict(meta), [asdict(s) for s in sections]], ensure_ascii=False)
        self.conn.execute("INSERT OR REPLACE INTO parsed VALUES (?, ?)", (key, doc))

    # -- chunks, vectors ---------------------------------------------------------------------

    def chunks(self, keys: Iterable[str]) -> dict[str, Any]:
        """The cached chunk entries of ``keys`` (JSON values) that exist; all become used."""
        wanted = set(keys)
        self.used["chunks"] |= wanted
        rows = self.conn.execute("SELECT key, value FROM chunks")
        return {k: json.loads(v) for k, v in rows if k in wanted}

    def chunk_entry(self, key: str) -> Any | None:
        """One chunk entry, not marked used (a previous build's, to compare with)."""
        row = self.conn.execute("SELECT value FROM chunks WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put_chunks(self, key: str, entry: Any) -> None:
        """Cache a (non-RESTRICTED) document's chunk entry."""
        self.used["chunks"].add(key)
        value = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
        self.conn.execute("INSERT OR REPLACE INTO chunks VALUES (?, ?)", (key, value))

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
                self.conn.execute(f"CREATE TEMP TABLE used_{table} (key TEXT PRIMARY KEY)")
                self.conn.executemany(f"INSERT INTO used_{table} VALUES (?)",
                                      ((k,) for k in self.used[table]))
                self.conn.execute(
                    f"DELETE FROM {table} WHERE key NOT IN (SELECT key FROM used_{table})"
                )
            self.conn.execute("COMMIT")
        finally:
            self.conn.close()

    def abort(self) -> None:
        """A failed or refused build: keep the cache as it was (and leave nothing if it is new)."""
        try:
            self.conn.execute("ROLLBACK")
        finally:
            self.conn.close()
            if self.new:
                self.clear(self.folder)


def _parsed(value: str) -> Parsed:
    body, meta, sections = json.loads(value)
    return body, DocumentMeta(**meta), [Section(**s) for s in sections]


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
                          lambda: _pack_siblings(compressed_siblings(data)))
        return _unpack_siblings(blob)

    write_precompressed(path, siblings)


def _pack_siblings(siblings: dict[str, bytes]) -> bytes:
    """``{suffix: bytes}`` as one blob: per sibling a 4-byte suffix, an 8-byte length, bytes."""
    return b"".join(k.encode("ascii").ljust(4) + len(v).to_bytes(8, "little") + v
                    for k, v in siblings.items())


def _unpack_siblings(blob: bytes) -> dict[str, bytes]:
    out, at = {}, 0
    while at < len(blob):
        size = int.from_bytes(blob[at + 4 : at + 12], "little")
        out[blob[at : at + 4].decode("ascii").strip()] = blob[at + 12 : at + 12 + size]
        at += 12 + size
    return out


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
