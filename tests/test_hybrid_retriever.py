"""HybridRetriever: pre-filtering, BM25 / vector lanes, RRF, caching and validation."""

from __future__ import annotations

import pytest
from _bm25_reference import as_tuples, reference_search
from _fakes import RecordingBackend
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragspine_lite.chunking.chunking import Chunk
from ragspine_lite.filtering.metadata_filter import make_filter
from ragspine_lite.lexical import retrieval as retrieval_mod
from ragspine_lite.lexical.retrieval import GlossaryQueryRewriter, HybridRetriever
from ragspine_lite.lexical.scoring import bm25_scores, cosine_similarity
from ragspine_lite.lexical.tokenizer import tokenize
from ragspine_lite.pipeline import lanes as lanes_mod
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend
from ragspine_lite.vector.store import InProcessVectorStore


def mk(cid: str, text: str, doc_id: str = "doc", **kw: str) -> Chunk:
    return Chunk(cid, doc_id, 0, text, f"{doc_id}#para1", 1, 1, **kw)


class RecordingStore(InProcessVectorStore):
    """The in-process store, recording upserted ids and query arguments."""

    def __init__(self) -> None:
        super().__init__()
        self.upserted: list[str] = []
        self.queries: list[dict] = []

    def upsert(self, records):
        records = list(records)
        self.upserted.extend(r.id for r in records)
        return super().upsert(records)

    def query(self, vector, *, k=50, where=None):
        self.queries.append({"k": k, "where": where})
        return super().query(vector, k=k, where=where)


class FixedRewriter:
    def __init__(self, variants: list[str]) -> None:
        self.variants = variants

    def rewrite(self, query: str) -> list[str]:
        return list(self.variants)


CHUNKS = [
    mk("a", "revenue grew in hong kong", topic="REVENUE", entity="ACME_HK", period="2024"),
    mk("b", "profit fell in china", topic="PROFIT", entity="ACME_CN", period="2024"),
    mk("c", "revenue and profit were flat", topic="REVENUE", entity="", period="2023"),
    mk("d", "weather was sunny", topic="", entity="ACME_HK", period="2023"),
]


def ids(results) -> list[str]:
    return [r.chunk.chunk_id for r in results]


# --- construction ------------------------------------------------------------------------


def test_attributes_mirror_the_arguments_and_chunks_are_copied():
    chunks = list(CHUNKS)
    rw = GlossaryQueryRewriter()
    cache: dict = {}

    def fn(c):
        return c.text

    r = HybridRetriever(
        chunks, query_rewriter=rw, k1=1.2, b=0.5, rrf_k=10, top_k=3,
        embedding_cache=cache, manage_vectors=False, index_text_fn=fn,
    )
    assert r.chunks == chunks and r.chunks is not chunks
    chunks.pop()
    assert len(r.chunks) == 4
    assert (r.query_rewriter, r.k1, r.b, r.rrf_k, r.top_k) == (rw, 1.2, 0.5, 10, 3)
    assert r.embedding_cache is cache
    assert r.manage_vectors is False and r.index_text_fn is fn
    assert r.embedding_backend is None


def test_vector_store_is_created_only_when_a_backend_is_given():
    assert HybridRetriever(CHUNKS).vector_store is None
    made = HybridRetriever(CHUNKS, embedding_backend=DeterministicEmbeddingBackend()).vector_store
    assert isinstance(made, InProcessVectorStore)
    injected = InProcessVectorStore()
    assert HybridRetriever(CHUNKS, vector_store=injected).vector_store is injected
    backend = DeterministicEmbeddingBackend()
    assert HybridRetriever(
        CHUNKS, embedding_backend=backend, vector_store=injected
    ).vector_store is injected


def test_each_retriever_with_a_backend_gets_its_own_store():
    backend = DeterministicEmbeddingBackend()
    one = HybridRetriever(CHUNKS, embedding_backend=backend).vector_store
    two = HybridRetriever(CHUNKS, embedding_backend=backend).vector_store
    assert one is not two


@pytest.mark.parametrize("bad", [0, -3, True, 1.0, "5", None])
def test_constructor_rejects_a_bad_top_k(bad):
    with pytest.raises(ValueError, match="top_k"):
        HybridRetriever(CHUNKS, top_k=bad)


