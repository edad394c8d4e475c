"""Export a document folder into a bundle chunk store, RESTRICTED-free, and prove it.

RESTRICTED documents never enter the exported store: they are set aside at load time, so no
text, title, metadata, posting or vector of theirs is written anywhere. Their count is all that
is reported. The self-check (:mod:`ragspine_lite.bundle.leaks`: :func:`restricted_needles`,
:func:`verify_no_leaks`) then reads the finished bundle, its databases row by row and every
other byte, for the RESTRICTED documents' text, titles and ids and for canary strings.

With an embedding backend, :func:`export_store` also writes one vector per exported chunk into
the same file (:class:`~ragspine_lite.vector.sqlite_store.SqliteVectorStore`, default table,
``model_id = embedding_model_id(backend)``, ``quantization="int8"``: exact integer scores that
the bundle's vector shards copy), so the bundle can be searched hybrid.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import sys
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ragspine_lite.bundle.leaks import (
    MIN_NEEDLE_CHARS,
    Leak,
    Needle,
    RestrictedLeakError,
    restricted_needles,
    scan_for_leaks,
    verify_no_leaks,
)
from ragspine_lite.bundle.manifest import (
    BUNDLE_FORMAT_VERSION,
    BUNDLE_META_TABLE,
    FACET_FIELDS,
    PAGE_TABLE,
    SECTION_TABLE,
)
from ragspine_lite.bundle.pages import is_html_source, page_url, rendered_path
from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.chunking.chunking import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    DocumentMeta,
    chunk_document,
)
from ragspine_lite.chunking.sources import (
    Section,
    discover_documents,
    load_document_sections,
)
from ragspine_lite.common.errors import RagspineError
from ragspine_lite.common.sensitivity import SQL_IS_RESTRICTED, is_restricted

__all__ = [
    "EMBEDDING_PHASE",
    "MIN_NEEDLE_CHARS",
    "CachedDocument",
    "ExportReport",
    "Leak",
    "Needle",
    "RestrictedLeakError",
    "SourceDocument",
    "assign_urls",
    "default_jobs",
    "embed_chunks",
    "export_facts",
    "export_store",
    "load_corpus",
    "restricted_needles",
    "scan_for_leaks",
    "shared_title_suffix",
    "strip_title_suffix",
    "verify_no_leaks",
    "write_pages",
    "write_sections",
]

#: The progress item prefix of :func:`export_store`'s embedding phase.
EMBEDDING_PHASE = "embedding"

Progress = Callable[[int, int, str], None]


@dataclass
class SourceDocument:
    """One loaded source document: where it came from, its body, metadata and sections.

    ``rel_path`` is the path relative to the folder it was found in (``/``-separated);
    ``url`` is set by :func:`assign_urls` (empty: results of the document link nowhere);
    ``source_key``: the build cache's key of the file's bytes, path and load settings (empty
    when loaded without a cache).
    """

    path: str
    body: str
    meta: DocumentMeta
    sections: list[Section] = field(default_factory=list)
    rel_path: str = ""
    url: str = ""
    source_key: str = ""

    @functools.cached_property
    def restricted(self) -> bool:
        """Whether the document is RESTRICTED (its label is set when it is loaded)."""
        return is_restricted(self.meta.sensitivity)

    def loaded(self) -> SourceDocument:
        """This document with its body in memory (a :class:`CachedDocument` reads it once)."""
        return self


class CachedDocument(SourceDocument):
    """A :class:`SourceDocument` whose body stays in the build cache: ``body`` reads it each
    time (a build holds no document's text it is not working on)."""

    @property  # type: ignore[override]
    def body(self) -> str:
        value = self.__dict__["body"]
        return value if isinstance(value, str) else str(value())

    @body.setter
    def body(self, value: Any) -> None:
        self.__dict__["body"] = value

    def loaded(self) -> SourceDocument:
        return SourceDocument(self.path, self.body, self.meta, self.sections, self.rel_path,
                              self.url, self.source_key)


@dataclass
class ExportReport:
    """What :func:`export_store` wrote (exported documents only) and what it set aside.

    ``vectors``/``embedding_model_id``/``embedding_dim`` are set only when chunk vectors were
    written; :meth:`as_dict` then has a ``vectors`` count too (and is unchanged otherwise).
    ``excluded_restricted_documents`` is for the build's local output only: :meth:`as_dict`
    (the public facts and manifest counts) says nothing about what was withheld.
    """

    documents: int = 0
    chunks: int = 0
    empty_documents: int = 0
    excluded_restricted_documents: int = 0
    languages: dict[str, int] = field(default_factory=dict)
    sections: int = 0
    pages: int = 0
    vectors: int = 0
    embedding_model_id: str = ""
    embedding_dim: int = 0

    def count(self, chunks: int, language: str) -> None:
        """One exported document of ``chunks`` chunks in ``language`` (empty: counted so)."""
        self.chunks += chunks
        if chunks:
            self.documents += 1
            self.languages[language] = self.languages.get(language, 0) + 1
        else:
            self.empty_documents += 1

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "documents": self.documents,
            "chunks": self.chunks,
            "empty_documents": self.empty_documents,
            "languages": dict(sorted(self.languages.items())),
            "sections": self.sections,
        }
        if self.pages:
            out["pages"] = self.pages
        if self.embedding_model_id:
            out["vectors"] = self.vectors
        return out


