"""Exits that serve callers who may not see RESTRICTED text rank as if it were absent: no score,
slot, retry decision, count or title depends on a RESTRICTED chunk."""

from __future__ import annotations

import json

import pytest

from ragspine_lite.bundle.runtime import BundleSearcher
from ragspine_lite.chunking.chunking import DocumentMeta
from ragspine_lite.filtering.metadata_filter import make_filter
from ragspine_lite.link.narrative_link import build_narrative_retriever

OPEN_TEXT = "Quokka revenue grew on Rottnest island this year, with more visitors than before."
SECRET_TEXT = "Quokka quokka quokka: the merger codename stays confidential."
SECRET_PAGE = "---\nsensitivity: RESTRICTED\nentity: ACME_SECRET\ntitle: Project Nightjar\n---\n"


def _link(tmp_path, name, *, secret: bool):
    """The agent exit over a store with the open document (and the RESTRICTED one)."""
    retriever, store = build_narrative_retriever(tmp_path / f"{name}.db")
    retriever.index.ingest(OPEN_TEXT, DocumentMeta(doc_id="open", entity="ACME_HK"))
    retriever.index.ingest("Unrelated text about wombats.", DocumentMeta(doc_id="other"))
    if secret:
        retriever.index.ingest(
            SECRET_TEXT, DocumentMeta(doc_id="secret", entity="ACME_SECRET",
                                      sensitivity="RESTRICTED"),
        )
    return retriever, store


@pytest.fixture
def links(tmp_path):
    with_secret, s1 = _link(tmp_path, "with", secret=True)
    without, s2 = _link(tmp_path, "without", secret=False)
    yield with_secret, without
    s1.close()
    s2.close()


def test_agent_exit_scores_a_shared_word_as_without_the_restricted_document(links):
    with_secret, without = links
    below = with_secret.index.retrieve("quokka", top_k=5)
    assert below[0].chunk.doc_id == "secret"  # the RESTRICTED chunk does match
    got = with_secret.retrieve("quokka", top_k=5)
    expected = without.retrieve("quokka", top_k=5)
    assert [s["chunk_id"] for s in got] == ["open#c0"]
    assert got == expected  # same scores (BM25 idf/avgdl over the visible chunks only)


def test_agent_exit_top_1_with_the_best_hit_restricted_returns_the_best_visible_hit(links):
    with_secret, _ = links
    assert [s["doc_id"] for s in with_secret.retrieve("quokka", top_k=1)] == ["open"]


def test_agent_exit_retry_without_filters_does_not_depend_on_restricted_entities(links):
    with_secret, without = links
    hidden = with_secret.retrieve("quokka revenue", filters={"entity": "ACME_SECRET"})
    absent = with_secret.retrieve("quokka revenue", filters={"entity": "NO_SUCH_ENTITY"})
    assert [s["doc_id"] for s in absent] == ["open"]  # the public fallback
    assert hidden == absent
    assert hidden == without.retrieve("quokka revenue", filters={"entity": "ACME_SECRET"})


def test_the_visible_candidates_follow_every_write(links):
    with_secret, _ = links
    assert [s["doc_id"] for s in with_secret.retrieve("numbat")] == []
    with_secret.index.ingest("Numbat quokka survey.", DocumentMeta(doc_id="new"))
    assert [s["doc_id"] for s in with_secret.retrieve("numbat")] == ["new"]
    with_secret.index.ingest("Numbat quokka survey.",
                             DocumentMeta(doc_id="new", sensitivity="RESTRICTED"))
    assert with_secret.retrieve("numbat") == []
    assert [s["doc_id"] for s in with_secret.retrieve("quokka", top_k=1)] == ["open"]


def test_an_or_filter_also_ranks_without_restricted_chunks(links):
    from ragspine_lite.link.narrative_link import NarrativeIndexRetriever, OpenOnlyIndex

    either = make_filter([("doc_id", "eq", "open"), ("doc_id", "eq", "secret")], combine="or")
    with_secret, without = links
    got = NarrativeIndexRetriever(OpenOnlyIndex(with_secret.index, either)).retrieve("quokka")
    expected = NarrativeIndexRetriever(OpenOnlyIndex(without.index, either)).retrieve("quokka")
    assert got == expected and [s["doc_id"] for s in got] == ["open"]


def _page_search(searcher: BundleSearcher, query: str) -> dict:
    out = searcher.search(query, top_k=5).as_dict()
    out.pop("took_ms")
    return out


def test_page_search_output_does_not_depend_on_a_matching_restricted_document():
    query = "quokka revenue merger"
    with BundleSearcher() as plain, BundleSearcher() as secret:
        for s in (plain, secret):
            s.ingest("open.md", OPEN_TEXT)
        secret.ingest("nightjar.md", SECRET_PAGE + SECRET_TEXT)
        assert "held_back" not in _page_search(secret, query)
        assert json.dumps(_page_search(secret, query)) == json.dumps(_page_search(plain, query))


def test_page_documents_withhold_the_titles_of_restricted_documents():
    with BundleSearcher() as searcher:
        info = searcher.ingest("nightjar.md", SECRET_PAGE + SECRET_TEXT)
        listed = searcher.page_documents()
        checked = searcher.check_document("nightjar.md", SECRET_PAGE + SECRET_TEXT)
        assert info["restricted"] and [d["doc_id"] for d in listed] == ["nightjar.md"]
        for shown in (info, listed, checked, json.loads(searcher.dispatch("documents"))):
            assert "Nightjar" not in json.dumps(shown)
        searcher.ingest("open.md", "---\ntitle: Open Quokkas\n---\n" + OPEN_TEXT)
        assert {d["title"] for d in searcher.page_documents()} == {"", "Open Quokkas"}


@pytest.mark.cpython_only  # the Pyodide lane mounts the tests, not docs/
def test_the_security_notes_example_runs_as_written(capsys):
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "security.md").read_text("utf-8")
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    exec(compile(block, "docs/security.md", "exec"), {})
    assert capsys.readouterr().out == "['open']\n"