@pytest.mark.parametrize("bad", [0, -1, False, 2.0, "2"])
def test_search_rejects_a_bad_top_k(bad):
    with pytest.raises(ValueError, match="top_k"):
        HybridRetriever(CHUNKS).search("revenue", top_k=bad)


# --- pre-filtering -------------------------------------------------------------------------


def test_equality_filters_select_candidates():
    r = HybridRetriever(CHUNKS)
    assert ids(r.search("revenue profit", topic="REVENUE")) == ["c", "a"]
    assert ids(r.search("revenue profit", entity="ACME_CN")) == ["b"]
    assert ids(r.search("revenue profit", topic="REVENUE", period="2024")) == ["a"]
    assert r.search("revenue", topic="NOPE") == []


def test_empty_string_filter_is_a_real_filter():
    r = HybridRetriever(CHUNKS)
    assert ids(r.search("revenue profit weather", entity="")) == ["c"]
    assert ids(r.search("revenue profit weather", topic="")) == ["d"]


def test_metadata_filter_narrows_candidates_after_equality_filters():
    r = HybridRetriever(CHUNKS)
    mf = make_filter([("period", "gte", "2024")])
    # a and b each hold one query word once, with the same idf: the shorter b wins.
    assert ids(r.search("revenue profit", metadata_filter=mf)) == ["b", "a"]
    assert ids(r.search("revenue profit", topic="REVENUE", metadata_filter=mf)) == ["a"]
    none = make_filter([("period", "eq", "1999")])
    assert r.search("revenue", metadata_filter=none) == []


def test_bm25_statistics_are_computed_over_the_candidates_only():
    r = HybridRetriever(CHUNKS)
    got = r.search("revenue", topic="REVENUE")
    cand = [c for c in CHUNKS if c.topic == "REVENUE"]
    expected = bm25_scores(["revenue"], [tokenize(c.text) for c in cand])
    by_id = {c.chunk_id: s for c, s in zip(cand, expected, strict=True)}
    for res in got:
        assert res.bm25_score == pytest.approx(by_id[res.chunk.chunk_id], abs=1e-12)


def test_filtered_out_chunks_are_never_embedded_nor_upserted():
    backend = RecordingBackend()
    store = RecordingStore()
    secret = mk("s", "revenue secret plan", entity="OTHER", sensitivity="RESTRICTED")
    r = HybridRetriever([*CHUNKS, secret], embedding_backend=backend, vector_store=store)
    r.search("revenue", entity="ACME_HK")
    r.search("revenue", metadata_filter=make_filter([("entity", "ne", "OTHER")]))
    assert "revenue secret plan" not in backend.seen
    assert "s" not in store.upserted
    assert "s" not in r.embedding_cache
    assert store.count() == 4


def test_no_candidates_means_no_embedding_at_all():
    backend = RecordingBackend()
    r = HybridRetriever(CHUNKS, embedding_backend=backend)
    assert r.search("revenue", topic="NOPE") == []
    assert backend.calls == []


# --- vectors, cache and store ------------------------------------------------------------


def test_chunk_vectors_are_embedded_once_and_cached_by_chunk_id():
    backend = RecordingBackend()
    r = HybridRetriever(CHUNKS, embedding_backend=backend)
    r.search("revenue", entity="ACME_HK")  # embeds a, d + the query
    assert backend.calls[0] == [CHUNKS[0].text, CHUNKS[3].text]
    assert set(r.embedding_cache) == {"a", "d"}
    backend.calls.clear()
    r.search("profit")  # only b and c are new
    assert backend.calls[0] == [CHUNKS[1].text, CHUNKS[2].text]
    assert backend.calls[1:] == [["profit"]]
    backend.calls.clear()
    r.search("profit")
    assert backend.calls == [["profit"]]


def test_injected_cache_is_used_and_filled():
    backend = RecordingBackend()
    cache = {c.chunk_id: backend.inner.embed_texts([c.text])[0] for c in CHUNKS[:2]}
    r = HybridRetriever(CHUNKS, embedding_backend=backend, embedding_cache=cache)
    r.search("revenue")
    assert backend.calls[0] == [CHUNKS[2].text, CHUNKS[3].text]
    assert set(cache) == {"a", "b", "c", "d"}


