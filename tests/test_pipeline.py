"""The retrieval pipeline's stages and plug points, through both retrievers."""

from __future__ import annotations

import inspect

import pytest

from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.chunking.chunking import Chunk, DocumentMeta
from ragspine_lite.lexical.pipeline import (
    ChannelHits,
    Fusion,
    PostRetrievalStep,
    RRFFusion,
    default_fusion,
    embed_queries,
    equality_filters,
    query_variants,
    run_post_chain,
)
from ragspine_lite.lexical.retrieval import (
    GlossaryQueryRewriter,
    HybridRetriever,
    NarrativeIndex,
    RetrievalResult,
)
from ragspine_lite.lexical.scoring import rank_scores
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend

TEXTS = {
    "a": "revenue grew in hong kong",
    "b": "profit fell in china",
    "c": "revenue and profit were flat",
}


def chunks() -> list[Chunk]:
    return [Chunk(cid, "d", i, t, f"d#para{i}", i, i) for i, (cid, t) in enumerate(TEXTS.items())]


@pytest.fixture
def index():
    store = ChunkStore(":memory:")
    store.init_schema()
    yield store
    store.close()


class ReverseFusion:
    """A plug-in fusion: every chunk any channel ranked, in reverse id order."""

    def __init__(self) -> None:
        self.seen: list[list[ChannelHits]] = []

    def fuse(self, hits, limit):
        self.seen.append(list(hits))
        ids = {cid for h in hits for cid, _ in [*h.lexical, *(h.dense or [])]}
        return [(cid, float(i)) for i, cid in enumerate(sorted(ids, reverse=True))][:limit]


def test_rrf_fusion_interleaves_channels_per_variant_and_breaks_ties_by_id():
    hits = [ChannelHits("q1", [("b", 3.0)], [("a", 0.5)]), ChannelHits("q2", [("a", 1.0)], [])]
    assert RRFFusion(k=1).fuse(hits, 5) == [("a", 0.5 + 0.5), ("b", 0.5)]
    assert RRFFusion(k=1).fuse([ChannelHits("q", [("z", 1.0)], [("y", 1.0)])], 5) == [
        ("y", 0.5),
        ("z", 0.5),
    ]
    assert RRFFusion().fuse(hits, 1) == [("a", 2 / 61)]
    assert isinstance(RRFFusion(), Fusion)


def test_rank_scores_sorts_by_score_then_id_and_cuts():
    assert rank_scores({"b": 1.0, "a": 1.0, "c": 2.0}) == [("c", 2.0), ("a", 1.0), ("b", 1.0)]
    assert rank_scores({}, 3) == []


def test_default_fusion_is_rrf_for_backends_without_calibration():
    assert default_fusion(None) == RRFFusion()
    assert default_fusion(DeterministicEmbeddingBackend(), rrf_k=10) == RRFFusion(10)


def test_query_variants_keep_the_original_first_and_drop_duplicates():
    class Dup:
        def rewrite(self, query):
            return [query, "x", query, "x", "y"]

    assert query_variants(None, "q") == ["q"]
    assert query_variants(Dup(), "q") == ["q", "x", "y"]


def test_equality_filters_name_the_five_dimensions():
    assert equality_filters("t", None, "", None, "en") == {
        "topic": "t",
        "entity": None,
        "geography": "",
        "period": None,
        "language": "en",
    }


def test_every_retriever_takes_the_retrieve_options_as_keywords(index):
    from ragspine_lite.bundle.sharded_index import ShardedIndex
    from ragspine_lite.pipeline.stages import FILTER_DIMS, RetrieveOptions, retrieve_keywords

    rerankers = (NarrativeIndex.retrieve, ShardedIndex.retrieve)
    for method in (HybridRetriever.search, *rerankers):
        params = list(inspect.signature(method).parameters.values())
        assert [p.name for p in params[:2]] == ["self", "query"]
        assert all(p.kind is p.KEYWORD_ONLY for p in params[2:])
        names = [p.name for p in params[2:]]
        reranks = method in rerankers
        assert names == [*FILTER_DIMS, "top_k", *(("rerank", "top_n") if reranks else ()),
                         "metadata_filter"]

    plain = HybridRetriever(chunks())
    assert [r.chunk.chunk_id for r in plain.search("revenue", topic="", top_k=1)] == ["a"]
    assert plain.search("revenue", topic="other") == []
    for bad in ("topics", "rerank"):
        with pytest.raises(TypeError, match=f"HybridRetriever.search.*'{bad}'"):
            plain.search("revenue", **{bad: "x"})
    NarrativeIndex(index).ingest(" ".join(TEXTS.values()), DocumentMeta(doc_id="d", title="T"))
    narrative = NarrativeIndex(index)
    assert len(narrative.retrieve("revenue", rerank=False, top_n=1, language="")) == 1
    assert narrative.retrieve("revenue", rerank=False, top_n=1, language="zz") == []

    seen = []

    class Probe:
        @retrieve_keywords(reranks=False)
        def search(self, query, options):
            seen.append(options)
            return query

    assert Probe().search("q", entity="ACME", top_k=3) == "q"
    assert seen == [RetrieveOptions({**dict.fromkeys(FILTER_DIMS), "entity": "ACME"}, top_k=3)]


