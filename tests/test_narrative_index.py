"""NarrativeIndex: ingest, vector lifecycle, persistence policy, retrieve and rerank."""

from __future__ import annotations

import logging

import pytest
from _bm25_reference import as_tuples, reference_search
from _fakes import RecordingBackend
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragspine_lite.chunking.chunk_store import ChunkStore, StoredChunk
from ragspine_lite.chunking.chunking import Chunk, DocumentMeta, chunk_document
from ragspine_lite.filtering.metadata_filter import FilterCondition, MetadataFilter, make_filter
from ragspine_lite.lexical.retrieval import (
    GlossaryQueryRewriter,
    HybridRetriever,
    NarrativeIndex,
    RetrievableIndex,
)
from ragspine_lite.lexical.tokenizer import tokenize
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend
from ragspine_lite.vector.persistence_policy import IsolationFirstPolicy, PersistEverythingPolicy
from ragspine_lite.vector.store import InProcessVectorStore, VectorRecord


class ReverseJudge:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        self.calls.append((query, list(candidates)))
        return list(range(len(candidates)))[::-1]


class Extractor:
    def __init__(self, result=None, exc: Exception | None = None) -> None:
        self.result = result
        self.exc = exc
        self.queries: list[str] = []

    def extract(self, query: str):
        self.queries.append(query)
        if self.exc is not None:
            raise self.exc
        return self.result


class SplitLinesChunker:
    """One chunk per line; records the budget it was called with."""

    def __init__(self) -> None:
        self.budgets: list[tuple[int, int]] = []

    def chunk(self, text, meta, *, max_chars=480, overlap_chars=80):
        self.budgets.append((max_chars, overlap_chars))
        chunks = chunk_document(text, meta, max_chars=max_chars, overlap_chars=overlap_chars)
        for c in chunks:
            c.window_text = "WINDOW " + c.text
        return chunks


def paragraphs(*words: str) -> str:
    """One paragraph per word group, each long enough to become its own chunk at max 60."""
    return "\n".join(f"{w} " + "filler text " * 4 for w in words)


def meta(doc_id: str, **kw: str) -> DocumentMeta:
    return DocumentMeta(doc_id=doc_id, **kw)


def ids(results) -> list[str]:
    return [r.chunk.chunk_id for r in results]


# --- construction ---------------------------------------------------------------------------


def test_defaults_and_vector_store_rule(store):
    idx = NarrativeIndex(store)
    assert idx.store is store
    assert idx.vector_store is None and idx.embedding_backend is None
    assert isinstance(idx.persistence_policy, IsolationFirstPolicy)
    assert (idx.max_chars, idx.overlap_chars, idx.top_k, idx.rerank_top_n) == (480, 80, 50, 10)
    assert idx.judge is None and idx.query_rewriter is None and idx.filter_extractor is None
    assert isinstance(idx, RetrievableIndex)
    with_backend = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend())
    assert isinstance(with_backend.vector_store, InProcessVectorStore)
    injected = InProcessVectorStore()
    assert NarrativeIndex(store, vector_store=injected).vector_store is injected
    policy = PersistEverythingPolicy()
    assert NarrativeIndex(store, persistence_policy=policy).persistence_policy is policy


@pytest.mark.parametrize("bad", [0, -1, True, "10"])
def test_bad_top_k_is_rejected(store, bad):
    with pytest.raises(ValueError, match="top_k"):
        NarrativeIndex(store, top_k=bad)
    with pytest.raises(ValueError, match="top_k"):
        NarrativeIndex(store).retrieve("x", top_k=bad)


@pytest.mark.parametrize("bad", [0, -2, False, 1.5])
def test_bad_top_n_is_rejected(store, bad):
    with pytest.raises(ValueError, match="top_n"):
        NarrativeIndex(store).retrieve("x", top_n=bad)


# --- ingest -----------------------------------------------------------------------------------