def test_upsert_metadata_is_the_filter_dims_plus_doc_id():
    store = InProcessVectorStore()
    backend = DeterministicEmbeddingBackend()
    r = HybridRetriever(CHUNKS, embedding_backend=backend, vector_store=store)
    r.search("revenue")
    hit = {h.id: h for h in store.query([1.0] * 256, k=10)}["a"]
    assert dict(hit.metadata) == {
        "topic": "REVENUE", "entity": "ACME_HK", "geography": "", "period": "2024",
        "language": "", "doc_id": "doc",
    }


def test_store_query_uses_stringified_filter_args_as_where_and_candidate_count_as_k():
    store = RecordingStore()
    r = HybridRetriever(CHUNKS, embedding_backend=RecordingBackend(), vector_store=store)
    r.search("revenue", topic="REVENUE", period="2024")
    assert store.queries == [{"k": 1, "where": {"topic": "REVENUE", "period": "2024"}}]
    store.queries.clear()
    r.search("revenue")
    assert store.queries == [{"k": 4, "where": None}]


def test_manage_vectors_false_never_embeds_chunks():
    backend = RecordingBackend()
    store = InProcessVectorStore()
    r = HybridRetriever(CHUNKS, embedding_backend=backend, vector_store=store, manage_vectors=False)
    got = r.search("revenue")
    assert backend.calls == [["revenue"]]
    assert store.count() == 0
    assert all(res.vector_score == 0.0 for res in got)
    assert ids(got) == ids(HybridRetriever(CHUNKS).search("revenue"))


def test_vector_ranking_is_restricted_to_candidates():
    store = InProcessVectorStore()
    backend = DeterministicEmbeddingBackend()
    # Put every chunk in the store, then search a retriever that only knows two of them.
    HybridRetriever(CHUNKS, embedding_backend=backend, vector_store=store).search("x")
    r = HybridRetriever(CHUNKS[:2], embedding_backend=backend, vector_store=store,
                        manage_vectors=False)
    for query in ("revenue weather", "profit", "sunny flat"):
        assert set(ids(r.search(query))) <= {"a", "b"}


def test_hybrid_mode_gives_every_candidate_an_rrf_share():
    chunks = [mk(f"k{i:02d}", f"report item{i}") for i in range(60)]
    r = HybridRetriever(chunks, embedding_backend=DeterministicEmbeddingBackend(), top_k=60)
    got = r.search("report")
    assert len(got) == 60
    assert all(res.vector_score > 0 for res in got)
    assert all(res.fused_score > 0 for res in got)


def test_zero_cosine_candidates_stay_in_the_hybrid_ranking():
    r = HybridRetriever(CHUNKS, embedding_backend=DeterministicEmbeddingBackend(dim=4096))
    got = {res.chunk.chunk_id: res for res in r.search("weather")}
    assert set(got) == {"a", "b", "c", "d"}
    assert got["a"].bm25_score == 0.0
    assert got["a"].fused_score > 0


def test_pure_bm25_drops_chunks_without_a_bm25_hit():
    got = HybridRetriever(CHUNKS).search("weather")
    assert ids(got) == ["d"]
    assert HybridRetriever(CHUNKS).search("nothing matches") == []
    assert HybridRetriever(CHUNKS).search("!!!") == []


def test_vector_scores_are_cosines_of_query_and_index_text():
    backend = DeterministicEmbeddingBackend(dim=64)
    r = HybridRetriever(CHUNKS, embedding_backend=backend)
    qv = backend.embed_texts(["hong kong revenue"])[0]
    for res in r.search("hong kong revenue"):
        cv = backend.embed_texts([res.chunk.text])[0]
        assert res.vector_score == pytest.approx(cosine_similarity(qv, cv), abs=1e-12)


# --- ranking, fusion, queries ---------------------------------------------------------------


def test_bm25_ranking_ties_break_by_chunk_id():
    chunks = [mk("z", "same words"), mk("m", "same words"), mk("a", "same words")]
    got = HybridRetriever(chunks).search("same")
    assert ids(got) == ["a", "m", "z"]
    assert got[0].bm25_score == got[1].bm25_score == got[2].bm25_score
    assert [res.fused_score for res in got] == [1 / 61, 1 / 62, 1 / 63]


