"""A site build's index: its documents' chunks (cached by content), vectors and index files.

:func:`prepare_docs` chunks the exported documents whose chunk key (their body, metadata,
sections and URL, and the chunk settings) the build cache does not hold, and takes the others'
chunks from it. :func:`write_site_index` then writes the index files straight from the chunks
(:func:`~ragspine_lite.bundle.shard_writer.write_index`: the files
:func:`~ragspine_lite.bundle.shard_writer.write_shards` writes from the exported chunk store of
the same documents), reusing what the previous build wrote where nothing changed
(:mod:`ragspine_lite.bundle.incremental`). A hybrid build embeds only the texts the cache has
no vector for (:class:`CachedEmbeddings`). The chunk store is exported only for ``--keep-store``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ragspine_lite.bundle.build_cache import BATCH, BuildCache, ChunkTexts
from ragspine_lite.bundle.export import ExportReport, SourceDocument
from ragspine_lite.bundle.incremental import STATE_NAME, IndexState, Rebuild
from ragspine_lite.bundle.manifest import FACET_FIELDS
from ragspine_lite.bundle.shard_format import CHUNK_FIELDS, bundle_facts
from ragspine_lite.bundle.shard_writer import IndexSource, ShardReport, check_chunks
from ragspine_lite.chunking.chunk_store import StoredChunk
from ragspine_lite.chunking.chunking import Chunk, chunk_document
from ragspine_lite.common.sensitivity import canonical_sensitivity

__all__ = ["CachedEmbeddings", "PreparedDocs", "prepare_docs", "write_site_index"]

Progress = Callable[[int, int, str], None]
_FIELDS = tuple(f.name for f in fields(Chunk))
_SENSITIVITY_AT = _FIELDS.index("sensitivity")


@dataclass
class PreparedDocs:
    """The exported documents' chunks and what the index needs of them, by ``doc_id``:
    ``keys`` (chunk keys), ``chunks`` (in ``seq`` order), ``doc_sigs`` (digest of the
    document's URL and sections), and by ``chunk_id`` ``sigs`` (digest of its fragment row);
    ``weights`` for :func:`~ragspine_lite.bundle.language.site_language`, ``facets``: the
    distinct values of each facet field; ``salt``: the
    settings the keys are made with (``None``: a chunker from outside the package, nothing
    cached); ``chunked``: the documents chunked by this build."""

    keys: dict[str, str] = field(default_factory=dict)
    chunks: dict[str, list[StoredChunk]] = field(default_factory=dict)
    doc_sigs: dict[str, str] = field(default_factory=dict)
    sigs: dict[str, str] = field(default_factory=dict)
    weights: list[tuple[str, int]] = field(default_factory=list)
    facets: dict[str, set[str]] = field(default_factory=lambda: {n: set() for n in FACET_FIELDS})
    salt: str | None = None
    chunked: int = 0


def _digest(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def section_rows_of(doc: SourceDocument) -> list[tuple[int, int, str, str, int]]:
    """The document's sections as the exported store gives them back (by first paragraph)."""
    ordered = sorted(doc.sections, key=lambda s: s.para_start)
    return [(s.para_start, s.para_end, s.heading, s.anchor, s.level) for s in ordered]


def _stored(chunk: Chunk) -> list[Any]:
    """A chunk's fields as the chunk store keeps them (a known sensitivity label canonical)."""
    values = [getattr(chunk, name) for name in _FIELDS]
    values[_SENSITIVITY_AT] = canonical_sensitivity(chunk.sensitivity) or chunk.sensitivity
    return values


def _chunk_entry(doc: SourceDocument, chunking: tuple[Any, int, int]) -> dict[str, Any]:
    """What the cache keeps of a document: its chunks' fields and fragment-row digests, the
    digest of its fragment entry and its language weight."""
    from ragspine_lite.bundle.language import document_weight

    chunker, max_chars, overlap_chars = chunking
    chunk = chunker.chunk if chunker is not None else chunk_document
    doc = doc.loaded()
    rows = [tuple(_stored(c)) for c in chunk(doc.body, doc.meta, max_chars=max_chars,
                                             overlap_chars=overlap_chars)]
    stored = [StoredChunk(*row) for row in rows]
    return {
        "rows": rows,
        "sigs": [_digest([getattr(c, n) for n in CHUNK_FIELDS]) for c in stored],
        "doc": _digest([doc.meta.doc_id, doc.url, section_rows_of(doc)]),
        "weight": document_weight(doc),
        "facets": [sorted({getattr(c, name) for c in stored} - {""}) for name in FACET_FIELDS],
    }


def _chunk_key(salt: Any, doc: SourceDocument) -> str:
    """What a document's chunks are made from: its bytes (their cache key stands for the body
    and sections parsed from them), its final metadata and URL, and the settings (``salt``:
    their sha256 so far)."""
    made_of = doc.source_key or repr((doc.body, [tuple(vars(s).values()) for s in doc.sections]))
    digest = salt.copy()
    digest.update(repr((made_of, tuple(vars(doc.meta).values()), doc.url)).encode("utf-8"))
    return str(digest.hexdigest())


def _index_salt(cache: BuildCache, settings: dict[str, Any]) -> str | None:
    """What the chunks and the index are made with; ``None`` for a chunker from outside
    the package (its code is not part of the cache's salt)."""
    chunker = settings["the_chunker"]
    if chunker is not None and not type(chunker).__module__.startswith("ragspine_lite."):
        return None
    return json.dumps([cache.salt, settings["max_chars"], settings["overlap_chars"],
                       settings["chunker"], bool(settings["contextual"])])


def prepare_docs(
    corpus: Sequence[SourceDocument], cache: BuildCache, settings: dict[str, Any],
    progress: Progress | None,
) -> PreparedDocs:
    """Every exported document's chunks: from ``cache`` when it holds the document's chunk
    key, else chunked now (and cached: RESTRICTED documents are never chunked here)."""
    exported = [d for d in corpus if not d.restricted]
    out = PreparedDocs(salt=_index_salt(cache, settings))
    if out.salt is not None:
        salted = hashlib.sha256(out.salt.encode("utf-8"))
        out.keys = {d.meta.doc_id: _chunk_key(salted, d) for d in exported}
    chunking = (settings["the_chunker"], settings["max_chars"], settings["overlap_chars"])
    cached: dict[str, Any] = {}
    for i, doc in enumerate(exported, 1):
        key = out.keys.get(doc.meta.doc_id, "")
        if out.salt is not None and (i - 1) % BATCH == 0:  # the next batch of cached entries
            cached = cache.chunks([out.keys[d.meta.doc_id] for d in exported[i - 1:i - 1 + BATCH]])
        entry = cached.get(key)
        if entry is None:
            entry = _chunk_entry(doc, chunking)
            out.chunked += 1
            if out.salt is not None:
                entry = cache.put_chunks(key, entry)
        chunks = cache.stored(key, entry) if out.salt is not None else [
            StoredChunk(*row) for row in entry["rows"]]
        out.chunks[doc.meta.doc_id] = chunks
        out.sigs.update(zip((c.chunk_id for c in chunks), entry["sigs"], strict=True))
        out.doc_sigs[doc.meta.doc_id] = entry["doc"]
        out.weights.append((entry["weight"][0], entry["weight"][1]))
        for name, values in zip(FACET_FIELDS, entry["facets"], strict=True):
            out.facets[name].update(values)
        if progress is not None:
            progress(i, len(exported), doc.path)
    return out


def _source(
    corpus: Sequence[SourceDocument], docs: PreparedDocs, reader: ChunkTexts
) -> tuple[IndexSource, ExportReport, dict[str, list[str]]]:
    """The index source (facts still empty), the export report and the facets."""
    exported = [d for d in corpus if not d.restricted]
    report = ExportReport(excluded_restricted_documents=len(corpus) - len(exported))
    for doc in exported:
        report.count(len(docs.chunks[doc.meta.doc_id]), doc.meta.language or "")
        report.sections += len(doc.sections)
        report.pages += 1 if doc.url else 0
    chunks = sorted((c for d in exported for c in docs.chunks[d.meta.doc_id]),
                    key=lambda c: c.chunk_id)
    if docs.salt is not None:  # cached: their texts are read from the cache in this order
        reader.plan(docs.keys[c.doc_id] for c in chunks)
    check_chunks(chunks, "the export")
    facets = {name: sorted(values) for name, values in docs.facets.items()}
    pages = {d.meta.doc_id: (d.url, section_rows_of(d)) for d in exported}
    return IndexSource({}, chunks, pages), report, facets


class CachedEmbeddings:
    """``backend`` through the build cache: a text that an earlier build embedded with the same
    model is not embedded again (its exact floats come back). Every other attribute is the
    backend's."""

    def __init__(self, backend: Any, cache: BuildCache) -> None:
        from ragspine_lite.vector.sqlite_store import embedding_model_id

        self.backend, self.cache = backend, cache
        self.model_id = embedding_model_id(backend)
        self.embedded = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        keys = [hashlib.sha256(f"{self.model_id}\0{t}".encode()).hexdigest() for t in texts]
        found = self.cache.vectors(keys)
        todo = list(dict.fromkeys(i for i, key in enumerate(keys) if key not in found))
        if todo:
            fresh = list(self.backend.embed_texts([texts[i] for i in todo]))
            if len(fresh) != len(todo):
                raise ValueError(f"embedding backend returned {len(fresh)} vectors for "
                                 f"{len(todo)} texts")
            new = {keys[i]: list(vector) for i, vector in zip(todo, fresh, strict=True)}
            self.cache.put_vectors(new.items())
            found.update(new)
            self.embedded += len(todo)
        return [found[key] for key in keys]


def write_site_index(
    corpus: Sequence[SourceDocument], docs: PreparedDocs, cache: BuildCache, *,
    target: Path, staging: Path, scratch: Path, progress: Progress | None,
    phase: Callable[[str], Progress | None], log: Callable[[str], None],
    settings: dict[str, Any],
) -> tuple[ExportReport, ShardReport]:
    """Write the index files into ``staging`` (vectors, and the ``--keep-store`` chunk store as
    ``scratch/chunks.db``, in ``scratch``); record the index in ``cache`` for the next build."""
    from ragspine_lite.bundle.export import export_facts
    from ragspine_lite.bundle.shard_writer import write_index
    from ragspine_lite.contextual import contextual_index_text

    fn = contextual_index_text if settings["contextual"] else None
    source, report, facets = _source(corpus, docs, cache.reader)
    log(f"index: {report.documents} document(s), {report.chunks} chunk(s) "
        f"({docs.chunked} document(s) chunked by this build)")
    backend = settings["backend"]
    embedder = None if backend is None else CachedEmbeddings(backend, cache)
    if embedder is not None:
        source.vectors_db = scratch / "vectors.db"
        _embed(source.chunks, embedder, source.vectors_db, report, progress, fn, log)
    source.facts = bundle_facts(export_facts(report, facets, fn), "the export")
    old = None if docs.salt is None else IndexState.read(cache.state_file(STATE_NAME), docs.salt)
    rebuild = Rebuild(target, old, docs.keys, docs.chunks, _old_chunks(cache), docs.sigs,
                      docs.doc_sigs, scratch)
    shards = write_index(source, staging, progress=phase("sharding"), reuse=rebuild)
    how = "patched" if rebuild.patched else "computed for every chunk"
    log(f"index files: {shards.kept} of {len(shards.files)} kept from the previous build "
        f"(postings {how})")
    if docs.salt is None:
        cache.put_state(STATE_NAME, None)
    else:
        rebuild.write_state(cache.new_state_file(STATE_NAME), docs.salt, source.chunks, shards,
                            staging)
    if settings["keep_store"] is not None:
        _export_store(corpus, scratch / "chunks.db", embedder, fn, settings)
    return report, shards


def _old_chunks(cache: BuildCache) -> Callable[[str], list[StoredChunk] | None]:
    def old_chunks(key: str) -> list[StoredChunk] | None:
        entry = cache.chunk_entry(key)
        return None if entry is None else [StoredChunk(*row) for row in entry["rows"]]

    return old_chunks


def _embed(
    chunks: Sequence[StoredChunk], embedder: CachedEmbeddings, db: Path, report: ExportReport,
    progress: Progress | None, fn: Any, log: Callable[[str], None],
) -> None:
    """The chunks' int8 vectors into ``db``, in the order the chunk store embeds them."""
    from ragspine_lite.bundle.export import embed_chunks

    log(f"chunks are embedded after indexing, with {embedder.model_id}")
    in_store_order = sorted(chunks, key=lambda c: (c.doc_id, c.seq))
    embed_chunks(in_store_order, embedder, db, report, progress, None, index_text_fn=fn)
    log(f"vectors: {report.vectors} ({report.embedding_dim}-d), {embedder.embedded} embedded "
        "by this build")


def _export_store(
    corpus: Sequence[SourceDocument], path: Path, embedder: Any, fn: Any,
    settings: dict[str, Any],
) -> None:
    """The ``--keep-store`` chunk store (with its BM25 index; vectors from the cache)."""
    from ragspine_lite.bundle.export import export_store

    export_store(
        corpus, path, max_chars=settings["max_chars"], overlap_chars=settings["overlap_chars"],
        chunker=settings["the_chunker"], embedding_backend=embedder, index_text_fn=fn,
    )
