"""A hybrid site answers before its model is in: the BM25 first, the dense lane joining later.

- The instant lane (web/ragspine-instant.mjs, under Node) on a bundle built WITH vectors gives
  the Python path's ``mode="bm25"`` results bit for bit: what a hybrid site's first searches
  show while the model downloads.
- :meth:`BundleSearcher.use_embeddings` (the model joining a searcher opened without it) gives
  exactly the hybrid results of a searcher opened with the model, leaves BM25 results alone,
  and embeds the page documents added afterwards.
"""

from __future__ import annotations

import json
import random

import pytest
from test_bundle_dense import hybrid_queries
from test_bundle_shards import _site
from test_instant_lane import _cases_file, _queries, _run_node, _score_bits

from ragspine_lite.bundle import dense
from ragspine_lite.bundle.runtime import BundleSearcher
from ragspine_lite.bundle.shards import DirectoryFiles
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend

pytestmark = pytest.mark.cpython_only

PAGE_DOC = "# Wombat notes\n\nWombats dig burrows with their front claws at night.\n"


@pytest.fixture(scope="module")
def hybrid_site(tmp_path_factory):
    """A bundle with int8 vectors (the hashed stand-in model) in several shards."""
    backend = DeterministicEmbeddingBackend(dim=48)
    patch = pytest.MonkeyPatch()
    patch.setattr(dense, "VECTOR_SHARD_BYTES", 48 * 40)
    try:
        _db, root = _site(tmp_path_factory.mktemp("join"), embedding_backend=backend)
    finally:
        patch.undo()
    return root, backend


def _queries_for_join() -> list[str]:
    return [*hybrid_queries(), *_queries(300, seed=5)]


def test_the_instant_lane_on_a_hybrid_bundle_gives_pythons_bm25_mode(hybrid_site, tmp_path):
    root, backend = hybrid_site
    rng = random.Random(3)
    cases = [{"query": q, "topK": rng.choice([1, 5, 10, 40]), "highlight": rng.random() < 0.8}
             for q in _queries_for_join()]
    with BundleSearcher.from_files(DirectoryFiles(root), embedding_backend=backend) as python:
        assert python.search("hk revenue").semantic["mode"] == "hybrid"  # the site's default
        expected = []
        for c in cases:
            out = python.search(c["query"], top_k=c["topK"], highlight=c["highlight"],
                                mode="bm25").as_dict()
            del out["took_ms"]
            out.pop("semantic", None)  # the lane has no semantic report (no model loaded)
            expected.append(json.loads(json.dumps(out)))
    found = _run_node("search", str(root), str(_cases_file(tmp_path, cases)))
    assert sum(bool(w["hits"]) for w in expected) > len(cases) // 2
    for c, want, got in zip(cases, expected, found, strict=True):
        got.pop("semantic", None)
        assert got == want, c["query"]
        assert _score_bits(got) == _score_bits(want), c["query"]


def test_the_model_joining_later_gives_the_hybrid_results_of_a_searcher_opened_with_it(
    hybrid_site,
):
    root, backend = hybrid_site
    files = DirectoryFiles(root)
    with BundleSearcher.from_files(files, embedding_backend=backend) as opened, \
            BundleSearcher.from_files(files) as joined:
        before = [joined.search(q).as_dict()["hits"] for q in hybrid_queries()]
        assert joined.search("hk revenue").semantic is None  # BM25 while the model loads
        assert joined.use_embeddings(backend) is True
        differ = 0
        for q, bm25 in zip(hybrid_queries(), before, strict=True):
            want, got = opened.search(q).as_dict(), joined.search(q).as_dict()
            assert got["hits"] == want["hits"] and got["semantic"] == want["semantic"], q
            assert joined.search(q, mode="bm25").as_dict()["hits"] == bm25, q
            differ += [h["snippet"]["chunk_id"] for h in got["hits"]] != [
                h["snippet"]["chunk_id"] for h in bm25]
        assert differ > 0  # the dense lane does change rankings
        with pytest.raises(ValueError, match="once"):
            joined.use_embeddings(backend)
        added = joined.ingest("wombats.md", PAGE_DOC)
        assert added["embedded"] >= 1  # page documents added after the join are embedded


def test_a_model_joins_before_page_documents_and_only_a_bundle_with_vectors(
    hybrid_site, tmp_path_factory
):
    root, backend = hybrid_site
    with BundleSearcher.from_files(DirectoryFiles(root)) as searcher:
        searcher.ingest("wombats.md", PAGE_DOC)
        with pytest.raises(ValueError, match="before any page document"):
            searcher.use_embeddings(backend)
    _db, plain_root = _site(tmp_path_factory.mktemp("plain"))
    with BundleSearcher.from_files(DirectoryFiles(plain_root)) as plain:
        assert plain.use_embeddings(backend) is False
        assert plain.search("hk revenue").semantic is None