def test_equal_fused_scores_break_by_chunk_id_not_by_ranking_order():
    # "b" leads the alpha ranking and "a" the beta ranking: both fuse to 1/61 + 1/62.
    chunks = [mk("b", "alpha alpha beta"), mk("a", "alpha beta beta")]
    got = HybridRetriever(chunks, query_rewriter=FixedRewriter(["alpha", "beta"])).search("x")
    assert got[0].fused_score == got[1].fused_score == 1 / 61 + 1 / 62
    assert ids(got) == ["a", "b"]


def test_results_sort_by_fused_then_chunk_id_and_cut_to_top_k():
    r = HybridRetriever(CHUNKS, top_k=2)
    full = HybridRetriever(CHUNKS).search("revenue profit")
    assert ids(r.search("revenue profit")) == ids(full)[:2]
    assert ids(r.search("revenue profit", top_k=3)) == ids(full)[:3]
    keys = [(-res.fused_score, res.chunk.chunk_id) for res in full]
    assert keys == sorted(keys)


def test_rrf_k_changes_the_fused_scores():
    got = HybridRetriever(CHUNKS, rrf_k=1).search("weather")
    assert got[0].fused_score == 0.5


def test_k1_and_b_reach_bm25():
    docs = [tokenize(c.text) for c in CHUNKS]
    expected = bm25_scores(["revenue"], docs, k1=0.9, b=0.3)
    got = {res.chunk.chunk_id: res.bm25_score for res in
           HybridRetriever(CHUNKS, k1=0.9, b=0.3).search("revenue")}
    assert got["a"] == pytest.approx(expected[0], abs=1e-12)
    assert got["c"] == pytest.approx(expected[2], abs=1e-12)


def test_duplicate_query_variants_are_harmless():
    single = HybridRetriever(CHUNKS).search("revenue")
    dup = HybridRetriever(CHUNKS, query_rewriter=FixedRewriter(["revenue", "revenue"])).search(
        "revenue"
    )
    assert repr(dup) == repr(single)


def test_duplicate_variants_are_embedded_once():
    backend = RecordingBackend()
    r = HybridRetriever(CHUNKS, embedding_backend=backend,
                        query_rewriter=FixedRewriter(["revenue", "profit", "revenue"]))
    r.search("revenue")
    assert backend.calls[1:] == [["revenue", "profit"]]  # one call for all variants


def test_scores_are_the_best_over_query_variants_and_fusion_sums_all_rankings():
    r = HybridRetriever(CHUNKS, query_rewriter=FixedRewriter(["revenue", "profit"]))
    got = {res.chunk.chunk_id: res for res in r.search("ignored")}
    docs = [tokenize(c.text) for c in CHUNKS]
    rev = bm25_scores(["revenue"], docs)
    prof = bm25_scores(["profit"], docs)
    # c holds both words: best of its two BM25 scores, and a share from both rankings.
    assert got["c"].bm25_score == pytest.approx(max(rev[2], prof[2]), abs=1e-12)
    rev_rank = sorted([("a", rev[0]), ("c", rev[2])], key=lambda t: (-t[1], t[0]))
    prof_rank = sorted([("b", prof[1]), ("c", prof[2])], key=lambda t: (-t[1], t[0]))
    expected_c = 1 / (60 + 1 + [x for x, _ in rev_rank].index("c")) + 1 / (
        60 + 1 + [x for x, _ in prof_rank].index("c")
    )
    assert got["c"].fused_score == pytest.approx(expected_c, abs=1e-15)
    assert set(got) == {"a", "b", "c"}


def test_index_text_fn_feeds_bm25_and_embeddings_but_results_keep_the_chunk():
    backend = RecordingBackend()

    def fn(c):
        return f"{c.entity} {c.text}"

    r = HybridRetriever(CHUNKS, embedding_backend=backend, index_text_fn=fn)
    got = r.search("ACME_CN")
    assert ids(got)[0] == "b"
    assert got[0].bm25_score > 0
    assert got[0].chunk is CHUNKS[1]
    assert backend.calls[0][1] == "ACME_CN profit fell in china"
    assert HybridRetriever(CHUNKS).search("ACME_CN") == []


def test_result_chunks_are_the_input_objects():
    got = HybridRetriever(CHUNKS).search("revenue")
    assert all(any(res.chunk is c for c in CHUNKS) for res in got)


def test_repeated_searches_and_fresh_instances_are_identical():
    def make():
        return HybridRetriever(CHUNKS, embedding_backend=DeterministicEmbeddingBackend(dim=32),
                               query_rewriter=GlossaryQueryRewriter())

    r = make()
    first = repr(r.search("hk revenue profit"))
    assert repr(r.search("hk revenue profit")) == first
    assert repr(make().search("hk revenue profit")) == first


