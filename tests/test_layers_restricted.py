"""RESTRICTED canaries for the opt-in layers: each inherits both exits on a real index.

The corpus of ``test_restricted_exits`` (open documents plus highly relevant RESTRICTED ones
in several casings). Every layer is switched on and every place it could leak — its output,
what its pluggable parts (compressor, grader, summariser, embedder, judge) were shown — is
searched for the secret tokens; a reverse proof shows the same text unlabelled does flow.
"""

from __future__ import annotations

from test_restricted_exits import (
    OPEN_DOCS,
    SECRET_DOCS,
    RecordingJudge,
    ingest_all,
    leaked,
)

from ragspine_lite.chunking.chunking import DocumentMeta
from ragspine_lite.common.llm import EchoProvider
from ragspine_lite.contextual import make_index_text_fn
from ragspine_lite.corrective import make_corrective_retriever
from ragspine_lite.lexical.retrieval import GlossaryQueryRewriter, NarrativeIndex
from ragspine_lite.link.narrative_link import NarrativeIndexRetriever
from ragspine_lite.postprocess import (
    ChainPostprocessor,
    CompressionPostprocessor,
    make_postprocessor,
)
from ragspine_lite.raptor import (
    LLMRaptorSummarizer,
    build_raptor_tree,
    make_raptor_retriever,
)
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend

QUERY = "hong kong revenue 香港营收 merger plan"


class RecordingEmbedder(DeterministicEmbeddingBackend):
    def __init__(self) -> None:
        super().__init__(dim=32)
        object.__setattr__(self, "seen", [])

    def embed_texts(self, texts):
        self.seen.extend(texts)
        return super().embed_texts(texts)


def make_index(store, judge=None, **kw) -> NarrativeIndex:
    index = NarrativeIndex(store, judge=judge, query_rewriter=GlossaryQueryRewriter(), **kw)
    ingest_all(index)
    return index


def test_postprocess_chain_and_its_compressor_never_see_restricted(store):
    shown = []
    judge = RecordingJudge()
    chain = ChainPostprocessor([
        make_postprocessor("mmr"), make_postprocessor("lost_in_middle"),
        CompressionPostprocessor(compressor=lambda q, t: shown.append(t) or t),
    ])
    out = NarrativeIndexRetriever(make_index(store, judge), postprocessor=chain).retrieve(QUERY)
    assert {s["doc_id"] for s in out} == set(OPEN_DOCS)
    assert shown and leaked(shown) == [] and leaked([repr(out)]) == []
    assert leaked(judge.seen) == []
    assert all(s["text"] == s["prompt_text"] for s in out)  # identity compressor


def test_postprocess_all_restricted_input_reaches_the_chain_empty(store):
    seen = []

    class Recording:
        def postprocess(self, query, results):
            seen.append(list(results))
            return results

    link = NarrativeIndexRetriever(make_index(store), postprocessor=Recording())
    assert link.retrieve("merger confidential draft") == []
    assert seen == [[]]


def test_corrective_never_grades_restricted_and_refuses_rather_than_leak(store):
    graded = []

    class RecordingGrader:
        def grade(self, query, snippets):
            graded.extend(snippets)
            return 0.0  # always weak: every action runs, then refusal

    link = NarrativeIndexRetriever(make_index(store), retry_without_filters=False)
    crag = make_corrective_retriever(link, "crag", grader=RecordingGrader(), emit=False,
                                     query_rewriter=lambda q: "merger plan confidential")
    assert crag.retrieve(QUERY, filters={"entity": "ACME_HK"}) == []
    assert [a.action for a in crag.last_actions] == [
        "retrieve", "drop_filters", "rewrite_query", "refuse"]
    assert graded and leaked([repr(graded)]) == []


def test_corrective_on_an_all_restricted_result_refuses(store):
    crag = make_corrective_retriever(NarrativeIndexRetriever(make_index(store)), "on",
                                     emit=False)
    assert crag.retrieve("SECRET0 SECRET1 merger confidential draft") == []
    assert crag.last_actions[-1].action == "refuse"


def test_raptor_tree_from_the_store_never_holds_or_shows_restricted(store):
    embedder = RecordingEmbedder()
    provider = EchoProvider(lambda messages: "A theme about revenue.")
    index = make_index(store)
    chunks = store.iter_chunks()
    assert {c.doc_id for c in chunks} >= set(SECRET_DOCS)  # the store does hold them
    tree = build_raptor_tree(chunks, embedder=embedder, summarizer=LLMRaptorSummarizer(provider),
                             threshold=0.2)
    assert tree.summaries  # a real tree, with LLM-written summaries
    assert leaked([repr(tree)]) == [] and leaked(embedder.seen) == []
    assert provider.calls and leaked([repr(provider.calls)]) == []
    retriever = make_raptor_retriever(NarrativeIndexRetriever(index), "raptor", tree=tree,
                                      embedder=embedder)
    out = retriever.retrieve(QUERY)
    assert any(s.get("is_synthesis") for s in out)
    assert leaked([repr(out)]) == []
    for s in out:
        assert str(s["sensitivity"]).upper() != "RESTRICTED"


def test_raptor_reverse_proof_unlabelled_secret_text_does_reach_the_summariser(store):
    provider = EchoProvider("theme")
    index = NarrativeIndex(store)
    for doc_id, text in SECRET_DOCS.items():
        index.ingest(text, DocumentMeta(doc_id=doc_id))  # INTERNAL this time
    build_raptor_tree(store.iter_chunks(), embedder=DeterministicEmbeddingBackend(dim=32),
                      summarizer=LLMRaptorSummarizer(provider), threshold=0.2)
    assert leaked([repr(provider.calls)])


def test_contextual_headers_stay_index_side_and_restricted_stays_out(store):
    judge = RecordingJudge()
    embedder = RecordingEmbedder()
    index = make_index(store, judge, index_text_fn=make_index_text_fn("contextual"),
                       embedding_backend=embedder)
    out = NarrativeIndexRetriever(index).retrieve(QUERY, filters={"entity": "ACME_HK"})
    assert {s["doc_id"] for s in out} == set(OPEN_DOCS)
    assert leaked([repr(out)]) == [] and leaked(judge.seen) == []
    assert all("[实体:" not in t for t in judge.seen)  # the judge sees cited text only
    assert all(not str(s["text"]).startswith("[") for s in out)
    # vectors: RESTRICTED chunks are not persisted (IsolationFirstPolicy), so never embedded
    assert embedder.seen and leaked(embedder.seen) == []
    assert any(t.startswith("[实体:ACME_HK]") for t in embedder.seen)
