"""The search side of a static bundle: what the browser worker runs inside Pyodide.

:class:`BundleSearcher` opens a built site's sharded bundle (:meth:`BundleSearcher.from_files`;
in the worker, files fetched per query) or an exported chunk store, without writing to either,
and keeps an in-memory store for documents the visitor adds in the page. A search goes through the
agent link exit (RESTRICTED dropped before any snippet is built) for each library and fuses
them with :class:`~ragspine_lite.routing.multi_index.MultiIndexRetriever`, so every result is
the Python snippet dict plus ``library_id`` (``"bundle"`` or ``"page"``). Each hit also
carries the heading section it falls in and highlight spans for the query terms.

:meth:`BundleSearcher.dispatch` is the JSON-in/JSON-out door the worker calls.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragspine_lite.bundle.dense import DenseScanner
from ragspine_lite.bundle.manifest import (
    BUNDLE_FORMAT_VERSION,
    BUNDLE_META_TABLE,
    FACET_FIELDS,
    BundleFormatError,
)
from ragspine_lite.bundle.sharded_index import ShardedIndex
from ragspine_lite.bundle.shards import (
    BundleFiles,
    ShardedBundle,
    bundle_facts,
    index_text_fn_of,
    page_urls,
    section_rows,
)
from ragspine_lite.chunking.chunk_store import SCHEMA_VERSION, ChunkStore, ChunkStoreError
from ragspine_lite.chunking.sources import document_from_text, load_sections
from ragspine_lite.common.glossary import DEFAULT_GLOSSARY, Glossary, find_terms
from ragspine_lite.common.sensitivity import NOT_RESTRICTED_SQL, is_restricted
from ragspine_lite.filtering.metadata_filter import (
    FilterCondition,
    MetadataFilter,
    parse_filter_expression,
)
from ragspine_lite.lexical.pipeline import embed_queries, index_text
from ragspine_lite.lexical.retrieval import GlossaryQueryRewriter, NarrativeIndex
from ragspine_lite.link.narrative_link import NarrativeIndexRetriever, OpenOnlyIndex
from ragspine_lite.rerank.listwise_rerank import listwise_rerank
from ragspine_lite.routing.multi_index import LibraryIndex, MultiIndexRetriever
from ragspine_lite.vector.store import InProcessVectorStore

__all__ = [
    "BUNDLE_LIBRARY",
    "DEFAULT_SEARCH_TOP_K",
    "FACET_FIELDS",
    "FILTER_FIELDS",
    "MAX_SEARCH_TOP_K",
    "PAGE_LIBRARY",
    "SEARCH_MODES",
    "BundleSearcher",
    "RerankSetting",
    "SearchOutcome",
    "excerpt",
    "highlight_spans",
    "open_read_only_store",
    "parse_filters",
]

_LOGGER = logging.getLogger(__name__)

BUNDLE_LIBRARY = "bundle"
PAGE_LIBRARY = "page"
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

_LOCATOR_PARA_RE = re.compile(r"#para(\d+)(?:-(\d+))?$")
_ASCII_TOKEN_RE = re.compile(r"[a-z0-9]+")
_CJK_RUN_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_ASTRAL_RE = re.compile("[\U00010000-\U0010ffff]")
# Function words that would light up every line; highlighting only (BM25 still scores them).
_HIGHLIGHT_SKIP = frozenset(
    "a an and are as at by did do does for from how in is it of on or the to was were what "
    "when where which who why with".split()
)


def open_read_only_store(db_path: str | Path) -> ChunkStore:
    """Open an existing chunk store so that nothing can write to it (``PRAGMA query_only``).

    Raises ``FileNotFoundError`` when the file is missing (SQLite would create it).
    """
    path = Path(db_path)
    if not path.is_file():
        raise FileNotFoundError(f"bundle chunk store not found at {str(path)!r}")
    return ChunkStore(path, read_only=True)


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


# ---------------------------------------------------------------- highlighting


def _utf16_offsets(text: str) -> list[int] | None:
    """Code-point index → UTF-16 index, or ``None`` when they coincide (no astral chars)."""
    if text.isascii() or _ASTRAL_RE.search(text) is None:
        return None
    out = [0]
    for c in text:
        out.append(out[-1] + (2 if ord(c) > 0xFFFF else 1))
    return out


def highlight_spans(query: str, text: str) -> list[list[int]]:
    """``[start, end)`` spans of ``text`` (UTF-16 units, as JS strings count) to highlight.

    ASCII query words (not one-letter or function words such as "in", "why") match whole ASCII
    words, case-insensitively; a Chinese run of the query matches by its bigrams (a single
    character by itself). Overlapping spans are merged.

    >>> highlight_spans("hong kong revenue", "Hong Kong revenue rose; Kongs not.")
    [[0, 4], [5, 9], [10, 17]]
    >>> highlight_spans("营运利润", "营运利润回升，利率下行")
    [[0, 4]]
    """
    return _as_utf16(text, _match_spans(query, text))


def _as_utf16(text: str, spans: list[list[int]]) -> list[list[int]]:
    offsets = _utf16_offsets(text)
    if offsets is None:
        return spans
    return [[offsets[s], offsets[e]] for s, e in spans]


def _match_spans(query: str, text: str) -> list[list[int]]:
    """:func:`highlight_spans` in code points."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a character that lower-cases to two: keep offsets aligned
        lowered = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
    q = query.lower()
    spans: list[tuple[int, int]] = []
    words = sorted(
        {w for w in _ASCII_TOKEN_RE.findall(q) if len(w) > 1 and w not in _HIGHLIGHT_SKIP},
        key=len,
        reverse=True,
    )
    if words:
        pattern = re.compile(
            r"(?<![a-z0-9])(?:" + "|".join(re.escape(w) for w in words) + r")(?![a-z0-9])"
        )
        spans.extend(m.span() for m in pattern.finditer(lowered))
    grams: set[str] = set()
    for run in _CJK_RUN_RE.findall(q):
        if len(run) == 1:
            grams.add(run)
        grams.update(run[i : i + 2] for i in range(len(run) - 1))
    for gram in grams:
        start = lowered.find(gram)
        while start != -1:
            spans.append((start, start + len(gram)))
            start = lowered.find(gram, start + 1)
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


