"""GraphQuery: roll-up over subsidiaries, peer comparison, derivation trace — gated first,
answered with lineage, traced with codes and counts only."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from _graph import CANARY

from ragspine_lite.common.company_profile import load_company_profile
from ragspine_lite.common.security_gate import SecurityGate
from ragspine_lite.graph.query import ComparisonRow, DerivationTrace, GraphQuery
from ragspine_lite.graph.relation import build_relation_graph
from ragspine_lite.graph.store import GraphEdge, GraphNode, InProcessGraphStore
from ragspine_lite.storage.fact_store import Fact, SqliteFactStore


def fact(entity, value, metric="REVENUE", period="2024", channel="TOTAL"):
    doc = f"{entity.lower()}_report"
    return Fact(metric, entity, "", channel, "FY", period, value, "USD_M", doc, f"{doc}#para2")


class CountingFacts(SqliteFactStore):
    """A real SQLite fact store that counts its queries."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.init_schema()
        self.calls: list[tuple] = []

    def query(self, *args, **kwargs):
        self.calls.append(args)
        return super().query(*args, **kwargs)


@pytest.fixture
def profile(monkeypatch):
    monkeypatch.delenv("RAGSPINE_COMPANY_CONFIG", raising=False)
    return load_company_profile()


@pytest.fixture
def facts():
    store = CountingFacts()
    store.upsert_facts([fact("ACME_HK", 18.5), fact("ACME_CN", 12.25), fact("ACME_GROUP", 99.0),
                        fact("ACME_HK", 7.0, channel="AGENCY"),
                        fact("ACME_HK", 16.0, period="2023")])
    yield store
    store.close()


@pytest.fixture
def query(profile, facts):
    return GraphQuery(build_relation_graph(profile), facts, profile=profile)


def test_rollup_sums_the_subsidiaries_with_their_facts(query, facts, caplog):
    with caplog.at_level(logging.INFO, logger="ragspine_lite.trace"):
        got = query.subsidiary_rollup("ACME_GROUP", "REVENUE", "FY", "2024")
    assert (got.parent, got.metric, got.period, got.total, got.found, got.refused) == (
        "ACME_GROUP", "REVENUE", "FY2024", 30.75, True, False)
    assert [(f.entity, f.source_doc_id, f.source_locator) for f in got.facts] == [
        ("ACME_CN", "acme_cn_report", "acme_cn_report#para2"),
        ("ACME_HK", "acme_hk_report", "acme_hk_report#para2")]
    [record] = [r for r in caplog.records if getattr(r, "route", "") == "graph_subsidiary_rollup"]
    assert record.trace == {"route": "graph_subsidiary_rollup", "metric": "REVENUE",
                            "entity": "ACME_GROUP", "period": "FY2024",
                            "subsidiary_count": 2, "found_count": 2}
    agency = query.subsidiary_rollup("ACME_GROUP", "REVENUE", "FY", "2024", channel="AGENCY")
    assert (agency.total, [f.entity for f in agency.facts]) == (7.0, ["ACME_HK"])


def test_rollup_without_facts_or_children(query):
    none = query.subsidiary_rollup("ACME_GROUP", "ROE", "FY", "2024")
    assert (none.total, none.found, none.facts, none.refused) == (None, False, (), False)
    leaf = query.subsidiary_rollup("ACME_HK", "REVENUE", "FY", "2024")
    assert (leaf.total, leaf.found) == (None, False)


@pytest.mark.parametrize("parent", ["AIA", "a i a", "平 安", "Ping  An"])
def test_an_external_parent_is_refused_before_any_read(query, facts, parent, caplog):
    with caplog.at_level(logging.INFO, logger="ragspine_lite.trace"):
        got = query.subsidiary_rollup(parent, "REVENUE", "FY", "2024")
    assert (got.total, got.found, got.facts, got.refused) == (None, False, (), True)
    assert "outside the scope" in got.refusal_message
    assert "ACME Group REVENUE" in got.refusal_message
    assert facts.calls == [] and not [r for r in caplog.records if hasattr(r, "route")]


def test_a_restricted_subsidiary_is_left_out(profile, facts):
    store = build_relation_graph(profile)
    store.upsert_nodes([GraphNode(CANARY, "entity", "", {"sensitivity": "RESTRICTED",
                                                         "source_doc_id": "x",
                                                         "source_locator": "x#1"})])
    store.upsert_edges([GraphEdge("ACME_GROUP", CANARY, "parent_of")])
    facts.upsert_facts([fact(CANARY, 1000.0)])
    got = GraphQuery(store, facts, profile=profile).subsidiary_rollup(
        "ACME_GROUP", "REVENUE", "FY", "2024")
    assert got.total == 30.75 and CANARY not in repr(got)
    assert all(call[1] != CANARY for call in facts.calls)


