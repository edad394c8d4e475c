"""The deterministic relation graph over the controlled dimensions, fully cited.

:func:`build_relation_graph` turns a domain profile, facts and chunks into typed nodes
(``entity``, ``metric``, ``external_entity``, the derived dimensions' values such as
``geography``, ``doc``) and edges (``parent_of``, ``derives``, ``competes_with``,
``mentions``). Every node and edge carries a non-empty ``source_doc_id`` and
``source_locator``; a document node carries the most restrictive sensitivity of its sources,
so a document with one RESTRICTED chunk is invisible to every read.

>>> from ragspine_lite.common.company_profile import load_company_profile
>>> store = build_relation_graph(load_company_profile())
>>> [n.id for n in store.neighbors("ACME_GROUP", edge_type="parent_of")]
['ACME_CN', 'ACME_HK']
"""

from __future__ import annotations

from collections.abc import Iterable

from ragspine_lite.common.company_profile import DomainProfile
from ragspine_lite.graph._chunks import chunk_field, chunk_sensitivity, most_restrictive
from ragspine_lite.graph.extractor import RelationExtractor
from ragspine_lite.graph.store import GraphEdge, GraphNode, GraphStore, InProcessGraphStore
from ragspine_lite.storage.fact_store import Fact

__all__ = ["PROFILE_SOURCE", "build_relation_graph"]

PROFILE_SOURCE = "company_profile"
_EdgeKey = tuple[str, str, str]


def _profile_node(node_id: str, node_type: str, label: str, locator: str) -> GraphNode:
    meta = {"source_doc_id": PROFILE_SOURCE, "source_locator": f"{PROFILE_SOURCE}#{locator}",
            "sensitivity": "INTERNAL"}
    return GraphNode(node_id, node_type, label, meta)


def _edge(src: str, dst: str, kind: str, doc: str, locator: str) -> GraphEdge:
    return GraphEdge(src, dst, kind, {"source_doc_id": doc, "source_locator": locator})


def _profile_graph(profile: DomainProfile) -> tuple[dict[str, GraphNode], list[GraphEdge]]:
    """The nodes and edges the profile alone defines."""
    home = profile.home_entity_code
    entities = sorted({*profile.home_entity_synonyms.values(), *profile.entity_geography,
                       *profile.home_entity_labels, home})
    nodes = {e: _profile_node(e, "entity", profile.home_entity_labels.get(e, ""),
                              f"home_entity/{e}") for e in entities}
    metric = next((d for d in profile.dimensions if d.name == "metric"), None)
    for code in dict.fromkeys(metric.synonyms.values() if metric else ()):
        nodes[code] = _profile_node(code, "metric", metric.labels.get(code, "") if metric else "",
                                    f"metric/{code}")
    externals = list(dict.fromkeys(profile.external_entities.values()))
    for name in externals:
        nodes[name] = _profile_node(name, "external_entity", name, f"external_entities/{name}")
    loc = PROFILE_SOURCE + "#"
    edges = [_edge(home, e, "parent_of", PROFILE_SOURCE, f"{loc}parent_of/{home}->{e}")
             for e in entities if e != home]
    for dim in sorted((d for d in profile.dimensions if d.derived_from and d.derivation),
                      key=lambda d: d.name):
        for src, dst in dim.derivation.items():
            if dst not in nodes:
                nodes[dst] = _profile_node(dst, dim.name, dim.labels.get(dst, ""),
                                           f"derivation/{dim.name}/{dst}")
            edges.append(_edge(src, dst, "derives", PROFILE_SOURCE,
                               f"{loc}derivation/{dim.name}/{src}->{dst}"))
    edges += [_edge(home, name, "competes_with", PROFILE_SOURCE,
                    f"{loc}external_entities/{home}->{name}") for name in externals]
    return nodes, edges


def _check_fact(index: int, fact: Fact) -> None:
    for name in ("source_doc_id", "source_locator"):
        if not str(getattr(fact, name, "") or "").strip():
            raise ValueError(f"facts[{index}] has no {name}: every graph edge needs lineage")


def _doc_nodes(facts: list[Fact], chunks: list[object]) -> dict[str, GraphNode]:
    """One ``doc`` node per source document, with its most restrictive sensitivity."""
    labels: dict[str, list[str]] = {str(f.source_doc_id): ["INTERNAL"] for f in facts}
    for chunk in chunks:
        doc = chunk_field(chunk, "doc_id")
        if doc:
            labels.setdefault(doc, []).append(chunk_sensitivity(chunk))
    return {
        doc: GraphNode(doc, "doc", doc, {"source_doc_id": doc, "source_locator": f"{doc}#doc",
                                         "sensitivity": most_restrictive(found)})
        for doc, found in labels.items()
    }


def _mention_edges(facts: list[Fact], chunks: list[object]) -> dict[_EdgeKey, GraphEdge]:
    """``mentions`` doc → entity/metric from facts, then doc → entity from chunks (wins)."""
    edges: dict[_EdgeKey, GraphEdge] = {}
    for fact in sorted(facts, key=lambda f: (str(f.source_doc_id), f.metric_code, f.entity,
                                             f.period_type, f.period, f.source_locator)):
        doc = str(fact.source_doc_id)
        for dst in (fact.entity, fact.metric_code):
            edge = _edge(doc, dst, "mentions", doc, fact.source_locator)
            edges[edge.key] = edge
    rows = []
    for chunk in chunks:
        doc, entity = chunk_field(chunk, "doc_id"), chunk_field(chunk, "entity")
        if doc and entity:
            rows.append((doc, entity, chunk_field(chunk, "source_locator") or f"{doc}#chunk"))
    for doc, entity, locator in sorted(rows):
        edge = _edge(doc, entity, "mentions", doc, locator)
        edges[edge.key] = edge
    return edges


def build_relation_graph(
    profile: DomainProfile,
    *,
    facts: Iterable[Fact] = (),
    chunks: Iterable[object] = (),
    store: GraphStore | None = None,
    relation_extractor: RelationExtractor | None = None,
) -> GraphStore:
    """Write the relation graph into ``store`` (a new in-process store when ``None``).

    Nodes are upserted in id order, then edges in ``(src, dst, type)`` order; then the
    ``relation_extractor``'s edges (given every chunk), sorted, replacing a base edge with
    the same key. A fact without ``source_doc_id`` / ``source_locator`` → ``ValueError``.
    """
    facts, chunks = list(facts), list(chunks)
    for i, fact in enumerate(facts):
        _check_fact(i, fact)
    store = InProcessGraphStore() if store is None else store
    nodes, profile_edges = _profile_graph(profile)
    nodes.update(_doc_nodes(facts, chunks))
    edges = {e.key: e for e in profile_edges}
    edges.update(_mention_edges(facts, chunks))
    store.upsert_nodes([nodes[i] for i in sorted(nodes)])
    store.upsert_edges([edges[k] for k in sorted(edges)])
    if relation_extractor is not None:
        extra = relation_extractor.extract(chunks)
        store.upsert_edges(sorted(extra, key=lambda e: e.key))
    return store
