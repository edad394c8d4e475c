"""The writer of bundle format 6 (:mod:`ragspine_lite.bundle.shards` describes the files):
:func:`write_shards` turns an exported chunk store into the files under ``data/``.

Files are cut where their content says (:func:`_groups`), at sizes that fit the site's file
budget (:func:`_plan`), carry no build clock, and are named by their bytes, so a rebuild of the
same documents writes the same files and an edit renames only the files its text lives in.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import sub
from pathlib import Path
from typing import Any, Protocol

from ragspine_lite.bundle.manifest import BUNDLE_META_TABLE, BundleFormatError
from ragspine_lite.bundle.packs import (
    REBUILD_HINT,
    content_path,
    name_hash,
    names_content,
    pack,
    unpack,
)
from ragspine_lite.bundle.shard_format import (
    CHUNK_FIELDS,
    FILTER_FIELDS,
    FRAGMENT_BYTES,
    LENGTHS_FILE_MIN_DF,
    LENGTHS_FILE_SHARE,
    MIN_INDEX_FILES,
    RESERVED_FILES,
    SITE_FILES,
    TERM_SHARD_BYTES,
    bundle_facts,
    byte_planes,
    fragment_path,
    index_text_fn_of,
    page_urls,
    section_rows,
    smallest_unsigned,
    term_shard_path,
)
from ragspine_lite.chunking.chunk_store import ChunkStore, ChunkStoreError, StoredChunk
from ragspine_lite.common.glossary import DEFAULT_GLOSSARY, Glossary
from ragspine_lite.common.sensitivity import is_restricted
from ragspine_lite.lexical.scoring import bm25_idf
from ragspine_lite.pipeline.stages import index_text
from ragspine_lite.text.words import tokenize

__all__ = [
    "IndexSource",
    "Reuse",
    "ShardReport",
    "glossary_lists",
    "read_source",
    "write_index",
    "write_shards",
]


@dataclass
class ShardReport:
    """What :func:`write_shards` wrote: the header path and every file (bundle-relative);
    ``kept``: how many of them a rebuild took from the previous build."""

    header: str = ""
    files: list[str] = field(default_factory=list)
    bytes_by_kind: dict[str, int] = field(default_factory=dict)
    count_by_kind: dict[str, int] = field(default_factory=dict)
    kept: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "header": self.header,
            "files": dict(sorted(self.count_by_kind.items())),
            "bytes": dict(sorted(self.bytes_by_kind.items())),
        }


#: ``term → [docnos, tfs]``, docnos ascending.
Postings = Mapping[str, Sequence[Sequence[int]]]


@dataclass
class IndexSource:
    """What the bundle files are written from: the export's facts, its active chunks in
    chunk-id order (a chunk's position is its docno), ``doc_id → (url, sections)`` and, for
    a hybrid bundle, the SQLite file holding the chunks' int8 vectors."""

    facts: dict[str, Any]
    chunks: list[StoredChunk]
    docs: Mapping[str, tuple[str, list[Any]]]
    vectors_db: Path | None = None


class Reuse(Protocol):
    """What a rebuild hands :func:`write_index` (:mod:`ragspine_lite.bundle.incremental`):
    the postings, and the previous build's file for a shard whose content did not change.
    It may also have ``checked(path)``: the size of a previous file it vouches for (as that
    build left it), which is then linked without being read."""

    previous: Path

    def postings(self, chunks: list[StoredChunk], fn: Any) -> tuple[array, Postings]: ...

    def term_file(self, terms: Sequence[str]) -> str | None: ...

    def fragment_file(self, start: int, part: Sequence[StoredChunk]) -> str | None: ...


class _Writer:
    def __init__(self, root: Path, report: ShardReport, previous: Path | None = None,
                 checked: Callable[[str], int | None] | None = None) -> None:
        self.root = root
        self.report = report
        self.previous = previous
        self.checked = checked

    def write(self, folder: str, kind: str, data: bytes, suffix: str = ".bin") -> str:
        return self.write_at(content_path(folder, kind, data, suffix), kind, data)

    def write_at(self, path: str, kind: str, data: bytes) -> str:
        """Write ``data`` as ``path`` (named by its bytes) unless it is there already."""
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            scratch = target.with_name(target.name + ".part")
            scratch.write_bytes(data)
            scratch.replace(target)
        return self._listed(path, kind, len(data))

    def keep(self, path: str | None, kind: str) -> str | None:
        """The previous build's file ``path`` (linked, else copied), when it is still there
        with the bytes its name says; ``None`` otherwise (the caller writes it anew)."""
        if path is None or self.previous is None:
            return None
        size = self._checked(path, kind)
        if size is None:
            return None
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            try:
                os.link(self.previous / path, target)
            except OSError:
                target.write_bytes((self.previous / path).read_bytes())
        self.report.kept += 1
        return self._listed(path, kind, size)

    def _checked(self, path: str, kind: str) -> int | None:
        """The size of the previous build's file ``path`` if it holds the bytes its name says
        (a rebuild's ``Reuse.checked`` may vouch for it without its being read)."""
        size = self.checked(path) if self.checked is not None else None
        if size is not None or self.previous is None:
            return size
        try:
            data = (self.previous / path).read_bytes()
        except OSError:
            return None
        if not names_content(path, data):
            return None
        return len(data)

    def keep_shard(self, path: str | None) -> str | None:
        """:meth:`keep` of a term shard and of the length files it names (``None``: any of
        them is missing or damaged; the caller writes the shard anew)."""
        listed = len(self.report.files)
        kept = self.keep(path, "t")
        if kept is None:
            return None
        meta, _ = unpack((self.root / kept).read_bytes(), kept)
        for own in meta["lengths"].values():
            if self.keep(own, "l") is None:
                self._unlist(listed)
                return None
        return kept

    def _unlist(self, listed: int) -> None:
        """Forget the files listed after the first ``listed`` (a partly kept shard)."""
        for path in self.report.files[listed:]:
            kind = path.rpartition("/")[2].partition("-")[0]
            size = (self.root / path).stat().st_size
            self.report.bytes_by_kind[kind] -= size
            self.report.count_by_kind[kind] -= 1
            self.report.kept -= 1
        del self.report.files[listed:]

    def _listed(self, path: str, kind: str, size: int) -> str:
        self.report.files.append(path)
        self.report.bytes_by_kind[kind] = self.report.bytes_by_kind.get(kind, 0) + size
        self.report.count_by_kind[kind] = self.report.count_by_kind.get(kind, 0) + 1
        return path


def index_file_budget(other_files: int) -> int:
    """Term shards and text fragments a site may get beside ``other_files`` index files (its
    vectors'): what :data:`SITE_FILES` leaves after :data:`RESERVED_FILES`, at least
    :data:`MIN_INDEX_FILES`."""
    return max(MIN_INDEX_FILES, SITE_FILES - RESERVED_FILES - other_files)


Plan = list[tuple[int, int]]


def _plan(
    terms: tuple[Sequence[str], Sequence[int]], chunks: tuple[Sequence[str], Sequence[int]],
    budget: int,
) -> tuple[Plan, Plan]:
    """The runs of the term shards and of the text fragments (``(keys, sizes)`` each): at
    :data:`TERM_SHARD_BYTES` and :data:`FRAGMENT_BYTES` times the smallest power of two that
    keeps both kinds together within ``budget`` files (a step function of the content: small
    edits keep the same targets)."""
    scale = 1
    while True:
        plans = (_groups(*terms, TERM_SHARD_BYTES * scale),
                 _groups(*chunks, FRAGMENT_BYTES * scale))
        if len(plans[0]) + len(plans[1]) <= budget:
            return plans
        scale *= 2


#: One item in this many may open a new file once the current one holds half its target.
CUT_ODDS = 4


def _groups(keys: Sequence[str], sizes: Sequence[int], target: int) -> list[tuple[int, int]]:
    """Consecutive ``[start, end)`` runs of items whose sizes add up to about ``target``.

    Content-defined cuts: a run ends before an item whose key hashes to a cut point once it
    holds ``target // 2`` bytes (or at ``2 * target``), so an edit moves the cuts near it
    only and every other file keeps its bytes, hence its name. An item of ``target // 2`` bytes
    or more has a run of its own: whoever reads a common word's postings reads nothing else,
    and whoever reads a word beside it does not read them.
    """
    out: list[tuple[int, int]] = []
    start, acc, big = 0, 0, False
    half = target // 2
    for i, (key, size) in enumerate(zip(keys, sizes, strict=True)):
        if acc and (big or size >= half or acc >= 2 * target or (
            acc >= half and zlib.crc32(key.encode("utf-8")) % CUT_ODDS == 0
        )):
            out.append((start, i))
            start, acc = i, 0
        acc += size
        big = size >= half
    if start < len(sizes):
        out.append((start, len(sizes)))
    return out


def read_source(db_path: Path) -> IndexSource:
    """The exported chunk store ``db_path`` as an :class:`IndexSource` (RESTRICTED chunks
    and duplicate chunk ids refused); the store is closed again."""
    store = ChunkStore(db_path, read_only=True)
    try:
        try:
            rows = store.execute_read(f"SELECT key, value FROM {BUNDLE_META_TABLE}")
        except ChunkStoreError:
            raise BundleFormatError(
                f"{str(db_path)!r} is not an exported bundle store (no {BUNDLE_META_TABLE}): "
                f"{REBUILD_HINT}"
            ) from None
        facts = bundle_facts(((r["key"], r["value"]) for r in rows), str(db_path))
        chunks = sorted(store.iter_chunks(), key=lambda c: c.chunk_id)
        check_chunks(chunks, str(db_path))
        docs = _documents(store)
    finally:
        store.close()
    return IndexSource(facts, chunks, docs, db_path if facts.get("vectors") else None)


def check_chunks(chunks: Sequence[StoredChunk], where: str) -> None:
    """Refuse a RESTRICTED chunk or a chunk id used twice."""
    from ragspine_lite.bundle.leaks import RestrictedLeakError

    if any(is_restricted(c.sensitivity) for c in chunks):
        raise RestrictedLeakError(f"a RESTRICTED chunk is in the exported store {where!r}")
    if len({c.chunk_id for c in chunks}) != len(chunks):
        raise BundleFormatError(f"{where!r} has duplicate chunk ids: {REBUILD_HINT}")


def postings_of(token_lists: Iterable[list[str]]) -> tuple[array, dict[str, list[array]]]:
    """Lengths by docno and, per term, ``[docnos, tfs]`` in docno order (4-byte arrays: half
    the memory of lists of ints)."""
    lengths = array("I")
    docs: defaultdict[str, array] = defaultdict(_uints)
    tfs: defaultdict[str, array] = defaultdict(_uints)
    for docno, tokens in enumerate(token_lists):
        lengths.append(len(tokens))
        for term, tf in Counter(tokens).items():
            docs[term].append(docno)
            tfs[term].append(tf)
    return lengths, {term: [d, tfs[term]] for term, d in docs.items()}


def _own_file_df(n_docs: int) -> int:
    """The document frequency from which a term's per-posting lengths get a file of their own."""
    return max(LENGTHS_FILE_MIN_DF, -(-n_docs // LENGTHS_FILE_SHARE))


def _uints() -> array:
    return array("I")


def _term_shard(
    out: _Writer, terms: Sequence[str], postings: Postings, lengths: array
) -> bytes:
    """One postings shard: per term its entry, delta-coded docnos (in byte planes), tfs, idf
    and the token
    count of each posting's chunk (``lens``; a very common term's in a file of its own, written
    here, which the shard names)."""
    entries: list[list[Any]] = []
    docs: list[int] = []
    tfs: list[int] = []
    lens: list[int] = []
    own: dict[str, str] = {}
    idfs = array("d")
    own_df = _own_file_df(len(lengths))
    for term in terms:
        d, f = postings[term]
        dl = list(map(lengths.__getitem__, d))
        entries.append([term, len(d), max(f), min(dl), len(d)])
        docs.append(d[0])
        docs.extend(map(sub, d[1:], d))
        tfs.extend(f)
        idfs.append(bm25_idf(len(lengths), len(d)))
        if len(d) >= own_df:
            own[term] = out.write(
                "data/terms", "l", pack({"term": term}, {"lens": smallest_unsigned(dl)})
            )
        else:
            lens.extend(dl)
    arrays = {"doc_planes": byte_planes(array("I", docs)), "tfs": smallest_unsigned(tfs),
              "idf": idfs, "lens": smallest_unsigned(lens)}
    return pack({"terms": entries, "lengths": own}, arrays)


def _term_items(postings: Postings) -> tuple[list[str], list[int]]:
    """The terms in order and the raw bytes each takes in a shard (about)."""
    terms = sorted(postings)
    df = getattr(postings, "df", None)  # a rebuild's postings count without slicing
    dfs = map(df, terms) if df is not None else (len(postings[t][0]) for t in terms)
    return terms, [len(t.encode("utf-8")) + 16 + 5 * n for t, n in zip(terms, dfs, strict=True)]


def _write_terms(
    out: _Writer, terms: list[str], plan: Plan, postings: Postings, lengths: array,
    reuse: Reuse | None = None,
) -> tuple[dict[str, Any], array]:
    """The header's ``bm25`` directory entries and the name hash of every term shard."""
    first_terms, hashes = [], array("I")
    for start, end in plan:
        group = terms[start:end]
        kept = out.keep_shard(reuse.term_file(group)) if reuse is not None else None
        if kept is None:
            data = _term_shard(out, group, postings, lengths)
            kept = out.write_at(term_shard_path(group[0], _sha(data)), "t", data)
        first_terms.append(group[0])
        hashes.append(name_hash(kept))
    every = pack({}, {"lens": smallest_unsigned(lengths)})
    path = content_path("data/terms", "n", every)
    kept = out.keep(path, "n") if reuse is not None else None
    every_path = kept or out.write("data/terms", "n", every)
    own = sorted({p for p in out.report.files if p.startswith("data/terms/l-")})
    return {"first_terms": first_terms, "lengths": every_path, "length_files": own}, hashes


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _documents(store: ChunkStore) -> dict[str, tuple[str, list[Any]]]:
    """``doc_id → (url, sections)`` from the export's page and section tables."""
    urls, sections = page_urls(store), section_rows(store)
    return {d: (urls.get(d, ""), sections.get(d, [])) for d in urls.keys() | sections.keys()}


def _chunk_items(chunks: list[StoredChunk]) -> tuple[list[str], list[int]]:
    """The chunk ids in docno order and the raw bytes each takes in a fragment (about)."""
    return [c.chunk_id for c in chunks], [len(c.text.encode("utf-8")) + 200 for c in chunks]


def _write_fragments(
    out: _Writer, chunks: list[StoredChunk], plan: Plan,
    docs: Mapping[str, tuple[str, list[Any]]], reuse: Reuse | None = None,
) -> dict[str, array]:
    """The header's arrays of the text fragments: their first docnos (as the byte planes of
    their gaps) and their name hashes."""
    gaps, hashes, previous = array("I"), array("I"), 0
    for start, end in plan:
        part = chunks[start:end]
        kept = out.keep(reuse.fragment_file(start, part), "f") if reuse is not None else None
        if kept is None:
            rows = [[_stable(c, name) for name in CHUNK_FIELDS] for c in part]
            doc_ids = dict.fromkeys(c.doc_id for c in part)
            listed = [[d, *docs.get(d, ("", []))] for d in doc_ids]
            data = pack({"start": start, "fields": list(CHUNK_FIELDS), "rows": rows,
                         "docs": listed})
            kept = out.write_at(fragment_path(start, _sha(data)), "f", data)
        gaps.append(start - previous)
        previous = start
        hashes.append(name_hash(kept))
    return {"fragment_start_planes": byte_planes(gaps), "fragment_hashes": hashes}


def _stable(chunk: StoredChunk, name: str) -> Any:
    """A chunk field as a fragment keeps it: the build's clock (``ingested_at``) is left out,
    so the same chunks make the same bytes on every build."""
    return "" if name == "ingested_at" else getattr(chunk, name)


def _write_filters(out: _Writer, chunks: list[StoredChunk]) -> str:
    distinct: dict[tuple[str, ...], int] = {}
    row_of = [
        distinct.setdefault(tuple(getattr(c, n) for n in FILTER_FIELDS), len(distinct))
        for c in chunks
    ]
    data = pack({"rows": [list(r) for r in distinct]}, {"row_of": smallest_unsigned(row_of)})
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
    source = read_source(Path(db_path))
    return write_index(source, bundle_root, progress=progress, coarse_min_rows=coarse_min_rows,
                       where=str(db_path))


def write_index(
    source: IndexSource,
    bundle_root: str | Path,
    *,
    progress: Callable[[int, int, str], None] | None = None,
    coarse_min_rows: int | None = None,
    reuse: Reuse | None = None,
    where: str = "the export",
) -> ShardReport:
    """:func:`write_shards` from an :class:`IndexSource`: the same files for the same source.
    A ``reuse`` gives the postings and, for a shard whose content did not change, the
    previous build's file, which is linked instead of packed again."""
    report = ShardReport()
    out = _Writer(Path(bundle_root), report, reuse.previous if reuse is not None else None,
                  getattr(reuse, "checked", None))
    chunks, facts = source.chunks, source.facts
    steps = ("vectors", "postings", "fragments", "filters", "header")

    def step(i: int) -> None:
        if progress is not None:
            progress(i + 1, len(steps), steps[i])

    fn = index_text_fn_of(facts, where)
    vectors = _vector_entry(out, source.vectors_db, facts, chunks, coarse_min_rows)
    budget = index_file_budget(len(report.files))  # the vectors' files come first
    step(0)
    lengths: array
    postings: Postings
    if reuse is not None:
        lengths, postings = reuse.postings(chunks, fn)
    else:
        lengths, postings = postings_of(tokenize(index_text(fn, c)) for c in chunks)
    terms, term_sizes = _term_items(postings)
    term_plan, fragment_plan = _plan((terms, term_sizes), _chunk_items(chunks), budget)
    del term_sizes
    bm25, term_hashes = _write_terms(out, terms, term_plan, postings, lengths, reuse)
    bm25 = {"n_docs": len(chunks), "total_length": sum(lengths), **bm25}
    step(1)
    fragments = _write_fragments(out, chunks, fragment_plan, source.docs, reuse)
    step(2)
    filters = _write_filters(out, chunks)
    step(3)
    meta: dict[str, Any] = {
        "facts": {k: json.dumps(v, ensure_ascii=False, sort_keys=True) for k, v in facts.items()},
        "bm25": bm25,
        "glossary": glossary_lists(),
        "filters": filters,
    }
    if vectors is not None:
        meta["vectors"] = vectors
    header = pack(meta, {"term_hashes": term_hashes, **fragments})
    report.header = out.write("data", "header", header)
    step(4)
    return report


def _vector_entry(
    out: _Writer,
    db_path: Path | None,
    facts: Mapping[str, Any],
    chunks: list[StoredChunk],
    min_rows: int | None,
) -> dict[str, Any] | None:
    """The header's ``vectors`` entry (``None`` for a bundle exported without vectors)."""
    if not facts.get("vectors"):
        return None
    if db_path is None:
        raise BundleFormatError("the export has vectors but no file holding them")
    from ragspine_lite.bundle.coarse import write_vectors  # it reads through this module

    return write_vectors(
        db_path,
        [c.chunk_id for c in chunks],
        lambda folder, data: out.write(folder, "v", data, ".i8"),
        model_id=str(facts.get("embedding_model_id") or ""),
        min_rows=min_rows,
    )
