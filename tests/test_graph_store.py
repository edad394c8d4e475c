"""GraphStore: the in-process store and the networkx store answer identically, deterministic
and RESTRICTED-safe (a RESTRICTED node is invisible and never a stepping stone)."""

from __future__ import annotations

import doctest
import importlib.util
import sys

import pytest

import ragspine_lite.graph.store as store_mod
from ragspine_lite.graph.store import (
    GRAPH_STORE_ENV,
    GraphEdge,
    GraphNode,
    GraphStore,
    InProcessGraphStore,
    Subgraph,
    make_graph_store,
)

HAS_NX = importlib.util.find_spec("networkx") is not None
needs_nx = pytest.mark.skipif(not HAS_NX, reason="the [graph] extra (networkx) is not installed")
CANARY = "ZEPHYRCANARY"


def _networkx_store():
    from ragspine_lite.graph.adapters.networkx_store import NetworkxGraphStore

    return NetworkxGraphStore()


STORES = [pytest.param(InProcessGraphStore, id="in_process"),
          pytest.param(_networkx_store, id="networkx", marks=needs_nx)]


def node(node_id, sens="INTERNAL", node_type="entity", **meta):
    return GraphNode(node_id, node_type, node_id.lower(), {"sensitivity": sens, **meta})


def edge(src, dst, kind="parent_of", **meta):
    return GraphEdge(src, dst, kind, {"source_doc_id": "d", "source_locator": "d#1", **meta})


@pytest.fixture(params=STORES)
def store(request) -> GraphStore:
    """A ← root → B → C, root → S (RESTRICTED) → X, S ← B, D --co--> root, root → ghost."""
    s = request.param()
    assert s.upsert_nodes([node("ROOT"), node("A"), node("B", region="HK"), node("C"),
                           node("D", node_type="doc"), node("S", " restricted\u200b "),
                           node("X"), node(CANARY, "RESTRICTED")]) == 8
    assert s.upsert_edges([edge("ROOT", "A"), edge("ROOT", "B"), edge("B", "C", "derives"),
                           edge("ROOT", "S"), edge("S", "X"), edge("B", "S"), edge("X", CANARY),
                           edge("D", "ROOT", "co_occurs_with"), edge("ROOT", "ghost")]) == 9
    return s


def ids(nodes):
    return [n.id for n in nodes]


def test_doctest():
    assert doctest.testmod(store_mod).failed == 0


def test_protocol_and_counts_include_restricted(store):
    assert isinstance(store, GraphStore)
    assert (store.count_nodes(), store.count_edges()) == (8, 9)
    assert store.upsert_nodes([]) == 0 and store.upsert_edges([]) == 0
    assert store.upsert_nodes([node("A"), node("A")]) == 2  # items iterated, duplicates too
    assert store.count_nodes() == 8
    store.upsert_edges([edge("ROOT", "A", note="replaced")])
    assert store.count_edges() == 9


@pytest.mark.parametrize("node_id", ["S", CANARY, "ghost", "nowhere"])
def test_restricted_and_missing_nodes_are_invisible(store, node_id):
    assert store.get_node(node_id) is None
    assert store.neighbors(node_id) == [] and store.traverse(node_id) == []
    assert store.subgraph([node_id], depth=3) == Subgraph()


def test_neighbors_directions_types_and_where(store):
    assert ids(store.neighbors("ROOT")) == ["A", "B"]
    assert ids(store.neighbors("ROOT", edge_type="co_occurs_with", direction="in")) == ["D"]
    assert ids(store.neighbors("B", direction="both")) == ["C", "ROOT"]
    assert ids(store.neighbors("B", edge_type="derives")) == ["C"]
    assert store.neighbors("ROOT", direction="sideways") == []
    assert ids(store.neighbors("ROOT", where={"region": "HK"})) == ["B"]
    assert ids(store.neighbors("ROOT", where={"type": "entity", "label": "a"})) == ["A"]
    assert store.neighbors("ROOT", where={"missing": ""}) == []
    assert ids(store.neighbors("ROOT", where={})) == ["A", "B"]
    assert store.get_node("B").metadata["region"] == "HK"


def test_where_metadata_wins_a_clash():
    s = InProcessGraphStore()
    s.upsert_nodes([node("R"), GraphNode("T", "entity", "t", {"type": "custom"})])
    s.upsert_edges([edge("R", "T")])
    assert ids(s.neighbors("R", where={"type": "custom"})) == ["T"]
    assert s.neighbors("R", where={"type": "entity"}) == []


def test_traverse_never_steps_through_restricted(store):
    # X and the canary are reachable only through S.
    assert ids(store.traverse("ROOT", max_depth=5)) == ["A", "B", "C"]
    assert ids(store.traverse("ROOT", max_depth=1)) == ["A", "B"]
    assert store.traverse("ROOT", max_depth=0) == [] and store.traverse("ROOT", max_depth=-2) == []
    assert ids(store.traverse("ROOT", edge_types=["parent_of"], max_depth=3)) == ["A", "B"]
    assert store.traverse("ROOT", edge_types=[]) == []
    assert ids(store.traverse("C", direction="in", edge_types=["derives", "parent_of"])) == [
        "B", "ROOT"]
    assert ids(store.traverse("ROOT", where={"label": "c"})) == ["C"]  # filters only the result
    assert CANARY not in repr(store.traverse("ROOT", direction="both", max_depth=9))


