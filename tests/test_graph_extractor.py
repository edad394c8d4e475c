"""The relation-extractor slot: none, deterministic co-occurrence, and the LLM extractor
(RESTRICTED text never sent, external endpoints dropped, every edge model-derived and
unverified) — against a scripted provider and a real loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest
from _graph import CANARY

from ragspine_lite.common.errors import ProviderError
from ragspine_lite.common.llm import EchoProvider
from ragspine_lite.common.security_gate import SecurityGate
from ragspine_lite.graph.extractor import (
    CO_OCCURS_EDGE_TYPE,
    RELATION_EXTRACTOR_ENV,
    DeterministicRelationExtractor,
    LLMRelationExtractor,
    RelationExtractor,
    make_relation_extractor,
)
from ragspine_lite.graph.store import GraphEdge

MARKERS = {"derived": "model-derived", "verified": "unverified"}


def chunk(doc, entity="", text="", sens="INTERNAL", loc=None):
    return SimpleNamespace(doc_id=doc, entity=entity, text=text, sensitivity=sens,
                           source_locator=loc or f"{doc}#para1")


def relations(*triples) -> str:
    return json.dumps({"relations": [{"source": s, "target": t, "kind": k}
                                     for s, t, k in triples]})


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv(RELATION_EXTRACTOR_ENV, raising=False)
    monkeypatch.delenv("RAGSPINE_COMPANY_CONFIG", raising=False)


# ---------------------------------------------------------------- deterministic


def test_co_occurrence_pairs_the_entities_of_each_document():
    chunks = [chunk("d2", "B"), chunk("d1", "C"), chunk("d1", "A"), chunk("d1", "C"),
              chunk("d2", "A"), chunk("d3", "A"), chunk("d1", "Z", sens="RESTRICTED"),
              chunk("d2", CANARY, sens=" Restricted"), chunk("", "Q"), chunk("d4", " ")]
    edges = DeterministicRelationExtractor().extract(chunks)
    assert isinstance(DeterministicRelationExtractor(), RelationExtractor)
    assert [(e.src, e.dst, e.type, e.metadata["source_doc_id"]) for e in edges] == [
        ("A", "B", CO_OCCURS_EDGE_TYPE, "d2"), ("A", "C", CO_OCCURS_EDGE_TYPE, "d1")]
    assert edges[1].metadata == {"source_doc_id": "d1", "source_locator": "d1#cooccur"}
    assert "derived" not in edges[0].metadata  # deterministic: clean lineage, no markers


def test_a_pair_in_two_documents_keeps_document_order():
    edges = DeterministicRelationExtractor().extract(
        [chunk("d9", "A"), chunk("d9", "B"), chunk("d1", "B"), chunk("d1", "A")])
    assert [e.metadata["source_doc_id"] for e in edges] == ["d1", "d9"]


# ---------------------------------------------------------------- LLM, scripted


class Script(EchoProvider):
    """Answers by the user message (the chunk text); ``raises`` for texts that fail."""

    def __init__(self, answers, raises=()):
        super().__init__(lambda messages: answers.get(messages[-1]["content"], ""))
        self.raises = set(raises)

    def chat(self, messages, *, tools=None):
        if messages[-1]["content"] in self.raises:
            self.calls.append((messages, tools))
            raise ProviderError("boom")
        return super().chat(messages, tools=tools)


def test_llm_edges_are_stamped_gated_and_restricted_text_is_never_sent(caplog):
    provider = Script({
        "t1": relations(("ACME_HK", "ACME_CN", "supplies"), ("ACME_HK", "A I A", "competes"),
                        ("平 安", "ACME_CN", "x")),
        "t2": relations(("ACME_CN", "HK", "")),
        f"secret {CANARY}": relations(("ACME_HK", CANARY, "leak")),
    })
    chunks = [chunk("b", text="t2", loc="b#p2"), chunk("a", text="t1", loc="a#p1"),
              chunk("r", text=f"secret {CANARY}", sens="RESTRICTED\n")]
    with caplog.at_level(logging.INFO):
        edges = LLMRelationExtractor(provider).extract(chunks)
    assert edges == (
        GraphEdge("ACME_CN", "HK", "related_to",
                  {"source_doc_id": "b", "source_locator": "b#p2", **MARKERS}),
        GraphEdge("ACME_HK", "ACME_CN", "supplies",
                  {"source_doc_id": "a", "source_locator": "a#p1", **MARKERS}),
    )
    sent = json.dumps([messages for messages, _tools in provider.calls], ensure_ascii=False)
    assert [m[-1]["content"] for m, _ in provider.calls] == ["t1", "t2"]  # (doc, locator) order
    assert CANARY not in sent and CANARY not in caplog.text
    system = provider.calls[0][0][0]
    assert system["role"] == "system" and '"relations"' in system["content"]


def test_provider_errors_and_bad_json_add_nothing(caplog):
    provider = Script({"fenced": "```json\n" + relations(("A", "B", "k")) + "\n```",
                       "list": "[1, 2]", "odd": '{"relations": "no"}',
                       "items": json.dumps({"relations": [1, {"source": "A"},
                                                          {"source": " ", "target": "B"},
                                                          {"source": " C ", "target": "D "}]}),
                       }, raises={"fail"})
    chunks = [chunk(doc, text=doc) for doc in ("fail", "fenced", "list", "odd", "items")]
    with caplog.at_level(logging.WARNING, logger="ragspine_lite.graph"):
        edges = LLMRelationExtractor(provider).extract(chunks)
    assert [(e.src, e.dst, e.type) for e in edges] == [("C", "D", "related_to")]
    assert "provider_error" in caplog.text and "bad_json" in caplog.text
    assert "not_an_object" in caplog.text


def test_the_cap_counts_kept_edges_and_stops_calling():
    many = relations(*((f"E{i}", f"F{i}", "k") for i in range(5)), ("AIA", "X", "k"))
    provider = Script({"one": many, "two": many, "three": many})
    chunks = [chunk(d, text=d) for d in ("one", "three", "two")]
    edges = LLMRelationExtractor(provider, max_relations=7).extract(chunks)
    assert len(edges) == 7 and len(provider.calls) == 2
    assert LLMRelationExtractor(provider, max_relations=-3).extract(chunks) == ()


def test_the_gate_is_the_given_one_or_the_profiles(tmp_path, monkeypatch):
    provider = Script({"t": relations(("Globex", "ACME", "k"), ("AIA", "ACME", "k"))})
    custom = LLMRelationExtractor(provider, security_gate=SecurityGate({"globex": "G"}, "H"))
    assert [e.src for e in custom.extract([chunk("d", text="t")])] == ["AIA"]
    default = LLMRelationExtractor(provider)  # no gate, no profile: the default profile's
    assert [e.src for e in default.extract([chunk("d", text="t")])] == ["Globex"]


def test_make_relation_extractor(monkeypatch):
    assert make_relation_extractor() is None and make_relation_extractor(" None ") is None
    assert make_relation_extractor("") is None
    for spec in ("deterministic", "RULE", "cooccurrence"):
        assert isinstance(make_relation_extractor(spec, max_relations=3),
                          DeterministicRelationExtractor)
    with pytest.raises(ValueError, match=r"'co-occurrence'.*none, cooccurrence, deterministic"):
        make_relation_extractor("co-occurrence")
    assert make_relation_extractor("llm") is None  # no provider: the slot stays off
    built = make_relation_extractor("on", provider=EchoProvider(), max_relations=5)
    assert isinstance(built, LLMRelationExtractor) and built.max_relations == 5
    monkeypatch.setenv(RELATION_EXTRACTOR_ENV, "deterministic")
    assert isinstance(make_relation_extractor(), DeterministicRelationExtractor)
    assert make_relation_extractor("none") is None


# ---------------------------------------------------------------- LLM, a real chat server


@pytest.mark.cpython_only
def test_the_llm_extractor_over_a_loopback_chat_server(tmp_path):
    from _graph import ingest_samples
    from _remote_server import StubHTTPServer, chat_reply

    from ragspine_lite.common.company_profile import load_company_profile
    from ragspine_lite.graph.relation import build_relation_graph
    from ragspine_lite.remote.openai_chat import OpenAICompatibleProvider

    def answer(method, path, headers, body):
        text = json.loads(body)["messages"][-1]["content"]
        if "Hong Kong" in text:
            return 200, chat_reply(relations(("ACME Hong Kong", "bank partners", "sells_via"),
                                             ("ACME Hong Kong", "AIA", "competes")))
        if "profit" in text.lower():
            return 200, chat_reply("not json at all")
        return 500, b'{"error": "overloaded"}'

    chunks = ingest_samples(tmp_path / "chunks.db")
    with StubHTTPServer(answer) as server:
        provider = OpenAICompatibleProvider(server.url + "/v1", "stub-llm", timeout=5)
        extractor = make_relation_extractor("llm", provider=provider, max_relations=50)
        store = build_relation_graph(load_company_profile(), chunks=chunks,
                                     relation_extractor=extractor)
    bodies = b"".join(body for _m, _p, _h, body in server.requests)
    assert server.requests and CANARY.encode() not in bodies
    assert len(server.requests) == sum(1 for c in chunks if c.sensitivity != "RESTRICTED")
    walked = store.neighbors("ACME Hong Kong", edge_type="sells_via")
    assert walked == []  # "bank partners" is no node: the edge is stored, never a node read
    derived = [e for e in store._edges.values() if e.metadata.get("derived")]
    assert derived and {e.type for e in derived} == {"sells_via"}
    assert all(e.metadata["verified"] == "unverified" and e.metadata["source_locator"]
               for e in derived)