def test_ingest_writes_chunks_and_returns_their_count(store):
    idx = NarrativeIndex(store, max_chars=60, overlap_chars=0)
    text = paragraphs("alpha", "beta", "gamma")
    n = idx.ingest(text, meta("d1", entity="ACME_HK"), valid_as_of="2024-06-30")
    expected = chunk_document(text, meta("d1", entity="ACME_HK"), max_chars=60, overlap_chars=0)
    assert n == len(expected) == 3
    stored = store.iter_chunks()
    assert [c.text for c in stored] == [c.text for c in expected]
    assert all(c.valid_as_of == "2024-06-30" and c.entity == "ACME_HK" for c in stored)


def test_ingest_uses_the_chunker_with_the_index_budget(store):
    chunker = SplitLinesChunker()
    idx = NarrativeIndex(store, chunker=chunker, max_chars=60, overlap_chars=10)
    idx.ingest(paragraphs("alpha", "beta"), meta("d1"))
    assert chunker.budgets == [(60, 10)]
    assert all(c.window_text.startswith("WINDOW ") for c in store.iter_chunks())


def test_reingest_gives_no_duplicate_active_chunks(store):
    idx = NarrativeIndex(store, max_chars=60, overlap_chars=0)
    idx.ingest(paragraphs("alpha", "beta", "gamma"), meta("d1"))
    idx.ingest(paragraphs("alpha", "beta"), meta("d1"))
    active = store.iter_chunks()
    assert len(active) == 2
    assert len({c.chunk_id for c in active}) == 2
    got = idx.retrieve("alpha beta gamma")
    assert len(ids(got)) == len(set(ids(got))) == 2
    assert all(r.chunk.version == 2 for r in got)


def test_vector_count_equals_chunk_count_after_ingest(store):
    idx = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend(),
                         max_chars=60, overlap_chars=0)
    idx.ingest(paragraphs("alpha", "beta", "gamma"), meta("d1"))
    assert idx.vector_store.count() == store.count() == 3


def test_reingest_swaps_vectors_and_fewer_chunks_leave_no_orphans(store):
    backend = DeterministicEmbeddingBackend(dim=64)
    idx = NarrativeIndex(store, embedding_backend=backend, max_chars=60, overlap_chars=0)
    idx.ingest(paragraphs("alpha", "beta", "gamma"), meta("d1"))
    idx.ingest(paragraphs("delta"), meta("d1"))
    vs = idx.vector_store
    assert vs.count() == 1
    old_text = store.iter_chunks(include_inactive=True)[0].text  # d1#c0, version 1
    new_text = store.iter_chunks()[0].text  # d1#c0, version 2
    assert old_text.startswith("alpha") and new_text.startswith("delta")
    (hit,) = vs.query(backend.embed_texts([new_text])[0], k=10)
    assert hit.id == "d1#c0"
    assert hit.score == pytest.approx(1.0, abs=1e-12)  # the vector of the new text
    (stale,) = vs.query(backend.embed_texts([old_text])[0], k=10)
    assert stale.score < 1.0 - 1e-6


def test_reingest_only_touches_that_documents_vectors(store):
    idx = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend(),
                         max_chars=60, overlap_chars=0)
    idx.ingest(paragraphs("alpha", "beta"), meta("d1"))
    idx.ingest(paragraphs("gamma", "delta", "epsilon"), meta("d2"))
    idx.ingest(paragraphs("zeta"), meta("d1"))
    vs = idx.vector_store
    assert vs.count() == 4
    d2 = vs.query([1.0] * 256, k=10, where={"doc_id": "d2"})
    assert sorted(h.id for h in d2) == ["d2#c0", "d2#c1", "d2#c2"]


def test_vector_metadata_carries_filter_dims_and_doc_id(store):
    idx = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend())
    idx.ingest("revenue grew", meta("d1", topic="REVENUE", entity="ACME_HK", period="2024"))
    (hit,) = idx.vector_store.query([1.0] * 256, k=5)
    assert dict(hit.metadata) == {
        "topic": "REVENUE", "entity": "ACME_HK", "geography": "", "period": "2024",
        "language": "", "doc_id": "d1",
    }


