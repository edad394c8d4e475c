"""RESTRICTED exits end to end: #1 rerank (never sent to the judge), #2 link (never a snippet).

The corpus mixes open documents with RESTRICTED ones labelled in several casings, all of
them highly relevant to the query, so that any leak would show up in the judge's inputs,
the snippets or the postprocessor's inputs.
"""

from __future__ import annotations

import pytest

from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.chunking.chunking import DocumentMeta
from ragspine_lite.common.llm import ChatCompletion, Choice, ResponseMessage
from ragspine_lite.filtering.metadata_filter import make_filter
from ragspine_lite.lexical.retrieval import GlossaryQueryRewriter, NarrativeIndex
from ragspine_lite.link.narrative_link import NarrativeIndexRetriever, build_narrative_retriever
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend
from ragspine_lite.vector.persistence_policy import PersistEverythingPolicy

LABELS = ["RESTRICTED", "restricted", "Restricted", "rEsTrIcTeD"]

OPEN_DOCS = {
    "open1": "Hong Kong revenue grew strongly in 2024.",
    "open2": "ACME HK revenue outlook remains positive.",
    "open3": "香港营收增长，银保渠道贡献最大。",
}
SECRET_DOCS = {
    f"secret{i}": f"SECRET{i} Hong Kong revenue merger plan 香港营收 confidential draft."
    for i in range(len(LABELS))
}
SECRET_TOKENS = [f"SECRET{i}" for i in range(len(LABELS))]


class RecordingJudge:
    """Reverses the candidates and keeps every text it was shown."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.calls = 0

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        self.calls += 1
        self.seen.extend(candidates)
        return list(range(len(candidates)))[::-1]


class RecordingPostprocessor:
    def __init__(self) -> None:
        self.seen: list[dict] = []

    def postprocess(self, query, results):
        self.seen.extend(results)
        return results


class RecordingProvider:
    """An LLM provider that records every prompt and answers "0"."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def chat(self, messages, *, tools=None):
        self.prompts.extend(str(m["content"]) for m in messages)
        return ChatCompletion(choices=(Choice(0, ResponseMessage(content="0")),))


def ingest_all(index: NarrativeIndex) -> None:
    for doc_id, text in OPEN_DOCS.items():
        index.ingest(text, DocumentMeta(doc_id=doc_id, entity="ACME_HK"))
    for (doc_id, text), label in zip(SECRET_DOCS.items(), LABELS, strict=True):
        index.ingest(text, DocumentMeta(doc_id=doc_id, entity="ACME_HK", sensitivity=label))


def leaked(texts) -> list[str]:
    return [t for t in texts for tok in SECRET_TOKENS if tok in str(t)]


@pytest.mark.parametrize("hybrid", [False, True], ids=["bm25", "hybrid"])
def test_exit1_judge_never_sees_restricted_text_through_the_index(store, hybrid):
    judge = RecordingJudge()
    index = NarrativeIndex(
        store,
        judge=judge,
        query_rewriter=GlossaryQueryRewriter(),
        embedding_backend=DeterministicEmbeddingBackend(dim=32) if hybrid else None,
        persistence_policy=PersistEverythingPolicy(),  # vectors too: the exit must still hold
    )
    ingest_all(index)
    results = index.retrieve("hong kong revenue 香港营收")
    assert judge.calls == 1
    assert judge.seen and leaked(judge.seen) == []
    assert sorted(judge.seen) == sorted(OPEN_DOCS.values())
    # The index result itself may still hold RESTRICTED chunks, at their RRF positions.
    assert {r.chunk.doc_id for r in results} >= set(SECRET_DOCS)


def test_exit1_restricted_keep_their_rrf_positions(store):
    judge = RecordingJudge()
    index = NarrativeIndex(store, judge=judge)
    ingest_all(index)
    base = index.retrieve("hong kong revenue", rerank=False)
    judged = index.retrieve("hong kong revenue")
    for pos, (b, j) in enumerate(zip(base, judged, strict=True)):
        if b.chunk.sensitivity.upper() == "RESTRICTED":
            assert j.chunk.chunk_id == b.chunk.chunk_id, pos


