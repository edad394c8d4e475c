"""build_relation_graph: typed nodes and edges from the profile, facts and chunks, every one
cited; the relation-extractor slot off leaves the graph byte-identical."""

from __future__ import annotations

import doctest
import importlib.util
import json
from types import SimpleNamespace

import pytest
from _graph import CANARY, RESTRICTED_DOCS, dump, ingest_samples

import ragspine_lite.graph.relation as relation_mod
from ragspine_lite.common.company_profile import load_company_profile
from ragspine_lite.graph.extractor import (
    RELATION_EXTRACTOR_ENV,
    DeterministicRelationExtractor,
    make_relation_extractor,
)
from ragspine_lite.graph.relation import build_relation_graph
from ragspine_lite.graph.store import GraphEdge, InProcessGraphStore
from ragspine_lite.storage.fact_store import Fact

HAS_NX = importlib.util.find_spec("networkx") is not None


@pytest.fixture
def profile(monkeypatch):
    """The built-in ACME profile (whatever the environment names)."""
    monkeypatch.delenv("RAGSPINE_COMPANY_CONFIG", raising=False)
    return load_company_profile()


@pytest.fixture(scope="module")
def sample_chunks(tmp_path_factory):
    """The bundled samples in a real chunk store (two RESTRICTED documents)."""
    return ingest_samples(tmp_path_factory.mktemp("graph") / "chunks.db")


def chunk(doc, entity, sens="INTERNAL", loc=None, text="t"):
    return SimpleNamespace(doc_id=doc, entity=entity, sensitivity=sens,
                           source_locator=loc if loc is not None else f"{doc}#para1", text=text)


def fact(entity, metric="REVENUE", doc="fy_report", loc="fy_report#para2", value=1.0):
    return Fact(metric, entity, "", "TOTAL", "FY", "2024", value, "USD_M", doc, loc)


def all_items(store):
    nodes = list(store._nodes.values())
    return nodes, list(store._edges.values())


def test_doctest():
    assert doctest.testmod(relation_mod).failed == 0


def test_the_default_profile_graph(profile):
    store = build_relation_graph(profile)
    nodes, edges = all_items(store)
    by_type: dict[str, list[str]] = {}
    for n in nodes:
        by_type.setdefault(n.type, []).append(n.id)
    assert {t: sorted(v) for t, v in by_type.items()} == {
        "entity": ["ACME_CN", "ACME_GROUP", "ACME_HK"],
        "metric": ["NEWSALES", "PROFIT", "REVENUE", "ROE"],
        "external_entity": ["AIA", "Manulife", "Ping An", "Prudential"],
        "geography": ["ASIA", "CN", "HK"],
    }
    kinds = sorted((e.src, e.dst, e.type) for e in edges)
    assert [k for k in kinds if k[2] == "parent_of"] == [
        ("ACME_GROUP", "ACME_CN", "parent_of"), ("ACME_GROUP", "ACME_HK", "parent_of")]
    assert [k for k in kinds if k[2] == "derives"] == [
        ("ACME_CN", "CN", "derives"), ("ACME_GROUP", "ASIA", "derives"),
        ("ACME_HK", "HK", "derives")]
    assert len([k for k in kinds if k[2] == "competes_with"]) == 4
    assert store.get_node("ACME_HK").label == "ACME Hong Kong"
    assert store.get_node("ASIA").metadata == {
        "source_doc_id": "company_profile",
        "source_locator": "company_profile#derivation/geography/ASIA", "sensitivity": "INTERNAL"}
    [e] = [e for e in edges if e.type == "competes_with" and e.dst == "AIA"]
    assert e.metadata == {"source_doc_id": "company_profile",
                          "source_locator": "company_profile#external_entities/ACME_GROUP->AIA"}


def test_every_node_and_edge_is_cited(profile, sample_chunks):
    store = build_relation_graph(profile, facts=[fact("ACME_HK")], chunks=sample_chunks,
                                 relation_extractor=DeterministicRelationExtractor())
    nodes, edges = all_items(store)
    assert nodes and edges
    for item in (*nodes, *edges):
        assert item.metadata["source_doc_id"].strip(), item
        assert item.metadata["source_locator"].strip(), item


def test_doc_nodes_take_the_most_restrictive_source(profile, sample_chunks):
    chunks = [*sample_chunks, chunk("mixed", "ACME_HK", "PUBLIC"),
              chunk("mixed", "ACME_HK", " restricted ", loc="mixed#para9"),
              chunk("odd", "ACME_CN", "SECRET"), chunk("blank", "ACME_CN", "")]
    store = build_relation_graph(profile, facts=[fact("ACME_HK", doc="mixed")], chunks=chunks)
    docs = {n.id: n.metadata["sensitivity"] for n in store._nodes.values() if n.type == "doc"}
    assert docs["en/acme_hk_2024_annual_review.md"] == "PUBLIC"
    assert docs["restricted/acme_hk_acquisition_memo.md"] == "RESTRICTED"
    # A label outside the vocabulary, blank included, fails closed (the project's one rule).
    assert (docs["mixed"], docs["odd"], docs["blank"]) == ("RESTRICTED",) * 3
    for hidden in ("mixed", "odd", "blank", *RESTRICTED_DOCS):
        assert store.get_node(hidden) is None and store.neighbors(hidden) == []
    reached = store.traverse("ACME_HK", direction="both", max_depth=4)
    assert not any("restricted" in n.id or n.id in ("mixed", "odd", "blank") for n in reached)
    assert "en/acme_hk_2024_annual_review.md" in [n.id for n in reached]
    assert CANARY not in dump(store)  # chunk text never enters the graph


