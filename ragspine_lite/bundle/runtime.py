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
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragspine_lite.bundle.dense import DenseScanner
from ragspine_lite.bundle.door import dispatch
from ragspine_lite.bundle.excerpts import excerpt, highlight_spans, section_of, with_synonyms
from ragspine_lite.bundle.layers import QueryLayerSetting, RerankSetting, layer_report, with_models
from ragspine_lite.bundle.manifest import (
    BUNDLE_FORMAT_VERSION,
    BUNDLE_META_TABLE,
    FACET_FIELDS,
    BundleFormatError,
)
from ragspine_lite.bundle.options import (
    DEFAULT_SEARCH_TOP_K,
    FILTER_FIELDS,
    MAX_SEARCH_TOP_K,
    SEARCH_DEFAULTS,
    SEARCH_MODES,
    SearchOutcome,
    check_top_k,
    parse_filters,
    postprocessor_of,
)
from ragspine_lite.bundle.page_backend import PageBackend
from ragspine_lite.bundle.sharded_index import ShardedIndex
from ragspine_lite.bundle.shards import (
    BundleFiles,
    MissingFile,
    ShardedBundle,
    bundle_facts,
    index_text_fn_of,
    page_urls,
    section_rows,
)
from ragspine_lite.chunking.chunk_store import SCHEMA_VERSION, ChunkStore, ChunkStoreError
from ragspine_lite.chunking.sources import document_from_text, load_sections
from ragspine_lite.common.sensitivity import NOT_RESTRICTED_SQL, is_restricted
from ragspine_lite.link.filtered_index import FilteredIndex
from ragspine_lite.link.narrative_link import NarrativeIndexRetriever, OpenOnlyIndex
from ragspine_lite.pipeline.retrievers import GlossaryQueryRewriter, NarrativeIndex
from ragspine_lite.pipeline.stages import index_text
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
def open_read_only_store(db_path: str | Path) -> ChunkStore:
    """Open an existing chunk store so that nothing can write to it (``PRAGMA query_only``).

    Raises ``FileNotFoundError`` when the file is missing (SQLite would create it).
    """
    path = Path(db_path)
    if not path.is_file():
        raise FileNotFoundError(f"bundle chunk store not found at {str(path)!r}")
    return ChunkStore(path, read_only=True)