def _inside(path: Path, folders: Sequence[Path]) -> bool:
    resolved = path.resolve()
    return any(resolved == f or f in resolved.parents for f in folders)


def load_corpus(
    paths: Iterable[str | Path],
    *,
    progress: Progress | None = None,
    exclude: Iterable[str | Path] = (),
    jobs: int = 1,
    cache: Any | None = None,
    **defaults: str,
) -> list[SourceDocument]:
    """Discover and load every document (front matter, HTML, sections) before anything is written.

    ``defaults`` are :func:`load_document` keyword defaults (``sensitivity``, ``language`` …);
    files inside an ``exclude`` folder (such as the search site being built into the
    documents folder) are skipped. ``jobs`` > 1 parses in that many processes (CPython; the
    documents come back in the same order, so the result is the serial one). A ``cache``
    (:class:`~ragspine_lite.bundle.build_cache.ParseCache`) gives the documents whose bytes it
    has seen and keeps the others' parse. Raises
    ``ValueError`` when nothing is found or two files claim the same ``doc_id``.
    """
    path_list = list(paths)
    skipped = [Path(p).resolve() for p in exclude]
    found = discover_documents(path_list)
    inner = {r: [s for s in skipped if _inside(s, [r.resolve()])] for r in {r for _, r in found}}
    files = [(f, r) for f, r in found if not (inner[r] and _inside(f, inner[r]))]
    if not files:
        shown = ", ".join(repr(str(p)) for p in path_list)
        raise ValueError(f"no documents found in {shown}")
    docs: list[SourceDocument] = []
    seen: dict[str, str] = {}
    rels = [_relative(path, root) for path, root in files]
    for i, ((path, _), rel, key, (body, meta, sections)) in enumerate(
        _cached_or_parsed(files, rels, defaults, jobs, cache), 1
    ):
        if meta.doc_id in seen:
            raise ValueError(
                f"doc_id {meta.doc_id!r} is used by both {seen[meta.doc_id]!r} and {str(path)!r}"
            )
        seen[meta.doc_id] = str(path)
        kind = SourceDocument if isinstance(body, str) else CachedDocument
        docs.append(kind(str(path), body, meta, sections, rel_path=rel, source_key=key))
        if progress is not None:
            progress(i, len(files), str(path))
    strip_title_suffix(docs)
    return docs