def test_injected_store_gives_the_same_results_as_the_default_store():
    backend = DeterministicEmbeddingBackend(dim=32)
    default = HybridRetriever(CHUNKS, embedding_backend=backend).search("hong kong revenue")
    injected = HybridRetriever(
        CHUNKS, embedding_backend=backend, vector_store=InProcessVectorStore()
    ).search("hong kong revenue")
    assert repr(injected) == repr(default)


# -- the inverted index: same results as bm25_scores, built once ------------------------------

_WORDS = ["revenue", "profit", "hk", "cn", "grew", "the", "香", "港", "收", "入", "营收", "ACME"]
_text = st.lists(st.sampled_from(_WORDS), max_size=10).map(" ".join)
_chunk = st.builds(
    lambda n, text, topic, entity: mk(f"c{n}", text, topic=topic, entity=entity),
    st.integers(0, 12), _text, st.sampled_from(["REVENUE", "PROFIT"]),
    st.sampled_from(["ACME_HK", "ACME_CN", ""]),
)


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(
    chunks=st.lists(_chunk, min_size=1, max_size=20),
    query=st.lists(st.sampled_from([*_WORDS, "香港", "nothing"]), max_size=5).map(" ".join),
    topic=st.sampled_from([None, "REVENUE"]),
    mf=st.sampled_from([None, make_filter([("entity", "ne", "ACME_CN")])]),
    rewrite=st.booleans(),
    top_k=st.integers(1, 12),
)
def test_search_equals_the_reference_for_any_corpus_filter_and_rewrite(
    chunks, query, topic, mf, rewrite, top_k
):
    rewriter = GlossaryQueryRewriter() if rewrite else None
    r = HybridRetriever(chunks, query_rewriter=rewriter)
    expected = reference_search(chunks, query, rewriter=rewriter, filters={"topic": topic},
                                metadata_filter=mf, top_k=top_k)
    for _ in range(2):  # a second search reuses the index and changes nothing
        got = as_tuples(r.search(query, topic=topic, metadata_filter=mf, top_k=top_k))
        assert [row[1:] for row in got] == [row[1:] for row in expected]
        # The very chunk objects, the first candidate of each id when ids repeat.
        assert all(g[0] is e[0] for g, e in zip(got, expected, strict=True))


def test_the_corpus_is_tokenized_once_not_per_search(monkeypatch):
    calls = []
    real = lanes_mod.tokenize  # the lane over a list of chunks tokenizes corpus and queries
    monkeypatch.setattr(lanes_mod, "tokenize", lambda text: calls.append(text) or real(text))
    r = HybridRetriever(CHUNKS)
    r.search("revenue")
    first = len(calls)
    assert first == len(CHUNKS) + 1  # every chunk, then the query
    r.search("profit", topic="PROFIT")
    r.search("revenue hk")
    assert len(calls) == first + 2  # only the two queries


def test_index_text_fn_is_what_the_index_holds():
    chunks = [mk("a", "plain text", title="ACME_HK"), mk("b", "acme_hk in the body")]
    r = HybridRetriever(chunks, index_text_fn=lambda c: f"{c.title} {c.text}")
    expected = reference_search(chunks, "acme_hk", index_text=lambda c: f"{c.title} {c.text}")
    assert as_tuples(r.search("acme_hk")) == expected


# --- the vocabulary-coverage gate ------------------------------------------------------------


class CoverageBackend(RecordingBackend):
    """A recording backend that knows only the words in ``known`` (its "vocabulary")."""

    def __init__(self, known: set[str]) -> None:
        super().__init__()
        self.known = known
        self.coverage_calls: list[str] = []

    def coverage(self, text: str) -> float:
        self.coverage_calls.append(text)
        words = tokenize(text)
        return 1.0 if not words else sum(w in self.known for w in words) / len(words)


KNOWN = {"revenue", "grew", "in", "hong", "kong", "profit", "fell", "china"}
GATE_QUERIES = ["revenue grew", "香港 revenue", "香港营收", "profit weather"]


