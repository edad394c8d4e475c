"""Bundle format 6: the chunk store split into small files a browser fetches per query.

A visitor should pay for what a query reads, not for the whole corpus. :func:`write_shards`
turns an exported chunk store into files under the bundle's ``data/`` folder:

- ``header-<h>.bin``: the bundle facts, the BM25 statistics (``n_docs``, ``total_length``),
  the query rewriter's glossary, and directories: the first term and the name hash of every
  postings shard, the first document (as gaps, in byte planes) and the name hash of every text
  fragment, the token-count and length files, the filter-metadata file and the vector shards;
- ``terms/t-<slot>-<h8>.bin``: the postings of a sorted range of terms (docnos delta-coded, stored
  as byte planes: :func:`~ragspine_lite.bundle.shard_format.byte_planes`), each
  term's BM25 IDF as a float64, computed once at build time (every reader, Python or
  the worker's JavaScript lane, uses that very value: no two ``log`` implementations), and
  each posting's chunk's token count (``lens``), so a query reads the lengths of the chunks
  it scores and nothing else. A term held by at least one chunk in
  :data:`~ragspine_lite.bundle.shard_format.LENGTHS_FILE_SHARE` (and
  :data:`~ragspine_lite.bundle.shard_format.LENGTHS_FILE_MIN_DF` chunks) keeps those counts in
  ``terms/l-<h>.bin``, named by the shard: a top-k search reads it only when it scores every
  posting of that term (a pruned search looks such a term up in chunks it already counted);
- ``terms/n-<h>.bin``: every chunk's token count (read when a search filters);
- ``text/f-<first docno>-<h8>.bin``: the chunks of a range of documents, with their pages'
  URLs and sections;
- ``text/m-<h>.bin``: what metadata filters test, per chunk (read only when a search filters);
- ``vectors/v-<h>.i8``: int8 chunk vectors (:mod:`ragspine_lite.bundle.dense`).

A document number (docno) is the chunk's position in ascending ``chunk_id`` order, so a tie
broken by docno is broken by chunk id. Every name carries the first 16 hex digits of its
file's sha256 (immutable, cacheable names), a term shard's and a fragment's the first 8 after
a slot of their own (:func:`~ragspine_lite.bundle.shard_format.term_shard_path`,
:func:`~ragspine_lite.bundle.shard_format.fragment_path`): the header keeps 4 bytes per file
of the thousands a large site has. The reader checks them. Term shards and fragments are cut
at sizes that keep a site within :data:`~ragspine_lite.bundle.shard_format.SITE_FILES` files.
``.bin`` files are "packs": ``zlib(JSON line + "\\n" + binary arrays)``, see :func:`pack`.

:class:`ShardedBundle` reads them through a :class:`BundleFiles` (a folder on CPython; in the
browser worker, prefetched bytes or a synchronous fetch) and keeps decoded files in an LRU
cache; :class:`ShardedBM25Index` is the same BM25 scorer as the SQLite index over them, so
scores and rankings are bit-identical.

This module is the reader; the writer is :mod:`ragspine_lite.bundle.shard_writer` and what
both share is :mod:`ragspine_lite.bundle.shard_format` (their names stay importable here).
"""

from __future__ import annotations

import contextlib
import json
from array import array
from bisect import bisect_left, bisect_right, insort
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import PurePosixPath
from typing import Any, cast

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
    fragment_path,
    from_byte_planes,
    index_text_fn_of,
    page_urls,
    section_rows,
    term_shard_path,
)
from ragspine_lite.bundle.shard_writer import ShardReport, glossary_lists, write_shards
from ragspine_lite.chunking.chunk_store import StoredChunk
from ragspine_lite.lexical.inverted_index import BM25Index, CandidateSet, Postings

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "BundleFiles",
    "DirectoryFiles",
    "MissingFile",
    "ShardReport",
    "ShardedBM25Index",
    "ShardedBundle",
    "TokenCounts",
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
    """One postings shard: term → (df, max_tf, min_len, offset, count, idf), decoded per term;
    its postings' token counts: term → an offset in ``lens`` or the path of its own file."""

    def __init__(self, meta: dict[str, Any], arrays: dict[str, array]) -> None:
        self.entries: dict[str, tuple[int, int, int, int, int, float]] = {}
        self.own: dict[str, str] = meta["lengths"]
        self.lens_at: dict[str, int] = {}
        offset = at = 0
        idfs = arrays["idf"]
        for i, (term, df, max_tf, min_len, count) in enumerate(meta["terms"]):
            self.entries[term] = (df, max_tf, min_len, offset, count, idfs[i])
            offset += count
            if term not in self.own:
                self.lens_at[term] = at
                at += count
        self.docs = from_byte_planes(arrays["doc_planes"])
        self.tfs = arrays["tfs"]
        self.lens = arrays["lens"]
        if at != len(self.lens):
            raise BundleFormatError(f"a term shard's token counts do not match its postings: "
                                    f"{REBUILD_HINT}")
        self.decoded: dict[str, Postings] = {}
        self.cost = 12 * offset

    def lengths(self, term: str) -> array | str:
        """The token counts of ``term``'s postings, or the path of the file holding them."""
        own = self.own.get(term)
        if own is not None:
            return own
        at, count = self.lens_at[term], self.entries[term][4]
        return self.lens[at : at + count]

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


