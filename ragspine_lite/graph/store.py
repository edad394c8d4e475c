"""Typed graph values, the ``GraphStore`` seam and its in-process default.

Every read is deterministic (nodes sorted by id, edges by ``(src, dst, type)``, a BFS
frontier walked in id order) and RESTRICTED-safe: a node whose ``metadata["sensitivity"]``
is RESTRICTED (:func:`~ragspine_lite.common.sensitivity.is_restricted`, the project's one
predicate) is invisible to every read and never a stepping stone of a traversal; an edge
labelled RESTRICTED, or citing (``source_doc_id``) a RESTRICTED node, is never walked nor
returned. ``count_nodes`` / ``count_edges`` count
what is stored, RESTRICTED included.

>>> store = InProcessGraphStore()
>>> store.upsert_nodes([GraphNode("a", "entity"), GraphNode("b", "entity"),
...                     GraphNode("s", "entity", metadata={"sensitivity": "RESTRICTED"}),
...                     GraphNode("c", "entity")])
4
>>> store.upsert_edges([GraphEdge("a", "b", "parent_of"), GraphEdge("a", "s", "parent_of"),
...                     GraphEdge("s", "c", "parent_of")])
3
>>> [n.id for n in store.traverse("a")]  # c is reachable only through RESTRICTED s
['b']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.common.registry import Registry
from ragspine_lite.common.sensitivity import RESTRICTED
from ragspine_lite.graph.reads import (
    DEFAULT_MAX_DEPTH,
    DIRECTION_BOTH,
    DIRECTION_IN,
    DIRECTION_OUT,
    GraphEdge,
    GraphNode,
    GraphReads,
    Subgraph,
)

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DIRECTION_BOTH",
    "DIRECTION_IN",
    "DIRECTION_OUT",
    "GRAPH_STORE_ENTRY_POINT_GROUP",
    "GRAPH_STORE_ENV",
    "RESTRICTED_SENSITIVITY",
    "GraphEdge",
    "GraphNode",
    "GraphStore",
    "InProcessGraphStore",
    "Subgraph",
    "make_graph_store",
]

RESTRICTED_SENSITIVITY = RESTRICTED
GRAPH_STORE_ENV = "RAGSPINE_GRAPH_STORE"
GRAPH_STORE_ENTRY_POINT_GROUP = "ragspine_lite.graph_stores"


@runtime_checkable
class GraphStore(Protocol):
    """Typed nodes and directed edges with deterministic, RESTRICTED-safe reads."""

    def upsert_nodes(self, nodes: Sequence[GraphNode]) -> int: ...

    def upsert_edges(self, edges: Sequence[GraphEdge]) -> int: ...

    def get_node(self, node_id: str) -> GraphNode | None: ...

    def neighbors(
        self, node_id: str, *, edge_type: str | None = None, direction: str = DIRECTION_OUT,
        where: Mapping[str, str] | None = None,
    ) -> list[GraphNode]: ...

    def subgraph(
        self, seeds: Sequence[str], *, depth: int = 1, edge_types: Sequence[str] | None = None,
        where: Mapping[str, str] | None = None,
    ) -> Subgraph: ...

    def traverse(
        self, start: str, *, edge_types: Sequence[str] | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH, direction: str = DIRECTION_OUT,
        where: Mapping[str, str] | None = None,
    ) -> list[GraphNode]: ...

    def count_nodes(self) -> int: ...

    def count_edges(self) -> int: ...

class InProcessGraphStore(GraphReads):
    """Nodes by id and edges by ``(src, dst, type)`` in dicts; an upsert replaces.

    Edges may name ids never upserted (they behave as missing nodes).
    """

    def __init__(self) -> None:
        self._nodes: dict[str, GraphNode] = {}
        self._edges: dict[tuple[str, str, str], GraphEdge] = {}
        self._out: dict[str, dict[tuple[str, str, str], GraphEdge]] = {}
        self._in: dict[str, dict[tuple[str, str, str], GraphEdge]] = {}

    def __repr__(self) -> str:
        return f"InProcessGraphStore({len(self._nodes)} nodes, {len(self._edges)} edges)"

    def upsert_nodes(self, nodes: Sequence[GraphNode]) -> int:
        count = 0
        for node in nodes:
            self._nodes[node.id] = node
            count += 1
        return count

    def upsert_edges(self, edges: Sequence[GraphEdge]) -> int:
        count = 0
        for edge in edges:
            self._edges[edge.key] = edge
            self._out.setdefault(edge.src, {})[edge.key] = edge
            self._in.setdefault(edge.dst, {})[edge.key] = edge
            count += 1
        return count

    def _stored_node(self, node_id: str) -> GraphNode | None:
        return self._nodes.get(node_id)

    def _out_edges(self, node_id: str) -> Iterable[GraphEdge]:
        return self._out.get(node_id, {}).values()

    def _in_edges(self, node_id: str) -> Iterable[GraphEdge]:
        return self._in.get(node_id, {}).values()

    def count_nodes(self) -> int:
        return len(self._nodes)

    def count_edges(self) -> int:
        return len(self._edges)


def _networkx_store(**kwargs: Any) -> GraphStore:
    """The networkx store (``[graph]`` extra); the module imports networkx when built."""
    from ragspine_lite.graph.adapters.networkx_store import NetworkxGraphStore

    return NetworkxGraphStore(**kwargs)


GRAPH_STORES = Registry("graph_stores", env=GRAPH_STORE_ENV)
for _name in ("in_process", "inprocess", "memory"):
    GRAPH_STORES.register(_name, InProcessGraphStore)
for _name in ("networkx", "nx"):
    GRAPH_STORES.register(_name, _networkx_store)


def make_graph_store(spec: str | None = None, **kwargs: Any) -> GraphStore | None:
    """A graph store for ``spec`` (env ``RAGSPINE_GRAPH_STORE`` when ``None``).

    ``none`` (the default) → ``None``; ``in_process``/``in-process``/``inprocess``/``memory``
    → :class:`InProcessGraphStore`; ``networkx``/``nx`` → the networkx store (``[graph]``
    extra); else an entry point of the group ``ragspine_lite.graph_stores`` called with
    ``**kwargs``; unknown → ``ValueError`` listing the names.
    """
    store: GraphStore | None = GRAPH_STORES.build(spec, **kwargs)
    return store