def test_exit1_all_restricted_candidates_mean_the_judge_is_not_called(store):
    judge = RecordingJudge()
    index = NarrativeIndex(store, judge=judge)
    ingest_all(index)
    results = index.retrieve("merger confidential draft")
    assert results and all(r.chunk.doc_id in SECRET_DOCS for r in results)
    assert judge.calls == 0


@pytest.mark.parametrize("hybrid", [False, True], ids=["bm25", "hybrid"])
def test_exit2_link_drops_restricted_before_snippets_and_postprocessing(store, hybrid):
    judge = RecordingJudge()
    pp = RecordingPostprocessor()
    index = NarrativeIndex(
        store,
        judge=judge,
        query_rewriter=GlossaryQueryRewriter(),
        embedding_backend=DeterministicEmbeddingBackend(dim=32) if hybrid else None,
    )
    ingest_all(index)
    out = NarrativeIndexRetriever(index, postprocessor=pp).retrieve(
        "hong kong revenue 香港营收", filters={"entity": "ACME_HK"}
    )
    assert {s["doc_id"] for s in out} == set(OPEN_DOCS)
    assert all(str(s["sensitivity"]).upper() != "RESTRICTED" for s in out)
    assert leaked(s["text"] for s in out) == []
    assert leaked(repr(s) for s in pp.seen) == []
    assert leaked(judge.seen) == []


def test_exit2_holds_when_a_filter_selects_restricted_at_index_level(store):
    index = NarrativeIndex(store)
    ingest_all(index)
    only_secret = make_filter([("doc_id", "in", sorted(SECRET_DOCS))])
    at_index = index.retrieve("hong kong revenue", metadata_filter=only_secret)
    assert {r.chunk.doc_id for r in at_index} == set(SECRET_DOCS)

    class FilteringIndex:
        """Forwards to the index with the RESTRICTED-selecting filter in place of the
        link's own (an index that ignores it): the exit still drops every result."""

        def retrieve(self, query, **kw):
            return index.retrieve(query, **{**kw, "metadata_filter": only_secret})

    assert NarrativeIndexRetriever(FilteringIndex()).retrieve("hong kong revenue") == []


def test_exit2_retry_without_filters_does_not_leak(store):
    index = NarrativeIndex(store)
    ingest_all(index)
    out = NarrativeIndexRetriever(index).retrieve("merger plan", filters={"entity": "NOPE"})
    assert out == []


def test_exits_through_build_narrative_retriever(tmp_path):
    provider = RecordingProvider()
    pp = RecordingPostprocessor()
    retriever, store = build_narrative_retriever(
        tmp_path / "chunks.db", provider,
        embedding_backend=DeterministicEmbeddingBackend(dim=32), postprocessor=pp,
    )
    try:
        ingest_all(retriever.index)
        out = retriever.retrieve("hong kong revenue 香港营收", top_k=50)
        assert out
        assert {s["doc_id"] for s in out} <= set(OPEN_DOCS)
        assert leaked(s["text"] for s in out) == []
        assert leaked(repr(s) for s in pp.seen) == []
        assert provider.prompts and leaked(provider.prompts) == []
        # RESTRICTED vectors are not persisted by default (IsolationFirstPolicy).
        assert retriever.index.vector_store.count() == len(OPEN_DOCS)
    finally:
        store.close()


@pytest.mark.parametrize("label", LABELS)
def test_each_label_casing_is_stripped_by_the_built_retriever(tmp_path, label):
    retriever, store = build_narrative_retriever(tmp_path / "c.db")
    try:
        retriever.index.ingest("merger plan text", DocumentMeta(doc_id="s", sensitivity=label))
        retriever.index.ingest("merger notes", DocumentMeta(doc_id="o"))
        assert [s["doc_id"] for s in retriever.retrieve("merger")] == ["o"]
        assert len(retriever.index.retrieve("merger")) == 2  # present below the exit
    finally:
        store.close()