def test_a_query_below_min_coverage_is_searched_exactly_like_pure_bm25():
    backend = CoverageBackend(KNOWN)
    store = RecordingStore()
    hybrid = HybridRetriever(CHUNKS, embedding_backend=backend, vector_store=store)
    pure = HybridRetriever(CHUNKS)
    for query in ("香港营收", "weather was sunny"):  # coverage 0.0 and 1/3
        for filters in ({}, {"entity": "ACME_HK"}):
            got = hybrid.search(query, **filters)
            assert repr(got) == repr(pure.search(query, **filters))
            assert hybrid.last_channel == retrieval_mod.CHANNEL_OUTSIDE_VOCABULARY
    assert backend.calls == [] and store.upserted == [] and store.queries == []
    assert pure.last_channel == retrieval_mod.CHANNEL_BM25


def test_a_covered_query_takes_the_hybrid_channel():
    backend = CoverageBackend(KNOWN)
    hybrid = HybridRetriever(CHUNKS, embedding_backend=backend)
    assert hybrid.last_channel is None
    results = hybrid.search("revenue grew in hong kong")
    assert hybrid.last_channel == retrieval_mod.CHANNEL_HYBRID
    assert backend.seen[-1] == "revenue grew in hong kong"
    assert len(results) == len(CHUNKS)  # hybrid ranks every candidate
    assert backend.coverage_calls == ["revenue grew in hong kong"]


def test_the_gate_uses_min_query_coverage_and_none_turns_it_off():
    query = "revenue weather"  # coverage 0.5
    assert retrieval_mod.DEFAULT_MIN_COVERAGE == 0.9
    strict = HybridRetriever(CHUNKS, embedding_backend=CoverageBackend(KNOWN))
    strict.search(query)
    assert strict.last_channel == retrieval_mod.CHANNEL_OUTSIDE_VOCABULARY
    lenient = HybridRetriever(
        CHUNKS, embedding_backend=CoverageBackend(KNOWN), min_query_coverage=0.5
    )
    lenient.search(query)
    assert lenient.last_channel == retrieval_mod.CHANNEL_HYBRID
    off = HybridRetriever(CHUNKS, embedding_backend=CoverageBackend(KNOWN), min_query_coverage=None)
    ungated = off.search("香港营收")
    assert off.last_channel == retrieval_mod.CHANNEL_HYBRID
    assert off.embedding_backend.coverage_calls == []
    assert len(ungated) == len(CHUNKS)


def test_a_backend_without_coverage_is_never_gated():
    backend = RecordingBackend()
    retriever = HybridRetriever(CHUNKS, embedding_backend=backend)
    retriever.search("香港营收")
    assert retriever.last_channel == retrieval_mod.CHANNEL_HYBRID
    assert "香港营收" in backend.seen


def test_the_gate_looks_at_the_query_not_its_rewrites():
    backend = CoverageBackend(KNOWN)
    retriever = HybridRetriever(
        CHUNKS, embedding_backend=backend, query_rewriter=FixedRewriter(["香港营收", "revenue"])
    )
    retriever.search("香港营收")
    assert backend.coverage_calls == ["香港营收"]
    assert retriever.last_channel == retrieval_mod.CHANNEL_OUTSIDE_VOCABULARY


@pytest.mark.parametrize("bad", [-0.1, 1.5, True, "0.9", float("nan")])
def test_a_bad_min_query_coverage_is_rejected(bad):
    with pytest.raises(ValueError, match="min_query_coverage"):
        HybridRetriever(CHUNKS, min_query_coverage=bad)


def test_with_a_rewriter_gated_queries_still_equal_pure_bm25():
    backend = CoverageBackend(KNOWN)
    rewriter = GlossaryQueryRewriter()
    hybrid = HybridRetriever(CHUNKS, embedding_backend=backend, query_rewriter=rewriter)
    pure = HybridRetriever(CHUNKS, query_rewriter=rewriter)
    channels = []
    for query in GATE_QUERIES:
        got = hybrid.search(query)
        channels.append(hybrid.last_channel)
        if hybrid.last_channel != retrieval_mod.CHANNEL_HYBRID:
            assert repr(got) == repr(pure.search(query)), query
    assert channels == [
        "hybrid", "bm25:outside-vocabulary", "bm25:outside-vocabulary", "bm25:outside-vocabulary"
    ]
    assert "revenue grew" in backend.seen
    assert not set(GATE_QUERIES[1:]) & set(backend.seen)  # gated queries are never embedded
