"""Bundle format 4: the chunk store split into small files a browser fetches per query.

A visitor should pay for what a query reads, not for the whole corpus. :func:`write_shards`
turns an exported chunk store into files under the bundle's ``data/`` folder:

- ``header-<h>.bin``: the bundle facts, the BM25 statistics (``n_docs``, ``total_length``,
  token count per document), the query rewriter's glossary, and directories: the first
  term of every postings shard, the first document of every text fragment, the
  filter-metadata file and the vector shards;
- ``terms/t-<h>.bin``: the postings of a sorted range of terms (docnos delta-coded) and
  each term's BM25 IDF as a float64, computed once at build time (every reader, Python or
  the worker's JavaScript lane, uses that very value: no two ``log`` implementations);
- ``text/f-<h>.bin``: the chunks of a range of documents, with their pages' URLs and sections;
- ``text/m-<h>.bin``: what metadata filters test, per chunk (read only when a search filters);
- ``vectors/v-<h>.i8``: int8 chunk vectors (:mod:`ragspine_lite.bundle.dense`).

A document number (docno) is the chunk's position in ascending ``chunk_id`` order, so a tie
broken by docno is broken by chunk id. Every name carries the first 16 hex digits of its
file's sha256 (immutable, cacheable names); the reader checks them. ``.bin`` files are
"packs": ``zlib(JSON line + "\\n" + binary arrays)``, see :func:`pack`.

:class:`ShardedBundle` reads them through a :class:`BundleFiles` (a folder on CPython; in the
browser worker, prefetched bytes or a synchronous fetch) and keeps decoded files in an LRU
cache; :class:`ShardedBM25Index` is the same BM25 scorer as the SQLite index over them, so
scores and rankings are bit-identical.

This module is the reader; the writer is :mod:`ragspine_lite.bundle.shard_writer` and what
both share is :mod:`ragspine_lite.bundle.shard_format` (their names stay importable here).
"""

from __future__ import annotations

import json
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import PurePosixPath
from typing import Any

from ragspine_lite.bundle.manifest import MANIFEST_NAME, BundleFormatError, check_format_version
from ragspine_lite.bundle.packs import (
    REBUILD_HINT,
    BundleFiles,
    DirectoryFiles,
    as_bytes,
    check_content,
    content_path,
    docno_key,
    pack,
    read_checked,
    unpack,
)
from ragspine_lite.bundle.shard_format import (
    bundle_facts,
    index_text_fn_of,
    page_urls,
    section_rows,
)
from ragspine_lite.bundle.shard_writer import ShardReport, glossary_lists, write_shards
from ragspine_lite.chunking.chunk_store import StoredChunk
from ragspine_lite.lexical.inverted_index import BM25Index, Postings

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "BundleFiles",
    "DirectoryFiles",
    "ShardReport",
    "ShardedBM25Index",
    "ShardedBundle",
    "bundle_facts",
    "content_path",
    "docno_key",
    "glossary_lists",
    "index_text_fn_of",
    "pack",
    "page_urls",
    "read_checked",
    "section_rows",
    "unpack",
    "write_shards",
]

#: Decoded shards a :class:`ShardedBundle` keeps, in bytes of their decompressed size.
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024


# ---------------------------------------------------------------- decoded files


class _TermShard:
    """One postings shard: term → (df, max_tf, min_len, offset, count, idf), decoded per term."""

    def __init__(self, meta: dict[str, Any], arrays: dict[str, array]) -> None:
        self.entries: dict[str, tuple[int, int, int, int, int, float]] = {}
        offset = 0
        idfs = arrays["idf"]
        for i, (term, df, max_tf, min_len, count) in enumerate(meta["terms"]):
            self.entries[term] = (df, max_tf, min_len, offset, count, idfs[i])
            offset += count
        self.docs = arrays["docs"]
        self.tfs = arrays["tfs"]
        self.decoded: dict[str, Postings] = {}
        self.cost = 8 * offset

    def postings(self, term: str) -> Postings | None:
        found = self.decoded.get(term)
        if found is not None:
            return found
        entry = self.entries.get(term)
        if entry is None:
            return None
        df, max_tf, min_len, offset, count, idf = entry
        docs = array("I", accumulate(self.docs[offset : offset + count]))
        tfs = array("I", self.tfs[offset : offset + count])
        found = self.decoded[term] = Postings(docs, tfs, df, max_tf, min_len, idf)
        return found