def test_mentions_from_facts_and_chunks(profile):
    facts = [fact("ACME_HK", loc="fy_report#para2"), fact("ACME_HK", "PROFIT", loc="fy#p9")]
    store = build_relation_graph(profile, facts=facts,
                                 chunks=[chunk("fy_report", "ACME_CN", loc=""),
                                         chunk("notes", "", loc="notes#p1"),
                                         chunk("", "ACME_HK")])
    edges = {e.key: e.metadata for e in store._edges.values() if e.type == "mentions"}
    assert edges == {
        ("fy_report", "ACME_HK", "mentions"): {"source_doc_id": "fy_report",
                                               "source_locator": "fy_report#para2"},
        ("fy_report", "REVENUE", "mentions"): {"source_doc_id": "fy_report",
                                               "source_locator": "fy_report#para2"},
        ("fy_report", "PROFIT", "mentions"): {"source_doc_id": "fy_report",
                                              "source_locator": "fy#p9"},
        ("fy_report", "ACME_CN", "mentions"): {"source_doc_id": "fy_report",
                                               "source_locator": "fy_report#chunk"},
    }
    assert store.get_node("fy_report").metadata == {
        "source_doc_id": "fy_report", "source_locator": "fy_report#doc",
        "sensitivity": "INTERNAL"}
    assert store.get_node("notes").type == "doc"  # a doc without an entity is still a node


def test_a_chunk_mention_overrides_the_fact_mention(profile):
    store = build_relation_graph(profile, facts=[fact("ACME_HK", doc="d", loc="d#fact")],
                                 chunks=[chunk("d", "ACME_HK", loc="d#para3")])
    assert store._edges[("d", "ACME_HK", "mentions")].metadata["source_locator"] == "d#para3"


def test_a_fact_without_lineage_is_refused(profile):
    with pytest.raises(ValueError, match=r"facts\[0\] has no source_locator"):
        build_relation_graph(profile, facts=[fact("ACME_HK", loc=" ")])


@pytest.mark.parametrize("store_spec", ["in_process", "networkx"])
def test_the_slot_off_leaves_the_graph_byte_identical(profile, sample_chunks, monkeypatch,
                                                      store_spec):
    if store_spec == "networkx" and not HAS_NX:
        pytest.skip("the [graph] extra (networkx) is not installed")
    from ragspine_lite.graph.store import make_graph_store

    monkeypatch.delenv(RELATION_EXTRACTOR_ENV, raising=False)
    facts = [fact("ACME_HK"), fact("ACME_CN", "PROFIT")]

    def build(**kw):
        return dump(build_relation_graph(profile, facts=facts, chunks=sample_chunks,
                                         store=make_graph_store(store_spec), **kw))

    plain = build()
    assert build(relation_extractor=None) == plain
    assert build(relation_extractor=make_relation_extractor()) == plain
    assert build(relation_extractor=make_relation_extractor("none")) == plain
    on = json.loads(build(relation_extractor=DeterministicRelationExtractor()))
    base = json.loads(plain)
    assert on["nodes"] == base["nodes"]
    assert [e for e in on["edges"] if e["type"] != "co_occurs_with"] == base["edges"]


def test_extracted_edges_replace_a_base_edge_with_the_same_key(profile):
    class Overrider:
        def extract(self, chunks):
            self.seen = list(chunks)
            return (GraphEdge("ACME_GROUP", "ACME_HK", "parent_of",
                              {"source_doc_id": "x", "source_locator": "x#1"}),)

    extractor = Overrider()
    chunks = [chunk("a", "ACME_HK"), chunk("b", "ACME_CN", "RESTRICTED")]
    store = build_relation_graph(profile, chunks=iter(chunks), relation_extractor=extractor)
    assert extractor.seen == chunks  # given every chunk (it filters RESTRICTED itself)
    assert store._edges[("ACME_GROUP", "ACME_HK", "parent_of")].metadata["source_doc_id"] == "x"


def test_a_given_store_is_filled_and_returned(profile):
    target = InProcessGraphStore()
    assert build_relation_graph(profile, store=target) is target and target.count_nodes() == 14


def test_co_occurrence_in_a_partly_restricted_document_stays_hidden(profile):
    chunks = [chunk("mixed", "ACME_HK", "PUBLIC"), chunk("mixed", "ACME_CN", "INTERNAL"),
              chunk("mixed", "ACME_GROUP", "RESTRICTED", loc="mixed#para3"),
              chunk("open", "ACME_HK"), chunk("open", "ACME_GROUP")]
    store = build_relation_graph(profile, chunks=chunks,
                                 relation_extractor=DeterministicRelationExtractor())
    assert ("ACME_CN", "ACME_HK", "co_occurs_with") in store._edges  # stored ...
    assert store.neighbors("ACME_HK", edge_type="co_occurs_with", direction="both") == [
        store.get_node("ACME_GROUP")]  # ... but only the open document's pair is read
    sub = store.subgraph(["ACME_CN", "ACME_HK", "ACME_GROUP"], depth=2)
    assert "mixed" not in repr(sub)
    assert [e.key for e in sub.edges if e.type == "co_occurs_with"] == [
        ("ACME_GROUP", "ACME_HK", "co_occurs_with")]