def test_restricted_is_not_persisted_by_default_but_stays_bm25_retrievable(store):
    idx = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend())
    idx.ingest("secret merger plan revenue", meta("s", sensitivity="RESTRICTED"))
    idx.ingest("public revenue report", meta("p"))
    assert idx.vector_store.count() == 1
    got = {r.chunk.chunk_id: r for r in idx.retrieve("merger")}
    assert set(got) == {"s#c0", "p#c0"}  # hybrid: p comes in on the vector lane
    assert got["s#c0"].bm25_score > 0
    assert got["s#c0"].vector_score == 0.0


def test_restricted_label_check_ignores_case_and_whitespace_for_persistence(store):
    idx = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend())
    idx.ingest("a secret", meta("s1", sensitivity="  restricted "))
    idx.ingest("a secret", meta("s2", sensitivity="Restricted"))
    assert idx.vector_store.count() == 0


def test_internal_to_restricted_reingest_leaves_zero_vectors(store):
    idx = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend(),
                         max_chars=60, overlap_chars=0)
    idx.ingest(paragraphs("alpha", "beta"), meta("d1"))
    assert idx.vector_store.count() == 2
    idx.ingest(paragraphs("alpha", "beta"), meta("d1", sensitivity="RESTRICTED"))
    assert idx.vector_store.count() == 0


def test_persist_everything_policy_persists_restricted(store):
    idx = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend(),
                         persistence_policy=PersistEverythingPolicy())
    idx.ingest("secret merger plan", meta("s", sensitivity="RESTRICTED"))
    assert idx.vector_store.count() == 1
    (res,) = idx.retrieve("merger")
    assert res.vector_score > 0


def test_injected_store_without_backend_is_still_cleared_per_document(store):
    vs = InProcessVectorStore()
    vs.upsert([VectorRecord("d1#c9", (1.0, 0.0), {"doc_id": "d1"}),
               VectorRecord("x#c0", (0.0, 1.0), {"doc_id": "x"})])
    idx = NarrativeIndex(store, vector_store=vs)
    idx.ingest("hello", meta("d1"))
    assert vs.count() == 1
    assert vs.query([0.0, 1.0], k=5)[0].id == "x#c0"


def test_ingest_embeds_index_text_of_persistable_chunks_only(store):
    backend = RecordingBackend()
    idx = NarrativeIndex(store, embedding_backend=backend, index_text_fn=lambda c: "CTX " + c.text)
    idx.ingest("hello world", meta("d1"))
    idx.ingest("top secret", meta("d2", sensitivity="RESTRICTED"))
    assert backend.calls == [["CTX hello world"]]


# --- retrieve -------------------------------------------------------------------------------


def test_retrieve_equals_a_hybrid_search_over_the_active_chunks(store):
    idx = NarrativeIndex(store, query_rewriter=GlossaryQueryRewriter(), max_chars=60,
                         overlap_chars=0)
    idx.ingest(paragraphs("revenue", "profit", "hk revenue"), meta("d1", entity="ACME_HK"))
    idx.ingest(paragraphs("revenue china"), meta("d2", entity="ACME_CN"))
    got = idx.retrieve("hk revenue")
    ref = HybridRetriever(store.iter_chunks(), query_rewriter=GlossaryQueryRewriter()).search(
        "hk revenue"
    )
    assert repr(got) == repr(ref)
    only_cn = idx.retrieve("hk revenue", entity="ACME_CN")
    assert ids(only_cn) == ["d2#c0"]
    assert all(isinstance(r.chunk, StoredChunk) for r in got)


def test_retrieve_never_re_embeds_chunks(store):
    backend = RecordingBackend()
    idx = NarrativeIndex(store, embedding_backend=backend, max_chars=60, overlap_chars=0)
    idx.ingest(paragraphs("alpha", "beta"), meta("d1"))
    backend.calls.clear()
    idx.retrieve("alpha")
    idx.retrieve("beta", top_k=1)
    assert backend.calls == [["alpha"], ["beta"]]
    assert idx.vector_store.count() == 2


