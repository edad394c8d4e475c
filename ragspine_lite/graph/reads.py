"""The graph's values and its read algorithms, shared by every store.

:class:`GraphReads` answers ``get_node`` / ``neighbors`` / ``traverse`` / ``subgraph`` over
three primitives a store provides, so the in-process store and the networkx store
(:mod:`ragspine_lite.graph.adapters.networkx_store`) answer identically. The rules
(deterministic order, RESTRICTED nodes invisible and never a stepping stone) are described
in :mod:`ragspine_lite.graph.store`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ragspine_lite.common.sensitivity import is_restricted

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DIRECTION_BOTH",
    "DIRECTION_IN",
    "DIRECTION_OUT",
    "GraphEdge",
    "GraphNode",
    "GraphReads",
    "Subgraph",
]

DIRECTION_OUT = "out"
DIRECTION_IN = "in"
DIRECTION_BOTH = "both"
DEFAULT_MAX_DEPTH = 3


@dataclass(frozen=True)
class GraphNode:
    """A typed node; lineage sits in ``metadata`` (``source_doc_id`` / ``source_locator``)."""

    id: str
    type: str
    label: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GraphEdge:
    """A directed typed edge ``src → dst``; one edge per ``(src, dst, type)``."""

    src: str
    dst: str
    type: str
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.src, self.dst, self.type)


@dataclass(frozen=True)
class Subgraph:
    nodes: tuple[GraphNode, ...] = ()
    edges: tuple[GraphEdge, ...] = ()


def _is_restricted(item: GraphNode | GraphEdge) -> bool:
    meta = item.metadata
    return "sensitivity" in meta and is_restricted(meta["sensitivity"])


def _node_matches(node: GraphNode, where: Mapping[str, str] | None) -> bool:
    """Exact AND over ``{type, label, **metadata}`` (metadata wins); a missing key excludes."""
    if not where:
        return True
    fields = {"type": node.type, "label": node.label, **node.metadata}
    return all(key in fields and fields[key] == value for key, value in where.items())


class GraphReads:
    """The read algorithms, shared by every store over three primitives:
    ``_stored_node(id)``, ``_out_edges(id)`` and ``_in_edges(id)``."""

    def _stored_node(self, node_id: str) -> GraphNode | None:
        raise NotImplementedError

    def _out_edges(self, node_id: str) -> Iterable[GraphEdge]:
        raise NotImplementedError

    def _in_edges(self, node_id: str) -> Iterable[GraphEdge]:
        raise NotImplementedError

    def get_node(self, node_id: str) -> GraphNode | None:
        """The node, or ``None`` when it is missing or RESTRICTED."""
        node = self._stored_node(node_id)
        return None if node is None or _is_restricted(node) else node

    def _edge_visible(self, edge: GraphEdge) -> bool:
        """Not labelled RESTRICTED, and not citing a document the store holds as RESTRICTED."""
        if _is_restricted(edge):
            return False
        cited = self._stored_node(str(edge.metadata.get("source_doc_id", "")))
        return cited is None or not _is_restricted(cited)

    def _step(self, node_id: str, edge_type: str | None, direction: str) -> list[str]:
        """Ids one edge away (any type when ``edge_type`` is ``None``), distinct, sorted."""
        found: set[str] = set()
        if direction in (DIRECTION_OUT, DIRECTION_BOTH):
            found.update(e.dst for e in self._out_edges(node_id)
                         if (edge_type is None or e.type == edge_type) and self._edge_visible(e))
        if direction in (DIRECTION_IN, DIRECTION_BOTH):
            found.update(e.src for e in self._in_edges(node_id)
                         if (edge_type is None or e.type == edge_type) and self._edge_visible(e))
        return sorted(found)

    def neighbors(
        self, node_id: str, *, edge_type: str | None = None, direction: str = DIRECTION_OUT,
        where: Mapping[str, str] | None = None,
    ) -> list[GraphNode]:
        """Visible nodes one edge away matching ``where``, sorted by id."""
        if self.get_node(node_id) is None:
            return []
        nodes = (self.get_node(i) for i in self._step(node_id, edge_type, direction))
        return [n for n in nodes if n is not None and _node_matches(n, where)]

    def traverse(
        self, start: str, *, edge_types: Sequence[str] | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH, direction: str = DIRECTION_OUT,
        where: Mapping[str, str] | None = None,
    ) -> list[GraphNode]:
        """Breadth-first from ``start`` (excluded), ``max_depth`` levels; sorted by id.

        A neighbour is marked visited before its visibility is checked, so a missing or
        RESTRICTED node is neither returned nor expanded. ``where`` filters only the result.
        """
        if self.get_node(start) is None:
            return []
        types: list[str | None] = [None] if edge_types is None else [*sorted(set(edge_types))]
        visited, frontier, found = {start}, [start], []
        for _ in range(max(0, int(max_depth))):
            reached: list[GraphNode] = []
            for node_id in frontier:
                for edge_type in types:
                    for nxt in self._step(node_id, edge_type, direction):
                        if nxt in visited:
                            continue
                        visited.add(nxt)
                        node = self.get_node(nxt)
                        if node is not None:
                            reached.append(node)
            found.extend(reached)
            frontier = sorted(n.id for n in reached)
            if not frontier:
                break
        return sorted((n for n in found if _node_matches(n, where)), key=lambda n: n.id)

    def subgraph(
        self, seeds: Sequence[str], *, depth: int = 1, edge_types: Sequence[str] | None = None,
        where: Mapping[str, str] | None = None,
    ) -> Subgraph:
        """Visible seeds matching ``where`` plus what each reaches (out, ``depth`` levels),
        and every stored edge between them whose type is in ``edge_types``."""
        nodes: dict[str, GraphNode] = {}
        for seed in seeds:
            node = self.get_node(seed)
            if node is not None and _node_matches(node, where):
                nodes[seed] = node
            for reached in self.traverse(seed, edge_types=edge_types, max_depth=depth,
                                         where=where):
                nodes[reached.id] = reached
        allowed = None if edge_types is None else set(edge_types)
        edges = [
            e for node_id in nodes for e in self._out_edges(node_id)
            if e.dst in nodes and (allowed is None or e.type in allowed) and self._edge_visible(e)
        ]
        return Subgraph(
            nodes=tuple(nodes[i] for i in sorted(nodes)),
            edges=tuple(sorted(edges, key=lambda e: e.key)),
        )
