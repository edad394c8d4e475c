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
from ragspine_lite.bundle.leaks import fold
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
    assert report.excluded_restricted_documents == 2  # the local report only
    assert "excluded_restricted_documents" not in report.as_dict()
    assert sum(report.languages.values()) == len(public)


def test_no_byte_of_the_exported_file_carries_restricted_text(exported, corpus):
    db, _ = exported
    data = db.read_bytes().lower()
    assert CANARY.lower().encode() not in data
    for needle in restricted_needles(corpus):
        assert needle.text.lower().encode("utf-8") not in data, needle.label


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
    assert "excluded_restricted_documents" not in facts  # public: says nothing of RESTRICTED
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


def test_needles_are_canaries_then_id_title_chunks_and_lines_of_restricted_documents(tmp_path):
    write(tmp_path / "d" / "secret.md",
          "---\nsensitivity: restricted\ntitle: Secret merger plan\n---\n"
          "# Secret merger plan\nshort\nThe merger closes next spring at a premium.")
    write(tmp_path / "d" / "public.md", "Public line that is long enough to be a needle.")
    needles = restricted_needles(load_corpus([tmp_path / "d"]), canaries=["", " CODEWORD "])
    assert [(n.label, n.text, n.anywhere) for n in needles] == [
        ("canary #2", "CODEWORD", True),
        ("the title of RESTRICTED document 'secret.md'", "Secret merger plan", False),
        ("text of chunk 1 of RESTRICTED document 'secret.md'",
         "# Secret merger plan\nshort\nThe merger closes next spring at a premium.", False),
        # the id is too short; line 1 is the title again (deduplicated), "short" is too short
        ("line 3 of RESTRICTED document 'secret.md'",
         "The merger closes next spring at a premium.", False),
    ]
    assert all(len(fold(n.text)) >= MIN_NEEDLE_CHARS for n in needles[1:])
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
    found = {(leak.path, leak.member, leak.label) for leak in leaks}
    assert found == {
        ("a/page.js", "", "canary #1"),
        ("meta.json", "", "canary #2"),
        ("pkg.whl", "pkg/data.txt", "canary #1"),
    }
    with pytest.raises(RestrictedLeakError, match=r"pkg\.whl!pkg/data\.txt holds canary #1"):
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
    "format_version", "facets", "documents", "chunks", "empty_documents", "languages",
    "sections",
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
        assert needle.text.lower().encode("utf-8") not in data, needle.label


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


# ---------------------------------------------------------------- the self-check reads rows


SECRET = " ".join(
    f"Clause {i}: the buyer pays {i * 7 + 3} million for lot {i} before the {i}th audit."
    for i in range(1, 31)
)  # one paragraph of ~2,000 characters, four default chunks


def _export(tmp_path: Path, files: dict[str, str], **kwargs) -> tuple[Path, list]:
    """Export ``files`` (name → text) into a folder with one chunk store; (folder, corpus)."""
    for name, text in files.items():
        write(tmp_path / "docs" / name, text)
    corpus = load_corpus([tmp_path / "docs"])
    out = tmp_path / "out"
    export_store(corpus, out / "chunks.db", **kwargs)
    return out, corpus


