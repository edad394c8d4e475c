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
"""

from __future__ import annotations

import json
import zlib
from array import array
from bisect import bisect_right
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from itertools import accumulate
from operator import sub
from pathlib import Path, PurePosixPath
from typing import Any

from ragspine_lite.bundle.manifest import (
    BUNDLE_META_TABLE,
    MANIFEST_NAME,
    PAGE_TABLE,
    SECTION_TABLE,
    BundleFormatError,
    check_format_version,
)
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
from ragspine_lite.chunking.chunk_store import ChunkStore, ChunkStoreError, StoredChunk
from ragspine_lite.common.glossary import DEFAULT_GLOSSARY, Glossary
from ragspine_lite.common.sensitivity import is_restricted
from ragspine_lite.lexical.inverted_index import BM25Index, Postings
from ragspine_lite.lexical.scoring import bm25_idf
from ragspine_lite.pipeline.stages import index_text
from ragspine_lite.text.words import tokenize

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
#: Raw (uncompressed) bytes aimed at per postings shard and per text fragment; a corpus too
#: big for :data:`MAX_FILES` files of that size gets bigger ones.
TERM_SHARD_BYTES = 32 * 1024
FRAGMENT_BYTES = 12 * 1024
#: Most files of one kind (postings shards, fragments) a bundle gets: static hosts cap counts.
MAX_FILES = 4000

#: The StoredChunk fields a fragment keeps (``active`` is always true in a bundle).
_CHUNK_FIELDS = tuple(f.name for f in fields(StoredChunk) if f.name != "active")
#: What a metadata filter may test (the bundle's filter fields).
_FILTER_FIELDS = ("doc_id", "title", "topic", "entity", "geography", "period", "language")


def _smallest_unsigned(values: Sequence[int]) -> array:
    largest = max(values, default=0)
    code = "B" if largest < 1 << 8 else "H" if largest < 1 << 16 else "I"
    return array(code, values)



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


def bundle_facts(rows: Iterable[tuple[str, str]], where: str) -> dict[str, Any]:
    """The export facts (``key → JSON value``) with a checked ``format_version``."""
    facts: dict[str, Any] = {}
    for key, value in rows:
        try:
            facts[key] = json.loads(value)
        except ValueError:
            facts[key] = value
    try:
        facts["format_version"] = check_format_version(facts.get("format_version"))
    except BundleFormatError as exc:
        raise BundleFormatError(f"{where}: {exc}") from None
    return facts


def index_text_fn_of(facts: Mapping[str, Any], where: str) -> Any:
    """The index text a bundle was exported with (its ``index_text`` fact; none if absent).

    A contextual bundle is searched with the same header; a setting this runtime cannot
    reproduce is refused.
    """
    from ragspine_lite.contextual import make_index_text_fn

    setting = str(facts.get("index_text") or "none")
    if setting not in ("none", "contextual"):
        raise BundleFormatError(
            f"{where!r} was indexed with index text {setting!r}, which this runtime cannot "
            "reproduce: rebuild the bundle with or without --contextual"
        )
    return make_index_text_fn(setting)


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


# ---------------------------------------------------------------- the writer


@dataclass
class ShardReport:
    """What :func:`write_shards` wrote: the header path and every file (bundle-relative)."""

    header: str = ""
    files: list[str] = field(default_factory=list)
    bytes_by_kind: dict[str, int] = field(default_factory=dict)
    count_by_kind: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "header": self.header,
            "files": dict(sorted(self.count_by_kind.items())),
            "bytes": dict(sorted(self.bytes_by_kind.items())),
        }


class _Writer:
    def __init__(self, root: Path, report: ShardReport) -> None:
        self.root = root
        self.report = report

    def write(self, folder: str, kind: str, data: bytes, suffix: str = ".bin") -> str:
        path = content_path(folder, kind, data, suffix)
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            scratch = target.with_name(target.name + ".part")
            scratch.write_bytes(data)
            scratch.replace(target)
        self.report.files.append(path)
        self.report.bytes_by_kind[kind] = self.report.bytes_by_kind.get(kind, 0) + len(data)
        self.report.count_by_kind[kind] = self.report.count_by_kind.get(kind, 0) + 1
        return path


def _target(total: int, floor: int) -> int:
    """Bytes per file: ``floor``, or ``floor`` times the power of two that keeps the files
    under ``MAX_FILES`` (a step function of ``total``: small edits keep the same target)."""
    target = floor
    while -(-2 * total // target) > MAX_FILES:  # a file holds at least half the target
        target *= 2
    return target


#: One item in this many may open a new file once the current one holds half its target.
CUT_ODDS = 4


def _groups(keys: Sequence[str], sizes: Sequence[int], target: int) -> list[tuple[int, int]]:
    """Consecutive ``[start, end)`` runs of items whose sizes add up to about ``target``.

    Content-defined cuts: a run ends before an item whose key hashes to a cut point once it
    holds ``target // 2`` bytes (or at ``2 * target``), so an edit moves the cuts near it
    only and every other file keeps its bytes, hence its name.
    """
    out: list[tuple[int, int]] = []
    start, acc = 0, 0
    for i, (key, size) in enumerate(zip(keys, sizes, strict=True)):
        if acc >= 2 * target or (
            acc >= target // 2 and zlib.crc32(key.encode("utf-8")) % CUT_ODDS == 0
        ):
            out.append((start, i))
            start, acc = i, 0
        acc += size
    if start < len(sizes):
        out.append((start, len(sizes)))
    return out


def _read_store(db_path: Path) -> tuple[dict[str, Any], list[StoredChunk], Any]:
    """Facts, active chunks by chunk id and the open store (RESTRICTED refused)."""
    from ragspine_lite.bundle.leaks import RestrictedLeakError

    store = ChunkStore(db_path, read_only=True)
    try:
        rows = store.execute_read(f"SELECT key, value FROM {BUNDLE_META_TABLE}")
    except ChunkStoreError:
        store.close()
        raise BundleFormatError(
            f"{str(db_path)!r} is not an exported bundle store (no {BUNDLE_META_TABLE}): "
            f"{REBUILD_HINT}"
        ) from None
    facts = bundle_facts(((r["key"], r["value"]) for r in rows), str(db_path))
    chunks = sorted(store.iter_chunks(), key=lambda c: c.chunk_id)
    if any(is_restricted(c.sensitivity) for c in chunks):
        store.close()
        raise RestrictedLeakError(f"a RESTRICTED chunk is in the exported store {str(db_path)!r}")
    ids = [c.chunk_id for c in chunks]
    if len(set(ids)) != len(ids):
        store.close()
        raise BundleFormatError(f"{str(db_path)!r} has duplicate chunk ids: {REBUILD_HINT}")
    return facts, chunks, store


def _postings_of(token_lists: Iterable[list[str]]) -> tuple[array, dict[str, list[list[int]]]]:
    """Lengths by docno and, per term, ``[docnos, tfs]`` in docno order."""
    lengths = array("I")
    docs: defaultdict[str, list[int]] = defaultdict(list)
    tfs: defaultdict[str, list[int]] = defaultdict(list)
    for docno, tokens in enumerate(token_lists):
        lengths.append(len(tokens))
        for term, tf in Counter(tokens).items():
            docs[term].append(docno)
            tfs[term].append(tf)
    return lengths, {term: [d, tfs[term]] for term, d in docs.items()}


def _write_terms(
    out: _Writer, postings: dict[str, list[list[int]]], lengths: array
) -> dict[str, Any]:
    terms = sorted(postings)
    sizes = [len(t.encode("utf-8")) + 16 + 5 * len(postings[t][0]) for t in terms]
    first_terms, paths = [], []
    for start, end in _groups(terms, sizes, _target(sum(sizes), TERM_SHARD_BYTES)):
        entries, docs, tfs, idfs = [], [], [], array("d")
        for term in terms[start:end]:
            d, f = postings[term]
            entries.append([term, len(d), max(f), min(map(lengths.__getitem__, d)), len(d)])
            docs.append(d[0])
            docs.extend(map(sub, d[1:], d))
            tfs.extend(f)
            idfs.append(bm25_idf(len(lengths), len(d)))
        arrays = {"docs": array("I", docs), "tfs": _smallest_unsigned(tfs), "idf": idfs}
        data = pack({"terms": entries}, arrays)
        first_terms.append(terms[start])
        paths.append(out.write("data/terms", "t", data))
    return {"first_terms": first_terms, "paths": paths}


def page_urls(store: ChunkStore) -> dict[str, str]:
    """``doc_id → url`` of an exported bundle (empty for a bundle built without URLs)."""
    try:
        rows = store.execute_read(f"SELECT doc_id, url FROM {PAGE_TABLE}")
    except ChunkStoreError:
        return {}
    return {r["doc_id"]: r["url"] for r in rows}


def section_rows(store: ChunkStore) -> dict[str, list[tuple[int, int, str, str, int]]]:
    """``doc_id → [(para_start, para_end, heading, anchor, level)]`` of an exported bundle."""
    try:
        rows = store.execute_read(
            f"SELECT doc_id, para_start, para_end, level, heading, anchor FROM {SECTION_TABLE} "
            "ORDER BY doc_id, para_start"
        )
    except ChunkStoreError:
        return {}
    out: dict[str, list[tuple[int, int, str, str, int]]] = {}
    for r in rows:
        out.setdefault(r["doc_id"], []).append(
            (int(r["para_start"]), int(r["para_end"]), r["heading"], r["anchor"], int(r["level"]))
        )
    return out


def _documents(store: ChunkStore) -> dict[str, tuple[str, list[Any]]]:
    """``doc_id → (url, sections)`` from the export's page and section tables."""
    urls, sections = page_urls(store), section_rows(store)
    return {d: (urls.get(d, ""), sections.get(d, [])) for d in urls.keys() | sections.keys()}


