"""The browser-side searcher: read-only bundle + page documents, fused, RESTRICTED-free."""

from __future__ import annotations

import json
import sqlite3

import pytest
from _restricted import matches_restricted

from ragspine_lite.bundle.export import export_store, load_corpus
from ragspine_lite.bundle.manifest import BUNDLE_META_TABLE, BundleFormatError
from ragspine_lite.bundle.runtime import (
    FILTER_FIELDS,
    BundleSearcher,
    highlight_spans,
    open_read_only_store,
    parse_filters,
)
from ragspine_lite.chunking.chunk_store import ChunkStore, ChunkStoreError
from ragspine_lite.chunking.chunking import Chunk
from ragspine_lite.cli import samples_dir
from ragspine_lite.lexical.retrieval import NarrativeIndex
from ragspine_lite.link.narrative_link import build_narrative_retriever

CANARY = "ZEPHYRCANARY"
SECRET_DOC = """---
sensitivity: RESTRICTED
entity: SECRET_ENTITY
---
The quokka merger is confidential and pending.
"""


def test_the_bundle_store_is_opened_read_only(bundle_db):
    before = bundle_db.read_bytes()
    store = open_read_only_store(bundle_db)
    try:
        assert store.count() > 0
        with pytest.raises(ChunkStoreError):
            store.replace_doc_chunks("x", [Chunk("x#c0", "x", 0, "t", "x#para1", 1, 1)])
    finally:
        store.close()
    assert bundle_db.read_bytes() == before