def _relative(path: Path, root: Path) -> str:
    """``path`` relative to ``root``, ``/``-separated (found under it: no file system calls)."""
    text, top = str(path), str(root)
    if text.startswith(top) and text[len(top):len(top) + 1] == os.sep:
        return text[len(top) + 1:].replace(os.sep, "/")
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return Path(os.path.relpath(path, root)).as_posix()


#: Files a worker parses per task, and the fewest files worth starting processes for.
PARSE_CHUNK = 64
MIN_PARALLEL_FILES = 256


def default_jobs() -> int:
    """Processes a build parses with: the CPUs (at most 8), 1 where there are no processes."""
    if sys.platform == "emscripten":
        return 1
    return max(1, min(8, os.cpu_count() or 1))


def _parse_one(task: tuple[Path, Path, dict[str, str]]) -> tuple[str, DocumentMeta, list[Section]]:
    path, root, defaults = task
    return load_document_sections(path, root=root, **defaults)


def _cached_or_parsed(
    files: Sequence[tuple[Path, Path]], rels: Sequence[str], defaults: dict[str, str],
    jobs: int, cache: Any | None,
) -> Iterator[tuple[tuple[Path, Path], str, str, tuple[Any, DocumentMeta, list[Section]]]]:
    """``(file, its relative path, cache key, parse)`` in order: from ``cache`` when it has the
    file's bytes, else parsed (the key is empty without a cache)."""
    if cache is None:
        for file, rel, parse in zip(files, rels, _parsed(files, defaults, jobs), strict=True):
            yield file, rel, "", parse
        return
    keys = [cache.key(path, rel) for (path, _), rel in zip(files, rels, strict=True)]
    hits = cache.get_many(keys)
    fresh = _parsed([f for f, hit in zip(files, hits, strict=True) if hit is None],
                    defaults, jobs)
    try:
        for file, rel, key, hit in zip(files, rels, keys, hits, strict=True):
            if hit is None:
                hit = cache.put(key, next(fresh))
            yield file, rel, key, hit
    finally:
        fresh.close()


def _parsed(
    files: Sequence[tuple[Path, Path]], defaults: dict[str, str], jobs: int
) -> Generator[tuple[str, DocumentMeta, list[Section]], None, None]:
    """Every file's ``(body, meta, sections)``, in order; in ``jobs`` processes when it pays."""
    tasks = [(path, root, defaults) for path, root in files]
    if jobs <= 1 or len(tasks) < MIN_PARALLEL_FILES:
        yield from map(_parse_one, tasks)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(_parse_one, tasks, chunksize=PARSE_CHUNK)


# What separates a page's title from the site's name in generated ``<title>``s.
_TITLE_SEPARATORS = (" - ", " – ", " — ", " | ", " · ", " :: ", " « ", " » ")


def shared_title_suffix(titles: Sequence[str]) -> str:
    """The `` - Site name`` ending most titles share (MkDocs, Sphinx, Hugo, Docusaurus and
    VitePress put the site's name there), or ``""`` when fewer than two titles or not half
    of them end with it.

    >>> shared_title_suffix(["Setup - Docs", "Colors - Docs", "Docs", "Blog - Docs"])
    ' - Docs'
    """
    counts: dict[str, int] = {}
    for title in titles:
        cuts = {title[i:] for sep in _TITLE_SEPARATORS if (i := title.rfind(sep)) > 0}
        for suffix in cuts:
            counts[suffix] = counts.get(suffix, 0) + 1
    if not counts:
        return ""
    best = max(counts, key=lambda suffix: (counts[suffix], -len(suffix)))
    return best if counts[best] >= 2 and 2 * counts[best] >= len(titles) else ""


def strip_title_suffix(docs: Sequence[SourceDocument]) -> str:
    """Drop the site-name ending the exported HTML pages' titles share
    (:func:`shared_title_suffix`: "Changing the colors - Material for MkDocs" → "Changing the
    colors"); returns it. Markdown/text titles and RESTRICTED documents are left alone."""
    pages = [d for d in docs if is_html_source(d.rel_path) and not d.restricted]
    suffix = shared_title_suffix([d.meta.title for d in pages])
    if suffix:
        for doc in pages:
            if doc.meta.title.endswith(suffix):
                doc.meta.title = doc.meta.title[: -len(suffix)].rstrip()
    return suffix