# ---------------------------------------------------------------- labels outside the vocabulary
# A label given through the Python API (or stored by an older version) that is not in the
# vocabulary fails closed: RESTRICTED at every exit, by the one predicate (is_restricted).

UNKNOWN_LABELS = ["RESTRICTED.", "SECRET", "[RESTRICTED]", "R E S T R I C T E D", "",
                  "TOP SECRET\u200b"]
API_CANARY = "zqapicanary"
OPEN_TEXT = "Harbour site merger plan for the board, open minutes."
SECRET_TEXT = f"Harbour site merger plan {API_CANARY} price and codename for the board."
QUERY = "harbour merger plan board"  # matches both documents, never names the canary


def _vector(text: str) -> list[float]:
    words = text.lower().split()
    return [1.0 + sum(len(w) for w in words if hash(w) % 8 == i) for i in range(8)]


def openai_stub(method: str, path: str, headers: dict, body: bytes) -> tuple[int, bytes]:
    """An OpenAI-compatible server: /v1/embeddings answers vectors, chat a reversed ranking."""
    import json

    from _remote_server import chat_reply, reverse_llm

    payload = json.loads(body)
    if path.endswith("/embeddings"):
        data = [{"index": i, "embedding": _vector(t)} for i, t in enumerate(payload["input"])]
        return 200, json.dumps({"data": data, "model": payload["model"]}).encode()
    if "[0] " in payload["messages"][-1]["content"]:
        return reverse_llm(method, path, headers, body)
    return 200, chat_reply("A summary of the themes.")