def _rows(db: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _assert_tells_nothing(message: str, secret: str) -> None:
    """No 12-character stretch of ``secret`` (folded) is in ``message``."""
    text, folded = fold(message), fold(secret)
    assert not [folded[i : i + 12] for i in range(len(folded) - 11) if folded[i : i + 12] in text]


def test_a_canary_in_a_paragraph_that_sqlite_spreads_over_pages_is_found(tmp_path):
    # a phrase: the BM25 vocabulary stores its words one by one, the chunk text alone holds it
    canary = "zephyr blue falcon"
    filler = " ".join(f"word{i}" for i in range(1200))[:6000]

    def with_canary_at(offset: int) -> tuple[Path, bytes, str]:
        text = filler[:offset] + canary + filler[offset + len(canary) :]  # same length
        out, _ = _export(tmp_path / str(offset), {"notes.md": text}, max_chars=8000)
        return out, (out / "chunks.db").read_bytes(), text

    # where the row's text leaves its page for an overflow page: the longest prefix in the file
    _, raw, text = with_canary_at(0)
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if text[:mid].encode() in raw else (low, mid - 1)
    out, raw, _ = with_canary_at(low - len(canary) // 2)
    assert canary.encode() not in raw.lower()  # what the bytes-only check looked for: missed
    leaks = scan_for_leaks(out, [canary])
    assert ("chunks.db", "table narrative_chunk, row 1, column text", "notes.md") in {
        (leak.path, leak.location, leak.document) for leak in leaks
    }
    with pytest.raises(RestrictedLeakError) as info:
        verify_no_leaks(out, ["x" * 20, canary])
    assert "holds canary #2" in str(info.value) and "falcon" not in str(info.value).lower()


def test_a_restricted_paragraph_longer_than_a_chunk_repeated_in_a_public_one_is_found(tmp_path):
    out, corpus = _export(tmp_path, {
        "memo.md": f"---\nsensitivity: RESTRICTED\n---\n{SECRET}",
        "leak.md": f"---\nsensitivity: PUBLIC\n---\nOverheard at lunch: {SECRET}",
    })
    texts = [t for (t,) in _rows(out / "chunks.db", "SELECT text FROM narrative_chunk")]
    assert len(texts) > 3 and not any(SECRET in t for t in texts)  # no row holds the line
    with pytest.raises(RestrictedLeakError) as info:
        verify_no_leaks(out, restricted_needles(corpus))
    message = str(info.value)
    assert "(table narrative_chunk, row 1, column text, document 'leak.md') holds text of " \
        "chunk 1 of RESTRICTED document 'memo.md'" in message
    assert "document(s) 'leak.md', not RESTRICTED, hold that content" in message
    _assert_tells_nothing(message, SECRET)


def test_leaks_in_freed_pages_are_found_in_the_raw_bytes(tmp_path):
    db = tmp_path / "out" / "x.db"
    db.parent.mkdir()
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA secure_delete = OFF")  # the default of many SQLite builds
    conn.execute("CREATE TABLE t (v TEXT)")
    conn.executemany("INSERT INTO t VALUES (?)", [(f"row {i} " * 200,) for i in range(20)])
    conn.execute("INSERT INTO t VALUES (?)", (f"gone {CANARY} gone",))
    conn.commit()
    conn.execute("DELETE FROM t WHERE v LIKE 'gone%'")
    conn.commit()
    conn.close()
    assert [(leak.path, leak.location) for leak in scan_for_leaks(db.parent, [CANARY])] == [
        ("x.db", "")
    ]


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalnum() else c for c in text)


def _zero_width(text: str) -> str:
    return "".join(c + "\u200b" if i % 5 == 4 else c for i, c in enumerate(text))


VARIANTS = {
    "as given": lambda t: t,
    "upper case": str.upper,
    "full width": _fullwidth,
    "zero-width spaces": _zero_width,
    "no-break spaces": lambda t: t.replace(" ", "\u00a0"),
    "reflowed": lambda t: t.replace(" ", "\n  ", 1).replace(". ", ".\n"),
}
CANARY_TEXT = "Zephyr Falcon 7731"
FILLER = " ".join(f"word{i}" for i in range(1000))


def _placed(place: str, variant: str) -> dict[str, str]:
    """Documents with the canary (or, for "repeated", a RESTRICTED paragraph) put in ``place``
    of a public document, written the ``variant`` way."""
    v = VARIANTS[variant]
    one_line = v(CANARY_TEXT).replace("\n", " ")
    public = "---\nsensitivity: PUBLIC\n{}---\n{}"
    return {
        "text": {"pub.md": public.format("", f"Notes. {v(CANARY_TEXT)} ends here.")},
        "title": {"pub.md": public.format(f"title: {one_line}\n", "Plain body text.")},
        "id": {"pub.md": public.format(f"doc_id: notes-{one_line}\n", "Plain body text.")},
        "metadata": {"pub.md": public.format(f"entity: {one_line}\n", "Plain body text.")},
        "large paragraph": {
            "pub.md": public.format("", f"{FILLER[:3100]} {v(CANARY_TEXT)} {FILLER[3100:6000]}")
        },
        "repeated": {
            "memo.md": f"---\nsensitivity: RESTRICTED\n---\n{SECRET}",
            "pub.md": public.format("", f"Overheard: {v(SECRET)}"),
        },
    }[place]


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize(
    "place", ["text", "title", "id", "metadata", "large paragraph", "repeated"]
)
def test_the_canary_matrix_every_placement_and_spelling_fails_the_check(tmp_path, place, variant):
    out, corpus = _export(tmp_path, _placed(place, variant), max_chars=8000
                          if place == "large paragraph" else 480)
    needles = restricted_needles(corpus, canaries=[CANARY_TEXT])
    leaks = scan_for_leaks(out, needles)
    expected = "canary #1" if place != "repeated" else "RESTRICTED document 'memo.md'"
    rows = [leak for leak in leaks if expected in leak.label and leak.location]
    assert rows, leaks
    assert all(leak.location.startswith("table ") for leak in rows)
    with pytest.raises(RestrictedLeakError) as info:
        verify_no_leaks(out, needles)
    _assert_tells_nothing(str(info.value), SECRET if place == "repeated" else CANARY_TEXT)


def test_whole_texts_match_as_whole_words_and_cjk_ones_inside_a_run(tmp_path):
    out, corpus = _export(tmp_path, {
        "secret.md": "---\nsensitivity: RESTRICTED\ntitle: Budget plan number 10\n---\n"
                     "# 董事会纪要：内地分支机构调整\nshort",
        "a.md": "See the budget plan number 1001 and budget plan number 10b.",
    })
    needles = restricted_needles(corpus)
    assert scan_for_leaks(out, needles) == []
    write(tmp_path / "more" / "b.md", "As the budget plan number 10, said.")
    write(tmp_path / "more" / "c.md", "会议显示董事会纪要：内地分支机构调整已经完成")
    export_store(load_corpus([tmp_path / "more"]), tmp_path / "out2" / "chunks.db")
    found = {(leak.document, leak.label) for leak in scan_for_leaks(tmp_path / "out2", needles)}
    assert ("b.md", "the title of RESTRICTED document 'secret.md'") in found
    assert ("c.md", "line 1 of RESTRICTED document 'secret.md'") in found
