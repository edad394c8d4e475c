"""A ``GraphStore`` on a networkx ``MultiDiGraph`` (the ``[graph]`` extra).

Nodes keep their :class:`~ragspine_lite.graph.store.GraphNode` in the ``obj`` attribute;
edges are keyed by their type and keep their ``GraphEdge`` in ``obj``. An edge to an id never
upserted creates a bare networkx node without ``obj``: it behaves as missing and is not
counted. The reads are the in-process store's (:class:`~ragspine_lite.graph.store.GraphReads`),
so both stores answer identically.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ragspine_lite.graph.reads import GraphEdge, GraphNode, GraphReads

__all__ = ["NetworkxGraphStore"]


def _import_networkx() -> Any:
    try:
        import networkx
    except ImportError as exc:
        raise ImportError(
            "networkx not installed: install it with `pip install 'ragspine-lite[graph]'` "
            "(or `pip install networkx`)"
        ) from exc
    return networkx


class NetworkxGraphStore(GraphReads):
    """Graph storage in ``self.graph`` (an ``nx.MultiDiGraph``)."""

    def __init__(self) -> None:
        self.graph = _import_networkx().MultiDiGraph()

    def __repr__(self) -> str:
        return f"NetworkxGraphStore({self.count_nodes()} nodes, {self.count_edges()} edges)"

    def upsert_nodes(self, nodes: Sequence[GraphNode]) -> int:
        count = 0
        for node in nodes:
            self.graph.add_node(node.id, obj=node)
            count += 1
        return count

    def upsert_edges(self, edges: Sequence[GraphEdge]) -> int:
        count = 0
        for edge in edges:
            self.graph.add_edge(edge.src, edge.dst, key=edge.type, obj=edge)
            count += 1
        return count

    def _stored_node(self, node_id: str) -> GraphNode | None:
        if node_id not in self.graph:
            return None
        node: GraphNode | None = self.graph.nodes[node_id].get("obj")
        return node

    def _out_edges(self, node_id: str) -> Iterable[GraphEdge]:
        if node_id not in self.graph:
            return []
        return [data["obj"] for _s, _d, data in self.graph.out_edges(node_id, data=True)]

    def _in_edges(self, node_id: str) -> Iterable[GraphEdge]:
        if node_id not in self.graph:
            return []
        return [data["obj"] for _s, _d, data in self.graph.in_edges(node_id, data=True)]

    def count_nodes(self) -> int:
        return sum(1 for _n, data in self.graph.nodes(data=True) if "obj" in data)

    def count_edges(self) -> int:
        return int(self.graph.number_of_edges())
