"""link.narrative_link: provider judge, agent-facing retriever, snippet lineage, the builder."""

from __future__ import annotations

import pytest

import ragspine_lite.link as link_pkg
from ragspine_lite.chunking.chunk_store import ChunkStore, StoredChunk
from ragspine_lite.chunking.chunking import Chunk, DocumentMeta
from ragspine_lite.common.errors import ProviderError
from ragspine_lite.common.llm import ChatCompletion, Choice, EchoProvider, ResponseMessage
from ragspine_lite.lexical.retrieval import (
    GlossaryQueryRewriter,
    NarrativeIndex,
    RetrievalResult,
)
from ragspine_lite.link import narrative_link
from ragspine_lite.link.narrative_link import (
    JUDGE_SYSTEM_PROMPT,
    NarrativeIndexRetriever,
    NarrativeRetriever,
    ProviderListwiseJudge,
    VisibleFilter,
    _to_snippet,
    build_narrative_retriever,
)
from ragspine_lite.rerank.listwise_rerank import build_listwise_prompt, listwise_rerank
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend
from ragspine_lite.vector.persistence_policy import PersistEverythingPolicy
from ragspine_lite.vector.store import InProcessVectorStore

SNIPPET_KEYS = [
    "text", "doc_id", "title", "source_locator", "chunk_id", "topic", "entity",
    "geography", "period", "language", "sensitivity", "scores",
]


def chunk(cid: str, text: str = "t", **kw) -> Chunk:
    return Chunk(cid, cid.split("#")[0], 0, text, f"{cid}#para1", 1, 1, **kw)


def result(c, bm25=1.0, vec=0.0, fused=0.5) -> RetrievalResult:
    return RetrievalResult(c, bm25, vec, fused)