def write_sections(conn: sqlite3.Connection, docs: Iterable[SourceDocument]) -> int:
    """(Re)create the section table and fill it for ``docs``; returns the row count."""
    conn.execute(f"DROP TABLE IF EXISTS {SECTION_TABLE}")
    conn.execute(
        f"CREATE TABLE {SECTION_TABLE} (doc_id TEXT NOT NULL, para_start INTEGER NOT NULL, "
        "para_end INTEGER NOT NULL, level INTEGER NOT NULL, heading TEXT NOT NULL, "
        "anchor TEXT NOT NULL)"
    )
    rows = [
        (d.meta.doc_id, s.para_start, s.para_end, s.level, s.heading, s.anchor)
        for d in docs
        for s in d.sections
    ]
    conn.executemany(f"INSERT INTO {SECTION_TABLE} VALUES (?, ?, ?, ?, ?, ?)", rows)
    return len(rows)


def assign_urls(docs: Iterable[SourceDocument], base_url: str = "/") -> dict[str, SourceDocument]:
    """Set every non-RESTRICTED document's ``url``; returns ``{bundle path: document}`` of the
    Markdown/text sources whose pages the build must render (see :mod:`.pages`).

    An HTML source links to itself under ``base_url``; another source to its rendered page
    (a path relative to the bundle; ``a.md`` and ``a.txt`` side by side keep their suffixes).
    """
    exported = [d for d in docs if not d.restricted]
    stems: dict[str, int] = {}
    for doc in exported:
        if not is_html_source(doc.rel_path):
            key = rendered_path(doc.rel_path)
            stems[key] = stems.get(key, 0) + 1
    to_render: dict[str, SourceDocument] = {}
    for doc in exported:
        if is_html_source(doc.rel_path):
            doc.url = page_url(doc.rel_path, base_url)
            continue
        target = rendered_path(doc.rel_path)
        if stems[target] > 1:
            target = rendered_path(doc.rel_path + ".html")
        doc.url = quote(target, safe="/")
        to_render[target] = doc
    return to_render


def write_pages(conn: sqlite3.Connection, docs: Iterable[SourceDocument]) -> int:
    """(Re)create the page table (``doc_id → url``) for ``docs`` with a URL; returns the rows."""
    conn.execute(f"DROP TABLE IF EXISTS {PAGE_TABLE}")
    conn.execute(f"CREATE TABLE {PAGE_TABLE} (doc_id TEXT PRIMARY KEY, url TEXT NOT NULL)")
    rows = [(d.meta.doc_id, d.url) for d in docs if d.url and not d.restricted]
    conn.executemany(f"INSERT INTO {PAGE_TABLE} VALUES (?, ?)", rows)
    return len(rows)


