"""Exporting a document folder into a bundle store: RESTRICTED never written, and proven so."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
import zipfile
from pathlib import Path

import pytest

from ragspine_lite.bundle.export import (
    EMBEDDING_PHASE,
    MIN_NEEDLE_CHARS,
    RestrictedLeakError,
    export_store,
    load_corpus,
    restricted_needles,
    scan_for_leaks,
    verify_no_leaks,
)
from ragspine_lite.bundle.manifest import BUNDLE_FORMAT_VERSION, BUNDLE_META_TABLE, SECTION_TABLE
from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.chunking.chunking import chunk_document
from ragspine_lite.chunking.sources import load_sections
from ragspine_lite.cli import samples_dir
from ragspine_lite.lexical.retrieval import CHANNEL_HYBRID, NarrativeIndex
from ragspine_lite.vector.chunk_vectors import CONTENT_HASH_KEY, sync_chunk_vectors
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend
from ragspine_lite.vector.sqlite_store import SqliteVectorStore, embedding_model_id

CANARY = "ZEPHYRCANARY"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def corpus():
    return load_corpus([samples_dir()])


@pytest.fixture
def exported(tmp_path, corpus):
    db = tmp_path / "out" / "chunks.db"
    return db, export_store(corpus, db)


def test_the_sample_corpus_has_restricted_documents_to_exclude(corpus):
    restricted = [d for d in corpus if d.restricted]
    assert len(restricted) == 2
    assert all(CANARY in d.body for d in restricted)


def test_export_writes_every_public_chunk_and_no_restricted_document(exported, corpus):
    db, report = exported
    public = [d for d in corpus if not d.restricted]
    with ChunkStore(db) as store:
        stored = store.iter_chunks()
    assert {c.doc_id for c in stored} == {d.meta.doc_id for d in public}
    expected = [c for d in public for c in chunk_document(d.body, d.meta)]
    got = {c.chunk_id: (c.text, c.source_locator) for c in stored}
    assert got == {c.chunk_id: (c.text, c.source_locator) for c in expected}
    assert all(c.sensitivity.upper() != "RESTRICTED" for c in stored)
    assert report.documents == len(public)
    assert report.chunks == len(expected)
    assert report.excluded_restricted_documents == 2
    assert sum(report.languages.values()) == len(public)


def test_no_byte_of_the_exported_file_carries_restricted_text(exported, corpus):
    db, _ = exported
    data = db.read_bytes().lower()
    assert CANARY.lower().encode() not in data
    for needle in restricted_needles(corpus):
        assert needle.lower().encode("utf-8") not in data, needle


def test_export_records_sections_and_bundle_facts(exported, corpus):
    db, report = exported
    conn = sqlite3.connect(db)
    try:
        sections = conn.execute(
            f"SELECT doc_id, para_start, para_end, heading, anchor FROM {SECTION_TABLE}"
        ).fetchall()
        facts = dict(conn.execute(f"SELECT key, value FROM {BUNDLE_META_TABLE}").fetchall())
    finally:
        conn.close()
    expected = {
        (d.meta.doc_id, s.para_start, s.para_end, s.heading, s.anchor)
        for d in corpus
        if not d.restricted
        for s in d.sections
    }
    assert set(sections) == expected
    assert len(sections) == report.sections > 0
    assert not any(doc_id.startswith("restricted/") for doc_id, *_ in sections)
    assert int(facts["format_version"]) == BUNDLE_FORMAT_VERSION
    assert json.loads(facts["excluded_restricted_documents"]) == 2
    assert json.loads(facts["documents"]) == report.documents
    facets = json.loads(facts["facets"])
    assert facets["language"] == ["en", "zh"]
    assert "ACME_HK" in facets["entity"]


def test_export_refuses_to_overwrite_a_store(exported, corpus):
    db, _ = exported
    with pytest.raises(FileExistsError, match="refusing to overwrite"):
        export_store(corpus, db)


def test_export_keeps_html_heading_ids(tmp_path):
    write(tmp_path / "docs" / "page.html", '<h1 id="intro">Intro</h1><p>Quokkas are small.</p>')
    docs = load_corpus([tmp_path / "docs"])
    export_store(docs, tmp_path / "c.db")
    conn = sqlite3.connect(tmp_path / "c.db")
    try:
        rows = conn.execute(f"SELECT doc_id, anchor, heading FROM {SECTION_TABLE}").fetchall()
    finally:
        conn.close()
    assert rows == [("page.html", "intro", "Intro")]
    assert docs[0].sections == load_sections(tmp_path / "docs" / "page.html")


def test_load_corpus_reports_progress_and_rejects_duplicate_ids(tmp_path):
    write(tmp_path / "a" / "one.md", "---\ndoc_id: same\n---\nx")
    write(tmp_path / "a" / "two.md", "---\ndoc_id: same\n---\ny")
    with pytest.raises(ValueError, match="'same' is used by both"):
        load_corpus([tmp_path / "a"])
    seen = []
    write(tmp_path / "b" / "one.md", "x")
    write(tmp_path / "b" / "two.txt", "y")
    load_corpus([tmp_path / "b"], progress=lambda i, n, p: seen.append((i, n)))
    assert seen == [(1, 2), (2, 2)]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no documents found"):
        load_corpus([tmp_path / "empty"])


def test_needles_are_canaries_and_long_lines_of_restricted_documents_only(tmp_path):
    write(tmp_path / "d" / "secret.md",
          "---\nsensitivity: restricted\ntitle: Secret merger plan\n---\n"
          "# Secret merger plan\nshort\nThe merger closes next spring at a premium.")
    write(tmp_path / "d" / "public.md", "Public line that is long enough to be a needle.")
    needles = restricted_needles(load_corpus([tmp_path / "d"]), canaries=[" CODEWORD "])
    assert needles == [
        "CODEWORD",
        "Secret merger plan",  # the title (and the heading, deduplicated)
        "The merger closes next spring at a premium.",
    ]
    assert all(len(n) >= MIN_NEEDLE_CHARS for n in needles[1:])
    assert restricted_needles([], canaries=["", "  "]) == []


def test_scan_finds_needles_in_files_zip_members_any_case_and_json_escaped(tmp_path):
    root = tmp_path / "bundle"
    write(root / "clean.txt", "nothing to see")
    write(root / "a" / "page.js", "const x = 'zephyrcanary';")
    write(root / "meta.json", json.dumps({"t": "董事会纪要：内地分支机构调整"}))  # \\u-escaped
    with zipfile.ZipFile(root / "pkg.whl", "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pkg/data.txt", "x" * 500 + "ZEPHYRCANARY" + "y" * 500)
    assert CANARY.encode() not in (root / "pkg.whl").read_bytes()  # compressed away
    leaks = scan_for_leaks(root, [CANARY, "董事会纪要：内地分支机构调整"])
    found = {(leak.path, leak.member, leak.needle) for leak in leaks}
    assert found == {
        ("a/page.js", "", CANARY),
        ("meta.json", "", "董事会纪要：内地分支机构调整"),
        ("pkg.whl", "pkg/data.txt", CANARY),
    }
    with pytest.raises(RestrictedLeakError, match=r"pkg\.whl!pkg/data\.txt"):
        verify_no_leaks(root, [CANARY])


def test_verify_passes_a_clean_folder_and_counts_needles(tmp_path):
    write(tmp_path / "x.txt", "public text only")
    assert verify_no_leaks(tmp_path, ["secret one", "secret two", ""]) == 2
    assert scan_for_leaks(tmp_path, []) == []


# ---------------------------------------------------------------- vectors


class RecordingBackend:
    """Deterministic vectors; remembers every batch of texts it was asked to embed."""

    def __init__(self, dim: int = 32) -> None:
        self.inner = DeterministicEmbeddingBackend(dim=dim)
        self.dim = dim
        self.model_id = f"test/recording-{dim}"
        self.calls: list[list[str]] = []

    def embed_texts(self, texts):
        self.calls.append(list(texts))
        return self.inner.embed_texts(texts)


OLD_FACTS = {
    "format_version", "facets", "documents", "chunks", "empty_documents",
    "excluded_restricted_documents", "languages", "sections",
}


def _tables(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


def _facts(db: Path) -> dict[str, str]:
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute(f"SELECT key, value FROM {BUNDLE_META_TABLE}").fetchall())
    finally:
        conn.close()


@pytest.fixture
def embedded(tmp_path, corpus):
    backend = RecordingBackend()
    seen: list[tuple[int, int, str]] = []
    db = tmp_path / "out" / "chunks.db"
    report = export_store(
        corpus, db, embedding_backend=backend, embedding_batch_size=5,
        progress=lambda i, n, item: seen.append((i, n, item)),
    )
    return db, report, backend, seen


def test_without_a_backend_no_vector_table_and_no_vector_facts_are_written(exported):
    db, report = exported
    assert not [t for t in _tables(db) if t.startswith("ragspine_vector")]
    assert set(_facts(db)) == OLD_FACTS
    assert "vectors" not in report.as_dict() and report.embedding_model_id == ""


def test_export_embeds_every_exported_chunk_into_the_same_file(embedded, corpus):
    db, report, backend, _ = embedded
    with ChunkStore(db) as store:
        chunks = store.iter_chunks()
    with SqliteVectorStore(db, model_id=embedding_model_id(backend)) as vectors:
        stored = vectors.metadata_by_id()
        assert vectors.models() == {"test/recording-32": 32}
    assert set(stored) == {c.chunk_id for c in chunks}
    assert len(stored) == report.vectors == report.chunks == len(chunks)
    restricted = {d.meta.doc_id for d in corpus if d.restricted}
    assert not {md["doc_id"] for md in stored.values()} & restricted
    assert {md["sensitivity"].upper() for md in stored.values()} <= {"INTERNAL", "PUBLIC"}
    by_id = {c.chunk_id: c for c in chunks}
    for rid, md in stored.items():
        c = by_id[rid]
        assert (md["doc_id"], md["entity"], md["language"]) == (c.doc_id, c.entity, c.language)
        assert md[CONTENT_HASH_KEY] == hashlib.sha256(c.text.encode("utf-8")).hexdigest()
    embedded_texts = [t for batch in backend.calls for t in batch]
    assert sorted(embedded_texts) == sorted(c.text for c in chunks)
    assert not any(CANARY in t for t in embedded_texts)


def test_export_embeds_in_batches_with_progress_and_records_the_facts(embedded):
    db, report, backend, seen = embedded
    n = report.chunks
    assert [len(b) for b in backend.calls] == [5] * (n // 5) + ([n % 5] if n % 5 else [])
    steps = [(i, total) for i, total, item in seen if item.startswith(f"{EMBEDDING_PHASE} ")]
    assert steps == [(min(i + 5, n), n) for i in range(0, n, 5)]
    ingest = [item for _, _, item in seen if not item.startswith(f"{EMBEDDING_PHASE} ")]
    assert len(ingest) == report.documents + report.empty_documents
    facts = _facts(db)
    assert set(facts) == OLD_FACTS | {"vectors", "embedding_model_id", "embedding_dim"}
    assert json.loads(facts["vectors"]) == n
    assert json.loads(facts["embedding_model_id"]) == "test/recording-32"
    assert json.loads(facts["embedding_dim"]) == 32
    assert report.as_dict()["vectors"] == n


def test_no_byte_of_an_embedded_export_carries_restricted_text(embedded, corpus):
    db, *_ = embedded
    data = db.read_bytes().lower()
    for needle in restricted_needles(corpus, canaries=[CANARY]):
        assert needle.lower().encode("utf-8") not in data, needle


def test_the_exported_vectors_serve_a_hybrid_narrative_index(embedded):
    db, _, backend, _ = embedded
    backend.calls.clear()
    with ChunkStore(db) as store, SqliteVectorStore(
        db, model_id=embedding_model_id(backend)
    ) as vectors:
        index = NarrativeIndex(store, embedding_backend=backend, vector_store=vectors)
        results = index.retrieve("Hong Kong revenue growth", top_k=5)
        assert index.last_channel == CHANNEL_HYBRID
        assert backend.calls == [["Hong Kong revenue growth"]]  # chunks are not re-embedded
        assert results and all(r.vector_score > 0 for r in results)
        qvec = backend.embed_texts(["Hong Kong revenue growth"])[0]
        cosines = {h.id: h.score for h in vectors.query(qvec, k=1000)}
        for r in results:
            assert r.vector_score == cosines[r.chunk.chunk_id]
        bm25_only = NarrativeIndex(store).retrieve("Hong Kong revenue growth", top_k=5)
        assert {r.chunk.chunk_id for r in bm25_only} & {r.chunk.chunk_id for r in results}


def test_sync_chunk_vectors_reembeds_only_changed_chunks_and_drops_gone_ones(tmp_path):
    write(tmp_path / "d" / "a.md", "Quokkas are small.")
    write(tmp_path / "d" / "b.md", "Wombats dig burrows.")
    db = tmp_path / "c.db"
    export_store(load_corpus([tmp_path / "d"]), db)
    with ChunkStore(db) as store:
        chunks = store.iter_chunks()
    assert len(chunks) == 2
    backend, vectors = RecordingBackend(), SqliteVectorStore(":memory:", model_id="m")
    assert sync_chunk_vectors(chunks, backend, vectors) == (2, 0)
    assert sync_chunk_vectors(chunks, backend, vectors) == (0, 0)
    changed = dataclasses.replace(chunks[0], text="Quokkas are tiny.")
    backend.calls.clear()
    assert sync_chunk_vectors([changed], backend, vectors) == (1, 2)  # a changed, b gone
    assert backend.calls == [["Quokkas are tiny."]]
    assert set(vectors.metadata_by_id()) == {changed.chunk_id}
    with pytest.raises(ValueError, match="batch_size must be an int >= 1, got 0"):
        sync_chunk_vectors(chunks, backend, vectors, batch_size=0)
    vectors.close()
