"""Cited multi-hop answers over the relation graph: roll-up, peer comparison, lineage trace.

The security gate screens a request before anything is read: a request naming an external
entity is refused as a whole (no store access, no trace). Answers carry their lineage — the
facts with their ``source_doc_id`` / ``source_locator``, the trace's nodes and edges with
theirs. Traces carry codes and counts only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragspine_lite.common.company_profile import (
    DomainProfile,
    default_security_gate,
    load_company_profile,
)
from ragspine_lite.common.observability import emit_trace
from ragspine_lite.common.security_gate import SECURITY_ALLOW, SecurityGate, SecurityVerdict
from ragspine_lite.graph.store import GraphEdge, GraphNode, GraphStore
from ragspine_lite.storage.fact_store import Fact, FactStore

__all__ = ["ComparisonResult", "ComparisonRow", "DerivationTrace", "GraphQuery", "RollupResult"]


@dataclass(frozen=True)
class RollupResult:
    parent: str
    metric: str
    period: str
    total: float | None
    found: bool
    facts: tuple[Fact, ...] = ()
    refused: bool = False
    refusal_message: str | None = None


@dataclass(frozen=True)
class ComparisonRow:
    entity: str
    found: bool
    fact: Fact | None = None


@dataclass(frozen=True)
class ComparisonResult:
    metric: str
    period: str
    rows: tuple[ComparisonRow, ...] = ()
    refused: bool = False
    refusal_message: str | None = None


@dataclass(frozen=True)
class DerivationTrace:
    start: str
    edges: tuple[GraphEdge, ...] = ()
    nodes: tuple[GraphNode, ...] = ()


class GraphQuery:
    """Queries over ``store`` (the relation graph) and ``fact_store``.

    ``profile=None`` loads the company profile; the default gate is the profile's.
    """

    def __init__(self, store: GraphStore, fact_store: FactStore, *,
                 profile: DomainProfile | None = None,
                 security_gate: SecurityGate | None = None) -> None:
        self.store = store
        self.fact_store = fact_store
        self.profile = profile if profile is not None else load_company_profile()
        self.gate = security_gate if security_gate is not None else default_security_gate(
            self.profile
        )

    def _screen(self, entity: str, metric: str) -> SecurityVerdict:
        return self.gate.screen(raw_question=f"{entity} {metric}", metric=metric)

    def subsidiary_rollup(self, parent_entity: str, metric: str, period_type: str,
                          period: str, *, channel: str = "TOTAL") -> RollupResult:
        """The sum of ``metric`` over the ``parent_of`` children of ``parent_entity``."""
        label = f"{period_type}{period}"
        verdict = self._screen(parent_entity, metric)
        if verdict.decision != SECURITY_ALLOW:
            return RollupResult(parent_entity, metric, label, None, False, (), True,
                                verdict.message)
        subsidiaries = self.store.neighbors(parent_entity, edge_type="parent_of")
        facts: list[Fact] = []
        for sub in subsidiaries:
            facts.extend(self.fact_store.query(metric, sub.id, period_type, period, channel))
        total = sum((f.value for f in facts), 0.0) if facts else None
        emit_trace(route="graph_subsidiary_rollup", metric=metric, entity=parent_entity,
                   period=label, subsidiary_count=len(subsidiaries), found_count=len(facts))
        return RollupResult(parent_entity, metric, label, total, bool(facts), tuple(facts))

    def peer_comparison(self, entities: Sequence[str], metric: str, period_type: str,
                        period: str, *, channel: str = "TOTAL") -> ComparisonResult:
        """One row per entity (input order, duplicates kept); any external entity refuses."""
        label = f"{period_type}{period}"
        entities = list(entities)
        for entity in entities:
            verdict = self._screen(entity, metric)
            if verdict.decision != SECURITY_ALLOW:
                return ComparisonResult(metric, label, (), True, verdict.message)
        rows = []
        for entity in entities:
            hits = self.fact_store.query(metric, entity, period_type, period, channel)
            fact = hits[0] if hits else None
            rows.append(ComparisonRow(entity, fact is not None, fact))
        emit_trace(route="graph_peer_comparison", metric=metric, period=label,
                   entity_count=len(rows), found_count=sum(r.found for r in rows))
        return ComparisonResult(metric, label, tuple(rows))

    def derivation_trace(self, start_value: str, *, edge_types: Sequence[str] = ("derives",),
                         max_depth: int = 3) -> DerivationTrace:
        """What ``start_value`` reaches along ``edge_types`` (nodes sorted by id, the edges
        between them); a missing or RESTRICTED start → an empty trace."""
        sub = self.store.subgraph([start_value], depth=max_depth, edge_types=list(edge_types))
        nodes = tuple(n for n in sub.nodes if n.id != start_value)
        emit_trace(route="graph_derivation_trace", start=start_value,
                   node_count=len(nodes), edge_count=len(sub.edges))
        return DerivationTrace(start_value, sub.edges, nodes)
