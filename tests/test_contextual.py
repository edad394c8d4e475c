"""contextual: the header, the factory, retrieval through it, the recorded setting."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.chunking.chunking import Chunk, DocumentMeta
from ragspine_lite.contextual import (
    CONTEXTUAL_ENV,
    INDEX_TEXT_META_KEY,
    IndexTextMismatch,
    build_context_header,
    check_index_text,
    contextual_index_text,
    index_text_setting,
    make_index_text_fn,
)
from ragspine_lite.lexical.retrieval import HybridRetriever, NarrativeIndex
from ragspine_lite.link.narrative_link import build_narrative_retriever


def chunk(**fields) -> Chunk:
    base = dict(chunk_id="d#c0", doc_id="d", seq=0, text="Revenue grew 12%.",
                source_locator="d#para1", para_start=1, para_end=1)
    return Chunk(**{**base, **fields})


def test_header_exact_strings():
    full = chunk(title="HK review", entity="ACME_HK", period="2024", heading="Results")
    assert build_context_header(full) == (
        "[文档:HK review · 实体:ACME_HK · 期间:2024 · 章节:Results]")
    assert build_context_header(chunk(entity="ACME_CN")) == "[实体:ACME_CN]"
    assert build_context_header(chunk(title="T", heading="H")) == "[文档:T · 章节:H]"
    assert build_context_header(chunk()) == ""
    # topic / geography / language are not part of the header vocabulary
    assert build_context_header(chunk(topic="x", geography="y", language="en")) == ""
    # any object works; missing or None attributes are skipped
    assert build_context_header(SimpleNamespace(text="t", period="2023", title=None)) == (
        "[期间:2023]")


def test_index_text_is_header_newline_text_and_chunk_text_untouched():
    c = chunk(title="T", entity="E")
    assert contextual_index_text(c) == "[文档:T · 实体:E]\nRevenue grew 12%."
    assert c.text == "Revenue grew 12%."
    assert contextual_index_text(chunk()) == "Revenue grew 12%."


def test_make_index_text_fn(monkeypatch):
    monkeypatch.delenv(CONTEXTUAL_ENV, raising=False)
    assert make_index_text_fn() is None
    assert make_index_text_fn("none") is None and make_index_text_fn("") is None
    for spec in ("default", "Deterministic", " on ", "contextual"):
        assert make_index_text_fn(spec) is contextual_index_text
    monkeypatch.setenv(CONTEXTUAL_ENV, "on")
    assert make_index_text_fn() is contextual_index_text
    assert make_index_text_fn("none") is None  # explicit beats env
    with pytest.raises(ValueError, match="'llm-context'"):
        make_index_text_fn("llm-context")


CHUNKS = [
    chunk(chunk_id="hk#c0", doc_id="hk", text="Bancassurance drove new sales.", entity="ACME_HK",
          title="Annual review"),
    chunk(chunk_id="cn#c0", doc_id="cn", text="Bancassurance slowed.", entity="ACME_CN"),
]


def test_a_query_matching_only_header_metadata_recalls_the_chunk():
    plain = HybridRetriever(CHUNKS)
    ctx = HybridRetriever(CHUNKS, index_text_fn=make_index_text_fn("on"))
    assert plain.search("ACME_HK") == []
    hits = ctx.search("ACME_HK")  # acme + hk: both have acme, only one has hk
    assert [r.chunk.chunk_id for r in hits] == ["hk#c0", "cn#c0"]
    assert hits[0].chunk.text == "Bancassurance drove new sales."
    assert [r.chunk.chunk_id for r in ctx.search("annual review")] == ["hk#c0"]


def test_works_through_the_chunk_store_and_keeps_citations_byte_identical(tmp_path):
    def run(fn):
        retriever, store = build_narrative_retriever(tmp_path / f"{fn is None}.db",
                                                     index_text_fn=fn)
        try:
            retriever.index.ingest("Bancassurance drove new sales.\nProfit rose.",
                                   DocumentMeta(doc_id="hk", entity="ACME_HK", title="Review"))
            return retriever.retrieve("ACME_HK bancassurance"), retriever.retrieve("ACME_HK")
        finally:
            store.close()

    (plain_both, plain_meta), (ctx_both, ctx_meta) = run(None), run(contextual_index_text)
    assert plain_meta == [] and [s["chunk_id"] for s in ctx_meta] == ["hk#c0"]
    cite = ("text", "doc_id", "title", "source_locator", "chunk_id", "entity", "sensitivity")
    assert [{k: s[k] for k in cite} for s in ctx_both] == [
        {k: s[k] for k in cite} for s in plain_both]
    assert all("[" not in str(s["text"]) for s in ctx_both)


def test_the_dense_channel_embeds_the_index_text():
    seen = []

    class Recording:
        def embed_texts(self, texts):
            seen.extend(texts)
            return [[1.0, float(len(t))] for t in texts]

    store = ChunkStore(":memory:")
    store.init_schema()
    try:
        index = NarrativeIndex(store, embedding_backend=Recording(),
                               index_text_fn=contextual_index_text)
        index.ingest("Text body.", DocumentMeta(doc_id="d", entity="ACME_HK"))
        assert seen == ["[实体:ACME_HK]\nText body."]
        assert store.iter_chunks()[0].text == "Text body."
    finally:
        store.close()


def test_index_text_setting_names():
    assert index_text_setting(None) == "none"
    assert index_text_setting(contextual_index_text) == "contextual"

    def mine(c):
        return c.text

    assert index_text_setting(mine) == (
        f"custom:{__name__}.test_index_text_setting_names.<locals>.mine")


def test_check_index_text_refuses_another_setting_and_names_both():
    check_index_text("contextual", contextual_index_text, where="db")
    check_index_text(None, None, where="db")  # unrecorded = none
    check_index_text("none", None, where="db")
    with pytest.raises(IndexTextMismatch, match=r"db was indexed with index text 'contextual', "
                                                r"not 'none'"):
        check_index_text("contextual", None, where="db")
    with pytest.raises(ValueError, match="rebuild it with 'contextual'"):
        check_index_text(None, contextual_index_text, where="db")


def test_chunk_store_meta_records_a_setting(tmp_path):
    store = ChunkStore(tmp_path / "m.db")
    assert store.read_meta(INDEX_TEXT_META_KEY) is None  # no schema yet
    store.init_schema()
    assert store.read_meta(INDEX_TEXT_META_KEY) is None
    store.write_meta(INDEX_TEXT_META_KEY, "contextual")
    store.close()
    reopened = ChunkStore(tmp_path / "m.db", read_only=True)
    try:
        assert reopened.read_meta(INDEX_TEXT_META_KEY) == "contextual"
    finally:
        reopened.close()
    store = ChunkStore(tmp_path / "m.db")
    try:
        for reserved in ("schema_version", "generation", "lexical_index_format"):
            with pytest.raises(ValueError, match="reserved"):
                store.write_meta(reserved, "9")
        assert store.schema_version() == 2 and store.generation() == 0
    finally:
        store.close()


def test_a_contextual_index_equals_a_fresh_retriever_and_sees_new_writes():
    store = ChunkStore(":memory:")
    store.init_schema()
    try:
        index = NarrativeIndex(store, index_text_fn=contextual_index_text)
        index.ingest("Bancassurance drove sales.", DocumentMeta(doc_id="a", entity="ACME_HK"))
        index.ingest("Bancassurance slowed.", DocumentMeta(doc_id="b", entity="ACME_CN"))
        for filters in ({}, {"entity": "ACME_HK"}, {"entity": "ACME_CN"}):
            for query in ("bancassurance", "hk", "acme"):
                fresh = HybridRetriever(store.iter_chunks(**filters),
                                        index_text_fn=contextual_index_text)
                assert repr(index.retrieve(query, **filters)) == repr(fresh.search(query))
        assert [r.chunk.doc_id for r in index.retrieve("cn")] == ["b"]
        index.ingest("Wombat report.", DocumentMeta(doc_id="c", entity="ACME_CN"))
        assert [r.chunk.doc_id for r in index.retrieve("cn")] == ["b", "c"]  # a write: rebuilt
        index.ingest("Bancassurance slowed.", DocumentMeta(doc_id="b", entity="ACME_HK"))
        assert [r.chunk.doc_id for r in index.retrieve("cn")] == ["c"]
    finally:
        store.close()