def test_retrieve_top_k_defaults_to_the_index_top_k(store):
    idx = NarrativeIndex(store, top_k=2, max_chars=60, overlap_chars=0)
    idx.ingest(paragraphs("word", "word", "word", "word"), meta("d1"))
    assert len(idx.retrieve("word")) == 2
    assert len(idx.retrieve("word", top_k=3)) == 3


def test_judge_reversal_reverses_the_rrf_order(store):
    idx = NarrativeIndex(store, max_chars=60, overlap_chars=0)
    idx.ingest(paragraphs("word", "word word", "word word word"), meta("d1"))
    base = idx.retrieve("word")
    judged = NarrativeIndex(store, judge=ReverseJudge()).retrieve("word")
    assert ids(judged) == ids(base)[::-1]


def test_rerank_false_skips_the_judge(store):
    judge = ReverseJudge()
    idx = NarrativeIndex(store, judge=judge, max_chars=60, overlap_chars=0)
    idx.ingest(paragraphs("word", "word word"), meta("d1"))
    assert ids(idx.retrieve("word", rerank=False)) == ids(NarrativeIndex(store).retrieve("word"))
    assert judge.calls == []


def test_with_a_judge_at_most_rerank_top_n_results_come_back(store):
    idx = NarrativeIndex(store, judge=ReverseJudge(), max_chars=60, overlap_chars=0)
    idx.ingest(paragraphs(*(["word"] * 14)), meta("d1"))
    assert len(idx.retrieve("word")) == 10
    assert len(idx.retrieve("word", top_n=3)) == 3
    assert len(NarrativeIndex(store, judge=ReverseJudge(), rerank_top_n=4).retrieve("word")) == 4
    assert len(NarrativeIndex(store).retrieve("word")) == 14


def test_restricted_text_never_reaches_the_judge_but_may_remain_in_results(store):
    judge = ReverseJudge()
    idx = NarrativeIndex(store, judge=judge)
    idx.ingest("merger plan alpha", meta("a"))
    idx.ingest("merger plan secret", meta("s", sensitivity="restricted"))
    got = idx.retrieve("merger plan")
    assert "s#c0" in ids(got)
    sent = [t for _, cands in judge.calls for t in cands]
    assert "merger plan secret" not in sent
    assert sent == ["merger plan alpha"]


def test_explicit_metadata_filter_wins_over_the_extractor(store):
    idx_plain = NarrativeIndex(store, max_chars=60, overlap_chars=0)
    idx_plain.ingest(paragraphs("revenue"), meta("d1", entity="ACME_HK"))
    idx_plain.ingest(paragraphs("revenue"), meta("d2", entity="ACME_CN"))
    ext = Extractor(MetadataFilter((FilterCondition("entity", "eq", "ACME_HK"),)))
    idx = NarrativeIndex(store, filter_extractor=ext)
    assert [r.chunk.doc_id for r in idx.retrieve("revenue")] == ["d1"]
    assert ext.queries == ["revenue"]
    explicit = make_filter([("entity", "eq", "ACME_CN")])
    assert [r.chunk.doc_id for r in idx.retrieve("revenue", metadata_filter=explicit)] == ["d2"]
    assert ext.queries == ["revenue"]  # not consulted when a filter is given


@pytest.mark.parametrize(
    "extractor", [Extractor(None), Extractor(exc=RuntimeError("boom"))], ids=["none", "raises"]
)
def test_extractor_failure_never_widens_beyond_the_explicit_filters(store, extractor):
    setup = NarrativeIndex(store, max_chars=60, overlap_chars=0)
    setup.ingest(paragraphs("revenue"), meta("d1", entity="ACME_HK"))
    setup.ingest(paragraphs("revenue"), meta("d2", entity="ACME_CN"))
    idx = NarrativeIndex(store, filter_extractor=extractor)
    assert [r.chunk.doc_id for r in idx.retrieve("revenue", entity="ACME_CN")] == ["d2"]
    assert sorted(r.chunk.doc_id for r in idx.retrieve("revenue")) == ["d1", "d2"]