def test_peer_comparison_keeps_input_order_and_duplicates(query, caplog):
    with caplog.at_level(logging.INFO, logger="ragspine_lite.trace"):
        got = query.peer_comparison(["ACME_HK", "ACME_CN", "ACME_XX", "ACME_HK"], "REVENUE",
                                    "FY", "2024")
    assert got.period == "FY2024" and not got.refused
    assert [(r.entity, r.found, r.fact.value if r.fact else None) for r in got.rows] == [
        ("ACME_HK", True, 18.5), ("ACME_CN", True, 12.25), ("ACME_XX", False, None),
        ("ACME_HK", True, 18.5)]
    assert got.rows[2] == ComparisonRow("ACME_XX", False, None)
    [record] = [r for r in caplog.records if getattr(r, "route", "") == "graph_peer_comparison"]
    assert (record.entity_count, record.found_count) == (4, 3)


@pytest.mark.parametrize("peer", ["AIA", "a i a", "友 邦", "P R U D E N T I A L"])
def test_one_external_entity_refuses_the_whole_comparison(query, facts, peer):
    got = query.peer_comparison(["ACME_HK", peer, "ACME_CN"], "REVENUE", "FY", "2024")
    assert (got.rows, got.refused) == ((), True) and facts.calls == []


def test_derivation_trace_is_cited_and_sorted(query, caplog):
    with caplog.at_level(logging.INFO, logger="ragspine_lite.trace"):
        got = query.derivation_trace("ACME_GROUP", edge_types=("parent_of", "derives"))
    assert [n.id for n in got.nodes] == ["ACME_CN", "ACME_HK", "ASIA", "CN", "HK"]
    assert [e.key for e in got.edges] == [
        ("ACME_CN", "CN", "derives"), ("ACME_GROUP", "ACME_CN", "parent_of"),
        ("ACME_GROUP", "ACME_HK", "parent_of"), ("ACME_GROUP", "ASIA", "derives"),
        ("ACME_HK", "HK", "derives")]
    assert all(x.metadata["source_doc_id"] and x.metadata["source_locator"]
               for x in (*got.nodes, *got.edges))
    assert query.derivation_trace("ACME_HK").nodes[0].id == "HK"
    assert query.derivation_trace("ACME_GROUP", max_depth=0) == DerivationTrace("ACME_GROUP")
    [record] = [r for r in caplog.records if getattr(r, "route", "") == "graph_derivation_trace"]
    assert (record.start, record.node_count, record.edge_count) == ("ACME_GROUP", 5, 5)


def test_a_restricted_start_traces_nothing(profile, facts):
    store = InProcessGraphStore()
    store.upsert_nodes([GraphNode("R", "doc", "", {"sensitivity": " RESTRICTED "}),
                        GraphNode("V", "entity")])
    store.upsert_edges([GraphEdge("R", "V", "derives")])
    got = GraphQuery(store, facts, profile=profile).derivation_trace("R")
    assert got == DerivationTrace("R")


def test_a_custom_gate_and_the_profile_default(monkeypatch, facts, tmp_path):
    store = InProcessGraphStore()
    gated = GraphQuery(store, facts, security_gate=SecurityGate({"globex": "Globex"}, "Home"))
    assert gated.subsidiary_rollup("G L O B E X", "REVENUE", "FY", "2024").refused
    assert not gated.subsidiary_rollup("AIA", "REVENUE", "FY", "2024").refused
    path = tmp_path / "p.json"
    path.write_text('{"external_entities": {"initech": "Initech"}}', encoding="utf-8")
    monkeypatch.setenv("RAGSPINE_COMPANY_CONFIG", str(path))
    loaded = GraphQuery(store, facts)  # profile=None loads the configured profile
    assert loaded.peer_comparison(["INITECH"], "REVENUE", "FY", "2024").refused


def test_traces_and_answers_never_carry_restricted_content(profile, facts, caplog, tmp_path):
    from _graph import ingest_samples

    chunks = ingest_samples(tmp_path / "chunks.db")
    secret = SimpleNamespace(doc_id=f"{CANARY}.md", entity=CANARY, sensitivity="RESTRICTED",
                             source_locator=f"{CANARY}.md#para1", text=CANARY)
    store = build_relation_graph(profile, chunks=[*chunks, secret])
    query = GraphQuery(store, facts, profile=profile)
    with caplog.at_level(logging.DEBUG):
        answers = [query.subsidiary_rollup("ACME_GROUP", "REVENUE", "FY", "2024"),
                   query.peer_comparison(["ACME_HK", "ACME_CN"], "REVENUE", "FY", "2024"),
                   query.derivation_trace("ACME_GROUP", edge_types=("parent_of", "derives",
                                                                    "mentions"), max_depth=5)]
    traces = [r.trace for r in caplog.records if hasattr(r, "trace")]
    assert len(traces) == 3
    assert CANARY not in repr(answers) + repr(traces) + caplog.text