@pytest.fixture
def openai_server(monkeypatch):
    pytest.importorskip("http.server")
    from _remote_server import StubHTTPServer

    for name in ("RAGSPINE_OPENAI_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with StubHTTPServer(openai_stub) as server:
        yield server


def _sent(server, suffix: str) -> bytes:
    return b"\n".join(body for _m, path, _h, body in server.requests if path.endswith(suffix))


def _off_host(server):
    from ragspine_lite.remote.openai_chat import OpenAICompatibleProvider
    from ragspine_lite.vector.openai_backend import OpenAIEmbeddingBackend

    provider = OpenAICompatibleProvider(server.url + "/v1", "stub-llm")
    embedder = OpenAIEmbeddingBackend(base_url=server.url + "/v1", model="stub-embed")
    return provider, embedder


@pytest.mark.cpython_only
@pytest.mark.parametrize("label", UNKNOWN_LABELS)
def test_an_api_label_outside_the_vocabulary_never_reaches_snippets_embedder_or_judge(
    tmp_path, openai_server, label
):
    provider, embedder = _off_host(openai_server)
    retriever, store = build_narrative_retriever(
        tmp_path / "c.db", provider, embedding_backend=embedder
    )
    try:
        retriever.index.ingest(OPEN_TEXT, DocumentMeta(doc_id="open"))
        retriever.index.ingest(SECRET_TEXT, DocumentMeta(doc_id="secret", sensitivity=label))
        below = retriever.index.retrieve(QUERY, rerank=False)  # reverse proof: it is stored
        assert any(API_CANARY in r.chunk.text for r in below)
        snippets = retriever.retrieve(QUERY, top_k=20)
    finally:
        store.close()
    assert [s["doc_id"] for s in snippets] == ["open"]
    assert API_CANARY not in repr(snippets)
    embedded, judged = _sent(openai_server, "/embeddings"), _sent(openai_server, "/completions")
    assert b"open minutes" in embedded and b"open minutes" in judged  # both exits were used
    assert API_CANARY.encode() not in embedded + judged


@pytest.mark.cpython_only
@pytest.mark.parametrize("label", UNKNOWN_LABELS)
def test_raptor_and_the_semantic_chunker_never_send_an_unknown_label_off_host(
    openai_server, label
):
    from ragspine_lite.chunking.chunking import Chunk
    from ragspine_lite.chunking.semantic_chunker import SemanticChunker
    from ragspine_lite.raptor import LLMRaptorSummarizer, build_raptor_tree

    provider, embedder = _off_host(openai_server)
    chunks = [Chunk(f"d{i}#c0", f"d{i}", 0, text, f"d{i}#para1", 1, 1, sensitivity=sens)
              for i, (text, sens) in enumerate([(OPEN_TEXT, "INTERNAL"), (OPEN_TEXT, "PUBLIC"),
                                                 (SECRET_TEXT, label), (SECRET_TEXT, label)])]
    tree = build_raptor_tree(chunks, embedder=embedder, summarizer=LLMRaptorSummarizer(provider),
                             threshold=-1.0)
    assert tree.summaries and API_CANARY not in repr(tree)
    chunker = SemanticChunker(embedder)
    secret = "\n".join([SECRET_TEXT, "Second paragraph.", "Third paragraph."])
    assert chunker.chunk(secret, DocumentMeta(doc_id="s", sensitivity=label))
    summarised = _sent(openai_server, "/completions")
    assert b"open minutes" in summarised  # reverse proof: the open chunks went there
    assert API_CANARY.encode() not in summarised + _sent(openai_server, "/embeddings")


def _store_with_an_unknown_label(db, label: str, *, old: bool) -> None:
    """A store holding one open and one unknown-label document: written through the Python
    API today, or (``old``) labelled INTERNAL and relabelled in SQL, as an older version
    that stored any value would have left it."""
    store = ChunkStore(db)
    store.init_schema()
    index = NarrativeIndex(store)
    index.ingest(OPEN_TEXT, DocumentMeta(doc_id="open"))
    index.ingest(SECRET_TEXT, DocumentMeta(doc_id="secret", sensitivity="INTERNAL" if old
                                           else label))
    if old:
        store._conn.execute("UPDATE narrative_chunk SET sensitivity = ? WHERE doc_id = 'secret'",
                            (label,))
        store._conn.commit()
    store.close()


@pytest.mark.parametrize("old", [False, True], ids=["api", "older-store"])
@pytest.mark.parametrize("label", UNKNOWN_LABELS)
def test_cli_search_never_prints_an_unknown_label_document(tmp_path, capsys, monkeypatch,
                                                           label, old):
    import json

    from ragspine_lite import cli

    monkeypatch.setenv("RAGSPINE_EMBEDDING_BACKEND", "none")
    for name in ("RAGSPINE_EMBEDDING", "RAGSPINE_RETRIEVAL_MODE", "RAGSPINE_CONTEXTUAL"):
        monkeypatch.delenv(name, raising=False)
    db = tmp_path / "c.db"
    _store_with_an_unknown_label(db, label, old=old)
    for extra in ([], ["--json"]):
        assert cli.main(["search", QUERY, "--db", str(db), "--top-k", "20", *extra]) == 0
        out, err = capsys.readouterr()
        assert "open minutes" in out  # reverse proof: the search found the open document
        assert API_CANARY not in out + err
    assert cli.main(["stats", "--db", str(db), "--json"]) == 0
    by_sensitivity = json.loads(capsys.readouterr().out)["by_sensitivity"]
    assert by_sensitivity["RESTRICTED"]["documents"] == 1  # counted as RESTRICTED …
    assert set(by_sensitivity) == {"INTERNAL", "RESTRICTED"}  # … and the value never shown


@pytest.mark.parametrize("label", UNKNOWN_LABELS)
def test_an_older_store_with_an_unknown_label_is_read_closed_by_the_agent_exit(tmp_path, label):
    db = tmp_path / "c.db"
    _store_with_an_unknown_label(db, label, old=True)
    retriever, store = build_narrative_retriever(db, read_only=True)
    try:
        snippets = retriever.retrieve(QUERY, top_k=20)
    finally:
        store.close()
    assert [s["doc_id"] for s in snippets] == ["open"]
