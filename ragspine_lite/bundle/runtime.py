"""The search side of a static bundle: what the browser worker runs inside Pyodide.

:class:`BundleSearcher` opens the bundle's chunk store without writing to it and keeps a
second, in-memory store for documents the visitor adds in the page. A search goes through the
agent link exit (RESTRICTED dropped before any snippet is built) for each library and fuses
them with :class:`~ragspine_lite.routing.multi_index.MultiIndexRetriever`, so every result is
the Python snippet dict plus ``library_id`` (``"bundle"`` or ``"page"``). Each hit also
carries the heading section it falls in and highlight spans for the query terms.

:meth:`BundleSearcher.dispatch` is the JSON-in/JSON-out door the worker calls.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragspine_lite.bundle.manifest import (
    BUNDLE_FORMAT_VERSION,
    BUNDLE_META_TABLE,
    FACET_FIELDS,
    SECTION_TABLE,
    BundleFormatError,
    check_format_version,
)
from ragspine_lite.chunking.chunk_store import SCHEMA_VERSION, ChunkStore, ChunkStoreError
from ragspine_lite.chunking.sources import document_from_text, load_sections
from ragspine_lite.common.sensitivity import is_restricted
from ragspine_lite.filtering.metadata_filter import (
    FilterCondition,
    MetadataFilter,
    parse_filter_expression,
)
from ragspine_lite.lexical.retrieval import GlossaryQueryRewriter, NarrativeIndex
from ragspine_lite.link.narrative_link import NarrativeIndexRetriever
from ragspine_lite.rerank.listwise_rerank import listwise_rerank
from ragspine_lite.routing.multi_index import LibraryIndex, MultiIndexRetriever

__all__ = [
    "BUNDLE_LIBRARY",
    "DEFAULT_SEARCH_TOP_K",
    "FACET_FIELDS",
    "FILTER_FIELDS",
    "MAX_SEARCH_TOP_K",
    "PAGE_LIBRARY",
    "BundleSearcher",
    "RerankSetting",
    "SearchOutcome",
    "highlight_spans",
    "open_read_only_store",
    "parse_filters",
]

BUNDLE_LIBRARY = "bundle"
PAGE_LIBRARY = "page"
DEFAULT_SEARCH_TOP_K = 10
MAX_SEARCH_TOP_K = 200
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
    store = ChunkStore(path)
    try:
        # ChunkStore has no read-only mode; this connection-level switch refuses every write.
        store._connection().execute("PRAGMA query_only = ON")
    except Exception:
        store.close()
        raise
    return store


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
    offsets = _utf16_offsets(text)
    if offsets is not None:
        merged = [[offsets[s], offsets[e]] for s, e in merged]
    return merged


# ---------------------------------------------------------------- the searcher


class _FilteredIndex:
    """An index wrapper that applies one metadata filter and counts RESTRICTED results.

    Only the count leaves this object; the link exit drops the results themselves.
    """

    def __init__(self, index: NarrativeIndex) -> None:
        self.index = index
        self.metadata_filter: MetadataFilter | None = None
        self.held_back = 0

    def retrieve(self, query: str, **kwargs: Any) -> list[Any]:
        if self.metadata_filter is not None:
            kwargs["metadata_filter"] = self.metadata_filter
        results = self.index.retrieve(query, **kwargs)
        self.held_back = sum(1 for r in results if is_restricted(r.chunk.sensitivity))
        return results


@dataclass
class SearchOutcome:
    """Hits (``{"snippet", "section", "highlights"}``), the held-back count and timing.

    ``rerank`` is ``None`` unless a reranker is configured; then it says whether the
    reranker's order was applied (``applied``), its ``spec`` and the ``error`` that made the
    search keep the fused order.
    """

    hits: list[dict[str, Any]] = field(default_factory=list)
    held_back: int = 0
    took_ms: float = 0.0
    rerank: dict[str, Any] | None = None

    @property
    def snippets(self) -> list[dict[str, object]]:
        return [hit["snippet"] for hit in self.hits]

    def as_dict(self) -> dict[str, Any]:
        out = {"hits": self.hits, "held_back": self.held_back, "took_ms": self.took_ms}
        if self.rerank is not None:  # absent when off: the default output is unchanged
            out["rerank"] = self.rerank
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


def _section_rows(store: ChunkStore) -> dict[str, list[tuple[int, int, str, str, int]]]:
    try:
        rows = store.execute_read(
            f"SELECT doc_id, para_start, para_end, level, heading, anchor FROM {SECTION_TABLE} "
            "ORDER BY doc_id, para_start"
        )
    except ChunkStoreError:
        return {}
    out: dict[str, list[tuple[int, int, str, str, int]]] = {}
    for r in rows:
        out.setdefault(r["doc_id"], []).append(
            (int(r["para_start"]), int(r["para_end"]), r["heading"], r["anchor"], int(r["level"]))
        )
    return out


class BundleSearcher:
    """Search a bundle's chunk store (read-only) plus documents added in the page.

    ``bundle_db`` ``None`` → page documents only. Raises :class:`BundleFormatError` when the
    store was not exported as a bundle of this format, or has a newer chunk-store schema.
    """

    def __init__(self, bundle_db: str | Path | None = None) -> None:
        self.bundle_store: ChunkStore | None = None
        self.bundle_facts: dict[str, Any] = {}
        self._sections: dict[str, list[tuple[int, int, str, str, int]]] = {}
        self._bundle: _FilteredIndex | None = None
        if bundle_db is not None:
            store = open_read_only_store(bundle_db)
            try:
                self.bundle_facts = self._check_bundle(store, str(bundle_db))
                self._sections = _section_rows(store)
            except Exception:
                store.close()
                raise
            self.bundle_store = store
            self._bundle = _FilteredIndex(
                NarrativeIndex(store, query_rewriter=GlossaryQueryRewriter())
            )
        self.page_store = ChunkStore(":memory:")
        self.page_store.init_schema()
        self._page = _FilteredIndex(
            NarrativeIndex(self.page_store, query_rewriter=GlossaryQueryRewriter())
        )
        self._page_docs: dict[str, dict[str, Any]] = {}
        self._page_sections: dict[str, list[tuple[int, int, str, str, int]]] = {}
        self.reranker = RerankSetting()

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
                "'python build_wasm.py build DOCS_DIR --out DIR'"
            ) from None
        facts: dict[str, Any] = {}
        for r in rows:
            value = r["value"]
            try:
                facts[r["key"]] = json.loads(value)
            except ValueError:
                facts[r["key"]] = value
        facts["format_version"] = check_format_version(facts.get("format_version"))
        return facts

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Close both stores; calling it again does nothing."""
        if self.bundle_store is not None:
            self.bundle_store.close()
        self.page_store.close()

    def __enter__(self) -> BundleSearcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- page documents -------------------------------------------------------------------

    def ingest(self, name: str, text: str) -> dict[str, Any]:
        """Add (or replace) one page document given as a file name and its text.

        Same format rules as the CLI (front matter, ``.md``/``.txt``/``.html``); ``doc_id``
        defaults to ``name``. RESTRICTED documents are indexed but never returned.
        """
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"document name must be a non-empty string, got {name!r}")
        body, meta = document_from_text(text, name=name)
        chunks = self._page.index.ingest(body, meta)
        self._page_sections[meta.doc_id] = [
            (s.para_start, s.para_end, s.heading, s.anchor, s.level)
            for s in load_sections(name, text=text)
        ]
        info = {
            "doc_id": meta.doc_id,
            "name": name,
            "title": meta.title,
            "chunks": chunks,
            "language": meta.language,
            "restricted": is_restricted(meta.sensitivity),
        }
        if chunks:
            self._page_docs[meta.doc_id] = info
        else:
            self._page_docs.pop(meta.doc_id, None)
        return info

    def check_document(self, name: str, text: str) -> dict[str, Any]:
        """Validate a page document without indexing it → ``{"doc_id", "title", ...}``."""
        body, meta = document_from_text(text, name=name)
        return {"doc_id": meta.doc_id, "name": name, "title": meta.title, "chars": len(body)}

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
        info = self.reranker.describe()
        client = getattr(judge, "client", None)
        if check and client is not None:
            from ragspine_lite.remote.errors import RemoteError

            try:
                info["models"] = client.models()
            except RemoteError as exc:
                info["error"] = str(exc)
        return info

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

    # -- search ---------------------------------------------------------------------------

    def _section_of(self, snippet: Mapping[str, Any]) -> dict[str, Any] | None:
        table = self._page_sections if snippet.get("library_id") == PAGE_LIBRARY else (
            self._sections
        )
        rows = table.get(str(snippet.get("doc_id")), ())
        match = _LOCATOR_PARA_RE.search(str(snippet.get("source_locator", "")))
        if not rows or match is None:
            return None
        para = int(match.group(1))
        for start, end, heading, anchor, level in rows:
            if start <= para <= end:
                return {"heading": heading, "anchor": anchor, "level": level}
        return None

    def search(
        self,
        query: str,
        *,
        filters: Any = None,
        top_k: int = DEFAULT_SEARCH_TOP_K,
        highlight: bool = True,
        rerank: bool = True,
    ) -> SearchOutcome:
        """Fused hits over the bundle and the page documents; a blank query finds nothing.

        ``highlight=False`` leaves every hit's ``highlights`` empty (less work per query);
        ``rerank=False`` skips a configured reranker for this search.
        """
        started = time.perf_counter()
        if not isinstance(query, str):
            raise ValueError(f"query must be a string, got {query!r}")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not (
            1 <= top_k <= MAX_SEARCH_TOP_K
        ):
            raise ValueError(f"topK must be an integer from 1 to {MAX_SEARCH_TOP_K}, got {top_k!r}")
        metadata_filter = parse_filters(filters)
        outcome = SearchOutcome()
        if not query.strip():
            return outcome
        wrappers: list[tuple[str, _FilteredIndex]] = []
        if self._bundle is not None:
            wrappers.append((BUNDLE_LIBRARY, self._bundle))
        if self._page_docs:
            wrappers.append((PAGE_LIBRARY, self._page))
        if not wrappers:
            return outcome
        libraries = []
        for library_id, wrapper in wrappers:
            wrapper.metadata_filter = metadata_filter
            wrapper.held_back = 0
            libraries.append(
                LibraryIndex(
                    library_id,
                    library_id,
                    NarrativeIndexRetriever(wrapper, retry_without_filters=False),
                )
            )
        snippets = MultiIndexRetriever(libraries, top_k=top_k).retrieve(query, top_k=top_k)
        outcome.held_back = sum(w.held_back for _, w in wrappers)
        if self.reranker.judge is not None and rerank:
            snippets, outcome.rerank = self._rerank(query, snippets)
        outcome.hits = [
            {
                "snippet": s,
                "section": self._section_of(s),
                "highlights": highlight_spans(query, str(s["text"])) if highlight else [],
            }
            for s in snippets
        ]
        outcome.took_ms = round((time.perf_counter() - started) * 1000, 3)
        return outcome

    # -- stats ----------------------------------------------------------------------------

    @staticmethod
    def _store_stats(store: ChunkStore) -> dict[str, Any]:
        rows = store.execute_read(
            "SELECT COUNT(DISTINCT doc_id) AS docs, COUNT(*) AS chunks FROM narrative_chunk "
            "WHERE active = 1 AND UPPER(sensitivity) != 'RESTRICTED'"
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
                    "WHERE active = 1 AND UPPER(sensitivity) != 'RESTRICTED'"
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
        }
        if self.bundle_store is not None:
            out["bundle"] = {
                **self._store_stats(self.bundle_store),
                "excluded_restricted_documents": int(
                    self.bundle_facts.get("excluded_restricted_documents", 0)
                ),
            }
        return out

    # -- the worker's door ----------------------------------------------------------------

    def dispatch(self, op: str, payload: str = "{}") -> str:
        """Run ``op`` with JSON arguments and return a JSON result (errors propagate).

        Ops: ``search`` {query, filters?, topK?, highlight?, rerank?}; ``ingest`` {name, text};
        ``check`` {name, text}; ``forget`` {docIds?}; ``documents``; ``stats``; ``configure``
        {reranker, url?, token?, timeout?, check?}.
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
            ).as_dict()
        elif op == "configure":
            result = self.configure_reranker(
                args.get("reranker"),
                url=args.get("url"),
                token=args.get("token"),
                timeout=args.get("timeout"),
                check=bool(args.get("check", True)),
            )
        elif op == "ingest":
            result = self.ingest(args.get("name", ""), args.get("text", ""))
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
                f"unknown operation {op!r}; valid: check, configure, documents, forget, "
                "ingest, search, stats"
            )
        return json.dumps(result, ensure_ascii=False)
