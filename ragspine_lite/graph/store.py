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

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.common.registry import Registry, normalize_spec
from ragspine_lite.common.sensitivity import RESTRICTED, is_restricted

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
DIRECTION_OUT = "out"
DIRECTION_IN = "in"
DIRECTION_BOTH = "both"
DEFAULT_MAX_DEPTH = 3
GRAPH_STORE_ENV = "RAGSPINE_GRAPH_STORE"
GRAPH_STORE_ENTRY_POINT_GROUP = "ragspine_lite.graph_stores"


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
        types: list[str | None] = [None] if edge_types is None else sorted(set(edge_types))
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


GRAPH_STORES = Registry("graph_stores")
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
    if spec is None:
        spec = os.environ.get(GRAPH_STORE_ENV, "none")
    key = normalize_spec(spec or "none")
    if key == "none":
        return None
    names = GRAPH_STORES.names()
    if key not in names:
        raise ValueError(
            f"unknown graph store {spec!r}; valid names: none, {', '.join(names)} "
            f"(plugins: entry points of the group {GRAPH_STORE_ENTRY_POINT_GROUP!r})"
        )
    store: GraphStore = GRAPH_STORES.make(key, **kwargs)
    return store