# Markdown left in chunk text: heading/list/quote markers, emphasis, code ticks, links, images.
_MD_LINE_RE = re.compile(r"^\s*(?:#{1,6}\s+|[-*+]\s+|\d{1,9}[.)]\s+|>\s?)", re.MULTILINE)
_HEADING_LINE_RE = re.compile(r"^\s*#{1,6}\s")
# A code fence line with its info string ("```javascript"): markup, not text of the excerpt.
_FENCE_LINE_RE = re.compile(r"^\s*(?:`{3,}|~{3,})[^`]*$")
_MD_IMAGE_RE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_MD_LINK_RE = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_MD_MARK_RE = re.compile(r"(\*\*|__|`)|(?<![\w*])[*_](?=\S)|(?<=\S)[*_](?![\w*])")
_TAG_RE = re.compile(r"</?[A-Za-z][^<>]*>")
_CJK_CLASS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# A unit of excerpt length: one CJK character (half a word) or a run of other non-space text.
_UNIT_RE = re.compile(f"[{_CJK_CLASS}]|[^\\s{_CJK_CLASS}]+")
EXCERPT_WORDS = 30


def _plain(text: str, query: str) -> str:
    """Chunk text without Markdown/HTML markup (code fences and their info strings too), on
    one line; heading lines that do not match ``query`` are left out (the result shows its
    section heading apart) unless nothing else is left."""
    text = "\n".join(line for line in text.split("\n") if not _FENCE_LINE_RE.match(line))
    body = "\n".join(
        line for line in text.split("\n")
        if not _HEADING_LINE_RE.match(line) or _match_spans(query, line)
    )
    out = _MD_LINE_RE.sub("", body if body.strip() else text)
    out = _MD_IMAGE_RE.sub(r"\1", out)
    out = _MD_LINK_RE.sub(r"\1", out)
    out = _TAG_RE.sub(" ", out)
    out = _MD_MARK_RE.sub("", out)
    return " ".join(out.split())


def with_synonyms(query: str, glossary: Glossary = DEFAULT_GLOSSARY) -> str:
    """``query`` plus the glossary synonyms of its terms (other languages included), for
    highlighting: "revenue" also lights up "营收", "hk" also "香港".

    >>> with_synonyms("hk revenue")
    'hk revenue 香港 营收'
    >>> with_synonyms("营收")
    '营收 revenue'

    """
    lowered = query.lower()
    extra: list[str] = []
    for synonyms in (glossary.entity_synonyms, glossary.metric_synonyms):
        for match in find_terms(lowered, synonyms):
            chinese = bool(_CJK_RUN_RE.search(match.term))
            for term, code in synonyms.items():
                if code != match.code or bool(_CJK_RUN_RE.search(term)) == chinese:
                    continue  # the same language highlights by itself
                extra.extend([term] if chinese else _CJK_RUN_RE.findall(term))
    return " ".join([query, *dict.fromkeys(t for t in extra if t.lower() not in lowered)])


def excerpt(
    query: str, text: str, *, words: int = EXCERPT_WORDS, start_line: int = 0
) -> dict[str, Any]:
    """About ``words`` words of ``text`` around its best match for ``query`` →
    ``{"text", "highlights"}`` (UTF-16 spans, as :func:`highlight_spans`).

    Markdown/HTML markup and heading lines without a match are stripped; a CJK character
    counts as half a word. The excerpt starts at the ``start_line``-th non-blank line (the
    hit's section), a few words before the run of matches it covers best (at the start when
    nothing matches); ``…`` marks cut ends.

    >>> excerpt("revenue", "# Review\\nOne two three four five. **Revenue** grew 12%.", words=5)
    {'text': '… five. Revenue grew 12%.', 'highlights': [[8, 15]]}
    """
    lines = [line for line in text.split("\n") if line.strip()]
    first_line = min(max(start_line, 0), max(len(lines) - 1, 0))
    plain = _plain("\n".join(lines[first_line:]), query)
    units = [(m.start(), m.end(), 0.5 if len(m.group()) == 1 and _CJK_RUN_RE.match(m.group())
              else 1.0) for m in _UNIT_RE.finditer(plain)]
    if not units:
        return {"text": "", "highlights": []}
    spans = _match_spans(query, plain)
    hit_units = sorted(
        {i for s, e in spans for i, (a, b, _) in enumerate(units) if a < e and s < b}
    )

    def window(first: int) -> int:
        """Index after the last unit of a ``words``-long window starting at ``first``."""
        budget, end = float(words), first
        while end < len(units) and budget >= units[end][2]:
            budget -= units[end][2]
            end += 1
        return end

    best_start, best_count = 0, -1
    lead = words / 5
    for hit in hit_units or [0]:
        first, back = hit, 0.0
        while first > 0 and back + units[first - 1][2] <= lead:
            back += units[first - 1][2]
            first -= 1
        end = window(first)
        count = sum(1 for i in hit_units if first <= i < end)
        if count > best_count:
            best_start, best_count = first, count
    end = window(best_start)
    snippet = plain[units[best_start][0] : units[end - 1][1]]
    if best_start > 0 or first_line > 0:
        snippet = ("…" if _CJK_RUN_RE.match(snippet) else "… ") + snippet
    if end < len(units):
        snippet += "…" if _CJK_RUN_RE.match(snippet[-1]) else " …"
    return {"text": snippet, "highlights": highlight_spans(query, snippet)}


# ---------------------------------------------------------------- the searcher


class _FilteredIndex:
    """An index wrapper that applies one metadata filter (the bundle's; page documents get
    theirs through :class:`OpenOnlyIndex`, which leaves RESTRICTED ones unranked). With a
    ``fallback`` index, a failure of ``index`` (the hybrid one: its model may be unable to
    run) is logged once and the query answered by ``fallback``; ``failure`` keeps why.
    """

    def __init__(self, index: NarrativeIndex, fallback: NarrativeIndex | None = None) -> None:
        self.index = index
        self.fallback = fallback
        self.metadata_filter: MetadataFilter | None = None
        self.failure: str | None = None
        self._logged = False

    def retrieve(self, query: str, **kwargs: Any) -> list[Any]:
        if self.metadata_filter is not None:
            kwargs["metadata_filter"] = self.metadata_filter
        self.failure = None
        try:
            results = self.index.retrieve(query, **kwargs)
        except (sqlite3.Error, ValueError):
            raise
        except Exception as exc:
            if self.fallback is None:
                raise
            self.failure = f"{type(exc).__name__}: {exc}"
            if not self._logged:
                self._logged = True
                _LOGGER.warning("dense search failed (%s); using BM25 only", self.failure)
            results = self.fallback.retrieve(query, **kwargs)
        return results


