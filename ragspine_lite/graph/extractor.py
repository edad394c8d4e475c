"""The relation-extractor slot beside :func:`~ragspine_lite.graph.relation.build_relation_graph`.

Off by default (``RAGSPINE_RELATION_EXTRACTOR`` unset → ``None``): the base graph is then
exactly what it is without the slot. :class:`DeterministicRelationExtractor` adds
``co_occurs_with`` edges between entities sharing a document, with clean lineage.
:class:`LLMRelationExtractor` asks a model for relations chunk by chunk: RESTRICTED chunks
never reach it, an edge naming an external entity at either end is dropped by the security
gate, and every edge it keeps is stamped ``derived=model-derived``, ``verified=unverified``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.common.company_profile import (
    DomainProfile,
    default_security_gate,
    load_company_profile,
)
from ragspine_lite.common.llm import LLMProvider
from ragspine_lite.common.registry import Registry
from ragspine_lite.common.security_gate import SecurityGate
from ragspine_lite.graph._chunks import chunk_field, chunk_is_restricted
from ragspine_lite.graph.narrative import llm_json_object, parse_relations
from ragspine_lite.graph.store import GraphEdge

__all__ = [
    "CO_OCCURS_EDGE_TYPE",
    "DEFAULT_MAX_RELATIONS",
    "EDGE_META_DERIVED",
    "EDGE_META_VERIFIED",
    "PROVENANCE_MODEL_DERIVED",
    "PROVENANCE_UNVERIFIED",
    "RELATION_EXTRACTOR_ENV",
    "DeterministicRelationExtractor",
    "LLMRelationExtractor",
    "RelationExtractor",
    "make_relation_extractor",
]

RELATION_EXTRACTOR_ENV = "RAGSPINE_RELATION_EXTRACTOR"
DEFAULT_MAX_RELATIONS = 64
PROVENANCE_MODEL_DERIVED = "model-derived"
PROVENANCE_UNVERIFIED = "unverified"
EDGE_META_DERIVED = "derived"
EDGE_META_VERIFIED = "verified"
CO_OCCURS_EDGE_TYPE = "co_occurs_with"

_RELATIONS_PROMPT = (
    "你是关系抽取助手。只输出一个 JSON 对象，格式为 "
    '{"relations":[{"source":"…","target":"…","kind":"…"}]}。'
    "source 与 target 必须逐字取自原文；没有关系时输出 {\"relations\":[]}。不要输出任何其他文字。"
)


@runtime_checkable
class RelationExtractor(Protocol):
    """Edges found in chunks (``doc_id``, ``entity``, ``text``, ``source_locator`` …)."""

    def extract(self, chunks: Iterable[object]) -> tuple[GraphEdge, ...]: ...


def _sorted_edges(edges: list[GraphEdge]) -> tuple[GraphEdge, ...]:
    return tuple(sorted(edges, key=lambda e: e.key))


class DeterministicRelationExtractor:
    """``co_occurs_with`` between every pair of distinct entities of a document (no LLM)."""

    def __repr__(self) -> str:
        return "DeterministicRelationExtractor()"

    def extract(self, chunks: Iterable[object]) -> tuple[GraphEdge, ...]:
        by_doc: dict[str, set[str]] = {}
        for chunk in chunks:
            doc, entity = chunk_field(chunk, "doc_id"), chunk_field(chunk, "entity")
            if doc and entity and not chunk_is_restricted(chunk):
                by_doc.setdefault(doc, set()).add(entity)
        edges: list[GraphEdge] = []
        for doc in sorted(by_doc):
            names = sorted(by_doc[doc])
            lineage = {"source_doc_id": doc, "source_locator": f"{doc}#cooccur"}
            edges.extend(
                GraphEdge(a, b, CO_OCCURS_EDGE_TYPE, dict(lineage))
                for i, a in enumerate(names) for b in names[i + 1:]
            )
        return _sorted_edges(edges)


class LLMRelationExtractor:
    """Model-derived relations, one chat call per non-RESTRICTED chunk, at most
    ``max_relations`` edges kept; the gate is ``security_gate``, else the profile's (the
    default profile when none is given)."""

    def __init__(self, provider: LLMProvider, *, profile: DomainProfile | None = None,
                 security_gate: SecurityGate | None = None,
                 max_relations: int = DEFAULT_MAX_RELATIONS) -> None:
        self.provider = provider
        self.max_relations = max(0, int(max_relations))
        if security_gate is None:
            security_gate = default_security_gate(profile or load_company_profile())
        self.gate = security_gate

    def __repr__(self) -> str:
        return f"LLMRelationExtractor(max_relations={self.max_relations})"

    def _screened(self, name: str) -> bool:
        return self.gate.detect(name).external_entity is None

    def extract(self, chunks: Iterable[object]) -> tuple[GraphEdge, ...]:
        ordered = sorted(chunks, key=lambda c: (chunk_field(c, "doc_id"),
                                                chunk_field(c, "source_locator")))
        kept: list[GraphEdge] = []
        for chunk in ordered:
            if len(kept) >= self.max_relations:
                break
            if chunk_is_restricted(chunk):
                continue
            data = llm_json_object(self.provider, _RELATIONS_PROMPT,
                                   str(getattr(chunk, "text", "")),
                                   route="graph_relation_extract")
            meta = {
                "source_doc_id": chunk_field(chunk, "doc_id"),
                "source_locator": chunk_field(chunk, "source_locator"),
                EDGE_META_DERIVED: PROVENANCE_MODEL_DERIVED,
                EDGE_META_VERIFIED: PROVENANCE_UNVERIFIED,
            }
            for source, target, kind in parse_relations(data, None):
                if len(kept) >= self.max_relations:
                    break
                if self._screened(source) and self._screened(target):
                    kept.append(GraphEdge(source, target, kind, dict(meta)))
        return _sorted_edges(kept)


def _deterministic(**_kwargs: Any) -> RelationExtractor:
    return DeterministicRelationExtractor()


def _llm(*, provider: LLMProvider, profile: DomainProfile | None = None,
         **kwargs: Any) -> RelationExtractor:
    return LLMRelationExtractor(provider, profile=profile, **kwargs)


RELATION_EXTRACTORS = Registry("relation_extractors", env=RELATION_EXTRACTOR_ENV)
for _name in ("deterministic", "rule", "cooccurrence"):
    RELATION_EXTRACTORS.register(_name, _deterministic)
for _name in ("llm", "on"):
    RELATION_EXTRACTORS.register(_name, _llm)


def make_relation_extractor(spec: str | None = None, *, provider: LLMProvider | None = None,
                            profile: DomainProfile | None = None,
                            **kwargs: Any) -> RelationExtractor | None:
    """The extractor for ``spec`` (env ``RAGSPINE_RELATION_EXTRACTOR`` when ``None``).

    ``none``/``""`` (the default) → ``None``; ``deterministic``/``rule``/``cooccurrence`` →
    :class:`DeterministicRelationExtractor` (``kwargs`` ignored); ``llm``/``on`` →
    :class:`LLMRelationExtractor` over ``provider`` (``None`` without one); else
    ``ValueError`` listing the names.
    """
    key = RELATION_EXTRACTORS.resolve(spec)
    if key is None:
        return None
    if key in ("llm", "on") and provider is None:
        return None
    extractor: RelationExtractor = RELATION_EXTRACTORS.make(
        key, provider=provider, profile=profile, **kwargs
    )
    return extractor
