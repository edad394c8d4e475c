"""The narrative GraphRAG skeleton: LLM entity/relation extraction, communities, summaries.

Opt-in (``RAGSPINE_NARRATIVE_GRAPH=llm``) and behind the LLM seam
(:class:`~ragspine_lite.common.llm.LLMProvider`). A provider error, a reply that is not a
JSON object, or a malformed field adds nothing; lineage is always the caller's, never the
model's. Communities are connected components (deterministic, stable ids); a community
summary is a synthesis (``is_synthesis=True``): a reading aid, never a citable fact.
:meth:`NarrativeGraphPipeline.extract_chunks` never sends a RESTRICTED chunk to the model.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.common.errors import ProviderError
from ragspine_lite.common.llm import LLMProvider, completion_text
from ragspine_lite.common.observability import emit_trace
from ragspine_lite.common.registry import Registry
from ragspine_lite.graph._chunks import chunk_field, chunk_is_restricted

__all__ = [
    "DEFAULT_MAX_ENTITIES",
    "DEFAULT_MAX_RELATIONS",
    "NARRATIVE_GRAPH_ENV",
    "Community",
    "CommunitySummarizer",
    "CommunitySummary",
    "ExtractedEntity",
    "ExtractedGraph",
    "ExtractedRelation",
    "GraphExtractor",
    "LLMCommunitySummarizer",
    "LLMGraphExtractor",
    "NarrativeGraphPipeline",
    "detect_communities",
    "make_narrative_graph",
]

NARRATIVE_GRAPH_ENV = "RAGSPINE_NARRATIVE_GRAPH"
DEFAULT_MAX_ENTITIES = 32
DEFAULT_MAX_RELATIONS = 64
FALLBACK_ENTITY_TYPE = "entity"
FALLBACK_RELATION_KIND = "related_to"
PLACEHOLDER_PREFIX = "[合成摘要·占位]"

_log = logging.getLogger("ragspine_lite.graph")

_EXTRACT_PROMPT = (
    "你是信息抽取助手。只输出一个 JSON 对象，格式为 "
    '{"entities":[{"name":"…","type":"…"}],"relations":[{"source":"…","target":"…","kind":"…"}]}。'
    "name、source、target 必须逐字取自原文；没有可抽取的内容时输出空数组。不要输出任何其他文字。"
)
_SUMMARY_PROMPT = (
    "你是分析助手。根据给定的社区成员与关系，写一段简短的主题综述（不超过三句话）。"
    "不得出现任何数字、金额或比率。只输出综述正文。"
)


@dataclass(frozen=True)
class ExtractedEntity:
    name: str
    type: str
    source_doc_id: str
    source_locator: str


@dataclass(frozen=True)
class ExtractedRelation:
    source: str
    target: str
    kind: str
    source_doc_id: str
    source_locator: str


@dataclass(frozen=True)
class ExtractedGraph:
    entities: tuple[ExtractedEntity, ...] = ()
    relations: tuple[ExtractedRelation, ...] = ()


@dataclass(frozen=True)
class Community:
    id: str
    member_names: tuple[str, ...]
    relation_count: int


@dataclass(frozen=True)
class CommunitySummary:
    """A synthesis over a community: never a citable fact (``is_synthesis`` is always True)."""

    community_id: str
    text: str
    member_names: tuple[str, ...]
    is_synthesis: bool = True
    source_doc_ids: tuple[str, ...] = ()


@runtime_checkable
class GraphExtractor(Protocol):
    def extract(self, text: str, *, source_doc_id: str, source_locator: str) -> ExtractedGraph:
        ...


@runtime_checkable
class CommunitySummarizer(Protocol):
    def summarize(self, community: Community, graph: ExtractedGraph) -> CommunitySummary: ...


# ---------------------------------------------------------------- the LLM call and parsing


def llm_json_object(provider: LLMProvider, system: str, user: str, *, route: str) -> Any:
    """One ``chat([system, user])``; the reply parsed as a JSON object, or ``None`` (logged
    and traced with a code) on a provider error, bad JSON or a non-object."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    try:
        content = completion_text(provider.chat(messages))
    except ProviderError:
        return _failed(route, "provider_error")
    try:
        data = json.loads(content.strip())
    except ValueError:
        return _failed(route, "bad_json")
    return data if isinstance(data, dict) else _failed(route, "not_an_object")


def _failed(route: str, code: str) -> None:
    _log.warning("%s: %s; nothing extracted from this text", route, code)
    emit_trace(route=route, outcome=code)
    return None


def _text(item: dict[str, Any], key: str) -> str:
    value = item.get(key)
    return value.strip() if isinstance(value, str) else ""


def parse_items(raw: Any, keys: tuple[str, ...], fallback: tuple[str, str], cap: int | None
                ) -> list[tuple[str, ...]]:
    """Up to ``cap`` (``None``: all) dict items with non-blank string ``keys``, stripped, plus the
    ``fallback`` field (``(name, default)``); a non-list → ``[]``."""
    if not isinstance(raw, list):
        return []
    out: list[tuple[str, ...]] = []
    for item in raw:
        if cap is not None and len(out) >= cap:
            break
        if not isinstance(item, dict):
            continue
        values = tuple(_text(item, k) for k in keys)
        if all(values):
            out.append((*values, _text(item, fallback[0]) or fallback[1]))
    return out


def parse_relations(data: Any, cap: int | None) -> list[tuple[str, ...]]:
    """``(source, target, kind)`` triples of ``data["relations"]`` (kind falls back)."""
    raw = data.get("relations") if isinstance(data, dict) else None
    return parse_items(raw, ("source", "target"), ("kind", FALLBACK_RELATION_KIND), cap)


# ---------------------------------------------------------------- extraction


