"""The opt-in layers in the browser runtime: search(q, {postprocess}), contextual bundles."""

from __future__ import annotations

import json
import sqlite3

import pytest
from _restricted import matches_restricted

from ragspine_lite.bundle.export import export_store, load_corpus
from ragspine_lite.bundle.manifest import BUNDLE_META_TABLE, BundleFormatError
from ragspine_lite.bundle.runtime import BundleSearcher
from ragspine_lite.cli import samples_dir
from ragspine_lite.contextual import contextual_index_text
from ragspine_lite.postprocess import make_postprocessor

SECRET_PAGE = """---
sensitivity: Restricted
---
The quokka merger SECRETQUOKKA is confidential and pending. Quokka revenue grew.
"""


@pytest.fixture(scope="module")
def contextual_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("ctx") / "chunks.db"
    export_store(load_corpus([samples_dir()]), db, index_text_fn=contextual_index_text)
    return db


def snippets(searcher, query, **kw):
    return json.loads(searcher.dispatch("search", json.dumps({"query": query, **kw})))["hits"]


def test_postprocess_runs_on_the_snippets_and_off_changes_nothing(searcher):
    plain = [h["snippet"] for h in snippets(searcher, "revenue growth", topK=8)]
    for spec in ("mmr,lost_in_middle", ["mmr", "lost_in_middle"]):
        got = [h["snippet"] for h in snippets(searcher, "revenue growth", topK=8,
                                              postprocess=spec)]
        assert got == make_postprocessor("mmr,lost_in_middle").postprocess("revenue growth",
                                                                           plain)
    assert [h["snippet"] for h in snippets(searcher, "revenue growth", topK=8,
                                           postprocess="none")] == plain
    assert searcher.search("revenue growth", top_k=8).snippets == plain


def test_compress_keeps_text_and_highlights_and_adds_prompt_text(searcher):
    plain = snippets(searcher, "hong kong revenue")
    compressed = snippets(searcher, "hong kong revenue", postprocess="compress")
    assert [h["highlights"] for h in compressed] == [h["highlights"] for h in plain]
    for p, c in zip(plain, compressed, strict=True):
        assert {k: v for k, v in c["snippet"].items() if k != "prompt_text"} == p["snippet"]
        assert c["snippet"]["prompt_text"] in c["snippet"]["text"]


def test_bad_postprocess_specs_are_value_errors(searcher):
    with pytest.raises(ValueError, match="'bogus'"):
        searcher.search("revenue", postprocess="mmr,bogus")
    with pytest.raises(ValueError, match="postprocess must be"):
        searcher.search("revenue", postprocess={"mmr": 1})


def test_restricted_page_documents_never_reach_a_postprocessor(searcher):
    searcher.ingest("secret.md", SECRET_PAGE)
    searcher.ingest("open.md", "Quokka revenue grew in the open report.")
    out = searcher.search("quokka merger revenue", postprocess="mmr,lost_in_middle,compress")
    ids = [s["doc_id"] for s in out.snippets]
    assert "open.md" in ids and "secret.md" not in ids
    assert matches_restricted(searcher, "quokka merger revenue")
    assert "SECRETQUOKKA" not in json.dumps(out.as_dict())


def test_a_contextual_bundle_records_and_searches_with_the_header(contextual_db, bundle_db):
    with sqlite3.connect(contextual_db) as conn:
        facts = dict(conn.execute(f"SELECT key, value FROM {BUNDLE_META_TABLE}"))
    assert json.loads(facts["index_text"]) == "contextual"
    with sqlite3.connect(bundle_db) as conn:
        plain_facts = dict(conn.execute(f"SELECT key, value FROM {BUNDLE_META_TABLE}"))
    assert "index_text" not in plain_facts  # a plain bundle is unchanged
    with BundleSearcher(contextual_db) as ctx, BundleSearcher(bundle_db) as plain:
        assert ctx.index_text_fn is contextual_index_text and plain.index_text_fn is None
        found = ctx.search("ACME_CN", top_k=3).snippets
        assert found and found[0]["entity"] == "ACME_CN"
        assert not found[0]["text"].startswith("[")
        assert all("ACME_CN" not in s["text"] for s in plain.search("ACME_CN").snippets)
        # page documents are searched with the bundle's setting too
        for searcher in (ctx, plain):
            searcher.ingest("n.md", "---\nentity: ACME_ZZ\n---\nWombat notes.")
        assert [s["doc_id"] for s in ctx.search("zz").snippets] == ["n.md"]
        assert plain.search("zz").snippets == []


def test_a_bundle_with_an_index_text_the_runtime_cannot_reproduce_is_refused(tmp_path):
    db = tmp_path / "c.db"
    export_store(load_corpus([samples_dir()]), db, index_text_fn=lambda c: c.text.upper())
    with pytest.raises(BundleFormatError, match="cannot reproduce"):
        BundleSearcher(db)