def _postprocessor(spec: Any) -> Any:
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


class _PageBackend:
    """The bundle's model as page documents see it: chunk vectors a document was stored with
    are reused (a reload does not re-embed); everything else is the model's."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.known: dict[str, list[float]] = {}

    def __getattr__(self, name: str) -> Any:  # calibration, coverage, plan, model_id, …
        return getattr(self.backend, name)

    def remember(self, vectors: Any) -> None:
        """Take ``{"model_id", "items": [[text, vector], …]}`` from :meth:`page_vectors`;
        vectors of another model (or malformed ones) are ignored: the text is re-embedded."""
        from ragspine_lite.vector.sqlite_store import embedding_model_id

        if not isinstance(vectors, Mapping) or vectors.get("model_id") != embedding_model_id(
            self.backend
        ):
            return
        dim = getattr(self.backend, "dim", None)
        for item in vectors.get("items") or ():
            if isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str):
                vector = [float(x) for x in item[1]]
                if dim is None or len(vector) == dim:
                    self.known[item[0]] = vector

    def forget(self, keep: set[str]) -> None:
        """Drop the vectors of texts no longer indexed."""
        self.known = {t: v for t, v in self.known.items() if t in keep}

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.known]
        if missing:
            vectors = self.backend.embed_texts(missing)
            self.known.update(zip(missing, (list(v) for v in vectors), strict=True))
        return [self.known[t] for t in texts]

    def embed_queries(self, texts: list[str]) -> list[Any]:
        return embed_queries(self.backend, texts)

    def missing(self, texts: Sequence[str]) -> list[str]:
        """The texts without a vector yet."""
        return [t for t in dict.fromkeys(texts) if t not in self.known]


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


@dataclass(frozen=True)
class _SnippetChunk:
    text: str
    sensitivity: str


@dataclass(frozen=True)
class _SnippetItem:
    """A fused snippet seen the way ``listwise_rerank`` reads results (``.chunk``)."""

    snippet: dict[str, Any]
    chunk: _SnippetChunk


@dataclass(frozen=True)
class RerankSetting:
    """The reranker a :class:`BundleSearcher` applies after fusion (``judge`` ``None``: off)."""

    spec: str = "none"
    judge: Any = None
    url: str | None = None

    def describe(self) -> dict[str, Any]:
        return {"spec": self.spec, "url": self.url, "enabled": self.judge is not None}


@dataclass(frozen=True)
class QueryLayerSetting:
    """The LLM query layers a :class:`BundleSearcher` applies (``provider`` ``None``: off)."""

    transform: str = "none"
    decompose: str = "none"
    adaptive: str = "none"
    provider: Any = None
    url: str | None = None

    def describe(self) -> dict[str, Any]:
        return {"transform": self.transform, "decompose": self.decompose,
                "adaptive": self.adaptive, "url": self.url, "enabled": self.provider is not None}

    def wrap(self, retriever: Any) -> Any:
        from ragspine_lite.query import apply_query_layers

        return apply_query_layers(
            retriever, transform=self.transform, decompose=self.decompose,
            adaptive=self.adaptive, provider=self.provider,
        )


def _layer_report(top: Any, base: Any) -> dict[str, Any]:
    """``{"applied": [names], "outcomes": [{transform, status, generated, refused, error}]}``."""
    outcomes, layer = [], top
    while layer is not base:
        outcome = getattr(layer, "last_outcome", None)
        if outcome is not None:
            outcomes.insert(0, {"transform": outcome.transform, "status": outcome.status,
                                "generated": list(outcome.generated), "refused": outcome.refused,
                                "error": outcome.error or None})
        layer = layer.base
    return {"applied": [o["transform"] for o in outcomes if o["status"] == "applied"],
            "outcomes": outcomes}


class BundleSearcher:
    """Search a bundle (read-only) plus documents added in the page.

    The bundle is either the exported chunk store ``bundle_db`` (SQLite, the reference path)
    or ``bundle``, the sharded files of a built site (:meth:`from_files`); neither → page
    documents only. Both give the same results. Raises :class:`BundleFormatError` when the
    bundle is not of this format, or has a newer chunk-store schema.
    """

    def __init__(
        self,
        bundle_db: str | Path | None = None,
        *,
        embedding_backend: Any = None,
        bundle: ShardedBundle | None = None,
        scanner: DenseScanner | None = None,
    ) -> None:
        if bundle_db is not None and bundle is not None:
            raise ValueError("give the bundle as a chunk store path or as shards, not both")
        self.bundle_store: ChunkStore | None = None
        self.sharded: ShardedBundle | None = bundle
        self.bundle_facts: dict[str, Any] = {}
        self._sections: dict[str, list[tuple[int, int, str, str, int]]] = {}
        self._urls: dict[str, str] = {}
        self._bundle: _FilteredIndex | None = None
        self._hybrid: _FilteredIndex | None = None
        self._vector_store: Any = None
        self.embedding_backend: Any = None
        self.index_text_fn: Any = None
        if bundle_db is not None:
            store = open_read_only_store(bundle_db)
            try:
                self.bundle_facts = self._check_bundle(store, str(bundle_db))
                self.index_text_fn = index_text_fn_of(self.bundle_facts, str(bundle_db))
                self._sections = section_rows(store)
                self._urls = page_urls(store)
            except Exception:
                store.close()
                raise
            self.bundle_store = store
            self._bundle = _FilteredIndex(
                NarrativeIndex(
                    store, query_rewriter=GlossaryQueryRewriter(), index_text_fn=self.index_text_fn
                )
            )
            if embedding_backend is not None:
                self._open_vectors(bundle_db, embedding_backend)
        elif bundle is not None:
            self._use_sharded(bundle, embedding_backend, scanner)
        self.page_store = ChunkStore(":memory:")
        self.page_store.init_schema()
        self._page = _FilteredIndex(
            NarrativeIndex(
                self.page_store,
                query_rewriter=GlossaryQueryRewriter(),
                index_text_fn=self.index_text_fn,
            )
        )
        # With the bundle's model loaded, page documents are embedded with it too.
        self._page_backend: _PageBackend | None = None
        self._page_hybrid: _FilteredIndex | None = None
        if self._hybrid is not None:
            self._page_backend = _PageBackend(self.embedding_backend)
            self._page_hybrid = _FilteredIndex(
                NarrativeIndex(
                    self.page_store,
                    query_rewriter=GlossaryQueryRewriter(),
                    embedding_backend=self._page_backend,
                    vector_store=InProcessVectorStore(),
                    index_text_fn=self.index_text_fn,
                ),
                fallback=self._page.index,
            )
        self._page_docs: dict[str, dict[str, Any]] = {}
        self._page_sections: dict[str, list[tuple[int, int, str, str, int]]] = {}
        self.reranker = RerankSetting()
        self.query_layers = QueryLayerSetting()

    def _use_sharded(
        self, bundle: ShardedBundle, embedding_backend: Any, scanner: DenseScanner | None
    ) -> None:
        """Search ``bundle`` (hybrid too when ``embedding_backend`` has its vectors' model)."""
        self.sharded = bundle
        self.bundle_facts = dict(bundle.facts)
        self.index_text_fn = index_text_fn_of(self.bundle_facts, bundle.header_path)
        self._bundle = _FilteredIndex(
            ShardedIndex(  # type: ignore[arg-type]
                bundle, query_rewriter=GlossaryQueryRewriter(), index_text_fn=self.index_text_fn
            )
        )
        self._hybrid = None
        if embedding_backend is not None and self._vector_model(embedding_backend):
            self.embedding_backend = embedding_backend
            self._hybrid = _FilteredIndex(
                ShardedIndex(  # type: ignore[arg-type]
                    bundle,
                    query_rewriter=GlossaryQueryRewriter(),
                    index_text_fn=self.index_text_fn,
                    embedding_backend=embedding_backend,
                    scanner=scanner,
                ),
                fallback=self._bundle.index,
            )

    def replace_bundle(self, files: BundleFiles, header: str) -> None:
        """Search the rebuilt site's bundle (``header`` read through ``files``) from now on:
        page documents, reranker and LLM layers stay (a tab opened before the rebuild).

        A bundle this searcher cannot take in place (none open, another index text, vectors
        of another model or none where there were some) raises ``ValueError``: reload.
        """
        if self.sharded is None:
            raise ValueError("no sharded bundle is open: reload the page")
        bundle = ShardedBundle(files, header)
        same_text = bundle.facts.get("index_text") == self.bundle_facts.get("index_text")
        same_model = (bundle.facts.get("embedding_model_id")
                      == self.bundle_facts.get("embedding_model_id"))
        if not (same_text and same_model):
            raise ValueError("the rebuilt site indexes differently: reload the page")
        self._use_sharded(bundle, self.embedding_backend, None)

    @classmethod
    def from_files(
        cls,
        files: BundleFiles,
        *,
        header: str | None = None,
        embedding_backend: Any = None,
        scanner: DenseScanner | None = None,
    ) -> BundleSearcher:
        """Search a built site's sharded bundle read through ``files`` (a
        :class:`~ragspine_lite.bundle.shards.DirectoryFiles` on CPython; the worker's fetching
        reader in the browser). ``header``: its path (default: the manifest's ``entry.index``).
        ``scanner`` scans the chunk vectors of a hybrid search (default: numpy or pure Python
        over the vector shards; the worker passes its JavaScript scanner).
        """
        bundle = ShardedBundle(files, header)
        return cls(embedding_backend=embedding_backend, bundle=bundle, scanner=scanner)

    def vector_shards(self) -> dict[str, Any]:
        """What a scanner outside Python needs: ``{"dim", "scale", "shards": [[start, count,
        path], …], "missing", "rows"}``, or for coarse lists the header entry's ``centroids``,
        ``probe``, ``lists`` and ``assign`` instead of ``shards`` (``{}``: no vectors)."""
        vectors = self.sharded.vectors if self.sharded is not None else None
        if not vectors:
            return {}
        keys = ("dim", "scale", "shards", "missing", "centroids", "probe", "lists", "assign")
        return {**{k: vectors[k] for k in keys if k in vectors}, "rows": self.sharded.n_docs}  # type: ignore[union-attr]

    def use_scanner(self, scanner: DenseScanner) -> None:
        """Scan the sharded vectors with ``scanner`` from now on (the worker hands over its
        JavaScript scanner once the shards are in; the results stay the same integers)."""
        index = self._hybrid.index if self._hybrid is not None else None
        if not isinstance(index, ShardedIndex) or index.dense is None:
            raise ValueError("this searcher has no sharded vectors to scan")
        index.dense.scanner = scanner

    def files_for(
        self,
        query: str,
        *,
        filters: Any = None,
        top_k: int | None = None,
        mode: str | None = None,
    ) -> list[str]:
        """The bundle files a search for ``query`` would read that are not cached yet (none
        for a SQLite bundle): the postings shards of its terms (and the filter file when it
        filters); once those are provided, with ``top_k``, the text fragments of its ``top_k``
        BM25 hits (``mode`` ``"bm25"``; a hybrid search's hits depend on the query vector).
        Fetch them ahead, while the visitor types, and hand them to :meth:`provide`; asking
        again until nothing is missing loads all a search reads."""
        if self._bundle is None or not isinstance(self._bundle.index, ShardedIndex):
            return []
        if not isinstance(query, str) or not query.strip():
            return []
        if top_k is not None and self._resolve_mode(mode) != "bm25":
            top_k = None
        return self._bundle.index.files_for(
            query, metadata_filter=parse_filters(filters), top_k=top_k
        )

    def index_paths(self) -> list[str]:
        """The sharded bundle's term shards, text fragments and filter file (none for a
        SQLite bundle): what a cache of this bundle may keep."""
        return self.sharded.paths() if self.sharded is not None else []

    def provide(self, path: str, data: Any) -> None:
        """Take the bytes of a bundle file fetched ahead (checked against its name's hash)."""
        if self.sharded is None:
            raise ValueError("this searcher has no sharded bundle to provide files to")
        self.sharded.provide(str(path), data)

    @property
    def vector_count(self) -> int:
        """How many chunk vectors the bundle was exported with (0: a BM25-only bundle)."""
        value = self.bundle_facts.get("vectors", 0)
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0

    def _vector_model(self, backend: Any) -> str:
        """The model of the bundle's vectors (``""``: a BM25-only bundle, the backend has
        nothing to search); a backend of another model is refused."""
        from ragspine_lite.vector.sqlite_store import embedding_model_id

        model_id = str(self.bundle_facts.get("embedding_model_id") or "")
        if not self.vector_count or not model_id:
            return ""
        if embedding_model_id(backend) != model_id:
            raise BundleFormatError(
                f"the bundle's vectors were made by {model_id!r} but the embedding backend is "
                f"{embedding_model_id(backend)!r}: rebuild the bundle or load its own model"
            )
        return model_id

    def _open_vectors(self, bundle_db: str | Path, backend: Any) -> None:
        from ragspine_lite.vector.sqlite_store import SqliteVectorStore

        model_id = self._vector_model(backend)
        if not model_id:
            return
        vector_store = SqliteVectorStore(bundle_db, model_id=model_id, read_only=True)
        self._vector_store = vector_store
        self.embedding_backend = backend
        assert self.bundle_store is not None and self._bundle is not None
        self._hybrid = _FilteredIndex(
            NarrativeIndex(
                self.bundle_store,
                query_rewriter=GlossaryQueryRewriter(),
                embedding_backend=backend,
                vector_store=vector_store,
                index_text_fn=self.index_text_fn,
            ),
            fallback=self._bundle.index,
        )

    @staticmethod
    def _check_bundle(store: ChunkStore, where: str) -> dict[str, Any]:
        schema = store.schema_version()
        if schema == 0:
            raise BundleFormatError(f"{where!r} is not a ragspine_lite chunk store")
        if schema > SCHEMA_VERSION:
            raise BundleFormatError(
                f"the bundle's chunk store has schema version {schema}, newer than this "
                f"runtime reads ({SCHEMA_VERSION}): update the runtime (rebuild the site)"
            )
        try:
            rows = store.execute_read(f"SELECT key, value FROM {BUNDLE_META_TABLE}")
        except ChunkStoreError:
            raise BundleFormatError(
                f"{where!r} is a chunk store but not an exported bundle (no "
                f"{BUNDLE_META_TABLE} table): rebuild the bundle with "
                "'ragspine-lite build-site DOCS_DIR --out DIR'"
            ) from None
        return bundle_facts(((r["key"], r["value"]) for r in rows), where)

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Close both stores; calling it again does nothing."""
        if self._vector_store is not None:
            self._vector_store.close()
        if self.bundle_store is not None:
            self.bundle_store.close()
        self.page_store.close()

    def __enter__(self) -> BundleSearcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- page documents -------------------------------------------------------------------

    def ingest(self, name: str, text: str, vectors: Any = None) -> dict[str, Any]:
        """Add (or replace) one page document given as a file name and its text.

        Same format rules as the CLI (front matter, ``.md``/``.txt``/``.html``); ``doc_id``
        defaults to ``name``. RESTRICTED documents are indexed but never ranked nor returned,
        and their title is withheld (``""``) here and in :meth:`page_documents`. With the
        bundle's model loaded the chunks are embedded with it (``embedded``: how many; a model
        failure leaves the document BM25-only and says so in ``embedding_error``);
        ``vectors`` (what :meth:`page_vectors` gave for it) are reused instead of re-embedding.
        """
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"document name must be a non-empty string, got {name!r}")
        body, meta = document_from_text(text, name=name)
        extra: dict[str, Any] = {}
        if self._page_hybrid is None or self._page_backend is None:
            chunks = self._page.index.ingest(body, meta)
        else:
            self._page_backend.remember(vectors)
            try:
                chunks = self._page_hybrid.index.ingest(body, meta)
                extra["embedded"] = len(self._page_vectors(meta.doc_id))
            except (sqlite3.Error, ValueError):
                raise
            except Exception as exc:  # the model failed: the document stays BM25-only
                extra = {"embedded": 0, "embedding_error": f"{type(exc).__name__}: {exc}"}
                chunks = self._page.index.ingest(body, meta)
        self._page_sections[meta.doc_id] = [
            (s.para_start, s.para_end, s.heading, s.anchor, s.level)
            for s in load_sections(name, text=text)
        ]
        restricted = is_restricted(meta.sensitivity)
        info = {  # a RESTRICTED document's title is RESTRICTED too: only its name is shown
            "doc_id": meta.doc_id,
            "name": name,
            "title": "" if restricted else meta.title,
            "chunks": chunks,
            "language": meta.language,
            "restricted": restricted,
            **extra,
        }
        if chunks:
            self._page_docs[meta.doc_id] = info
        else:
            self._page_docs.pop(meta.doc_id, None)
        return info

    def _page_vectors(self, doc_id: str) -> list[list[Any]]:
        """``[index text, vector]`` of the page document's chunks that have a vector."""
        if self._page_backend is None or self._page_hybrid is None:
            return []
        index = self._page_hybrid.index
        known = self._page_backend.known
        chunks = [c for c in self.page_store.iter_chunks() if c.doc_id == doc_id]
        texts = [index_text(index.index_text_fn, c) for c in chunks]
        return [[t, known[t]] for t in dict.fromkeys(texts) if t in known]

    def page_vectors(self, doc_id: str) -> dict[str, Any]:
        """The chunk vectors of a page document, to store with it (``{"model_id", "items"}``)."""
        from ragspine_lite.vector.sqlite_store import embedding_model_id

        model = embedding_model_id(self.embedding_backend) if self._page_backend else None
        return {"model_id": model, "items": self._page_vectors(str(doc_id))}

    def check_document(self, name: str, text: str) -> dict[str, Any]:
        """Validate a page document without indexing it → ``{"doc_id", "title", ...}``."""
        body, meta = document_from_text(text, name=name)
        title = "" if is_restricted(meta.sensitivity) else meta.title
        return {"doc_id": meta.doc_id, "name": name, "title": title, "chars": len(body)}

    def forget(self, doc_ids: Iterable[str] | None = None) -> int:
        """Retire page documents (all of them when ``doc_ids`` is ``None``); returns how many."""
        targets = list(self._page_docs) if doc_ids is None else [str(d) for d in doc_ids]
        removed = 0
        for doc_id in targets:
            if doc_id in self._page_docs:
                self.page_store.replace_doc_chunks(doc_id, [])
                del self._page_docs[doc_id]
                self._page_sections.pop(doc_id, None)
                removed += 1
        if removed and self._page_hybrid is not None and self._page_backend is not None:
            index = self._page_hybrid.index
            for doc_id in targets:
                index.vector_store.delete(where={"doc_id": doc_id})  # type: ignore[union-attr]
            active = self.page_store.iter_chunks()
            self._page_backend.forget({index_text(index.index_text_fn, c) for c in active})
        return removed

    def page_documents(self) -> list[dict[str, Any]]:
        """The page documents currently indexed, by ``doc_id``."""
        return [dict(self._page_docs[k]) for k in sorted(self._page_docs)]

    # -- reranking ------------------------------------------------------------------------

    def configure_reranker(
        self,
        spec: str | None = None,
        *,
        url: str | None = None,
        token: str | None = None,
        timeout: float | None = None,
        check: bool = True,
    ) -> dict[str, Any]:
        """Rerank fused hits with ``spec`` (``"remote:colbert"``, …; ``None``/``"none"``: off).

        The reranker comes from :func:`~ragspine_lite.rerank.factory.make_reranker`, so a
        remote one sees only the texts of hits the link exit let through (RESTRICTED never
        reaches it) and a failing endpoint leaves the fused order. With ``check`` the
        endpoint's ``/v1/models`` is asked once → ``{"spec", "url", "enabled", "models"?,
        "error"?}``; an unreachable endpoint is reported, not raised. Bad specs or URLs raise
        ``ValueError`` and leave the previous setting in place.
        """
        from ragspine_lite.rerank.factory import make_reranker

        name = "none" if spec is None else str(spec).strip()
        kwargs: dict[str, Any] = {}
        if url:
            kwargs["url"] = url
        if token:
            kwargs["token"] = token
        if timeout is not None:
            kwargs["timeout"] = timeout
        judge = make_reranker(name, **kwargs)
        self.reranker = RerankSetting(name if judge is not None else "none", judge, url or None)
        return _with_models(self.reranker.describe(), getattr(judge, "client", None), check)

    def configure_llm(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        timeout: float | None = None,
        transform: str = "none",
        decompose: str = "none",
        adaptive: str = "none",
        check: bool = True,
        provider: Any = None,
    ) -> dict[str, Any]:
        """Run the LLM query layers (``ragspine_lite.query``) on every later search, with the
        remote endpoint's ``/v1/chat`` as the LLM (``provider`` overrides it, e.g. in tests).

        The LLM sees only the query; a failing endpoint gives the plain search. No URL and no
        provider → off. With ``check`` the endpoint's ``/v1/models`` is asked once →
        ``{"transform", "decompose", "adaptive", "url", "enabled", "models"?, "error"?}``. Bad
        specs or URLs raise ``ValueError`` and leave the previous setting in place.
        """
        if provider is None and url:
            from ragspine_lite.remote.client import RemoteChatProvider

            provider = RemoteChatProvider(url, token=token or None, timeout=timeout or 60.0)
        specs = {"transform": transform or "none", "decompose": decompose or "none",
                 "adaptive": adaptive or "none"}
        setting = QueryLayerSetting(**specs, provider=provider, url=url or None)
        setting.wrap(None)  # building the layers validates the specs before anything changes
        self.query_layers = setting
        return _with_models(
            self.query_layers.describe(), getattr(provider, "client", None), check
        )

    def _rerank(self, query: str, snippets: list[dict[str, Any]]) -> tuple[list, dict]:
        judge = self.reranker.judge
        client = getattr(judge, "client", None)
        failures = getattr(client, "failures", 0)
        started = time.perf_counter()
        items = [
            _SnippetItem(s, _SnippetChunk(str(s["text"]), str(s.get("sensitivity", ""))))
            for s in snippets
        ]
        ranked = listwise_rerank(query, items, judge, top_n=len(items))
        report: dict[str, Any] = {"spec": self.reranker.spec, "applied": True, "error": None}
        if client is not None and client.failures != failures:
            report["applied"] = False
            report["error"] = str(client.last_error)
        report["ms"] = round((time.perf_counter() - started) * 1000, 3)
        return [item.snippet for item in ranked], report

    # -- the semantic channel ---------------------------------------------------------------

    def _resolve_mode(self, mode: str | None) -> str:
        if mode is None:
            return "hybrid" if self._hybrid is not None else "bm25"
        if mode not in SEARCH_MODES:
            raise ValueError(
                f"unknown search mode {mode!r}; valid modes: {', '.join(SEARCH_MODES)}"
            )
        if mode == "hybrid" and self._hybrid is None:
            raise ValueError(
                "search mode 'hybrid' needs a bundle built with vectors ('ragspine-lite "
                "build-site DOCS --embeddings minilm') and its embedding model loaded"
            )
        return mode

    def embedding_plan(self, query: str, mode: str | None = None) -> dict[str, Any]:
        """What a search for ``query`` will embed and is not cached yet (the no-JSPI path).

        → the backend's ``plan`` (``{"texts", "ids", "mask", "batch", "seq"}``, one batch;
        ask again after priming it); no texts when the search will not embed (BM25 mode, a
        blank query, or a query outside the vocabulary).
        """
        empty: dict[str, Any] = {"texts": [], "ids": [], "mask": [], "batch": 0, "seq": 0}
        if not isinstance(query, str) or not query.strip() or self._hybrid is None:
            return empty
        if self._resolve_mode(mode) != "hybrid":
            return empty
        queries = self._hybrid.index.dense_queries(query)
        return self.embedding_backend.plan(queries) if queries else empty

    def _backend_for(self, texts: Sequence[str]) -> Any:
        """The loaded backend, after checking ``texts`` is a list of strings."""
        if self.embedding_backend is None:
            raise ValueError("no embedding model is loaded (the bundle has no vectors)")
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise ValueError(f"texts must be a list of strings, got {texts!r:.80}")
        return self.embedding_backend

    def embedding_plan_for(self, texts: Sequence[str]) -> dict[str, Any]:
        """:meth:`embedding_plan` for explicit texts (what :meth:`embed` will need)."""
        return self._backend_for(texts).plan(list(texts))

    def document_embedding_plan(self, name: str, text: str) -> dict[str, Any]:
        """:meth:`embedding_plan` for what :meth:`ingest` of this document will embed (chunks
        without a vector yet; none without a model or for a RESTRICTED document)."""
        empty: dict[str, Any] = {"texts": [], "ids": [], "mask": [], "batch": 0, "seq": 0}
        if self._page_hybrid is None or self._page_backend is None:
            return empty
        body, meta = document_from_text(text, name=name)
        todo = self._page_backend.missing(self._page_hybrid.index.texts_to_embed(body, meta))
        return self.embedding_backend.plan(todo) if todo else empty

    def prime_embeddings(self, texts: Sequence[str] | str, output: Any) -> int:
        """Hand the model output for :meth:`embedding_plan`'s texts to the backend."""
        if self.embedding_backend is None:
            raise ValueError("this searcher has no embedding backend to prime")
        if isinstance(texts, str):
            texts = json.loads(texts)
        return int(self.embedding_backend.prime(list(texts), output))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for ``texts`` from the loaded backend (for checks and tools)."""
        return [list(v) for v in self._backend_for(texts).embed_texts(list(texts))]

    # -- search ---------------------------------------------------------------------------

    def _document(self, snippet: Mapping[str, Any]) -> tuple[str | None, Sequence[Any]]:
        """``(url, sections)`` of a hit's document (``None``: no page to link to)."""
        doc_id = str(snippet.get("doc_id"))
        if snippet.get("library_id") == PAGE_LIBRARY:
            return None, self._page_sections.get(doc_id, ())
        if self.sharded is not None:
            url, sections = self.sharded.document(doc_id) or ("", [])
            return url or None, sections
        return self._urls.get(doc_id), self._sections.get(doc_id, ())

    def _section_of(
        self, snippet: Mapping[str, Any], query: str = ""
    ) -> tuple[dict[str, Any] | None, int]:
        """``(section, line)``: the heading section of the hit and the index of its first
        non-blank line of the chunk text in it. With a ``query``, the section of the chunk
        with the most matches (the first on ties); else the one the chunk starts in."""
        rows = self._document(snippet)[1]
        match = _LOCATOR_PARA_RE.search(str(snippet.get("source_locator", "")))
        if match is None:
            return None, 0
        first = int(match.group(1))
        lines = [line for line in str(snippet.get("text", "")).split("\n") if line.strip()]
        last = first + max(len(lines), 1) - 1
        # (start, end, section) spans inside the chunk; text before the first heading: None.
        spans: list[tuple[int, int, dict[str, Any] | None]] = []
        lead_end = min([r[0] for r in rows] + [last + 1]) - 1
        if first <= lead_end:
            spans.append((first, lead_end, None))
        for start, end, heading, anchor, level in rows:
            if start <= last and end >= first:
                section = {"heading": heading, "anchor": anchor, "level": level}
                spans.append((max(start, first), min(end, last), section))
        if not spans:
            return None, 0
        best = spans[0]
        if query:
            counts = [len(_match_spans(query, line)) for line in lines]
            scores = [sum(counts[a - first : b - first + 1]) for a, b, _ in spans]
            best = spans[scores.index(max(scores))]
        return best[2], best[0] - first

    def _hit(self, query: str, snippet: dict[str, Any], highlight: bool) -> dict[str, Any]:
        """A snippet with its section, result URL (page + ``#anchor``; ``None`` when the
        document has no page) and, with ``highlight``, highlight spans and an excerpt."""
        section, line = self._section_of(snippet, query)
        url = self._document(snippet)[0]
        if url is not None and section is not None and section["anchor"]:
            url = f"{url}#{section['anchor']}"
        text = str(snippet["text"])
        hit: dict[str, Any] = {
            "snippet": snippet,
            "section": section,
            "highlights": highlight_spans(query, text) if highlight else [],
            "url": url,
        }
        if highlight:
            hit["excerpt"] = excerpt(with_synonyms(query), text, start_line=line)
        return hit

    def search(
        self,
        query: str,
        *,
        filters: Any = None,
        top_k: int = DEFAULT_SEARCH_TOP_K,
        highlight: bool = True,
        rerank: bool = True,
        mode: str | None = None,
        query_layers: bool = True,
        postprocess: str | Sequence[str] | None = None,
    ) -> SearchOutcome:
        """Fused hits over the bundle and the page documents; a blank query finds nothing.

        ``highlight=False`` leaves every hit's ``highlights`` empty (less work per query);
        ``rerank=False`` skips a configured reranker, ``query_layers=False`` the configured LLM
        query layers (:meth:`configure_llm`), for this search. ``mode`` ``"hybrid"``
        (the default when the bundle has vectors and a backend) or ``"bm25"``; page documents
        are searched the same way (hybrid with the bundle's model). ``postprocess``
        (``"mmr,lost_in_middle"`` or a list of names, see
        :func:`~ragspine_lite.postprocess.make_postprocessor`) runs on the snippets after the
        RESTRICTED exit and the reranker.
        """
        started = time.perf_counter()
        if not isinstance(query, str):
            raise ValueError(f"query must be a string, got {query!r}")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not (
            1 <= top_k <= MAX_SEARCH_TOP_K
        ):
            raise ValueError(f"topK must be an integer from 1 to {MAX_SEARCH_TOP_K}, got {top_k!r}")
        metadata_filter = parse_filters(filters)
        postprocessor = _postprocessor(postprocess)
        hybrid = self._resolve_mode(mode) == "hybrid"
        outcome = SearchOutcome()
        if not query.strip():
            return outcome
        wrappers: list[tuple[str, _FilteredIndex]] = []
        bundle = self._hybrid if hybrid else self._bundle
        if bundle is not None:
            wrappers.append((BUNDLE_LIBRARY, bundle))
        if self._page_docs:
            page = self._page_hybrid if hybrid and self._page_hybrid else self._page
            wrappers.append((PAGE_LIBRARY, page))
        if not wrappers:
            return outcome
        libraries = []
        for library_id, wrapper in wrappers:
            # The bundle holds no RESTRICTED chunk (its export leaves them out and checks it):
            # its filter stays its own. Page documents rank as if RESTRICTED ones were absent.
            page = library_id == PAGE_LIBRARY
            wrapper.metadata_filter = None if page else metadata_filter
            index = OpenOnlyIndex(wrapper, metadata_filter) if page else wrapper
            link = NarrativeIndexRetriever(index, retry_without_filters=False, visible_only=page)
            libraries.append(LibraryIndex(library_id, library_id, link))
        retriever: Any = MultiIndexRetriever(libraries, top_k=top_k)
        layered = retriever
        if query_layers and self.query_layers.provider is not None:
            layered = self.query_layers.wrap(retriever)
        snippets = layered.retrieve(query, top_k=top_k)
        if layered is not retriever:
            outcome.query_layers = _layer_report(layered, retriever)
        if self._hybrid is not None:
            channel = self._hybrid.index.last_channel if hybrid else "bm25"
            if hybrid and self._hybrid.failure:
                channel = "bm25:embedding-failed"
            outcome.semantic = {
                "mode": "hybrid" if hybrid else "bm25",
                "channel": channel,
                "error": self._hybrid.failure if hybrid else None,
            }
        if self.reranker.judge is not None and rerank:
            snippets, outcome.rerank = self._rerank(query, snippets)
        if postprocessor is not None:
            snippets = postprocessor.postprocess(query, snippets)
        outcome.hits = [self._hit(query, s, highlight) for s in snippets]
        outcome.took_ms = round((time.perf_counter() - started) * 1000, 3)
        return outcome

    # -- stats ----------------------------------------------------------------------------

    @staticmethod
    def _store_stats(store: ChunkStore) -> dict[str, Any]:
        rows = store.execute_read(
            "SELECT COUNT(DISTINCT doc_id) AS docs, COUNT(*) AS chunks FROM narrative_chunk "
            f"WHERE active = 1 AND {NOT_RESTRICTED_SQL}"
        )
        return {"documents": int(rows[0]["docs"]), "chunks": int(rows[0]["chunks"])}

    def stats(self) -> dict[str, Any]:
        """Counts per library, the bundle's export facts and facet values for filters."""
        from ragspine_lite import __version__

        facets: dict[str, set[str]] = {name: set() for name in FACET_FIELDS}
        stores = [self.page_store]
        exported = self.bundle_facts.get("facets")
        if isinstance(exported, dict):  # listed at export time: no scan of the bundle
            for name in FACET_FIELDS:
                facets[name].update(str(v) for v in exported.get(name, ()))
        elif self.bundle_store is not None:
            stores.append(self.bundle_store)
        for store in stores:
            for name in FACET_FIELDS:
                for r in store.execute_read(
                    f"SELECT DISTINCT {name} AS v FROM narrative_chunk "
                    f"WHERE active = 1 AND {NOT_RESTRICTED_SQL}"
                ):
                    if r["v"]:
                        facets[name].add(r["v"])
        out: dict[str, Any] = {
            "ragspine_lite": __version__,
            "format_version": BUNDLE_FORMAT_VERSION,
            "bundle": None,
            "page": {
                **self._store_stats(self.page_store),
                "restricted_documents": sum(1 for d in self._page_docs.values() if d["restricted"]),
            },
            "facets": {name: sorted(values) for name, values in facets.items()},
            "reranker": self.reranker.describe(),
            "embeddings": {
                "vectors": self.vector_count,
                "model_id": self.bundle_facts.get("embedding_model_id"),
                "loaded": self._hybrid is not None,
            },
        }
        counted = None
        if self.bundle_store is not None:
            counted = self._store_stats(self.bundle_store)
        elif self.sharded is not None:
            facts = self.bundle_facts
            counted = {"documents": int(facts["documents"]), "chunks": int(facts["chunks"])}
        if counted is not None:  # nothing about what the build withheld: it is not public
            out["bundle"] = counted
        return out

    # -- the worker's door ----------------------------------------------------------------

    def dispatch(self, op: str, payload: str = "{}") -> str:
        """Run ``op`` with JSON arguments and return a JSON result (errors propagate).

        Ops: ``search`` {query, filters?, topK?, highlight?, rerank?, mode?, postprocess?};
        ``ingest`` {name, text, vectors?}; ``page_vectors`` {docId}; ``check`` {name, text};
        ``forget`` {docIds?}; ``documents``; ``stats``; ``files_for`` {query, filters?, topK?,
        mode?}; ``vector_shards``;
        ``configure`` {reranker, url?, token?, timeout?, check?}; ``configure_llm`` {url?,
        token?, timeout?, transform?, decompose?, adaptive?, check?}; ``embed_plan`` {query,
        mode?}, {texts} or {document: {name, text}}; ``embed`` {texts}. ``search`` also takes
        ``queryLayers``.
        """
        args = json.loads(payload) if payload else {}
        if not isinstance(args, dict):
            raise ValueError(f"arguments for {op!r} must be a JSON object, got {payload!r:.80}")
        result: Any
        if op == "search":
            result = self.search(
                args.get("query", ""),
                filters=args.get("filters"),
                top_k=args.get("topK", DEFAULT_SEARCH_TOP_K),
                highlight=bool(args.get("highlight", True)),
                rerank=bool(args.get("rerank", True)),
                mode=args.get("mode"),
                query_layers=bool(args.get("queryLayers", True)),
                postprocess=args.get("postprocess"),
            ).as_dict()
        elif op == "embed_plan":
            if "texts" in args:
                result = self.embedding_plan_for(args["texts"])
            elif "document" in args:
                doc = args["document"] if isinstance(args["document"], dict) else {}
                result = self.document_embedding_plan(doc.get("name", ""), doc.get("text", ""))
            else:
                result = self.embedding_plan(args.get("query", ""), args.get("mode"))
        elif op == "files_for":
            result = {"paths": self.files_for(
                args.get("query", ""), filters=args.get("filters"), top_k=args.get("topK"),
                mode=args.get("mode"),
            )}
        elif op == "vector_shards":
            result = self.vector_shards()
        elif op == "embed":
            result = {"vectors": self.embed(args.get("texts", []))}
        elif op == "configure":
            result = self.configure_reranker(
                args.get("reranker"),
                url=args.get("url"),
                token=args.get("token"),
                timeout=args.get("timeout"),
                check=bool(args.get("check", True)),
            )
        elif op == "configure_llm":
            result = self.configure_llm(
                args.get("url"),
                token=args.get("token"),
                timeout=args.get("timeout"),
                transform=args.get("transform") or "none",
                decompose=args.get("decompose") or "none",
                adaptive=args.get("adaptive") or "none",
                check=bool(args.get("check", True)),
            )
        elif op == "ingest":
            result = self.ingest(args.get("name", ""), args.get("text", ""), args.get("vectors"))
        elif op == "page_vectors":
            result = self.page_vectors(args.get("docId", ""))
        elif op == "check":
            result = self.check_document(args.get("name", ""), args.get("text", ""))
        elif op == "forget":
            ids: Sequence[str] | None = args.get("docIds")
            result = {"removed": self.forget(ids)}
        elif op == "documents":
            result = self.page_documents()
        elif op == "stats":
            result = self.stats()
        else:
            raise ValueError(
                f"unknown operation {op!r}; valid: check, configure, configure_llm, documents, "
                "embed, embed_plan, files_for, forget, ingest, page_vectors, search, stats, "
                "vector_shards"
            )
        return json.dumps(result, ensure_ascii=False)


def _with_models(info: dict[str, Any], client: Any, check: bool) -> dict[str, Any]:
    """``info`` plus the endpoint's ``/v1/models`` (or why asking failed) when ``check``."""
    if check and client is not None:
        from ragspine_lite.remote.errors import RemoteError

        try:
            info["models"] = client.models()
        except RemoteError as exc:
            info["error"] = str(exc)
    return info