def test_filters_select_candidates_before_embedding_of_the_query_only(store):
    backend = RecordingBackend()
    idx = NarrativeIndex(store, embedding_backend=backend)
    idx.ingest("revenue hk", meta("d1", entity="ACME_HK"))
    idx.ingest("revenue cn", meta("d2", entity="ACME_CN"))
    backend.calls.clear()
    got = idx.retrieve("revenue", entity="ACME_CN")
    assert ids(got) == ["d2#c0"]
    assert backend.calls == [["revenue"]]


def test_metadata_filter_quirk_store_query_has_no_where(store):
    # On the index path the store is queried with k = len(candidates) and no where, so a
    # non-candidate's vector can take the only slot and the candidate gets no vector share.
    backend = DeterministicEmbeddingBackend(dim=64)
    idx = NarrativeIndex(store, embedding_backend=backend)
    idx.ingest("zebra zebra zebra", meta("d1", entity="X"))
    idx.ingest("unrelated words only", meta("d2", entity="Y"))
    only_y = make_filter([("entity", "eq", "Y")])
    assert idx.retrieve("zebra", metadata_filter=only_y) == []
    # The same candidates through a self-managed retriever do get their vector share.
    own = HybridRetriever(only_y.apply(store.iter_chunks()), embedding_backend=backend)
    assert ids(own.search("zebra")) == ["d2#c0"]


def test_retrieve_is_deterministic_across_calls_and_instances(store):
    def build(s):
        idx = NarrativeIndex(s, embedding_backend=DeterministicEmbeddingBackend(dim=32),
                             query_rewriter=GlossaryQueryRewriter(), max_chars=60, overlap_chars=0)
        idx.ingest(paragraphs("hk revenue", "profit cn", "营收 香港"), meta("d1"))
        return idx

    a = build(store)
    first = [(r.chunk.chunk_id, r.bm25_score, r.vector_score, r.fused_score)
             for r in a.retrieve("hk revenue")]
    assert first == [(r.chunk.chunk_id, r.bm25_score, r.vector_score, r.fused_score)
                     for r in a.retrieve("hk revenue")]
    other = ChunkStore(":memory:")
    other.init_schema()
    try:
        b = build(other)
        assert first == [(r.chunk.chunk_id, r.bm25_score, r.vector_score, r.fused_score)
                         for r in b.retrieve("hk revenue")]
    finally:
        other.close()


# -- BM25 from the persisted index: the reference's results, reading only what is returned ---

_WORDS = ["revenue", "profit", "hk", "cn", "grew", "the", "香", "港", "收", "入", "营收"]
_line = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=6).map(" ".join)
_doc = st.tuples(
    st.integers(0, 4),  # which document
    st.lists(_line, max_size=4),  # its paragraphs (empty: retire the document)
    st.sampled_from(["REVENUE", "PROFIT"]),
    st.sampled_from(["ACME_HK", "ACME_CN"]),
)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    docs=st.lists(_doc, min_size=1, max_size=8),
    query=st.lists(st.sampled_from([*_WORDS, "香港", "nothing"]), max_size=4).map(" ".join),
    topic=st.sampled_from([None, "REVENUE"]),
    mf=st.sampled_from([None, make_filter([("entity", "eq", "ACME_HK")])]),
    rewrite=st.booleans(),
    top_k=st.integers(1, 10),
)
def test_retrieve_equals_the_reference_through_ingests(
    docs, query, topic, mf, rewrite, top_k
):
    with ChunkStore(":memory:") as s:
        s.init_schema()
        rewriter = GlossaryQueryRewriter() if rewrite else None
        idx = NarrativeIndex(s, query_rewriter=rewriter, max_chars=60, overlap_chars=0)
        for n, lines, t, e in docs:
            idx.ingest("\n".join(lines), meta(f"d{n}", topic=t, entity=e))
            expected = reference_search(s.iter_chunks(), query, rewriter=rewriter,
                                        filters={"topic": topic}, metadata_filter=mf,
                                        top_k=top_k)
            got = idx.retrieve(query, topic=topic, metadata_filter=mf, top_k=top_k)
            assert as_tuples(got) == expected