def _write_fragments(
    out: _Writer, chunks: list[StoredChunk], docs: Mapping[str, tuple[str, list[Any]]]
) -> tuple[array, list[str]]:
    sizes = [len(c.text.encode("utf-8")) + 200 for c in chunks]
    keys = [c.chunk_id for c in chunks]
    starts, paths = array("I"), []
    for start, end in _groups(keys, sizes, _target(sum(sizes), FRAGMENT_BYTES)):
        part = chunks[start:end]
        rows = [[_stable(c, name) for name in _CHUNK_FIELDS] for c in part]
        doc_ids = dict.fromkeys(c.doc_id for c in part)
        listed = [[d, *docs.get(d, ("", []))] for d in doc_ids]
        data = pack({"start": start, "fields": list(_CHUNK_FIELDS), "rows": rows, "docs": listed})
        starts.append(start)
        paths.append(out.write("data/text", "f", data))
    return starts, paths


def _stable(chunk: StoredChunk, name: str) -> Any:
    """A chunk field as a fragment keeps it: the build's clock (``ingested_at``) is left out,
    so the same chunks make the same bytes on every build."""
    return "" if name == "ingested_at" else getattr(chunk, name)


def _write_filters(out: _Writer, chunks: list[StoredChunk]) -> str:
    distinct: dict[tuple[str, ...], int] = {}
    row_of = [
        distinct.setdefault(tuple(getattr(c, n) for n in _FILTER_FIELDS), len(distinct))
        for c in chunks
    ]
    data = pack({"rows": [list(r) for r in distinct]}, {"row_of": _smallest_unsigned(row_of)})
    return out.write("data/text", "m", data)


