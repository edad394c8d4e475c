"""The narrative GraphRAG skeleton: LLM extraction with caps and the caller's lineage,
deterministic communities, synthesis summaries, the switch — and a RESTRICTED canary that
never reaches the chat server."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest
from _graph import CANARY

from ragspine_lite.common.errors import ProviderError
from ragspine_lite.common.llm import EchoProvider
from ragspine_lite.graph.narrative import (
    NARRATIVE_GRAPH_ENV,
    Community,
    CommunitySummarizer,
    CommunitySummary,
    ExtractedEntity,
    ExtractedGraph,
    ExtractedRelation,
    GraphExtractor,
    LLMCommunitySummarizer,
    LLMGraphExtractor,
    NarrativeGraphPipeline,
    detect_communities,
    make_narrative_graph,
)


def rel(source, target, kind="k", doc="d", loc="d#1"):
    return ExtractedRelation(source, target, kind, doc, loc)


class Failing(EchoProvider):
    def chat(self, messages, *, tools=None):
        self.calls.append((messages, tools))
        raise ProviderError("down")


def test_extraction_parses_caps_and_keeps_the_callers_lineage():
    reply = json.dumps({
        "entities": [{"name": " ACME HK ", "type": "company"}, {"name": "bank"}, "junk",
                     {"name": ""}, {"name": "third", "type": " "}],
        "relations": [{"source": "ACME HK", "target": "bank", "kind": "partners",
                       "source_doc_id": "model-says", "source_locator": "nowhere"},
                      {"source": "bank", "target": " "}, {"source": "a", "target": "b"}],
    })
    provider = EchoProvider(reply)
    extractor = LLMGraphExtractor(provider, max_entities=2, max_relations=5)
    assert isinstance(extractor, GraphExtractor)
    got = extractor.extract("the text", source_doc_id="doc1", source_locator="doc1#para2")
    assert got.entities == (ExtractedEntity("ACME HK", "company", "doc1", "doc1#para2"),
                            ExtractedEntity("bank", "entity", "doc1", "doc1#para2"))
    assert got.relations == (rel("ACME HK", "bank", "partners", "doc1", "doc1#para2"),
                             rel("a", "b", "related_to", "doc1", "doc1#para2"))
    [(messages, tools)] = provider.calls
    assert tools is None and [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == "the text" and '"entities"' in messages[0]["content"]
    assert LLMGraphExtractor(provider, max_entities=-1, max_relations=0).extract(
        "t", source_doc_id="d", source_locator="l") == ExtractedGraph()


@pytest.mark.parametrize("provider", [
    EchoProvider("not json"), EchoProvider("[]"), EchoProvider("```json\n{}\n```"),
    EchoProvider('{"entities": {"name": "x"}, "relations": null}'), Failing()])
def test_failures_give_the_empty_graph(provider):
    got = LLMGraphExtractor(provider).extract("t", source_doc_id="d", source_locator="d#1")
    assert got == ExtractedGraph()


def test_communities_are_connected_components_with_stable_ids():
    graph = ExtractedGraph((), (rel("b", "c"), rel("x", "y"), rel("c", "a"), rel("a", "b"),
                                rel("y", "x", "again")))
    assert detect_communities(graph) == (Community("c0", ("a", "b", "c"), 3),
                                         Community("c1", ("x", "y"), 2))
    assert detect_communities(ExtractedGraph((ExtractedEntity("a", "e", "d", "l"),))) == ()
    shuffled = ExtractedGraph((), tuple(reversed(graph.relations)))
    assert detect_communities(shuffled) == detect_communities(graph)


def test_summaries_are_syntheses_with_their_sources():
    graph = ExtractedGraph((), (rel("b", "a", "owns", doc="d2"), rel("a", "c", "sells", "d1"),
                                rel("x", "y", doc="")))
    provider = EchoProvider("  A short theme.  ")
    summarizer = LLMCommunitySummarizer(provider)
    assert isinstance(summarizer, CommunitySummarizer)
    [first, second] = detect_communities(graph)
    got = summarizer.summarize(first, graph)
    assert got == CommunitySummary("c0", "A short theme.", ("a", "b", "c"), True, ("d1", "d2"))
    user = provider.calls[0][0][1]["content"]
    assert "a、b、c" in user and user.index("a --sells--> c") < user.index("b --owns--> a")
    assert "数字" in provider.calls[0][0][0]["content"]  # the prompt forbids numbers
    assert summarizer.summarize(second, graph).source_doc_ids == ()


@pytest.mark.parametrize("provider", [EchoProvider("   "), Failing()])
def test_no_summary_gives_a_deterministic_placeholder(provider, caplog):
    community = Community("c3", ("a", "b"), 1)
    with caplog.at_level(logging.WARNING, logger="ragspine_lite.graph"):
        got = LLMCommunitySummarizer(provider).summarize(community, ExtractedGraph())
    assert got.text == "[合成摘要·占位] 社区 c3：a、b" and got.is_synthesis
    assert "no_summary" in caplog.text


def test_the_pipeline_never_sends_restricted_chunks():
    provider = EchoProvider(lambda m: json.dumps(
        {"relations": [{"source": m[-1]["content"][:2], "target": "hub"}]}))
    pipeline = make_narrative_graph("LLM", provider=provider, max_relations=3)
    chunks = [SimpleNamespace(doc_id="d1", text="p1 text", source_locator="d1#p1",
                              sensitivity="PUBLIC"),
              SimpleNamespace(doc_id="r", text=f"{CANARY} memo", source_locator="r#p1",
                              sensitivity="\tRESTRICTED"),
              SimpleNamespace(doc_id="u", text=f"{CANARY} odd", source_locator="u#p1",
                              sensitivity="SECRET"),  # outside the vocabulary: never sent
              SimpleNamespace(doc_id="n", text=f"{CANARY} unlabelled", source_locator="n#p1"),
              SimpleNamespace(doc_id="d2", text="p2 text", source_locator="d2#p9",
                              sensitivity="internal")]
    graph = pipeline.extract_chunks(chunks)
    assert [(r.source, r.source_doc_id, r.source_locator) for r in graph.relations] == [
        ("p1", "d1", "d1#p1"), ("p2", "d2", "d2#p9")]
    [summary] = pipeline.summarize(graph)
    assert summary.member_names == ("hub", "p1", "p2") and summary.is_synthesis
    assert pipeline.detect_communities(graph) == detect_communities(graph)
    assert CANARY not in json.dumps([c[0] for c in provider.calls])


def test_make_narrative_graph(monkeypatch, caplog):
    monkeypatch.delenv(NARRATIVE_GRAPH_ENV, raising=False)
    assert make_narrative_graph(provider=EchoProvider()) is None
    assert make_narrative_graph("none", provider=EchoProvider()) is None
    assert make_narrative_graph("", provider=EchoProvider()) is None
    with caplog.at_level(logging.WARNING, logger="ragspine_lite.graph"):
        assert make_narrative_graph("on") is None
    assert "needs an LLM provider" in caplog.text
    provider = EchoProvider()
    monkeypatch.setenv(NARRATIVE_GRAPH_ENV, "on")
    pipeline = make_narrative_graph(provider=provider, max_entities=4)
    assert isinstance(pipeline, NarrativeGraphPipeline)
    assert pipeline.extractor.provider is provider and pipeline.summarizer.provider is provider
    assert pipeline.extractor.max_entities == 4
    with pytest.raises(ValueError, match="none, llm, on"):
        make_narrative_graph("graphrag", provider=provider)


@pytest.mark.cpython_only
def test_the_pipeline_over_a_loopback_chat_server(tmp_path):
    from _graph import ingest_samples
    from _remote_server import StubHTTPServer, chat_reply

    from ragspine_lite.remote.openai_chat import OpenAICompatibleProvider

    def answer(method, path, headers, body):
        messages = json.loads(body)["messages"]
        if "综述" in messages[0]["content"]:
            return 200, chat_reply("ACME 的业务围绕香港与内地展开。")
        entity = "ACME HK" if "Hong Kong" in messages[-1]["content"] else "ACME"
        return 200, chat_reply(json.dumps({"entities": [{"name": entity, "type": "company"}],
                                           "relations": [{"source": entity, "target": "ACME",
                                                          "kind": "part_of"}]}))

    chunks = ingest_samples(tmp_path / "chunks.db")
    with StubHTTPServer(answer) as server:
        provider = OpenAICompatibleProvider(server.url + "/v1", "stub-llm", timeout=5)
        pipeline = make_narrative_graph("llm", provider=provider)
        graph = pipeline.extract_chunks(chunks)
        summaries = pipeline.summarize(graph)
    bodies = b"".join(body for _m, _p, _h, body in server.requests)
    assert CANARY.encode() not in bodies
    assert {r.source_doc_id for r in graph.relations} == {
        c.doc_id for c in chunks if c.sensitivity != "RESTRICTED"}
    [summary] = summaries
    assert summary.text == "ACME 的业务围绕香港与内地展开。" and summary.is_synthesis
    assert summary.member_names == ("ACME", "ACME HK")