# ---------------------------------------------------------------- the searcher


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
        self._bundle: FilteredIndex | None = None
        self._hybrid: FilteredIndex | None = None
        self._vector_store: Any = None
        self.embedding_backend: Any = None
        self.index_text_fn: Any = None
        # Per set of libraries: their retriever, built once, and what takes a search's filter.
        self._stacks: dict[tuple[int, ...], tuple[MultiIndexRetriever, list[Any]]] = {}
        if bundle_db is not None:
            self._open_store(bundle_db, embedding_backend)
        elif bundle is not None:
            self._use_sharded(bundle, embedding_backend, scanner)
        self._open_page()
        self._page_docs: dict[str, dict[str, Any]] = {}
        self._page_sections: dict[str, list[tuple[int, int, str, str, int]]] = {}
        self.reranker = RerankSetting()
        self.query_layers = QueryLayerSetting()

    def _narrative(self, store: ChunkStore, **kwargs: Any) -> NarrativeIndex:
        """A search of ``store`` as the bundle's: glossary variants, the bundle's index text."""
        return NarrativeIndex(
            store, query_rewriter=GlossaryQueryRewriter(), index_text_fn=self.index_text_fn,
            **kwargs,
        )

    def _open_store(self, bundle_db: str | Path, backend: Any) -> None:
        """Open the exported chunk store ``bundle_db`` (and its vectors, with ``backend``)."""
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
        self._bundle = FilteredIndex(self._narrative(store))
        if backend is not None:
            self._open_vectors(bundle_db, backend)

    def _use_sharded(self, bundle: ShardedBundle, backend: Any, scanner: Any) -> None:
        """Search the sharded ``bundle`` (hybrid too, with a ``backend`` of its vectors' model)."""
        self.sharded = bundle
        self.bundle_facts = dict(bundle.facts)
        self.index_text_fn = index_text_fn_of(self.bundle_facts, bundle.header_path)
        self._bundle = FilteredIndex(ShardedIndex(bundle, **self._index_options()))
        self._hybrid = None
        self._stacks.clear()  # the retrievers over the old bundle's indexes
        if backend is not None and self._vector_model(backend):
            self._add_hybrid(bundle, backend, scanner)

    def _index_options(self) -> dict[str, Any]:
        return {"query_rewriter": GlossaryQueryRewriter(), "index_text_fn": self.index_text_fn}

    def _add_hybrid(self, bundle: ShardedBundle, backend: Any, scanner: Any) -> None:
        """The sharded ``bundle``'s hybrid index over ``backend`` (its vectors' model)."""
        self.embedding_backend = backend
        hybrid = ShardedIndex(
            bundle, **self._index_options(), embedding_backend=backend, scanner=scanner
        )
        self._hybrid = FilteredIndex(hybrid, fallback=self._bundle.index)  # type: ignore[union-attr]

    def use_embeddings(self, backend: Any, scanner: DenseScanner | None = None) -> bool:
        """Search hybrid from now on, with ``backend`` loaded after the searcher opened (the
        worker answers with BM25 while the model downloads) → whether the bundle has vectors
        (``False``: it stays BM25). Searches in ``"bm25"`` mode are unchanged. Before any
        page document is added (they would stay BM25-only), once; else ``ValueError``."""
        if self.sharded is None or self._hybrid is not None or self._page_docs:
            raise ValueError("a model joins a sharded bundle once, before any page document")
        if not self._vector_model(backend):
            return False
        self._add_hybrid(self.sharded, backend, scanner)
        self._stacks.clear()
        self.page_store.close()
        self._open_page()  # empty: from now on page documents are embedded too
        return True

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

    def _open_page(self) -> None:
        """The page documents' store; with the bundle's model loaded, embedded with it too."""
        self.page_store = ChunkStore(":memory:")
        self.page_store.init_schema()
        self._page = FilteredIndex(self._narrative(self.page_store))
        self._page_backend: PageBackend | None = None
        self._page_hybrid: FilteredIndex | None = None
        if self._hybrid is not None:
            self._page_backend = PageBackend(self.embedding_backend)
            hybrid = self._narrative(
                self.page_store,
                embedding_backend=self._page_backend,
                vector_store=InProcessVectorStore(),
            )
            self._page_hybrid = FilteredIndex(hybrid, fallback=self._page.index)

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
        """What a scanner outside Python needs: ``{"dim", "scale", "shards", "missing", "rows"}``
        (shards: ``[[start, count, path], …]``), or for coarse lists the header entry's
        ``centroids``, ``probe``, ``candidates``, ``lists``, ``blocks`` (``{}``: no vectors)."""
        vectors = self.sharded.vectors if self.sharded is not None else None
        if not vectors:
            return {}
        keys = ("dim", "scale", "shards", "missing", "centroids", "probe", "candidates",
                "lists", "blocks")
        return {**{k: vectors[k] for k in keys if k in vectors}, "rows": self.sharded.n_docs}  # type: ignore[union-attr]

    def use_scanner(self, scanner: DenseScanner) -> None:
        """Scan the sharded vectors with ``scanner`` from now on (the worker hands over its
        JavaScript scanner once the shards are in; the results stay the same integers)."""
        index = self._hybrid_sharded()
        if index is None or index.dense is None:
            raise ValueError("this searcher has no sharded vectors to scan")
        index.dense.scanner = scanner

    def _hybrid_sharded(self) -> ShardedIndex | None:
        """The hybrid lane's sharded index (``None``: no vectors, or a SQLite bundle)."""
        index = self._hybrid.index if self._hybrid is not None else None
        return index if isinstance(index, ShardedIndex) else None

    def files_for(
        self,
        query: str,
        *,
        filters: Any = None,
        top_k: int | None = None,
        mode: str | None = None,
    ) -> list[str]:
        """The bundle files a search for ``query`` (in ``mode``) would read that are not
        cached yet (none for a SQLite bundle): the postings shards of its terms (and the
        filter file when it filters); once those are provided, with ``top_k``, the text
        fragments of its ``top_k`` BM25 hits, or for a hybrid search whose query vectors are
        primed (:meth:`vectors_for`) of its fused hits (the vector scanner fetches its own
        files). Fetch them ahead, while the visitor types, and hand them to :meth:`provide`;
        asking again until nothing is missing loads all the search reads."""
        if self._bundle is None or not isinstance(self._bundle.index, ShardedIndex):
            return []
        if not isinstance(query, str) or not query.strip():
            return []
        hybrid = self._hybrid_sharded() if self._resolve_mode(mode) == "hybrid" else None
        index = hybrid if hybrid is not None else self._bundle.index
        return index.files_for(query, metadata_filter=parse_filters(filters), top_k=top_k)

    def vectors_for(
        self,
        query: str,
        *,
        filters: Any = None,
        top_k: int | None = None,
        mode: str | None = None,
    ) -> dict[str, list[Any]]:
        """What a hybrid search for ``query`` will hand the vector scanner, once the query's
        vectors are primed (:meth:`embedding_plan`, :meth:`prime_embeddings`): ``{"queries":
        [int8 codes per variant], "rows": [docnos of its best BM25 hits], "missing": []}``,
        empty lists when it will not scan (BM25 mode or channel, a SQLite bundle, vectors not
        primed); ``missing`` names a file its BM25 ranking reads and the cache lacks (provide
        it, then ask again). A scanner that fetches its files (the worker's coarse lists)
        fetches them ahead with it. ``top_k``: the search's (``None``: the default)."""
        empty: dict[str, list[Any]] = {"queries": [], "rows": [], "missing": []}
        index = self._hybrid_sharded()
        blank = not isinstance(query, str) or not query.strip()
        if blank or index is None or self._resolve_mode(mode) != "hybrid":
            return empty
        top_k = check_top_k(SEARCH_DEFAULTS["top_k"] if top_k is None else top_k)
        try:
            codes, rows = index.vectors_for(
                query, metadata_filter=parse_filters(filters), top_k=top_k
            )
        except MissingFile as missing:
            return {**empty, "missing": [missing.path]}
        return {"queries": [list(memoryview(c).cast("b")) for c in codes], "rows": rows,
                "missing": []}

    def index_paths(self) -> list[str]:
        """The sharded bundle's term shards, text fragments, filter file, token-count and
        length files (none for a SQLite bundle): what a cache of this bundle may keep."""
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
        self._hybrid = FilteredIndex(
            self._narrative(
                self.bundle_store, embedding_backend=backend, vector_store=vector_store
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
        self, spec: str | None = None, *, check: bool = True, **endpoint: Any
    ) -> dict[str, Any]:
        """Rerank fused hits with ``spec`` (``"remote:colbert"``, …; ``None``/``"none"``: off);
        ``endpoint``: ``url``, ``token``, ``timeout`` (:meth:`RerankSetting.from_spec`).

        The reranker comes from :func:`~ragspine_lite.rerank.factory.make_reranker`, so a
        remote one sees only the texts of hits the link exit let through (RESTRICTED never
        reaches it) and a failing endpoint leaves the fused order. With ``check`` the
        endpoint's ``/v1/models`` is asked once → ``{"spec", "url", "enabled", "models"?,
        "error"?}``; an unreachable endpoint is reported, not raised. Bad specs or URLs raise
        ``ValueError`` and leave the previous setting in place.
        """
        self.reranker = RerankSetting.from_spec(spec, **endpoint)
        client = getattr(self.reranker.judge, "client", None)
        return with_models(self.reranker.describe(), client, check)

    def configure_llm(
        self, url: str | None = None, *, check: bool = True, **specs: Any
    ) -> dict[str, Any]:
        """Run the LLM query layers (``ragspine_lite.query``) on every later search, with the
        remote endpoint's ``/v1/chat`` as the LLM; ``specs``: ``token``, ``timeout``,
        ``transform``, ``decompose``, ``adaptive`` and ``provider`` (it overrides the
        endpoint, e.g. in tests), as :meth:`QueryLayerSetting.from_specs` takes them.

        The LLM sees only the query; a failing endpoint gives the plain search. No URL and no
        provider → off. With ``check`` the endpoint's ``/v1/models`` is asked once →
        ``{"transform", "decompose", "adaptive", "url", "enabled", "models"?, "error"?}``. Bad
        specs or URLs raise ``ValueError`` and leave the previous setting in place.
        """
        self.query_layers = QueryLayerSetting.from_specs(url, **specs)
        provider = self.query_layers.provider
        return with_models(self.query_layers.describe(), getattr(provider, "client", None), check)

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
        """:func:`~ragspine_lite.bundle.excerpts.section_of` in the hit's document."""
        return section_of(self._document(snippet)[1], snippet, query)

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
        filters: Any = SEARCH_DEFAULTS["filters"],
        top_k: int = SEARCH_DEFAULTS["top_k"],
        highlight: bool = SEARCH_DEFAULTS["highlight"],
        rerank: bool = SEARCH_DEFAULTS["rerank"],
        mode: str | None = SEARCH_DEFAULTS["mode"],
        query_layers: bool = SEARCH_DEFAULTS["query_layers"],
        postprocess: str | Sequence[str] | None = SEARCH_DEFAULTS["postprocess"],
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
        check_top_k(top_k)
        metadata_filter = parse_filters(filters)
        postprocessor = postprocessor_of(postprocess)
        hybrid = self._resolve_mode(mode) == "hybrid"
        outcome = SearchOutcome()
        if not query.strip():
            return outcome
        wrappers = self._libraries(hybrid)
        if not wrappers:
            return outcome
        retriever, holders = self._retriever(wrappers)
        for holder in holders:
            holder.metadata_filter = metadata_filter
        retriever.top_k = top_k
        layered: Any = retriever
        if query_layers and self.query_layers.provider is not None:
            layered = self.query_layers.wrap(retriever)
        snippets = layered.retrieve(query, top_k=top_k)
        if layered is not retriever:
            outcome.query_layers = layer_report(layered, retriever)
        outcome.semantic = self._semantic_report(hybrid)
        if self.reranker.judge is not None and rerank:
            snippets, outcome.rerank = self.reranker.rerank(query, snippets)
        if postprocessor is not None:
            snippets = postprocessor.postprocess(query, snippets)
        outcome.hits = [self._hit(query, s, highlight) for s in snippets]
        outcome.took_ms = round((time.perf_counter() - started) * 1000, 3)
        return outcome

    def _semantic_report(self, hybrid: bool) -> dict[str, Any] | None:
        """``{"mode", "channel", "error"}`` of the last search (``None``: no vectors)."""
        if self._hybrid is None:
            return None
        channel = self._hybrid.index.last_channel if hybrid else "bm25"
        if hybrid and self._hybrid.failure:
            channel = "bm25:embedding-failed"
        return {
            "mode": "hybrid" if hybrid else "bm25",
            "channel": channel,
            "error": self._hybrid.failure if hybrid else None,
        }

    def _libraries(self, hybrid: bool) -> list[tuple[str, FilteredIndex]]:
        """The libraries a search reads: the bundle, and the page documents when there are."""
        wrappers: list[tuple[str, FilteredIndex]] = []
        bundle = self._hybrid if hybrid else self._bundle
        if bundle is not None:
            wrappers.append((BUNDLE_LIBRARY, bundle))
        if self._page_docs:
            page = self._page_hybrid if hybrid and self._page_hybrid else self._page
            wrappers.append((PAGE_LIBRARY, page))
        return wrappers

    def _retriever(
        self, wrappers: list[tuple[str, FilteredIndex]]
    ) -> tuple[MultiIndexRetriever, list[Any]]:
        """The retriever over these libraries, built once, and what takes a search's filter.

        The bundle holds no RESTRICTED chunk (its export leaves them out and checks it): its
        filter stays its own. Page documents rank as if RESTRICTED ones were absent
        (:class:`~ragspine_lite.link.narrative_link.OpenOnlyIndex`).
        """
        key = tuple(id(w) for _, w in wrappers)
        cached = self._stacks.get(key)
        if cached is None:
            libraries, holders = [], []
            for library_id, wrapper in wrappers:
                page = library_id == PAGE_LIBRARY
                wrapper.metadata_filter = None
                index: Any = OpenOnlyIndex(wrapper) if page else wrapper
                holders.append(index)
                link = NarrativeIndexRetriever(
                    index, retry_without_filters=False, visible_only=page
                )
                libraries.append(LibraryIndex(library_id, library_id, link))
            cached = self._stacks[key] = (MultiIndexRetriever(libraries), holders)
        return cached

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
        """Run ``op`` with JSON arguments and return a JSON result (errors propagate); the
        operations are :data:`~ragspine_lite.bundle.door.OPERATIONS`."""
        return dispatch(self, op, payload)
