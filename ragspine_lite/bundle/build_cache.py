"""What a rebuild reuses: every document's parse (body, metadata, sections), keyed by its bytes.

A site build keeps ``.OUT.cache/parsed.db`` beside ``--out`` (SQLite, never part of the
site). The next build into the same ``--out`` parses only the documents whose bytes, path or
load settings changed (all of them after any change to the package's sources) and forgets the
ones that are gone. RESTRICTED documents are never cached. ``--clean``
(``build_site(clean=True)``) deletes the cache first.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ragspine_lite.chunking.chunking import DocumentMeta
from ragspine_lite.chunking.sources import Section
from ragspine_lite.common.sensitivity import is_restricted

__all__ = ["CACHE_FILE", "ParseCache", "cache_dir"]

CACHE_FILE = "parsed.db"
Parsed = tuple[str, DocumentMeta, list[Section]]


def cache_dir(target: Path) -> Path:
    """``.NAME.cache`` beside the site folder ``target``."""
    return target.parent / f".{target.name}.cache"


def package_digest() -> str:
    """The sha256 of this ragspine_lite's Python sources: a changed parser never reuses a parse."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


class ParseCache:
    """Parsed documents by :meth:`key`; :meth:`close` drops the entries this build did not use."""

    def __init__(self, folder: Path, settings: dict[str, Any]) -> None:
        self.folder, self.new = folder, not folder.exists()
        folder.mkdir(parents=True, exist_ok=True)
        self.salt = json.dumps([package_digest(), settings], sort_keys=True)
        self.conn = sqlite3.connect(folder / CACHE_FILE, isolation_level=None)
        self.conn.execute("CREATE TABLE IF NOT EXISTS parsed (key TEXT PRIMARY KEY, doc TEXT)")
        self.conn.execute("BEGIN")  # one transaction: committed by close
        self.used: set[str] = set()
        self.hits = 0

    @staticmethod
    def clear(folder: Path) -> None:
        shutil.rmtree(folder, ignore_errors=True)

    def key(self, path: Path, rel: str) -> str:
        """The sha256 of the file's bytes, its path and the load settings."""
        digest = hashlib.sha256(self.salt.encode("utf-8"))
        digest.update(rel.encode("utf-8") + b"\0" + path.read_bytes())
        return digest.hexdigest()

    def get(self, key: str) -> Parsed | None:
        self.used.add(key)
        row = self.conn.execute("SELECT doc FROM parsed WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        body, meta, sections = json.loads(row[0])
        self.hits += 1
        return body, DocumentMeta(**meta), [Section(**s) for s in sections]

    def put(self, key: str, parsed: Parsed) -> None:
        body, meta, sections = parsed
        if is_restricted(meta.sensitivity):
            return  # nothing RESTRICTED is written outside the build's memory
        doc = json.dumps([body, asdict(meta), [asdict(s) for s in sections]], ensure_ascii=False)
        self.conn.execute("INSERT OR REPLACE INTO parsed VALUES (?, ?)", (key, doc))

    def close(self) -> None:
        """Forget the documents this build did not see; close the database."""
        try:
            self.conn.execute("CREATE TEMP TABLE used (key TEXT PRIMARY KEY)")
            self.conn.executemany("INSERT INTO used VALUES (?)", ((k,) for k in self.used))
            self.conn.execute("DELETE FROM parsed WHERE key NOT IN (SELECT key FROM used)")
            self.conn.execute("COMMIT")
        finally:
            self.conn.close()

    def abort(self) -> None:
        """A failed load: keep the cache as it was (and leave nothing if it is new)."""
        try:
            self.conn.execute("ROLLBACK")
        finally:
            self.conn.close()
            if self.new:
                self.clear(self.folder)
