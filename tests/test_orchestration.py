"""One orchestration: every index runs Pipeline.search over sibling lanes, with the same rules."""

from __future__ import annotations

import pytest
from test_bundle_shards import _site

from ragspine_lite.bundle.sharded_index import ShardedIndex, ShardLane
from ragspine_lite.bundle.shards import DirectoryFiles, ShardedBundle
from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.chunking.chunking import DocumentMeta
from ragspine_lite.filtering.metadata_filter import make_filter
from ragspine_lite.lexical.inverted_index import StoreBM25Index
from ragspine_lite.link.filtered_index import FilteredIndex
from ragspine_lite.link.narrative_link import OpenOnlyIndex
from ragspine_lite.pipeline.fusion import RRFFusion
from ragspine_lite.pipeline.lanes import ChunkListLane, StoreLane
from ragspine_lite.pipeline.retrievers import GlossaryQueryRewriter, NarrativeIndex
from ragspine_lite.pipeline.search import Pipeline

DOCS = {
    "a": "Hong Kong revenue grew strongly in 2024.",
    "b": "ACME HK revenue outlook remains positive, revenue up.",
    "c": "Profit fell in the mainland.",
    "s": "Hong Kong revenue merger plan, confidential.",
}


@pytest.fixture
def store():
    s = ChunkStore(":memory:")
    s.init_schema()
    index = NarrativeIndex(s)
    for doc_id, text in DOCS.items():
        label = "RESTRICTED" if doc_id == "s" else "INTERNAL"
        index.ingest(text, DocumentMeta(doc_id=doc_id, topic=doc_id, sensitivity=label))
    yield s
    s.close()


def ranked(results):
    return [(r.chunk.chunk_id, r.bm25_score, r.fused_score) for r in results]


@pytest.mark.parametrize("query", ["hong kong revenue", "revenue", "hk revenue", "nothing"])
def test_the_store_lane_and_the_list_lane_rank_alike_through_one_pipeline(store, query):
    pipeline = Pipeline(RRFFusion(), GlossaryQueryRewriter())
    bm25 = StoreBM25Index.attach(store)
    rows = store.iter_chunk_rows()
    lanes = [
        StoreLane(store, bm25),
        ChunkListLane([c for _, c in rows]),  # in memory, its own index
        ChunkListLane([c for _, c in rows], index=bm25, docnos=[d for d, _ in rows]),
    ]
    got = [ranked(pipeline.search(query, lane, limit=3)) for lane in lanes]
    assert got[0] == got[1] == got[2]
    assert ranked(NarrativeIndex(store, query_rewriter=GlossaryQueryRewriter()).retrieve(
        query, top_k=3)) == got[0]


def test_a_filter_nobody_passes_gives_nothing_and_still_runs_the_post_chain(store):
    calls = []

    def step(query, results):
        calls.append(list(results))
        return results

    pipeline = Pipeline(RRFFusion(), steps=[step])
    lane = ChunkListLane([c for _, c in store.iter_chunk_rows()])
    assert pipeline.search("revenue", lane, limit=5, filters={"topic": "zzz"}) == []
    assert calls == [[]]


@pytest.mark.slow  # the slow lane: scripts/test.sh --quick skips it
def test_the_sharded_index_runs_its_post_retrieval_steps(tmp_path):
    _db, root = _site(tmp_path)
    bundle = ShardedBundle(DirectoryFiles(root))
    plain = ShardedIndex(bundle).retrieve("revenue growth", top_k=5)
    assert len(plain) > 1

    def reverse(query, results):
        return results[::-1]

    stepped = ShardedIndex(bundle, post_retrieval=[reverse]).retrieve("revenue growth", top_k=5)
    assert ranked(stepped) == ranked(plain)[::-1]
    lane = ShardLane(bundle)
    keys = [k for k, _ in lane.rankings(["revenue growth"], None, 5)[0]]
    assert [r.chunk.chunk_id for r in plain] == [
        lane.chunks_for(keys, None)[k].chunk_id for k in keys
    ]


def test_the_open_only_index_ranks_as_if_restricted_were_absent(store):
    index = NarrativeIndex(store)
    seen = index.retrieve("hong kong revenue merger")
    assert "s#c0" in {r.chunk.chunk_id for r in seen}
    kept = OpenOnlyIndex(index).retrieve("hong kong revenue merger")
    assert "s#c0" not in {r.chunk.chunk_id for r in kept}
    assert [r.chunk.chunk_id for r in kept] == [
        r.chunk.chunk_id for r in seen if r.chunk.doc_id != "s"
    ]


def test_a_fixed_filter_wins_over_the_callers(store):
    index = NarrativeIndex(store)
    fixed = FilteredIndex(index, metadata_filter=make_filter([("topic", "eq", "a")]))
    other = make_filter([("topic", "eq", "b")])
    assert [r.chunk.doc_id for r in fixed.retrieve("revenue", metadata_filter=other)] == ["a"]


def test_a_failing_index_falls_back_once_logged_and_says_why(store, caplog):
    class Broken:
        def retrieve(self, query, **kwargs):
            raise RuntimeError("model cannot run")

    wrapped = FilteredIndex(Broken(), fallback=NarrativeIndex(store))
    results = wrapped.retrieve("revenue")
    assert results and wrapped.failure == "RuntimeError: model cannot run"
    assert any("dense search failed" in r.getMessage() for r in caplog.records)