def glossary_lists(glossary: Glossary = DEFAULT_GLOSSARY) -> dict[str, list[list[str]]]:
    """The query rewriter's glossary as the header keeps it, ``{"metric", "entity"}`` →
    ``[[term, code], …]`` in dict order: what a reader outside Python expands queries with."""
    return {
        "metric": [[t, c] for t, c in glossary.metric_synonyms.items()],
        "entity": [[t, c] for t, c in glossary.entity_synonyms.items()],
    }


def write_shards(
    db_path: str | Path,
    bundle_root: str | Path,
    *,
    progress: Callable[[int, int, str], None] | None = None,
    coarse_min_rows: int | None = None,
) -> ShardReport:
    """Write the bundle files of the exported chunk store ``db_path`` under
    ``bundle_root/data/``; returns what was written (paths relative to ``bundle_root``).

    BM25 indexes each chunk's index text (the ``index_text`` fact, e.g. contextual headers),
    exactly as the SQLite path scores it. The chunk store is left as it is.
    ``progress(i, n, step)`` follows the steps. ``coarse_min_rows``: the vectors from which
    they get the coarse layout (default :data:`~ragspine_lite.bundle.coarse.COARSE_MIN_ROWS`).
    """
    root = Path(bundle_root)
    report = ShardReport()
    out = _Writer(root, report)
    facts, chunks, store = _read_store(Path(db_path))
    steps = ("postings", "fragments", "filters", "vectors", "header")

    def step(i: int) -> None:
        if progress is not None:
            progress(i + 1, len(steps), steps[i])

    try:
        fn = index_text_fn_of(facts, str(db_path))
        lengths, postings = _postings_of(tokenize(index_text(fn, c)) for c in chunks)
        bm25 = {"n_docs": len(chunks), "total_length": sum(lengths), **_write_terms(
            out, postings, lengths)}
        step(0)
        starts, fragment_paths = _write_fragments(out, chunks, _documents(store))
        step(1)
        filters = _write_filters(out, chunks)
        step(2)
        vectors = _vector_entry(out, Path(db_path), facts, chunks, coarse_min_rows)
        step(3)
    finally:
        store.close()
    meta: dict[str, Any] = {
        "facts": {k: json.dumps(v, ensure_ascii=False, sort_keys=True) for k, v in facts.items()},
        "bm25": bm25,
        "glossary": glossary_lists(),
        "fragments": fragment_paths,
        "filters": filters,
    }
    if vectors is not None:
        meta["vectors"] = vectors
    header = pack(meta, {"lengths": _smallest_unsigned(lengths), "fragment_starts": starts})
    report.header = out.write("data", "header", header)
    step(4)
    return report


def _vector_entry(
    out: _Writer,
    db_path: Path,
    facts: Mapping[str, Any],
    chunks: list[StoredChunk],
    min_rows: int | None,
) -> dict[str, Any] | None:
    """The header's ``vectors`` entry (``None`` for a bundle exported without vectors)."""
    if not facts.get("vectors"):
        return None
    from ragspine_lite.bundle.coarse import write_vectors  # it reads through this module

    return write_vectors(
        db_path,
        [c.chunk_id for c in chunks],
        lambda folder, data: out.write(folder, "v", data, ".i8"),
        model_id=str(facts.get("embedding_model_id") or ""),
        min_rows=min_rows,
    )