class LLMGraphExtractor:
    """Entities and relations of one text, at most ``max_entities`` / ``max_relations``."""

    def __init__(self, provider: LLMProvider, *, max_entities: int = DEFAULT_MAX_ENTITIES,
                 max_relations: int = DEFAULT_MAX_RELATIONS) -> None:
        self.provider = provider
        self.max_entities = max(0, int(max_entities))
        self.max_relations = max(0, int(max_relations))

    def extract(self, text: str, *, source_doc_id: str, source_locator: str) -> ExtractedGraph:
        data = llm_json_object(self.provider, _EXTRACT_PROMPT, str(text),
                               route="graph_narrative_extract")
        if data is None:
            return ExtractedGraph()
        lineage = (source_doc_id, source_locator)
        entities = parse_items(data.get("entities"), ("name",),
                               ("type", FALLBACK_ENTITY_TYPE), self.max_entities)
        relations = parse_relations(data, self.max_relations)
        return ExtractedGraph(
            entities=tuple(ExtractedEntity(name, kind, *lineage) for name, kind in entities),
            relations=tuple(ExtractedRelation(s, t, k, *lineage) for s, t, k in relations),
        )


def detect_communities(graph: ExtractedGraph) -> tuple[Community, ...]:
    """Connected components of the (undirected) relations, ordered by members; ids ``c0…``."""
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        parent.setdefault(name, name)
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for rel in graph.relations:
        a, b = root(rel.source), root(rel.target)
        if a != b:
            low, high = sorted((a, b))
            parent[high] = low
    members: dict[str, list[str]] = {}
    for name in parent:
        members.setdefault(root(name), []).append(name)
    counts = dict.fromkeys(members, 0)
    for rel in graph.relations:
        counts[root(rel.source)] += 1
    ordered = sorted((tuple(sorted(m)), counts[r]) for r, m in members.items())
    return tuple(Community(f"c{i}", names, n) for i, (names, n) in enumerate(ordered))


class LLMCommunitySummarizer:
    """A short thematic synthesis of one community (no numbers), or a placeholder."""

    def __init__(self, provider: LLMProvider) -> None:
        self.provider = provider

    def summarize(self, community: Community, graph: ExtractedGraph) -> CommunitySummary:
        members = set(community.member_names)
        relations = [r for r in graph.relations if r.source in members]
        docs = tuple(sorted({r.source_doc_id for r in relations if r.source_doc_id}))
        lines = sorted(f"{r.source} --{r.kind}--> {r.target}" for r in relations)
        user = "成员：" + "、".join(community.member_names) + "\n关系：\n" + (
            "\n".join(lines) if lines else "（无关系）"
        )
        messages = [{"role": "system", "content": _SUMMARY_PROMPT},
                    {"role": "user", "content": user}]
        try:
            text = completion_text(self.provider.chat(messages)).strip()
        except ProviderError:
            text = ""
        if not text:
            _failed("graph_community_summary", "no_summary")
            text = (f"{PLACEHOLDER_PREFIX} 社区 {community.id}："
                    + "、".join(community.member_names))
        return CommunitySummary(community.id, text, community.member_names, True, docs)


@dataclass(frozen=True)
class NarrativeGraphPipeline:
    """An extractor and a summarizer sharing one provider."""

    extractor: GraphExtractor
    summarizer: CommunitySummarizer

    def extract_chunks(self, chunks: Iterable[object]) -> ExtractedGraph:
        """Extraction over every non-RESTRICTED chunk (``text``, ``doc_id``,
        ``source_locator``), concatenated in input order; RESTRICTED chunks are never sent."""
        entities: list[ExtractedEntity] = []
        relations: list[ExtractedRelation] = []
        for chunk in chunks:
            if chunk_is_restricted(chunk):
                continue
            got = self.extractor.extract(
                str(getattr(chunk, "text", "")), source_doc_id=chunk_field(chunk, "doc_id"),
                source_locator=chunk_field(chunk, "source_locator"),
            )
            entities.extend(got.entities)
            relations.extend(got.relations)
        return ExtractedGraph(tuple(entities), tuple(relations))

    def detect_communities(self, graph: ExtractedGraph) -> tuple[Community, ...]:
        return detect_communities(graph)

    def summarize(self, graph: ExtractedGraph) -> tuple[CommunitySummary, ...]:
        """One summary per community, in community order."""
        return tuple(self.summarizer.summarize(c, graph) for c in detect_communities(graph))


def _llm_pipeline(provider: LLMProvider, **kwargs: Any) -> NarrativeGraphPipeline:
    return NarrativeGraphPipeline(LLMGraphExtractor(provider, **kwargs),
                                  LLMCommunitySummarizer(provider))


NARRATIVE_GRAPHS = Registry("narrative_graphs", env=NARRATIVE_GRAPH_ENV, spaces=False,
                            label="narrative graph")
NARRATIVE_GRAPHS.register("llm", _llm_pipeline, "on")


def make_narrative_graph(spec: str | None = None, *, provider: LLMProvider | None = None,
                         **kwargs: Any) -> NarrativeGraphPipeline | None:
    """The pipeline for ``spec`` (env ``RAGSPINE_NARRATIVE_GRAPH`` when ``None``).

    ``none``/``""`` (the default) → ``None``; ``llm``/``on`` → a pipeline over ``provider``
    (``**kwargs`` go to :class:`LLMGraphExtractor`), or ``None`` without a provider;
    anything else → ``ValueError``.
    """
    key = NARRATIVE_GRAPHS.resolve(spec)
    if key is None:
        return None
    if provider is None:
        _log.warning("the narrative graph needs an LLM provider; it stays off")
        return None
    pipeline: NarrativeGraphPipeline = NARRATIVE_GRAPHS.make(key, provider=provider, **kwargs)
    return pipeline