def export_store(
    docs: Sequence[SourceDocument],
    db_path: str | Path,
    *,
    max_chars: int = DEFAULT_CHUNK_CHARS,
    overlap_chars: int = DEFAULT_OVERLAP_CHARS,
    chunker: Any | None = None,
    progress: Progress | None = None,
    embedding_backend: Any | None = None,
    embedding_batch_size: int | None = None,
    index_text_fn: Any | None = None,
    lexical_index: bool = True,
) -> ExportReport:
    """Write the non-RESTRICTED ``docs`` into a new chunk store at ``db_path``.

    Ingest goes through :class:`~ragspine_lite.lexical.retrieval.NarrativeIndex` (the normal
    path, so whatever index it keeps is built too), then the section and bundle-meta tables
    are added (no ``VACUUM``: it may renumber the rowids the BM25 index refers to).
    ``progress(i, n, path)`` follows the ingest, document by document.

    With an ``embedding_backend`` every active chunk is then embedded (in batches of
    ``embedding_batch_size`` texts, default
    :data:`~ragspine_lite.vector.chunk_vectors.DEFAULT_SYNC_BATCH_SIZE`; progress items
    ``"embedding <chunk_id>"``) into a
    :class:`~ragspine_lite.vector.sqlite_store.SqliteVectorStore` in the same file (int8
    codes at a scale calibrated on the first batch), and the
    bundle facts record ``vectors``, ``embedding_model_id`` and ``embedding_dim``. Without
    one, no vector table is created. An ``index_text_fn`` (e.g. the contextual header) is
    what gets embedded, and the facts record its setting as ``index_text`` so the runtime
    searches with the same one. Raises ``FileExistsError`` if ``db_path`` exists and
    :class:`RestrictedLeakError` if a RESTRICTED row or vector is found after writing (it
    cannot be, by construction; the check guards changes).
    """
    from ragspine_lite.pipeline.retrievers import NarrativeIndex

    target = Path(db_path)
    if target.exists():
        raise FileExistsError(f"refusing to overwrite existing chunk store {str(target)!r}")
    target.parent.mkdir(parents=True, exist_ok=True)
    exported = [d for d in docs if not d.restricted]
    report = ExportReport(excluded_restricted_documents=len(docs) - len(exported))
    store = ChunkStore(target)
    try:
        store.init_schema()
        _ingest(store, exported, report, progress, (chunker, max_chars, overlap_chars))
        index = NarrativeIndex(  # attached after the writes: its BM25 index is built once
            store, max_chars=max_chars, overlap_chars=overlap_chars, chunker=chunker,
            index_text_fn=index_text_fn,
        )
        if lexical_index:
            store.sync_indexers()
        facets = _facets_of(store, target)
        if embedding_backend is not None:
            embed_chunks(store.iter_chunks(), embedding_backend, target, report, progress,
                         embedding_batch_size, index.persistence_policy, index.index_text_fn)
    finally:
        store.close()
    _write_facts(target, exported, report, facets, index_text_fn)
    return report


def _facets_of(store: ChunkStore, target: Path) -> dict[str, list[str]]:
    """The distinct values of every facet field, refusing a store with a RESTRICTED chunk."""
    leaked = store.execute_read(
        f"SELECT COUNT(*) AS n FROM narrative_chunk WHERE {SQL_IS_RESTRICTED}(sensitivity)"
    )
    if int(leaked[0]["n"]):
        raise RestrictedLeakError(
            f"{leaked[0]['n']} RESTRICTED chunk(s) reached the exported store {str(target)!r}"
        )
    return {
        name: sorted(
            r["v"]
            for r in store.execute_read(
                f"SELECT DISTINCT {name} AS v FROM narrative_chunk WHERE active = 1"
            )
            if r["v"]
        )
        for name in FACET_FIELDS
    }


def _write_facts(
    target: Path, exported: Sequence[SourceDocument], report: ExportReport,
    facets: dict[str, list[str]], index_text_fn: Any | None,
) -> None:
    """The section, page and bundle-meta tables of the exported store (one transaction)."""
    conn = sqlite3.connect(target, isolation_level=None)
    try:
        conn.execute("BEGIN")
        report.sections = write_sections(conn, (d for d in exported))
        report.pages = write_pages(conn, exported)
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {BUNDLE_META_TABLE} "
            "(key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )
        conn.executemany(
            f"INSERT OR REPLACE INTO {BUNDLE_META_TABLE} (key, value) VALUES (?, ?)",
            export_facts(report, facets, index_text_fn),
        )
        conn.execute("COMMIT")
    finally:
        conn.close()