class _Lengths:
    """Token counts: one term's postings' (``l-``) or every chunk's (``n-``)."""

    def __init__(self, meta: dict[str, Any], arrays: dict[str, array]) -> None:
        self.lens = arrays["lens"]
        self.cost = 4 * len(self.lens)


_UNKNOWN = 0xFFFFFFFF


class TokenCounts:
    """The chunks' token counts as a bundle's reader learns them: from the postings it has
    read (their ``lens``), else from a common term's own file holding the chunk, else from
    the token-count file (every chunk)."""

    def __init__(self, bundle: ShardedBundle) -> None:
        self.bundle = bundle
        self.known = array("I", [_UNKNOWN]) * bundle.n_docs
        self.pending: list[tuple[array, str]] = []  # (docnos, own file), fewest first
        self.complete = False

    def __len__(self) -> int:
        return len(self.known)

    def __getitem__(self, docno: int) -> int:
        found = self.known[docno]
        return found if found != _UNKNOWN else self._miss(docno)

    def learn(self, docs: array, lens: array | str) -> None:
        """The token counts of the postings ``docs`` (or the file holding them)."""
        if self.complete:
            return
        if isinstance(lens, str):
            insort(self.pending, (docs, lens), key=lambda entry: len(entry[0]))
            return
        known = self.known
        for d, n in zip(docs, lens, strict=True):
            known[d] = n

    def _miss(self, docno: int) -> int:
        if not 0 <= docno < len(self.known):
            raise IndexError(f"docno {docno!r} is not in this bundle")
        for i, (docs, path) in enumerate(self.pending):
            k = bisect_left(docs, docno)
            if k < len(docs) and docs[k] == docno:
                lens = self.bundle.load_lengths(path)
                del self.pending[i]
                self.learn(docs, lens)
                return self.known[docno]
        self.load_every()
        return self.known[docno]

    def load_every(self) -> None:
        """Read the token-count file (every chunk's count)."""
        if not self.complete:
            self.known = array("I", self.bundle.load_lengths(self.bundle.lengths_path))
            self.pending.clear()
            self.complete = True


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
    "l": _Lengths,
    "n": _Lengths,
}


# ---------------------------------------------------------------- the reader


class MissingFile(Exception):
    """A file a search would read next, while :meth:`ShardedBundle.planning`."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class ShardedBundle:
    """A format-5 bundle read file by file through ``files``, decoded files kept in an LRU.

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
        self.term_paths = list(map(term_shard_path, self.term_starts, arrays["term_hashes"]))
        self.lengths_path: str = bm25["lengths"]
        self.length_paths: list[str] = bm25["length_files"]
        gaps = from_byte_planes(arrays["fragment_start_planes"])
        self.fragment_starts = array("I", accumulate(gaps))
        self.fragment_paths = list(map(fragment_path, self.fragment_starts,
                                       arrays["fragment_hashes"]))
        self.filter_path: str = meta["filters"]
        self.vectors: dict[str, Any] | None = meta.get("vectors")
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._cached = 0
        self._docs: dict[str, tuple[str, list[tuple[Any, ...]]]] = {}
        self.token_counts = TokenCounts(self)
        self._planning = False

    @contextlib.contextmanager
    def planning(self) -> Iterator[None]:
        """Within: reading a file not cached raises :class:`MissingFile` instead (what a
        prefetch asks for next)."""
        self._planning = True
        try:
            yield
        finally:
            self._planning = False

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
        if self._planning:
            raise MissingFile(path)
        value = self._decode(path, self._fetch(path))
        self._keep(path, value)
        return value

    def paths(self) -> list[str]:
        """Every term shard, text fragment, filter, token-count and length file the header
        lists (what a cache of this bundle may keep)."""
        return [*self.term_paths, *self.fragment_paths, self.filter_path, self.lengths_path,
                *self.length_paths]

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
        if path is None:
            return None
        shard: _TermShard = self._load(path)
        fresh = term not in shard.decoded
        found = shard.postings(term)
        if found is not None and fresh:
            self.token_counts.learn(found.docs, shard.lengths(term))
        return found

    def load_lengths(self, path: str) -> array:
        """The token counts of a length file (a common term's, or the every-chunk file)."""
        lengths: _Lengths = self._load(path)
        return lengths.lens

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
        return cast(Sequence[int], self.bundle.token_counts)  # indexed by docno, sized

    def _norms(self, k1: float, b: float, avgdl: float, cand: Any) -> None:
        """No per-chunk table: the token counts are read with the postings that need them."""
        return None

    def candidates(self, docnos: Iterable[int]) -> CandidateSet:
        self.bundle.token_counts.load_every()  # a filter's candidates: any chunk may be one
        return super().candidates(docnos)

    def _chunk_ids(self, docnos: Iterable[int]) -> dict[int, str]:
        return {d: docno_key(d) for d in docnos}