def test_retrieve_with_duplicate_chunk_ids_equals_the_reference(store):
    rewriter = GlossaryQueryRewriter()
    for doc, text in [("a", "hk revenue grew"), ("b", "hk revenue hk"), ("c", "profit hk")]:
        # Same chunk ids in every document: legal, and RRF then adds up shares per id.
        store.replace_doc_chunks(doc, [Chunk("dup#c0", doc, 0, text, f"{doc}#para1", 1, 1),
                                       Chunk(f"{doc}#c1", doc, 1, "revenue", f"{doc}#para2", 2, 2)])
    idx = NarrativeIndex(store, query_rewriter=rewriter)
    for query in ["hk revenue", "revenue", "profit"]:
        for top_k in (1, 2, 50):
            expected = reference_search(store.iter_chunks(), query, rewriter=rewriter, top_k=top_k)
            assert as_tuples(idx.retrieve(query, top_k=top_k)) == expected


def test_pure_bm25_retrieve_reads_only_the_result_rows(store, monkeypatch):
    idx = NarrativeIndex(store, max_chars=60, overlap_chars=0)
    for i in range(20):
        idx.ingest(paragraphs(f"revenue{i % 3}", "profit"), meta(f"d{i}", topic="REVENUE"))
    expected = reference_search(store.iter_chunks(), "revenue1 profit", top_k=5)

    def refuse(*args, **kwargs):
        raise AssertionError("the whole active set must not be loaded")

    monkeypatch.setattr(store, "iter_chunks", refuse)
    monkeypatch.setattr(store, "iter_chunk_rows", refuse)
    assert as_tuples(idx.retrieve("revenue1 profit", top_k=5)) == expected
    assert idx.retrieve("revenue1", topic="REVENUE", top_k=3)  # equality filters: rowids only


def test_retrieve_with_an_index_text_fn_scores_that_text(store):
    def fn(c):
        return f"{c.entity} {c.text}"

    idx = NarrativeIndex(store, index_text_fn=fn, max_chars=60, overlap_chars=0)
    idx.ingest(paragraphs("revenue", "profit"), meta("d1", entity="ACME_HK"))
    idx.ingest(paragraphs("revenue"), meta("d2", entity="OTHER"))
    assert store.indexer("bm25") is None  # chunk.text is not what this index scores
    expected = reference_search(store.iter_chunks(), "acme_hk revenue", index_text=fn)
    assert as_tuples(idx.retrieve("acme_hk revenue")) == expected


def test_read_only_store_with_a_stale_index_falls_back_to_scoring_in_memory(tmp_path, caplog):
    path = tmp_path / "s.db"
    with ChunkStore(path) as s:
        s.init_schema()
        NarrativeIndex(s, max_chars=60, overlap_chars=0).ingest(
            paragraphs("revenue", "profit"), meta("d1"))
    with ChunkStore(path) as s:  # no index attached: this write leaves the index behind
        s.replace_doc_chunks("d2", [Chunk("d2#c0", "d2", 0, "revenue hk", "d2#para1", 1, 1)])
        expected = reference_search(s.iter_chunks(), "revenue hk")
    with ChunkStore(path) as s:
        s._connection().execute("PRAGMA query_only = ON")
        idx = NarrativeIndex(s)
        with caplog.at_level(logging.WARNING):
            got = as_tuples(idx.retrieve("revenue hk"))
        assert got == expected
        assert any("cannot be built" in r.getMessage() for r in caplog.records)


# --- the vocabulary-coverage gate -----------------------------------------------------------


class CoverageBackend(RecordingBackend):
    """A recording backend whose vocabulary is ASCII: coverage = share of ASCII tokens."""

    def coverage(self, text: str) -> float:
        words = tokenize(text)
        return 1.0 if not words else sum(w.isascii() for w in words) / len(words)