def export_facts(
    report: ExportReport, facets: dict[str, list[str]], index_text_fn: Any | None
) -> list[tuple[str, str]]:
    """The bundle-meta rows (``key``, JSON value), sorted by key: what the export records."""
    facts = {
        "format_version": str(BUNDLE_FORMAT_VERSION),
        "facets": json.dumps(facets, ensure_ascii=False, sort_keys=True),
        **{k: json.dumps(v, sort_keys=True) for k, v in report.as_dict().items()},
    }
    if index_text_fn is not None:  # absent by default: a plain bundle is unchanged
        from ragspine_lite.contextual import index_text_setting

        facts["index_text"] = json.dumps(index_text_setting(index_text_fn))
    if report.embedding_model_id:
        facts["embedding_model_id"] = json.dumps(report.embedding_model_id)
        facts["embedding_dim"] = json.dumps(report.embedding_dim)
    return sorted(facts.items())


#: Documents written per chunk-store transaction (one sync to disk each).
INGEST_BATCH = 1000


def _ingest(
    store: ChunkStore,
    exported: Sequence[SourceDocument],
    report: ExportReport,
    progress: Progress | None,
    chunking: tuple[Any, int, int],
) -> None:
    """Chunk every document as ``NarrativeIndex.ingest`` does (``chunking``: the chunker or
    ``None``, max and overlap chars) and write them in batched transactions."""
    chunker, max_chars, overlap_chars = chunking
    chunk = chunker.chunk if chunker is not None else chunk_document
    batch: list[tuple[str, list[Any]]] = []
    for i, doc in enumerate(exported, 1):
        chunks = chunk(doc.body, doc.meta, max_chars=max_chars, overlap_chars=overlap_chars)
        batch.append((doc.meta.doc_id, chunks))
        report.count(len(chunks), doc.meta.language or "")
        if len(batch) >= INGEST_BATCH or i == len(exported):
            store.replace_docs(batch)
            batch = []
        if progress is not None:
            progress(i, len(exported), doc.path)


def _prefixed(progress: Progress | None, phase: str) -> Progress | None:
    """``progress`` with ``phase`` put before every item (``None`` stays ``None``)."""
    if progress is None:
        return None
    report_to = progress

    def step(done: int, total: int, item: str) -> None:
        report_to(done, total, f"{phase} {item}")

    return step


def embed_chunks(
    chunks: Iterable[Any],
    backend: Any,
    target: Path,
    report: ExportReport,
    progress: Progress | None,
    batch_size: int | None,
    policy: Any = None,
    index_text_fn: Any | None = None,
) -> None:
    """Embed the non-RESTRICTED ``chunks`` (in the chunk store's order: ``doc_id, seq``) into
    an int8 vector table of ``target``; fill ``report``."""
    from ragspine_lite.vector.chunk_vectors import DEFAULT_SYNC_BATCH_SIZE, sync_chunk_vectors
    from ragspine_lite.vector.sqlite_store import SqliteVectorStore, embedding_model_id

    chunks = [c for c in chunks if not is_restricted(c.sensitivity)]
    model_id = embedding_model_id(backend)
    step = _prefixed(progress, EMBEDDING_PHASE)
    with SqliteVectorStore(target, model_id=model_id, quantization="int8") as vectors:
        sync_chunk_vectors(
            chunks,
            backend,
            vectors,
            persistence_policy=policy,
            index_text_fn=index_text_fn,
            batch_size=DEFAULT_SYNC_BATCH_SIZE if batch_size is None else batch_size,
            progress=step,
        )
        stored = vectors.metadata_by_id()
        dim = vectors.dim
    wrong = sorted(
        rid for rid, md in stored.items() if is_restricted(md.get("sensitivity", ""))
    )
    if wrong:
        raise RestrictedLeakError(
            f"{len(wrong)} RESTRICTED vector(s) reached the exported store {str(target)!r}"
        )
    if set(stored) != {c.chunk_id for c in chunks}:
        raise RagspineError(
            f"{len(stored)} vector(s) written for {len(chunks)} chunk(s) in {str(target)!r}"
        )
    report.vectors = len(stored)
    report.embedding_model_id = model_id
    report.embedding_dim = int(dim) if dim else int(getattr(backend, "dim", 0) or 0)