class _Fragment:
    """The chunks of a docno range and the URL and sections of their documents."""

    def __init__(self, meta: dict[str, Any], arrays: dict[str, array]) -> None:
        names = meta["fields"]
        self.start = int(meta["start"])
        self.chunks = [StoredChunk(**dict(zip(names, row, strict=True))) for row in meta["rows"]]
        self.docs = {
            doc_id: (url, [tuple(s) for s in sections])
            for doc_id, url, sections in meta["docs"]
        }
        self.cost = sum(len(c.text) for c in self.chunks) + 64 * len(self.chunks)


class _FilterRows:
    """Per docno, an object with the filter fields (one object per distinct row)."""

    def __init__(self, meta: dict[str, Any], arrays: dict[str, array]) -> None:
        self.rows = [_FilterRow(*row) for row in meta["rows"]]
        self.row_of = arrays["row_of"]
        self.cost = 8 * len(self.row_of) + 100 * len(self.rows)


@dataclass(frozen=True)
class _FilterRow:
    doc_id: str
    title: str
    topic: str
    entity: str
    geography: str
    period: str
    language: str


_DECODERS: dict[str, Callable[[dict[str, Any], dict[str, array]], Any]] = {
    "t": _TermShard,
    "f": _Fragment,
    "m": _FilterRows,
}


# ---------------------------------------------------------------- the reader


