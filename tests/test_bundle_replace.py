"""``BundleSearcher.replace_bundle``: a searcher opened before a rebuild takes the new bundle
in place (what the page's worker does when a content-named file has gone), keeping the page
documents and settings; a bundle indexed differently is refused (reload)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragspine_lite.bundle.export import export_store, load_corpus
from ragspine_lite.bundle.runtime import BundleSearcher, RerankSetting
from ragspine_lite.bundle.shards import DirectoryFiles, write_shards
from ragspine_lite.contextual import make_index_text_fn

DOCS = {
    "quokka.md": "---\ntitle: Quokkas\n---\nQuokkas live on Rottnest island.\n",
    "wombat.md": "---\ntitle: Wombats\n---\nWombats dig long burrows.\n",
}


def _build(tmp: Path, name: str, docs: dict[str, str], **export) -> tuple[Path, str]:
    """A sharded bundle of ``docs`` → (its folder, its header path)."""
    folder = tmp / f"{name}-docs"
    folder.mkdir()
    for file, text in docs.items():
        (folder / file).write_text(text, encoding="utf-8")
    db = tmp / f"{name}.db"
    export_store(load_corpus([folder]), db, **export)
    root = tmp / name
    return root, write_shards(db, root).header


def test_a_rebuilt_bundle_is_taken_in_place_keeping_page_documents(tmp_path):
    old_root, old_header = _build(tmp_path, "v1", DOCS)
    new_docs = {**DOCS, "numbat.md": "---\ntitle: Numbats\n---\nNumbats eat termites.\n"}
    new_root, new_header = _build(tmp_path, "v2", new_docs)
    assert new_header != old_header  # content-named: the rebuild renamed the header
    searcher = BundleSearcher.from_files(DirectoryFiles(old_root), header=old_header)
    searcher.ingest("mine.md", "Numbats are my favourite termite eaters.")
    searcher.reranker = RerankSetting("test:kept")
    assert [s["doc_id"] for s in searcher.search("numbats", rerank=False).snippets] == ["mine.md"]
    searcher.replace_bundle(DirectoryFiles(new_root), new_header)
    found = {s["doc_id"] for s in searcher.search("numbats", rerank=False).snippets}
    assert found == {"numbat.md", "mine.md"}
    assert searcher.reranker.spec == "test:kept"
    assert searcher.stats()["bundle"]["documents"] == 3


def test_a_bundle_indexed_differently_is_refused(tmp_path):
    old_root, old_header = _build(tmp_path, "v1", DOCS)
    other_root, other_header = _build(tmp_path, "v2", DOCS,
                                      index_text_fn=make_index_text_fn("contextual"))
    searcher = BundleSearcher.from_files(DirectoryFiles(old_root), header=old_header)
    with pytest.raises(ValueError, match="reload the page"):
        searcher.replace_bundle(DirectoryFiles(other_root), other_header)
    assert searcher.search("wombats").snippets[0]["doc_id"] == "wombat.md"  # still the old one
