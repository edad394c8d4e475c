"""Visual page retrieval: RESTRICTED pages dropped before embedding, MaxSim ranking."""

from __future__ import annotations

import pytest
from _remote_fakes import FakeTransport, TinyVisualEmbedder

from ragspine_lite.remote.client import RemoteVisualEmbedder
from ragspine_lite.vision.colpali import (
    ColPaliVisualEmbedder,
    ColPaliVisualRetriever,
    VisualEmbedder,
    VisualPage,
    make_visual_embedder,
    render_pdf_pages,
)


def pages():
    return [
        VisualPage("report", 1, bytes([1, 1, 1])),
        VisualPage("report", 2, bytes([2, 3]), title="Chart"),
        VisualPage("memo", 1, bytes([2, 3]), sensitivity="Restricted"),
        VisualPage("deck", 4, bytes([3]), source_locator="deck.pdf#p4"),
    ]


def test_tiny_embedder_satisfies_the_protocol():
    assert isinstance(TinyVisualEmbedder(), VisualEmbedder)


def test_restricted_pages_are_dropped_before_they_are_embedded():
    emb = TinyVisualEmbedder()
    r = ColPaliVisualRetriever(emb, pages())
    assert len(r) == 3 and r.dropped == 1
    assert all(p.doc_id != "memo" for p in r.pages)
    assert len(emb.images_seen) == 3


def test_search_ranks_by_maxsim_with_stable_ties():
    r = ColPaliVisualRetriever(TinyVisualEmbedder(), pages())
    # query tokens "ab" (len 2) and "abc" (len 3): page 2 has patches 2 and 3 → 2.0
    hits = r.search("ab abc", top_k=5)
    assert [(p.doc_id, p.page_no) for p, _ in hits] == [("report", 2), ("deck", 4), ("report", 1)]
    assert [s for _, s in hits] == [2.0, 1.0, 0.0]
    assert r.search("ab", top_k=0) == []


def test_retrieve_gives_visual_snippets():
    r = ColPaliVisualRetriever(TinyVisualEmbedder(), pages())
    first, second = r.retrieve("ab abc", top_k=2)
    assert first == {
        "text": "", "doc_id": "report", "title": "Chart", "source_locator": "report#page2",
        "chunk_id": "report#page2", "sensitivity": "INTERNAL", "is_visual": True,
        "page_no": 2, "scores": {"visual_maxsim": 2.0},
    }
    assert second["source_locator"] == "deck.pdf#p4"


def test_bad_top_k_and_a_lying_embedder_are_refused():
    r = ColPaliVisualRetriever(TinyVisualEmbedder(), pages())
    with pytest.raises(ValueError, match="top_k"):
        r.search("x", top_k=-1)

    class Short(TinyVisualEmbedder):
        def embed_images(self, images):
            return []

    with pytest.raises(ValueError, match="0 embeddings for 1 pages"):
        ColPaliVisualRetriever(Short(), [pages()[0]])


def test_an_all_restricted_batch_never_calls_the_embedder():
    emb = TinyVisualEmbedder()
    r = ColPaliVisualRetriever(emb)
    assert r.add_pages([pages()[2]]) == 0 and emb.images_seen == []


def test_make_visual_embedder_specs(monkeypatch):
    monkeypatch.delenv("RAGSPINE_VISUAL_EMBEDDER", raising=False)
    assert make_visual_embedder() is None and make_visual_embedder("none") is None
    local = make_visual_embedder("ColQwen2", model_name="m")
    assert isinstance(local, ColPaliVisualEmbedder) and local.model_name == "m"
    remote = make_visual_embedder("remote", url="http://h:1", transport=FakeTransport(None))
    assert isinstance(remote, RemoteVisualEmbedder)
    with pytest.raises(ValueError, match="url="):
        make_visual_embedder("remote")
    with pytest.raises(ValueError, match="valid names: colpali, colqwen2, none, remote"):
        make_visual_embedder("clip")
    monkeypatch.setenv("RAGSPINE_VISUAL_EMBEDDER", "colpali")
    monkeypatch.setenv("RAGSPINE_COLPALI_MODEL", "vidore/colpali")
    assert make_visual_embedder().model_name == "vidore/colpali"


def test_colpali_loader_is_lazy_and_names_its_extra():
    emb = ColPaliVisualEmbedder()
    assert emb.embed_images([]) == []
    try:
        import fastembed  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"ragspine-lite\[vision\]"):
            emb.embed_query("x")


def test_render_pdf_pages_never_raises(tmp_path):
    (tmp_path / "bad.pdf").write_bytes(b"not a pdf")
    assert render_pdf_pages(tmp_path / "bad.pdf") == []
    assert render_pdf_pages(tmp_path / "missing.pdf") == []