def test_embed_queries_prefers_the_query_role_and_checks_the_count():
    class Roles(DeterministicEmbeddingBackend):
        def embed_queries(self, texts):
            return self.embed_texts(["query: " + t for t in texts])

    backend = Roles(dim=8)
    assert embed_queries(backend, ["hk"]) == backend.embed_texts(["query: hk"])
    plain = DeterministicEmbeddingBackend(dim=8)
    assert embed_queries(plain, ["hk"]) == plain.embed_texts(["hk"])

    class Short:
        def embed_texts(self, texts):
            return []

    with pytest.raises(ValueError, match="0 vectors for 1 queries"):
        embed_queries(Short(), ["hk"])


def test_a_plugged_fusion_decides_the_order_in_both_retrievers(index):
    fusion = ReverseFusion()
    backend = DeterministicEmbeddingBackend(dim=16)
    got = HybridRetriever(chunks(), embedding_backend=backend, fusion=fusion).search("revenue")
    assert [r.chunk.chunk_id for r in got] == ["c", "b", "a"]
    assert [h.query for h in fusion.seen[0]] == ["revenue"]
    assert {cid for cid, _ in fusion.seen[0][0].lexical} == {"a", "c"}
    assert len(fusion.seen[0][0].dense) == 3  # every candidate has a cosine

    narrative = NarrativeIndex(index, fusion=ReverseFusion())
    narrative.ingest("revenue grew\n\nrevenue fell", DocumentMeta(doc_id="d"))
    ids = [r.chunk.chunk_id for r in narrative.retrieve("revenue")]
    assert ids == sorted(ids, reverse=True) and ids


def test_the_query_role_is_used_for_queries_and_never_for_chunks():
    asked: list[str] = []

    class Roles(DeterministicEmbeddingBackend):
        def embed_queries(self, texts):
            asked.extend(texts)
            return self.embed_texts(["query: " + t for t in texts])

    backend = Roles(dim=16)
    got = HybridRetriever(chunks(), embedding_backend=backend).search("hong kong")
    assert asked == ["hong kong"]
    query_vec = backend.embed_texts(["query: hong kong"])[0]
    chunk_vec = backend.embed_texts([TEXTS["a"]])[0]
    cosine = sum(x * y for x, y in zip(query_vec, chunk_vec, strict=True))
    best = {r.chunk.chunk_id: r.vector_score for r in got}
    assert best["a"] == pytest.approx(cosine)


def test_post_retrieval_steps_run_in_order_after_fusion_and_after_the_judge(index):
    calls: list[str] = []

    def drop_last(query: str, results: list[RetrievalResult]) -> list[RetrievalResult]:
        calls.append(f"drop:{query}:{len(results)}")
        return results[:-1]

    def reverse(query: str, results: list[RetrievalResult]) -> list[RetrievalResult]:
        calls.append(f"reverse:{len(results)}")
        return results[::-1]

    assert isinstance(drop_last, PostRetrievalStep)
    plain = HybridRetriever(chunks()).search("revenue profit")
    got = HybridRetriever(chunks(), post_retrieval=[drop_last, reverse]).search("revenue profit")
    assert calls == ["drop:revenue profit:3", "reverse:2"]
    assert [r.chunk.chunk_id for r in got] == [r.chunk.chunk_id for r in plain[:-1]][::-1]

    class Judge:
        def judge(self, query, candidates):
            calls.append(f"judge:{len(candidates)}")
            return list(range(len(candidates)))

    calls.clear()
    narrative = NarrativeIndex(index, judge=Judge(), post_retrieval=[drop_last])
    narrative.ingest("revenue grew\n\nprofit fell\n\nrevenue and profit", DocumentMeta(doc_id="d"))
    narrative.retrieve("revenue profit")
    assert calls[0].startswith("judge:") and calls[1].startswith("drop:")
    calls.clear()
    narrative.retrieve("revenue profit", rerank=False)
    assert [c.split(":")[0] for c in calls] == ["drop"]


def test_run_post_chain_without_steps_returns_the_same_list():
    results: list[RetrievalResult] = []
    assert run_post_chain("q", results, []) is results


def test_dense_queries_name_what_a_retrieve_embeds(index):
    assert NarrativeIndex(index).dense_queries("hk revenue") == []
    hybrid = NarrativeIndex(
        index,
        embedding_backend=DeterministicEmbeddingBackend(dim=8),
        query_rewriter=GlossaryQueryRewriter(max_queries=2),
    )
    assert hybrid.dense_queries("hk revenue") == ["hk revenue", "hk REVENUE"]

    class Unknown(DeterministicEmbeddingBackend):
        def coverage(self, text):
            return 0.0

    gated = NarrativeIndex(index, embedding_backend=Unknown(dim=8))
    assert gated.dense_queries("营收") == []