def test_traverse_in_reaches_through_co_occurs(store):
    assert ids(store.traverse("C", direction="in")) == ["B", "D", "ROOT"]


def test_restricted_edges_are_never_walked():
    s = InProcessGraphStore()
    s.upsert_nodes([node("R"), node("T")])
    s.upsert_edges([edge("R", "T", sensitivity="Restricted")])
    assert s.neighbors("R") == [] and s.traverse("R") == []
    assert s.subgraph(["R", "T"]).edges == ()


def test_subgraph_is_induced_and_sorted(store):
    sub = store.subgraph(["ROOT"], depth=1, edge_types=["parent_of"])
    assert ids(sub.nodes) == ["A", "B", "ROOT"]
    assert [e.key for e in sub.edges] == [("ROOT", "A", "parent_of"), ("ROOT", "B", "parent_of")]
    # An edge never walked still shows when both ends are in the set (C ← B, B seeded).
    sub = store.subgraph(["C", "B"], depth=0)
    assert ids(sub.nodes) == ["B", "C"] and [e.key for e in sub.edges] == [("B", "C", "derives")]
    # A seed failing `where` still contributes what it reaches.
    sub = store.subgraph(["B"], depth=2, where={"label": "c"})
    assert ids(sub.nodes) == ["C"] and sub.edges == ()
    assert store.subgraph(["B"], depth=1, edge_types=[]).nodes == (store.get_node("B"),)


@needs_nx
def test_networkx_store_matches_in_process_and_ignores_ghosts():
    a, b = InProcessGraphStore(), _networkx_store()
    for s in (a, b):
        s.upsert_nodes([node(f"N{i}") for i in range(12)] + [node("R1", "RESTRICTED")])
        s.upsert_edges([edge(f"N{i}", f"N{(i * 7) % 12}", k)
                        for i in range(12) for k in ("t1", "t2")]
                       + [edge("N0", "R1"), edge("R1", "N5"), edge("N3", "phantom")])
    assert (a.count_nodes(), a.count_edges()) == (b.count_nodes(), b.count_edges()) == (13, 27)
    assert "phantom" in b.graph and b.get_node("phantom") is None
    for start in ("N0", "N3", "R1", "phantom"):
        for direction in ("out", "in", "both"):
            assert a.traverse(start, direction=direction) == b.traverse(start, direction=direction)
            assert a.neighbors(start, direction=direction) == b.neighbors(start,
                                                                          direction=direction)
        assert a.subgraph([start], depth=2) == b.subgraph([start], depth=2)


def test_networkx_missing_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "networkx", None)
    from ragspine_lite.graph.adapters.networkx_store import NetworkxGraphStore

    with pytest.raises(ImportError, match=r"ragspine-lite\[graph\]"):
        NetworkxGraphStore()
    with pytest.raises(ImportError, match="pip install networkx"):
        make_graph_store("networkx")


def test_make_graph_store(monkeypatch):
    monkeypatch.delenv(GRAPH_STORE_ENV, raising=False)
    assert make_graph_store() is None and make_graph_store(" None ") is None
    assert make_graph_store("") is None
    for spec in ("in_process", "In-Process", "inprocess", "memory"):
        assert type(make_graph_store(spec)) is InProcessGraphStore
    monkeypatch.setenv(GRAPH_STORE_ENV, "memory")
    assert type(make_graph_store()) is InProcessGraphStore
    assert make_graph_store("none") is None  # an explicit spec beats the env
    with pytest.raises(ValueError, match=r"'neo4j'.*none, in_process.*networkx.*graph_stores"):
        make_graph_store("neo4j")


@needs_nx
def test_make_graph_store_networkx():
    from ragspine_lite.graph.adapters.networkx_store import NetworkxGraphStore

    assert isinstance(make_graph_store("nx"), NetworkxGraphStore)
    assert isinstance(make_graph_store("NetworkX"), NetworkxGraphStore)


def test_no_read_from_anywhere_shows_the_restricted_canary(store):
    starts = ["ROOT", "A", "B", "C", "D", "S", "X", CANARY, "ghost"]
    seen = []
    for start in starts:
        seen.append(store.get_node(start))
        seen.append(store.subgraph([start], depth=9))
        for direction in ("out", "in", "both"):
            seen.append(store.neighbors(start, direction=direction))
            seen.append(store.traverse(start, direction=direction, max_depth=9))
    assert CANARY not in repr(seen) and "'S'" not in repr(seen)
    assert store.get_node("X") is not None  # X exists; only the path through S is closed


def test_an_edge_citing_a_restricted_document_is_hidden(store):
    store.upsert_nodes([node("memo", "RESTRICTED", node_type="doc"), node("E")])
    store.upsert_edges([edge("A", "E", "co_occurs_with", source_doc_id="memo"),
                        edge("A", "C", "co_occurs_with", source_doc_id="public")])
    assert ids(store.neighbors("A", edge_type="co_occurs_with")) == ["C"]
    assert [e.key for e in store.subgraph(["A", "E", "C"], depth=0).edges] == [
        ("A", "C", "co_occurs_with")]
    assert "memo" not in repr(store.subgraph(["A"], depth=3))
