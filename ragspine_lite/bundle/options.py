"""What a bundle search accepts and answers: its options (:data:`SEARCH_OPTIONS`, declared once
here and generated into the page's JavaScript by :mod:`ragspine_lite.bundle.contract`) with
their defaults and bounds, its modes, its filters (:func:`parse_filters`: the page's filter
objects or expressions → a ``MetadataFilter``) and the :class:`SearchOutcome` it returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ragspine_lite.filtering.metadata_filter import (
    FilterCondition,
    MetadataFilter,
    parse_filter_expression,
)

__all__ = [
    "DEFAULT_SEARCH_TOP_K",
    "FILTER_FIELDS",
    "MAX_SEARCH_TOP_K",
    "PREFETCH_OPTIONS",
    "SEARCH_DEFAULTS",
    "SEARCH_MODES",
    "SEARCH_OPTIONS",
    "SearchOption",
    "SearchOutcome",
    "check_top_k",
    "parse_filters",
    "postprocessor_of",
    "search_keywords",
]

DEFAULT_SEARCH_TOP_K = 10
MAX_SEARCH_TOP_K = 200
#: Search modes of a bundle exported with vectors (``hybrid`` is then the default).
SEARCH_MODES = ("hybrid", "bm25")
#: Snippet fields a filter may test.
FILTER_FIELDS: tuple[str, ...] = (
    "doc_id",
    "title",
    "topic",
    "entity",
    "geography",
    "period",
    "language",
)


@dataclass(frozen=True)
class SearchOption:
    """One option of a bundle search: its ``name`` in the page's API and the worker's messages,
    its :meth:`~ragspine_lite.bundle.runtime.BundleSearcher.search` ``keyword``, its
    ``default``, its TypeScript type and doc; ``detailed``: typed on ``DetailedSearchOptions``
    only (``searchDetailed``'s extras)."""

    name: str
    keyword: str
    default: Any
    ts_type: str
    doc: str = ""
    detailed: bool = False


#: Every search option, as MiniSearch declares its ``defaultOptions``: the page's API, its
#: worker and :meth:`BundleSearcher.search` all read these names and defaults from here.
SEARCH_OPTIONS: tuple[SearchOption, ...] = (
    SearchOption("filters", "filters", None, "Filters | null"),
    SearchOption(
        "topK", "top_k", DEFAULT_SEARCH_TOP_K, "number",
        f"1 … {MAX_SEARCH_TOP_K}, default {DEFAULT_SEARCH_TOP_K}.",
    ),
    SearchOption(
        "postprocess", "postprocess", None, "string | string[] | null",
        "Snippet postprocessors run after the RESTRICTED exit (and the reranker), in order:\n"
        '"mmr" (diversity), "lost_in_middle" (best at both ends), "compress" (adds `prompt_text`,\n'
        "`text` unchanged), as a comma list or an array. Default none: results unchanged.",
    ),
    SearchOption("highlight", "highlight", True, "boolean",
                 "Compute highlight spans (default true).", detailed=True),
    SearchOption("rerank", "rerank", True, "boolean",
                 "Apply the configured reranker (default true).", detailed=True),
    SearchOption(
        "mode", "mode", None, "SearchMode | null",
        '"hybrid" or "bm25"; default (null): hybrid when the bundle has vectors and its model\n'
        'is loaded, else BM25. In the page a hybrid bundle answers BM25 until its model joined\n'
        '(`mode` of the results says which); a search asked for "hybrid" waits for it.',
        detailed=True,
    ),
    SearchOption("queryLayers", "query_layers", True, "boolean",
                 "Apply the configured LLM query layers (default true).", detailed=True),
)
#: ``keyword → default`` of :data:`SEARCH_OPTIONS` (what ``BundleSearcher.search`` defaults to).
SEARCH_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {option.keyword: option.default for option in SEARCH_OPTIONS}
)
#: The options ``prefetch`` takes (a subset of :data:`SEARCH_OPTIONS`, same defaults).
PREFETCH_OPTIONS: tuple[str, ...] = ("mode", "filters", "topK")
_BY_NAME = {option.name: option for option in SEARCH_OPTIONS}


def check_top_k(top_k: Any) -> int:
    """``top_k`` if it is an integer from 1 to :data:`MAX_SEARCH_TOP_K`, else ``ValueError``."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_SEARCH_TOP_K:
        raise ValueError(f"topK must be an integer from 1 to {MAX_SEARCH_TOP_K}, got {top_k!r}")
    return top_k


def search_keywords(options: Mapping[str, Any]) -> dict[str, Any]:
    """The page's search options (``{"topK": 5, ...}``) → ``BundleSearcher.search`` keywords
    with every default filled in (a boolean option is read as a boolean).

    >>> search_keywords({"topK": 5})["top_k"], search_keywords({})["highlight"]
    (5, True)
    >>> search_keywords({"topk": 5})
    Traceback (most recent call last):
    ValueError: unknown search option 'topk'; valid options: filters, topK, postprocess, \