class CountingStore(InProcessVectorStore):
    def __init__(self) -> None:
        super().__init__()
        self.queries = 0

    def query(self, vector, *, k=50, where=None):
        self.queries += 1
        return super().query(vector, k=k, where=where)


GATE_DOCS = [
    ("en", "Hong Kong revenue grew 12% in 2024.\nProfit was flat.", "ACME_HK"),
    ("zh", "香港营收增长，银保渠道贡献最大。\n新签金额稳定。", "ACME_HK"),
    ("cn", "中国内地营运利润下降。\nACME China revenue fell.", "ACME_CN"),
]
GATE_FILTERS = [
    {},
    {"entity": "ACME_HK"},
    {"metadata_filter": make_filter([("entity", "eq", "ACME_CN")])},
]


def _gate_index(store, **kw) -> tuple[NarrativeIndex, CoverageBackend, CountingStore]:
    backend, vectors = CoverageBackend(), CountingStore()
    idx = NarrativeIndex(store, embedding_backend=backend, vector_store=vectors,
                         query_rewriter=GlossaryQueryRewriter(), **kw)
    for doc_id, text, entity in GATE_DOCS:
        idx.ingest(text, meta(doc_id, entity=entity))
    backend.calls.clear()
    return idx, backend, vectors


@pytest.mark.parametrize("index_text_fn", [None, lambda c: f"{c.entity} {c.text}"])
def test_a_query_outside_the_vocabulary_retrieves_exactly_like_pure_bm25(store, index_text_fn):
    idx, backend, vectors = _gate_index(store, index_text_fn=index_text_fn)
    pure = NarrativeIndex(store, query_rewriter=GlossaryQueryRewriter(),
                          index_text_fn=index_text_fn)
    for query in ("香港营收增长", "中国内地 营运利润"):
        for filters in GATE_FILTERS:
            got = idx.retrieve(query, **filters)
            assert idx.last_channel == "bm25:outside-vocabulary"
            assert repr(got) == repr(pure.retrieve(query, **filters)), (query, filters)
            assert pure.last_channel == "bm25"
    assert backend.calls == [] and vectors.queries == 0


def test_a_covered_query_retrieves_hybrid(store):
    idx, backend, vectors = _gate_index(store)
    results = idx.retrieve("hong kong revenue")
    assert idx.last_channel == "hybrid"
    assert backend.calls and backend.calls[0][0] == "hong kong revenue"
    assert vectors.queries >= 1
    assert any(r.vector_score > 0 for r in results)


def test_the_index_gate_threshold_is_configurable_and_can_be_turned_off(store):
    idx, backend, _ = _gate_index(store, min_query_coverage=None)
    idx.retrieve("香港营收增长")
    assert idx.last_channel == "hybrid" and backend.calls[0][0] == "香港营收增长"
    lenient, _, _ = _gate_index(store, min_query_coverage=0.0)
    lenient.retrieve("香港营收增长")
    assert lenient.last_channel == "hybrid"
    with pytest.raises(ValueError, match="min_query_coverage must be a number"):
        NarrativeIndex(store, min_query_coverage=2)


def test_without_a_backend_the_channel_is_bm25(store):
    idx = NarrativeIndex(store)
    assert idx.last_channel is None
    idx.ingest("revenue grew", meta("d1"))
    idx.retrieve("revenue")
    assert idx.last_channel == "bm25"


def test_the_gate_also_covers_stores_with_duplicate_chunk_ids(store):
    for doc, text in [("a", "hk revenue 香港"), ("b", "香港 营收 hk")]:
        store.replace_doc_chunks(doc, [Chunk("dup#c0", doc, 0, text, f"{doc}#para1", 1, 1)])
    backend, vectors = CoverageBackend(), CountingStore()
    idx = NarrativeIndex(store, embedding_backend=backend, vector_store=vectors)
    got = idx.retrieve("香港营收")
    assert idx.last_channel == "bm25:outside-vocabulary"
    assert repr(got) == repr(NarrativeIndex(store).retrieve("香港营收"))
    assert backend.calls == [] and vectors.queries == 0


