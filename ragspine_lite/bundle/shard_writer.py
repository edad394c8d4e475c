"""The writer of bundle format 4 (:mod:`ragspine_lite.bundle.shards` describes the files):
:func:`write_shards` turns an exported chunk store into the files under ``data/``.

Files are cut where their content says (:func:`_groups`), carry no build clock, and are named
by their bytes, so a rebuild of the same documents writes the same files and an edit renames
only the files its text lives in.
"""

from __future__ import annotations

import json
import zlib
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import sub
from pathlib import Path
from typing import Any

from ragspine_lite.bundle.manifest import BUNDLE_META_TABLE, BundleFormatError
from ragspine_lite.bundle.packs import REBUILD_HINT, content_path, pack
from ragspine_lite.bundle.shard_format import (
    CHUNK_FIELDS,
    FILTER_FIELDS,
    FRAGMENT_BYTES,
    MAX_FILES,
    TERM_SHARD_BYTES,
    bundle_facts,
    index_text_fn_of,
    page_urls,
    section_rows,
    smallest_unsigned,
)
from ragspine_lite.chunking.chunk_store import ChunkStore, ChunkStoreError, StoredChunk
from ragspine_lite.common.glossary import DEFAULT_GLOSSARY, Glossary
from ragspine_lite.common.sensitivity import is_restricted
from ragspine_lite.lexical.scoring import bm25_idf
from ragspine_lite.pipeline.stages import index_text
from ragspine_lite.text.words import tokenize

__all__ = ["ShardReport", "glossary_lists", "write_shards"]


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
        arrays = {"docs": array("I", docs), "tfs": smallest_unsigned(tfs), "idf": idfs}
        data = pack({"terms": entries}, arrays)
        first_terms.append(terms[start])
        paths.append(out.write("data/terms", "t", data))
    return {"first_terms": first_terms, "paths": paths}


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
        rows = [[_stable(c, name) for name in CHUNK_FIELDS] for c in part]
        doc_ids = dict.fromkeys(c.doc_id for c in part)
        listed = [[d, *docs.get(d, ("", []))] for d in doc_ids]
        data = pack({"start": start, "fields": list(CHUNK_FIELDS), "rows": rows, "docs": listed})
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
    header = pack(meta, {"lengths": smallest_unsigned(lengths), "fragment_starts": starts})
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