highlight, rerank, mode, queryLayers
    """
    for name in options:
        if name not in _BY_NAME:
            raise ValueError(
                f"unknown search option {name!r:.60}; valid options: {', '.join(_BY_NAME)}"
            )
    keywords: dict[str, Any] = {}
    for option in SEARCH_OPTIONS:
        value = options.get(option.name, option.default)
        keywords[option.keyword] = bool(value) if isinstance(option.default, bool) else value
    return keywords


# ---------------------------------------------------------------- filters


def _condition(name: str, spec: Any) -> FilterCondition:
    if isinstance(spec, Mapping):
        op = str(spec.get("op", "eq")).strip().lower()
        value = spec.get("value")
        if isinstance(value, list):
            value = tuple(value)
        return FilterCondition(name, op, value)
    if isinstance(spec, (list, tuple)):
        return FilterCondition(name, "in", tuple(str(v) for v in spec))
    if isinstance(spec, (str, int, float)) and not isinstance(spec, bool):
        return FilterCondition(name, "eq", str(spec))
    raise ValueError(
        f"filter for {name!r} must be a string, a list of strings or "
        f"{{'op': ..., 'value': ...}}, got {spec!r}"
    )


def _check_field(name: str) -> None:
    if name not in FILTER_FIELDS:
        raise ValueError(f"unknown filter field {name!r}; valid fields: {', '.join(FILTER_FIELDS)}")


def parse_filters(filters: Any) -> MetadataFilter | None:
    """Filters from the JS API → a :class:`MetadataFilter` (all conditions must hold).

    Accepted: ``None``; a list of ``"field=op:value"`` expressions; or a mapping
    ``field → "value"`` (eq), ``field → ["a", "b"]`` (in) or ``field → {"op", "value"}``.
    A ``None`` value in a mapping means "no condition"; ``""`` is a real filter.

    >>> parse_filters({"entity": "ACME_HK", "period": {"op": "gte", "value": "2024"}}).conditions
    (FilterCondition(field='entity', op='eq', value='ACME_HK'), \
FilterCondition(field='period', op='gte', value='2024'))
    """
    if filters is None:
        return None
    conditions: list[FilterCondition] = []
    if isinstance(filters, Mapping):
        for name, spec in filters.items():
            if spec is None:
                continue
            _check_field(str(name))
            conditions.append(_condition(str(name), spec))
    elif isinstance(filters, (list, tuple)):
        for expr in filters:
            condition = parse_filter_expression(expr)
            _check_field(condition.field)
            conditions.append(condition)
    else:
        raise ValueError(
            f"filters must be an object or a list of 'field=op:value' strings, got {filters!r}"
        )
    return MetadataFilter(tuple(conditions)) if conditions else None


@dataclass
class SearchOutcome:
    """Hits (``{"snippet", "section", "highlights"}``) and timing; nothing in it depends on
    RESTRICTED chunks (they are neither ranked nor counted).

    ``rerank`` is ``None`` unless a reranker is configured; then it says whether the
    reranker's order was applied (``applied``), its ``spec`` and the ``error`` that made the
    search keep the fused order. ``semantic`` is ``None`` unless the bundle has vectors and
    a backend: then ``{"mode", "channel", "error"}`` (``channel`` ``"hybrid"``, ``"bm25"``,
    ``"bm25:outside-vocabulary"`` or ``"bm25:embedding-failed"``).
    """

    hits: list[dict[str, Any]] = field(default_factory=list)
    took_ms: float = 0.0
    rerank: dict[str, Any] | None = None
    semantic: dict[str, Any] | None = None
    query_layers: dict[str, Any] | None = None

    @property
    def snippets(self) -> list[dict[str, object]]:
        return [hit["snippet"] for hit in self.hits]

    def as_dict(self) -> dict[str, Any]:
        out = {"hits": self.hits, "took_ms": self.took_ms}
        # Absent when not configured / not exported: the default output is unchanged.
        if self.rerank is not None:
            out["rerank"] = self.rerank
        if self.semantic is not None:
            out["semantic"] = self.semantic
        if self.query_layers is not None:
            out["query_layers"] = self.query_layers
        return out


def postprocessor_of(spec: Any) -> Any:
    """The snippet postprocessor a search asks for (``None``: none). Never read from the
    environment: a page passes what it wants."""
    from ragspine_lite.postprocess import make_postprocessor

    if spec is None:
        return None
    if isinstance(spec, list | tuple) and all(isinstance(s, str) for s in spec):
        spec = ",".join(spec)
    if not isinstance(spec, str):
        raise ValueError(f"postprocess must be a string or a list of names, got {spec!r}")
    return make_postprocessor(spec)