class ShardedBundle:
    """A format-4 bundle read file by file through ``files``, decoded files kept in an LRU.

    ``header`` is the header's path (default: ``entry.index`` of the bundle's manifest).
    Raises :class:`BundleFormatError` for a bundle of another format or a damaged file.
    """

    def __init__(
        self, files: BundleFiles, header: str | None = None, *,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self.files = files
        if header is None:
            header = _header_path(files)
        self.header_path = header
        meta, arrays = unpack(self._fetch(header), header)
        self.facts = bundle_facts(meta["facts"].items(), header)
        bm25 = meta["bm25"]
        self.n_docs = int(bm25["n_docs"])
        self.total_length = int(bm25["total_length"])
        self.term_starts: list[str] = bm25["first_terms"]
        self.term_paths: list[str] = bm25["paths"]
        self.lengths = arrays["lengths"]
        self.fragment_starts = arrays["fragment_starts"]
        self.fragment_paths: list[str] = meta["fragments"]
        self.filter_path: str = meta["filters"]
        self.vectors: dict[str, Any] | None = meta.get("vectors")
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._cached = 0
        self._docs: dict[str, tuple[str, list[tuple[Any, ...]]]] = {}

    def __repr__(self) -> str:
        return f"ShardedBundle({self.files!r}, {self.header_path!r})"

    # -- files --------------------------------------------------------------------------

    def _fetch(self, path: str) -> bytes:
        return read_checked(self.files, path)

    def provide(self, path: str, data: bytes) -> None:
        """Take ``path``'s bytes fetched ahead of a search (prefetch); checked and decoded now."""
        if path in self._cache:
            return
        data = as_bytes(data)
        check_content(path, data)
        self._keep(path, self._decode(path, data))

    def _decode(self, path: str, data: bytes) -> Any:
        kind = PurePosixPath(path).name.partition("-")[0]
        decoder = _DECODERS.get(kind)
        if decoder is None:
            raise ValueError(f"{path!r} is not a term shard, text fragment or filter file")
        return decoder(*unpack(data, path))

    def _keep(self, path: str, value: Any) -> None:
        self._cache[path] = value
        self._cached += value.cost
        if isinstance(value, _Fragment):
            self._docs.update(value.docs)
        while self._cached > self.cache_bytes and len(self._cache) > 1:
            _, old = self._cache.popitem(last=False)
            self._cached -= old.cost

    def _load(self, path: str) -> Any:
        value = self._cache.get(path)
        if value is not None:
            self._cache.move_to_end(path)
            return value
        value = self._decode(path, self._fetch(path))
        self._keep(path, value)
        return value

    def paths(self) -> list[str]:
        """Every term shard, text fragment and filter file the header lists."""
        return [*self.term_paths, *self.fragment_paths, self.filter_path]

    def missing(self, paths: Iterable[str]) -> list[str]:
        """The ``paths`` not cached yet, in order, without repeats."""
        return [p for p in dict.fromkeys(paths) if p not in self._cache]

    # -- postings -----------------------------------------------------------------------

    def term_path(self, term: str) -> str | None:
        """The postings shard that would hold ``term`` (``None``: before every shard)."""
        i = bisect_right(self.term_starts, term) - 1
        return self.term_paths[i] if i >= 0 else None

    def postings(self, term: str) -> Postings | None:
        path = self.term_path(term)
        return None if path is None else self._load(path).postings(term)

    # -- chunks -------------------------------------------------------------------------

    def fragment_path(self, docno: int) -> str:
        """The text fragment holding ``docno``'s chunk."""
        i = bisect_right(self.fragment_starts, docno) - 1
        if not 0 <= docno < self.n_docs or i < 0:
            raise IndexError(f"docno {docno!r} is not in this bundle ({self.n_docs} chunks)")
        return self.fragment_paths[i]

    def chunks(self, docnos: Iterable[int]) -> dict[int, StoredChunk]:
        """The chunks of these docnos (their fragments are read)."""
        out: dict[int, StoredChunk] = {}
        for d in sorted(set(docnos)):
            fragment = self._load(self.fragment_path(d))
            out[d] = fragment.chunks[d - fragment.start]
        return out

    def document(self, doc_id: str) -> tuple[str, list[tuple[Any, ...]]] | None:
        """``(url, sections)`` of a document one of whose chunks was read (else ``None``)."""
        return self._docs.get(doc_id)

    def filter_rows(self) -> _FilterRows:
        """Per docno, the fields metadata filters test (reads the filter file)."""
        rows: _FilterRows = self._load(self.filter_path)
        return rows


def _header_path(files: BundleFiles) -> str:
    where = MANIFEST_NAME
    try:
        manifest = json.loads(bytes(files.read(MANIFEST_NAME)).decode("utf-8"))
    except ValueError as exc:
        raise BundleFormatError(f"{where} is not valid JSON ({exc}): {REBUILD_HINT}") from None
    if not isinstance(manifest, dict):
        raise BundleFormatError(f"{where} must be a JSON object: {REBUILD_HINT}")
    check_format_version(manifest.get("format_version"))
    header = (manifest.get("entry") or {}).get("index")
    if not isinstance(header, str) or not header:
        raise BundleFormatError(f"{where} names no sharded index (entry.index): {REBUILD_HINT}")
    return header


class ShardedBM25Index(BM25Index):
    """:class:`BM25Index` over a :class:`ShardedBundle`: the same scorer as the SQLite index.

    Hits carry :func:`docno_key` strings instead of chunk ids (they sort alike); read the
    chunks with :meth:`ShardedBundle.chunks`.
    """

    def __init__(self, bundle: ShardedBundle) -> None:
        self.bundle = bundle
        self.n_docs = bundle.n_docs
        self.total_length = bundle.total_length

    @property
    def has_duplicate_chunk_ids(self) -> bool:
        return False  # the writer refuses them

    def _postings(self, term: str) -> Postings | None:
        return self.bundle.postings(term)

    def _lengths(self) -> Sequence[int]:
        return self.bundle.lengths

    def _chunk_ids(self, docnos: Iterable[int]) -> dict[int, str]:
        return {d: docno_key(d) for d in docnos}