def test_a_missing_bundle_store_is_not_created(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        BundleSearcher(tmp_path / "nope.db")
    assert not (tmp_path / "nope.db").exists()


def test_results_are_the_python_link_snippets_plus_library_id(searcher, tmp_path):
    reference_db = tmp_path / "ref.db"
    retriever, store = build_narrative_retriever(reference_db)
    try:
        for doc in load_corpus([samples_dir()]):
            if not doc.restricted:
                retriever.index.ingest(doc.body, doc.meta)
        for query in ("why did operating profit fall", "中国内地营运利润"):
            expected = retriever.retrieve(query, top_k=5)
            got = searcher.search(query, top_k=5).snippets
            assert [{k: v for k, v in s.items() if k != "library_id"} for s in got] == expected
            assert {s["library_id"] for s in got} == {"bundle"}
    finally:
        store.close()


def test_english_and_chinese_queries_find_their_documents_and_locators(searcher):
    hit = searcher.search("why did operating profit fall", top_k=3).hits[0]
    assert hit["snippet"]["doc_id"] == "en/acme_cn_2023_profit.md"
    assert hit["snippet"]["source_locator"].startswith("en/acme_cn_2023_profit.md#para")
    zh = searcher.search("中国内地营运利润", top_k=3).snippets[0]
    assert zh["doc_id"] == "zh/acme_cn_2024_profit_zh.md"


def test_restricted_documents_are_simply_absent_from_a_bundle(searcher):
    outcome = searcher.search("Macau broker acquisition ZEPHYRCANARY 董事会 分支机构", top_k=50)
    assert all(not s["doc_id"].startswith("restricted/") for s in outcome.snippets)
    assert CANARY not in json.dumps(outcome.as_dict(), ensure_ascii=False)


def test_hits_carry_their_heading_section_and_highlights(searcher):
    hit = searcher.search("Hong Kong revenue", top_k=1).hits[0]
    assert hit["section"] == {
        "heading": "ACME Hong Kong 2024 annual review",
        "anchor": "acme-hong-kong-2024-annual-review",
        "level": 1,
    }
    text = hit["snippet"]["text"]
    marked = {text[a:b].lower() for a, b in hit["highlights"]}
    assert marked == {"hong", "kong", "revenue"}


def test_highlighting_can_be_switched_off(searcher):
    plain = searcher.search("Hong Kong revenue", top_k=3, highlight=False)
    full = searcher.search("Hong Kong revenue", top_k=3)
    assert plain.snippets == full.snippets
    assert [h["highlights"] for h in plain.hits] == [[], [], []]
    assert all(h["highlights"] for h in full.hits)


@pytest.mark.parametrize(
    "filters",
    [
        {"language": "zh"},
        ["language=zh"],
        {"language": ["zh"]},
        {"language": {"op": "in", "value": ["zh"]}},
    ],
)
def test_filter_forms_are_equivalent(searcher, filters):
    snippets = searcher.search("ACME 2024", filters=filters, top_k=20).snippets
    assert snippets
    assert {s["language"] for s in snippets} == {"zh"}


def test_filters_are_strict_and_combine(searcher):
    got = searcher.search(
        "revenue", filters={"entity": "ACME_HK", "period": {"op": "gte", "value": "2024"}}
    ).snippets
    assert got and all(s["entity"] == "ACME_HK" and s["period"] >= "2024" for s in got)
    assert searcher.search("revenue", filters={"entity": "NOBODY"}).snippets == []
    assert searcher.search("revenue", filters={"entity": None}).snippets  # None = no filter


def test_bad_filters_and_arguments_are_clear_value_errors(searcher):
    with pytest.raises(ValueError, match="unknown filter field 'colour'") as info:
        searcher.search("x", filters={"colour": "red"})
    for name in FILTER_FIELDS:
        assert name in str(info.value)
    with pytest.raises(ValueError, match="invalid filter expression"):
        searcher.search("x", filters=["language"])
    with pytest.raises(ValueError, match="unknown filter op"):
        parse_filters({"period": {"op": "near", "value": "2024"}})
    with pytest.raises(ValueError, match="topK"):
        searcher.search("x", top_k=0)
    with pytest.raises(ValueError, match="filters must be"):
        parse_filters("language=zh")


def test_a_blank_query_finds_nothing(searcher):
    assert searcher.search("   ").hits == []


def test_page_documents_are_searchable_fused_and_tagged(searcher):
    info = searcher.ingest("notes.md", "# Quokka notes\nACME Hong Kong counts quokkas in 2024.")
    assert info == {
        "doc_id": "notes.md", "name": "notes.md", "title": "Quokka notes", "chunks": 1,
        "language": "", "restricted": False,
    }
    outcome = searcher.search("quokkas hong kong", top_k=10)
    libraries = [s["library_id"] for s in outcome.snippets]
    assert libraries[0] == "page" or "page" in libraries
    assert "bundle" in libraries
    page_hit = next(h for h in outcome.hits if h["snippet"]["library_id"] == "page")
    assert page_hit["section"]["anchor"] == "quokka-notes"
    assert searcher.page_documents()[0]["doc_id"] == "notes.md"


def test_reingesting_a_page_document_replaces_it(searcher):
    searcher.ingest("n.md", "wombat facts")
    searcher.ingest("n.md", "numbat facts")
    assert searcher.search("wombat").snippets == []
    assert searcher.search("numbat").snippets[0]["doc_id"] == "n.md"


def test_restricted_page_documents_are_held_back_never_returned(searcher):
    info = searcher.ingest("secret.md", SECRET_DOC)
    assert info["restricted"] is True
    outcome = searcher.search("quokka merger", top_k=10)
    assert outcome.snippets == []
    assert matches_restricted(searcher, "quokka merger")  # the exit was exercised
    stats = searcher.stats()
    assert "SECRET_ENTITY" not in stats["facets"]["entity"]
    assert stats["page"]["restricted_documents"] == 1


def test_forget_removes_page_documents(searcher):
    searcher.ingest("a.md", "platypus one")
    searcher.ingest("b.md", "platypus two")
    assert searcher.forget(["a.md", "unknown.md"]) == 1
    assert [s["doc_id"] for s in searcher.search("platypus").snippets] == ["b.md"]
    assert searcher.forget() == 1
    assert searcher.search("platypus").snippets == []


def test_bad_page_documents_raise_before_anything_is_indexed(searcher):
    with pytest.raises(ValueError, match="unsupported file type"):
        searcher.ingest("slides.pptx", "x")
    with pytest.raises(ValueError, match="front matter"):
        searcher.check_document("bad.md", "---\ntitle: x\n")
    assert searcher.page_documents() == []


def test_bundle_facets_come_from_the_export_and_match_a_live_scan(searcher, bundle_db):
    exported = searcher.stats()["facets"]
    searcher.bundle_facts.pop("facets")
    assert searcher.stats()["facets"] == exported


def test_stats_count_libraries_and_list_facets(searcher):
    stats = searcher.stats()
    assert stats["bundle"]["documents"] == 8
    assert "excluded_restricted_documents" not in stats["bundle"]  # nothing withheld is told
    assert stats["page"] == {"documents": 0, "chunks": 0, "restricted_documents": 0}
    assert stats["facets"]["language"] == ["en", "zh"]
    assert "ACME_HK" in stats["facets"]["entity"]


def test_dispatch_speaks_json(searcher):
    out = json.loads(searcher.dispatch("search", json.dumps({"query": "营运利润", "topK": 2})))
    assert len(out["hits"]) == 2
    assert set(out) == {"hits", "took_ms"}
    json.loads(searcher.dispatch("ingest", json.dumps({"name": "z.txt", "text": "zebra"})))
    assert json.loads(searcher.dispatch("documents"))[0]["doc_id"] == "z.txt"
    assert json.loads(searcher.dispatch("forget", "{}")) == {"removed": 1}
    with pytest.raises(ValueError, match="unknown operation 'drop'"):
        searcher.dispatch("drop")


def test_a_page_only_searcher_works_without_a_bundle():
    with BundleSearcher() as s:
        assert s.search("anything").hits == []
        s.ingest("x.md", "kiwi bird")
        assert s.search("kiwi").snippets[0]["library_id"] == "page"
        assert s.stats()["bundle"] is None


def test_a_plain_chunk_store_is_not_a_bundle(tmp_path):
    db = tmp_path / "plain.db"
    with ChunkStore(db) as store:
        store.init_schema()
        NarrativeIndex(store).ingest("hello", load_corpus([samples_dir()])[0].meta)
    with pytest.raises(BundleFormatError, match="not an exported bundle"):
        BundleSearcher(db)


def test_a_newer_bundle_format_says_update_the_runtime(tmp_path):
    db = tmp_path / "chunks.db"
    export_store(load_corpus([samples_dir()]), db)
    conn = sqlite3.connect(db)
    conn.execute(f"UPDATE {BUNDLE_META_TABLE} SET value = '99' WHERE key = 'format_version'")
    conn.commit()
    conn.close()
    with pytest.raises(BundleFormatError, match="newer than this runtime reads"):
        BundleSearcher(db)


def test_highlights_match_whole_ascii_words_and_chinese_bigrams():
    assert highlight_spans("kong", "Hong Kong, Kongs") == [[5, 9]]
    assert highlight_spans("营运利润", "利润和营运利润") == [[0, 2], [3, 7]]
    assert highlight_spans("利", "利润") == [[0, 1]]
    assert highlight_spans("", "text") == []


def test_highlights_skip_function_words_and_single_letters():
    spans = highlight_spans("why did growth in 2024 a", "a growth in 2024, why")
    assert spans == [[2, 8], [12, 16]]


def test_highlight_offsets_survive_characters_that_lower_case_to_two():
    text = "\u0130stanbul revenue"  # İ lower-cases to "i" + a combining dot
    assert highlight_spans("revenue", text) == [[9, 16]]


def test_highlight_offsets_count_utf16_units_like_javascript():
    text = "\U0001f600 revenue"  # the emoji is two UTF-16 units
    assert highlight_spans("revenue", text) == [[3, 10]]


@pytest.mark.parametrize("label", ["SECRET", "RESTRICTED.", "[RESTRICTED]", ""])
def test_a_bundle_row_with_a_label_outside_the_vocabulary_is_never_a_hit(bundle_db, tmp_path,
                                                                         label):
    # A bundle written by an older version could hold any value: it reads as RESTRICTED.
    import shutil

    db = shutil.copy(bundle_db, tmp_path / "old.db")
    with BundleSearcher(db) as searcher:
        hit = searcher.search("Hong Kong revenue", top_k=1).hits[0]["snippet"]
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE narrative_chunk SET sensitivity = ? WHERE doc_id = ?",
                     (label, hit["doc_id"]))
    with BundleSearcher(db) as searcher:
        hits = searcher.search("Hong Kong revenue", top_k=50).hits
        assert hits and hit["doc_id"] not in {h["snippet"]["doc_id"] for h in hits}
        assert hit["text"] not in repr([h for h in hits])