# --- the cached rows of hybrid search ----------------------------------------------------------


def _fresh_hybrid(path, backend):
    """What a new index over the file retrieves: the reference for a cached one."""
    from ragspine_lite.vector.sqlite_store import SqliteVectorStore

    with ChunkStore(path) as s, SqliteVectorStore(path, model_id="m") as v:
        return repr(NarrativeIndex(s, embedding_backend=backend, vector_store=v).retrieve(
            "revenue profit", top_k=20))


def test_cached_hybrid_rows_follow_writes_here_and_from_another_connection(tmp_path):
    from ragspine_lite.vector.sqlite_store import SqliteVectorStore

    path = tmp_path / "h.db"
    backend = DeterministicEmbeddingBackend(dim=32)
    store, vectors = ChunkStore(path), SqliteVectorStore(path, model_id="m")
    store.init_schema()
    idx = NarrativeIndex(store, embedding_backend=backend, vector_store=vectors,
                         max_chars=60, overlap_chars=0)
    idx.ingest(paragraphs("revenue", "profit"), meta("d1"))
    first = idx.retrieve("revenue profit", top_k=20)
    assert idx.last_channel == "hybrid"
    assert repr(idx.retrieve("revenue profit", top_k=20)) == repr(first)  # served from the cache
    # A write through this index: the re-ingested document's new chunks are what comes back.
    idx.ingest(paragraphs("revenue", "profit", "revenue again"), meta("d1"))
    again = idx.retrieve("revenue profit", top_k=20)
    assert len(again) > len(first) and {r.chunk.version for r in again} == {2}
    assert sorted(ids(again)) == sorted(c.chunk_id for c in store.iter_chunks())
    assert repr(again) == _fresh_hybrid(path, backend)
    # A second connection writes to the file: this index sees it on its next search.
    with ChunkStore(path) as s2, SqliteVectorStore(path, model_id="m") as v2:
        other = NarrativeIndex(s2, embedding_backend=backend, vector_store=v2,
                               max_chars=60, overlap_chars=0)
        other.ingest(paragraphs("profit", "margin"), meta("d2"))
        other.ingest("", meta("d1"))  # retire d1 altogether
    seen = idx.retrieve("revenue profit", top_k=20)
    assert {r.chunk.doc_id for r in seen} == {"d2"}
    assert sorted(ids(seen)) == sorted(c.chunk_id for c in store.iter_chunks())
    assert repr(seen) == _fresh_hybrid(path, backend)
    store.close()
    vectors.close()


def test_cached_hybrid_rows_are_kept_per_filter_set_and_results_own_their_chunks(store):
    from ragspine_lite.vector.sqlite_store import SqliteVectorStore

    vectors = SqliteVectorStore(":memory:", model_id="m")
    idx = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend(dim=32),
                         vector_store=vectors, max_chars=60, overlap_chars=0)
    idx.ingest(paragraphs("revenue", "profit"), meta("hk", entity="ACME_HK"))
    idx.ingest(paragraphs("revenue"), meta("cn", entity="ACME_CN"))
    reads = []
    real = store.iter_chunk_rows

    def counting(**filters):
        reads.append(filters)
        return real(**filters)

    store.iter_chunk_rows = counting  # type: ignore[method-assign]
    for _ in range(2):
        assert ids(idx.retrieve("revenue", entity="ACME_CN")) == ["cn#c0"]
        assert sorted(ids(idx.retrieve("revenue"))) == ["cn#c0", "hk#c0", "hk#c1"]
    assert len(reads) == 2  # one read per filter set, not per search
    got = idx.retrieve("revenue", entity="ACME_HK")
    got[0].chunk.text = "tampered"
    assert all(r.chunk.text != "tampered" for r in idx.retrieve("revenue", entity="ACME_HK"))
    idx.query_rewriter = GlossaryQueryRewriter()  # a changed setting: rows are read again
    idx.retrieve("revenue")
    assert len(reads) == 4
    vectors.close()