class FakeIndex:
    """A RetrievableIndex that records its calls and answers from a script."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls: list[dict] = []

    def retrieve(self, query, **kwargs):
        self.calls.append({"query": query, **kwargs})
        return self.answers.pop(0) if self.answers else []


class RecordingPostprocessor:
    def __init__(self) -> None:
        self.seen: list[tuple[str, list[dict]]] = []

    def postprocess(self, query, results):
        self.seen.append((query, [dict(r) for r in results]))
        return list(reversed(results))


class RaisingProvider:
    def chat(self, messages, *, tools=None):
        raise ProviderError("endpoint down")


# --- module surface ---------------------------------------------------------------------


def test_link_package_reexports_the_module_api():
    assert link_pkg.__all__ == narrative_link.__all__
    for name in link_pkg.__all__:
        assert getattr(link_pkg, name) is getattr(narrative_link, name)


def test_narrative_retriever_protocol_is_runtime_checkable():
    assert isinstance(NarrativeIndexRetriever(FakeIndex()), NarrativeRetriever)
    assert not isinstance(object(), NarrativeRetriever)


# --- ProviderListwiseJudge --------------------------------------------------------------


def test_judge_sends_the_exact_system_prompt_and_listwise_prompt_without_tools():
    provider = EchoProvider("2,0,1")
    order = ProviderListwiseJudge(provider).judge("q", ["a", "b", "c"])
    assert order == [2, 0, 1]
    assert JUDGE_SYSTEM_PROMPT == "你是检索精排员，严格按用户指令输出，不输出任何额外内容。"
    ((messages, tools),) = provider.calls
    assert tools is None
    assert messages == [
        {"role": "system", "content": "你是检索精排员，严格按用户指令输出，不输出任何额外内容。"},
        {"role": "user", "content": build_listwise_prompt("q", ["a", "b", "c"])},
    ]


def test_judge_parses_none_content_as_empty_identity():
    class NoneProvider:
        def chat(self, messages, *, tools=None):
            return ChatCompletion(choices=(Choice(0, ResponseMessage(content=None)),))

    assert ProviderListwiseJudge(NoneProvider()).judge("q", ["a", "b"]) == [0, 1]


def test_judge_output_is_always_a_permutation():
    assert ProviderListwiseJudge(EchoProvider("[1] > [1] > [7]")).judge("q", ["a", "b", "c"]) == [
        1, 0, 2,
    ]


def test_judge_provider_exceptions_propagate_and_rerank_degrades_to_rrf_order():
    judge = ProviderListwiseJudge(RaisingProvider())
    with pytest.raises(ProviderError):
        judge.judge("q", ["a"])
    items = [result(chunk(f"d{i}#c0", f"text {i}")) for i in range(3)]
    assert listwise_rerank("q", items, judge) == items


# --- NarrativeIndexRetriever.retrieve ----------------------------------------------------------


def test_index_attribute_and_defaults():
    idx = FakeIndex()
    r = NarrativeIndexRetriever(idx)
    assert r.index is idx
    assert r.retry_without_filters is True and r.postprocessor is None


def test_retrieve_passes_exactly_the_truthy_known_filters_and_top_k():
    idx = FakeIndex([result(chunk("d#c0"))])
    NarrativeIndexRetriever(idx).retrieve(
        "q",
        filters={"entity": "ACME_HK", "period": "2024", "topic": "", "geography": None,
                 "foo": "bar"},
        top_k=7,
    )
    assert idx.calls == [{"query": "q", "entity": "ACME_HK", "period": "2024", "top_k": 7,
                          "metadata_filter": VisibleFilter()}]


def test_retrieve_default_call_has_only_top_k_50():
    idx = FakeIndex([result(chunk("d#c0"))])
    NarrativeIndexRetriever(idx).retrieve("q")
    assert idx.calls == [{"query": "q", "top_k": 50, "metadata_filter": VisibleFilter()}]


def test_empty_filtered_result_is_retried_once_without_filters():
    idx = FakeIndex([], [result(chunk("d#c0"))])
    out = NarrativeIndexRetriever(idx).retrieve("q", filters={"entity": "X"}, top_k=5)
    assert idx.calls == [
        {"query": "q", "entity": "X", "top_k": 5, "metadata_filter": VisibleFilter()},
        {"query": "q", "top_k": 5, "metadata_filter": VisibleFilter()},
    ]
    assert [s["chunk_id"] for s in out] == ["d#c0"]


def test_retry_happens_at_most_once():
    idx = FakeIndex([], [])
    assert NarrativeIndexRetriever(idx).retrieve("q", filters={"entity": "X"}) == []
    assert len(idx.calls) == 2


def test_strict_mode_keeps_the_empty_result():
    idx = FakeIndex([], [result(chunk("d#c0"))])
    out = NarrativeIndexRetriever(idx, retry_without_filters=False).retrieve(
        "q", filters={"entity": "X"}
    )
    assert out == []
    assert len(idx.calls) == 1


def test_no_retry_without_filters():
    idx = FakeIndex([], [result(chunk("d#c0"))])
    assert NarrativeIndexRetriever(idx).retrieve("q") == []
    assert NarrativeIndexRetriever(FakeIndex([])).retrieve("q", filters={}) == []
    assert len(idx.calls) == 1


def test_non_empty_filtered_result_is_not_retried():
    idx = FakeIndex([result(chunk("d#c0"))], [result(chunk("e#c0"))])
    out = NarrativeIndexRetriever(idx).retrieve("q", filters={"entity": "X"})
    assert [s["chunk_id"] for s in out] == ["d#c0"]
    assert len(idx.calls) == 1


@pytest.mark.parametrize("label", ["RESTRICTED", "restricted", "Restricted", "rEsTrIcTeD"])
def test_restricted_results_are_dropped_case_insensitively(label):
    idx = FakeIndex([
        result(chunk("a#c0", "open")),
        result(chunk("s#c0", "secret", sensitivity=label)),
        result(chunk("b#c0", "open too", sensitivity="CONFIDENTIAL")),
    ])
    out = NarrativeIndexRetriever(idx).retrieve("q")
    assert [s["chunk_id"] for s in out] == ["a#c0", "b#c0"]
    assert all(s["text"] != "secret" for s in out)


@pytest.mark.parametrize(
    "label", [" RESTRICTED ", "RESTRICTED\n", "\tRestricted", "RESTRICTED\u200b"]
)
def test_padded_restricted_labels_are_dropped_by_the_exit(label):
    # One normalisation (NFKC, format characters removed, stripped, case-folded).
    idx = FakeIndex([result(chunk("s#c0", sensitivity=label))])
    assert NarrativeIndexRetriever(idx).retrieve("q") == []


def test_snippets_are_never_built_for_restricted_results(monkeypatch):
    built = []
    real = narrative_link._to_snippet

    def spy(r):
        built.append(r.chunk.chunk_id)
        return real(r)

    monkeypatch.setattr(narrative_link, "_to_snippet", spy)
    idx = FakeIndex([result(chunk("a#c0")), result(chunk("s#c0", sensitivity="Restricted"))])
    NarrativeIndexRetriever(idx).retrieve("q")
    assert built == ["a#c0"]


def test_postprocessor_runs_after_stripping_and_its_output_is_returned():
    pp = RecordingPostprocessor()
    idx = FakeIndex([
        result(chunk("a#c0", "one")),
        result(chunk("s#c0", "secret", sensitivity="restricted")),
        result(chunk("b#c0", "two")),
    ])
    out = NarrativeIndexRetriever(idx, postprocessor=pp).retrieve("the query")
    ((query, seen),) = pp.seen
    assert query == "the query"
    assert [s["chunk_id"] for s in seen] == ["a#c0", "b#c0"]
    assert [s["chunk_id"] for s in out] == ["b#c0", "a#c0"]


# --- _to_snippet --------------------------------------------------------------------------------


def test_snippet_has_full_lineage_in_order_and_scores():
    c = chunk("d1#c3", "body", title="T", topic="REVENUE", entity="ACME_HK", geography="HK",
              period="2024", language="en", sensitivity="PUBLIC")
    s = _to_snippet(RetrievalResult(c, 1.25, 0.5, 0.03))
    assert list(s) == SNIPPET_KEYS
    assert s == {
        "text": "body", "doc_id": "d1", "title": "T", "source_locator": "d1#c3#para1",
        "chunk_id": "d1#c3", "topic": "REVENUE", "entity": "ACME_HK", "geography": "HK",
        "period": "2024", "language": "en", "sensitivity": "PUBLIC",
        "scores": {"bm25": 1.25, "vector": 0.5, "fused": 0.03},
    }


def test_prompt_text_and_parent_locator_only_when_non_empty():
    plain = _to_snippet(result(chunk("d#c0")))
    assert "prompt_text" not in plain and "parent_locator" not in plain
    rich = _to_snippet(result(chunk("d#c0", "child", window_text="the whole section",
                                    parent_locator="d#para1-3")))
    assert rich["prompt_text"] == "the whole section"
    assert rich["parent_locator"] == "d#para1-3"
    assert rich["text"] == "child"
    only_window = _to_snippet(result(chunk("d#c0", window_text="w")))
    assert "parent_locator" not in only_window and only_window["prompt_text"] == "w"


def test_stored_chunk_window_text_assigned_on_instance_becomes_prompt_text():
    sc = StoredChunk("d#c0", "d", 0, "child", "d#para1", 1, 1)
    assert "prompt_text" not in _to_snippet(result(sc))
    sc.window_text = "context"
    assert _to_snippet(result(sc))["prompt_text"] == "context"


def test_default_chunker_snippets_have_neither_optional_key(tmp_path):
    retriever, store = build_narrative_retriever(tmp_path / "c.db")
    try:
        retriever.index.ingest("Revenue grew.\nProfit fell.", DocumentMeta(doc_id="d1"))
        out = retriever.retrieve("revenue profit")
        assert out
        for s in out:
            assert list(s) == SNIPPET_KEYS
    finally:
        store.close()


# --- build_narrative_retriever --------------------------------------------------------------------


def test_builder_defaults(tmp_path):
    retriever, store = build_narrative_retriever(tmp_path / "c.db")
    try:
        assert isinstance(retriever, NarrativeIndexRetriever)
        assert isinstance(store, ChunkStore)
        idx = retriever.index
        assert isinstance(idx, NarrativeIndex)
        assert idx.store is store
        assert idx.vector_store is None and idx.embedding_backend is None
        assert idx.judge is None
        assert isinstance(idx.query_rewriter, GlossaryQueryRewriter)
        assert retriever.postprocessor is None
        assert store.count() == 0  # schema initialised
    finally:
        store.close()


def test_builder_accepts_a_str_path_and_the_store_persists(tmp_path):
    path = str(tmp_path / "c.db")
    retriever, store = build_narrative_retriever(path)
    retriever.index.ingest("Revenue grew.", DocumentMeta(doc_id="d1"))
    store.close()
    again, store2 = build_narrative_retriever(path)
    try:
        assert [s["chunk_id"] for s in again.retrieve("revenue")] == ["d1#c0"]
    finally:
        store2.close()


def test_builder_threads_vector_store_backend_policy_and_postprocessor(tmp_path):
    vs = InProcessVectorStore()
    backend = DeterministicEmbeddingBackend()
    policy = PersistEverythingPolicy()
    pp = RecordingPostprocessor()
    retriever, store = build_narrative_retriever(
        tmp_path / "c.db", embedding_backend=backend, vector_store=vs,
        persistence_policy=policy, postprocessor=pp,
    )
    try:
        assert retriever.index.vector_store is vs
        assert retriever.index.embedding_backend is backend
        assert retriever.index.persistence_policy is policy
        assert retriever.postprocessor is pp
    finally:
        store.close()


def test_builder_with_backend_only_gets_an_in_process_store(tmp_path):
    retriever, store = build_narrative_retriever(
        tmp_path / "c.db", embedding_backend=DeterministicEmbeddingBackend()
    )
    try:
        assert isinstance(retriever.index.vector_store, InProcessVectorStore)
    finally:
        store.close()


def test_builder_judge_is_reranker_else_provider_judge_else_none(tmp_path):
    class Reranker:
        def judge(self, query, candidates):
            return list(range(len(candidates)))

    provider = EchoProvider("0")
    reranker = Reranker()
    r1, s1 = build_narrative_retriever(tmp_path / "a.db", provider, reranker=reranker)
    r2, s2 = build_narrative_retriever(tmp_path / "b.db", provider)
    try:
        assert r1.index.judge is reranker
        assert isinstance(r2.index.judge, ProviderListwiseJudge)
        assert r2.index.judge.provider is provider
    finally:
        s1.close()
        s2.close()


def test_provider_judge_reorders_end_to_end(tmp_path):
    retriever, store = build_narrative_retriever(tmp_path / "c.db", EchoProvider("1,0"))
    try:
        retriever.index.ingest("alpha beta", DocumentMeta(doc_id="a"))
        retriever.index.ingest("alpha", DocumentMeta(doc_id="b"))
        base = retriever.index.retrieve("alpha", rerank=False)
        out = retriever.retrieve("alpha")
        assert [s["chunk_id"] for s in out] == [r.chunk.chunk_id for r in base][::-1]
    finally:
        store.close()


def test_provider_failure_keeps_rrf_order_end_to_end(tmp_path):
    retriever, store = build_narrative_retriever(tmp_path / "c.db", RaisingProvider())
    try:
        retriever.index.ingest("alpha beta", DocumentMeta(doc_id="a"))
        retriever.index.ingest("alpha", DocumentMeta(doc_id="b"))
        base = retriever.index.retrieve("alpha", rerank=False)
        out = retriever.retrieve("alpha")
        assert [s["chunk_id"] for s in out] == [r.chunk.chunk_id for r in base]
    finally:
        store.close()


def test_glossary_rewriter_is_on_in_the_built_retriever(tmp_path):
    retriever, store = build_narrative_retriever(tmp_path / "c.db")
    try:
        retriever.index.ingest("营收同比上升", DocumentMeta(doc_id="zh"))
        # "revenue" shares no token with the text; only the 营收 variant can find it.
        assert [s["doc_id"] for s in retriever.retrieve("revenue")] == ["zh"]
    finally:
        store.close()
