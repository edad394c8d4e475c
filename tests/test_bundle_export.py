"""Exporting a document folder into a bundle store: RESTRICTED never written, and proven so."""

from __future__ import annotations

import json
import sqlite3
import zipfile
from pathlib import Path

import pytest

from ragspine_lite.bundle.export import (
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
