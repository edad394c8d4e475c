"""``ragspine-lite search``: search one or several chunk databases through the link exit.

RESTRICTED chunks are never printed: the search goes through the agent link exit
(``build_narrative_retriever``) and says nothing about what was held back.
"""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path
from typing import Any

from ragspine_lite.cli import optin as optin_cli
from ragspine_lite.cli.common import (
    DEFAULT_CLI_TOP_K,
    EXIT_OK,
    PROG,
    UsageError,
    add_query_layer_options,
    add_retrieval_options,
    edge_settings,
    note,
    one_line,
    out,
    out_json,
    parse_filters,
    pick,
    positive_int,
    resolve_backend,
    shorten,
)
from ragspine_lite.cli.stores import (
    TABLE,
    close_quietly,
    open_existing_store,
    open_vector_store,
    sync_or_fallback,
    writable,
)
from ragspine_lite.common.sensitivity import NOT_RESTRICTED_SQL
from ragspine_lite.common.settings import Settings

_OUTSIDE_VOCABULARY_LABEL = "bm25: query outside the embedding vocabulary"
_SEARCH_EPILOG = (
    "Filters: FIELD=VALUE (equality) or FIELD=OP:VALUE with OP one of eq ne in nin gt gte "
    "lt lte between, e.g. entity=eq:ACME_HK, language=in:en,zh, period=between:2023,2024. "
    "Several --filter options must all match; filters are strict (no fallback to unfiltered "
    "results). RESTRICTED chunks are never shown, nor counted: a query that matches only "
    "RESTRICTED text prints what a query matching nothing prints. The database is only read."
)


def register(sub: Any) -> None:
    """Add the ``search`` subcommand."""
    p = sub.add_parser("search", help="search a chunk database", epilog=_SEARCH_EPILOG)
    p.add_argument("query", metavar="QUERY")
    p.add_argument(
        "--db", required=True, action="append", metavar="FILE",
        help="an existing chunk database; repeat to search several as libraries (fused, or "
        "routed by $RAGSPINE_LIBRARY_ROUTER)",
    )
    p.add_argument(
        "--filter", action="append", default=[], dest="filters", metavar="FIELD=[OP:]VALUE",
        help="metadata filter (repeatable)",
    )
    p.add_argument(
        "--top-k", type=positive_int, default=DEFAULT_CLI_TOP_K, metavar="N",
        help=f"number of results (default {DEFAULT_CLI_TOP_K})",
    )
    p.add_argument("--json", action="store_true", help="print the snippet dicts as JSON")
    p.add_argument(
        "--reranker", metavar="SPEC",
        help="rerank the fused results: none, auto, cross_encoder/ce/ms_marco, colbert/"
        "late_interaction, splade/learned_sparse, remote:<name> (endpoint from "
        "$RAGSPINE_REMOTE_URL); default $RAGSPINE_RERANKER, else none",
    )
    add_retrieval_options(p)
    add_query_layer_options(p)
    optin_cli.add_search_options(p)
    p.set_defaults(handler=_cmd_search)


def _make_reranker(spec: str | None, settings: Settings) -> Any:
    """``--reranker`` (else ``$RAGSPINE_RERANKER``) → a judge or ``None``; a remote spec
    takes its endpoint from ``$RAGSPINE_REMOTE_URL`` / ``$RAGSPINE_REMOTE_TOKEN``."""
    from ragspine_lite.rerank.factory import REMOTE_PREFIX, make_reranker

    spec = pick(spec, settings.reranker, "none")
    kwargs = {}
    if spec.strip().lower().startswith(REMOTE_PREFIX):
        for name, value in (("url", settings.remote_url), ("token", settings.remote_token)):
            if value:
                kwargs[name] = value
    try:
        return make_reranker(spec, **kwargs)
    except ValueError as exc:
        raise UsageError(f"argument --reranker: {exc}") from None


def _query_layers(args: argparse.Namespace) -> Any:
    """The search's LLM query layers (:class:`~ragspine_lite.query.layers.QueryLayers`),
    built and so validated before any database is opened; bad specs are usage errors."""
    from ragspine_lite.common.glossary import DEFAULT_GLOSSARY
    from ragspine_lite.query.layers import QueryLayers
    from ragspine_lite.remote.openai_chat import provider_from_env

    settings = args.settings
    glossary = edge_settings(settings)["glossary"] or DEFAULT_GLOSSARY
    try:
        provider = provider_from_env(settings.as_env(), url=args.llm_url, model=args.llm_model)
        return QueryLayers(
            transform=pick(args.query_transform, settings.query_transform, "none"),
            decompose=pick(args.decompose, settings.query_decompose, "none"),
            adaptive=pick(args.adaptive, settings.adaptive, "none"), provider=provider,
            glossary=glossary,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _search_once(
    db: str, query: str, metadata_filter: Any, top_k: int, backend: Any,
    layers: Any = None, *, settings: Settings, optin: Any = None,
    index_text_fn: Any = None, reranker: Any = None,
) -> tuple[list[dict[str, object]], str]:
    from ragspine_lite.link.narrative_link import (
        NarrativeIndexRetriever,
        OpenOnlyIndex,
        build_narrative_retriever,
    )

    vector_store = None
    if backend is not None:
        vector_store = open_vector_store(db, backend, settings, index_text_fn,
                                         read_only=not writable(db))
    try:
        retriever, store = build_narrative_retriever(
            db, embedding_backend=backend, vector_store=vector_store, index_text_fn=index_text_fn,
            reranker=reranker, read_only=True, **edge_settings(settings),
        )
        index: Any = retriever.index  # the NarrativeIndex build_narrative_retriever made
        index.rerank_top_n = top_k
        try:
            if backend is not None:
                sync_or_fallback(index)
            # ranks as if RESTRICTED chunks were absent; the fixed --filter wins
            wrapped = OpenOnlyIndex(index, metadata_filter)
            link = NarrativeIndexRetriever(
                wrapped, retry_without_filters=False,
                postprocessor=optin.postprocessor if optin else None,
            )
            if optin is not None:
                link = optin.wrap(link, wrapped, store, backend)
            if layers is None:
                snippets = link.retrieve(query, top_k=top_k)
            else:
                snippets = layers.search(link, query, top_k)
        finally:
            store.close()
    finally:
        close_quietly(vector_store)
    label = _channel_label(index.last_channel, backend)
    if reranker is not None:
        label += f", reranked by {type(reranker).__name__}"
    label += (layers.label() if layers else "") + (optin.label() if optin else "")
    return snippets, label


def _channel_label(channel: str | None, backend: Any) -> str:
    """The printed label of the channel a library search reports (``last_channel``)."""
    from ragspine_lite.pipeline.stages import CHANNEL_HYBRID, CHANNEL_OUTSIDE_VOCABULARY

    if channel == CHANNEL_HYBRID:
        return f"hybrid: bm25 + {type(backend).__name__}"
    if channel == CHANNEL_OUTSIDE_VOCABULARY:
        return _OUTSIDE_VOCABULARY_LABEL
    return "bm25"


def run_search(
    db: str, query: str, metadata_filter: Any, top_k: int, backend: Any,
    layers: Any = None, optin: Any = None, reranker: Any = None, *,
    settings: Settings,
) -> tuple[list[dict[str, object]], str]:
    """Search ``db`` through the link exit → (snippets, channel label).

    A failing embedding backend degrades to pure BM25 with a warning on stderr; a query the
    backend's vocabulary mostly does not know (the library gate,
    :func:`~ragspine_lite.vector.embedding_backends.outside_vocabulary`, e.g. Chinese for the
    English MiniLM) is searched with BM25 alone, since a dense lane of ``[UNK]`` vectors
    would only add noise to the fusion. The database's recorded index-text setting is used.
    """
    store = open_existing_store(db)
    try:
        active = store.count()
        index_text_fn = optin_cli.recorded_index_text(store, repr(db), settings)
        extra = {"optin": optin, "index_text_fn": index_text_fn, "reranker": reranker,
                 "settings": settings}
    finally:
        store.close()
    if active == 0:
        raise ValueError(
            f"chunk database {db!r} holds no active chunks; "
            f"ingest documents first with '{PROG} ingest PATH --db {db}'"
        )
    if backend is not None:
        from ragspine_lite.vector.embedding_backends import outside_vocabulary

        try:
            # The library gate (the index would search such a query with BM25 alone too),
            # asked first so that neither the vector table nor any chunk vector is touched.
            if outside_vocabulary(backend, query):
                snippets, channel = _search_once(
                    db, query, metadata_filter, top_k, None, layers, **extra
                )
                label = channel.replace("bm25", _OUTSIDE_VOCABULARY_LABEL, 1)
                return snippets, label
            return _search_once(db, query, metadata_filter, top_k, backend, layers, **extra)
        except (sqlite3.Error, OSError):
            raise
        except Exception as exc:  # a model/backend failure degrades, never crashes
            note(f"warning: embedding backend failed ({one_line(exc)}); using BM25 only")
    return _search_once(db, query, metadata_filter, top_k, None, layers, **extra)


def print_results(
    snippets: list[dict[str, object]], *, indent: str = "", prompt: bool = False
) -> None:
    """Ranked snippets; a RAPTOR summary is shown as a theme, never as a citation."""
    for rank, snip in enumerate(snippets, 1):
        scores: Any = snip["scores"]
        if snip.get("is_synthesis"):
            out(f"{indent}{rank:>2}. theme (level {snip['raptor_level']} summary, not a "
                f"citation)  raptor={scores['raptor']:.4f}")
            out(f"{indent}    sources: {snip['source_locator']}")
            out(f"{indent}    {shorten(str(snip['text']))}")
            continue
        out(f"{indent}{rank:>2}. {snip['title']}  [{snip['doc_id']}]")
        out(f"{indent}    cite: {snip['source_locator']}")
        out(
            f"{indent}    fused={scores['fused']:.6f}  bm25={scores['bm25']:.4f}"
            f"  vector={scores['vector']:.4f}"
        )
        out(f"{indent}    {shorten(str(snip['text']))}")
        if prompt and snip.get("prompt_text", snip["text"]) != snip["text"]:
            out(f"{indent}    prompt: {shorten(str(snip['prompt_text']))}")


def _describe_library(db: str) -> str:
    """A library's description for the router: its documents' titles, topics and entities."""
    store = open_existing_store(db)
    try:
        rows = store.execute_read(
            f"SELECT DISTINCT title, topic, entity FROM {TABLE} WHERE active = 1 "
            f"AND {NOT_RESTRICTED_SQL} ORDER BY title, topic, entity"
        )
    finally:
        store.close()
    return " ".join(dict.fromkeys(v for row in rows for v in row if v))


def _search_libraries(
    dbs: list[str], query: str, top_k: int, search: Any, settings: Settings
) -> tuple[list[dict[str, object]], str]:
    """Several ``--db``: one library each (id = file name), fused by RRF; with
    ``RAGSPINE_LIBRARY_ROUTER`` only the libraries the router picks are searched."""
    from ragspine_lite.routing.multi_index import (
        FunctionRetriever,
        LibraryIndex,
        MultiIndexRetriever,
    )
    from ragspine_lite.routing.router import LIBRARY_ROUTER_ENV, make_library_router

    try:
        router = make_library_router(pick(None, settings.library_router, "none"))
    except ValueError as exc:
        raise UsageError(f"{LIBRARY_ROUTER_ENV}: {exc}") from None
    searched: list[str] = []

    def library(db: str, library_id: str) -> FunctionRetriever:
        def run(query: str, top_k: int) -> list[dict[str, object]]:
            searched.append(library_id)
            return search(db, query, top_k)[0]

        return FunctionRetriever(run)

    libraries: list[LibraryIndex] = []
    seen: set[str] = set()
    for db in dbs:
        name = Path(db).name
        library_id = name if name not in seen else f"{name}#{len(seen)}"
        seen.add(library_id)
        libraries.append(LibraryIndex(library_id, _describe_library(db), library(db, library_id)))
    multi = MultiIndexRetriever(libraries, router=router, top_k=top_k)
    snippets = multi.retrieve(query, top_k=top_k)
    searched = [lib.library_id for lib in libraries if lib.library_id in searched]
    label = f"libraries searched: {', '.join(searched)} of {len(libraries)}"
    if router is not None:
        label += f", routed by {type(router).__name__}"
    return snippets, label


def _cmd_search(args: argparse.Namespace) -> int:
    metadata_filter = parse_filters(args.filters)
    if not args.query.strip():
        raise UsageError("argument QUERY: must not be blank")
    layers = _query_layers(args)
    try:
        optin = optin_cli.LayerOptions(args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _mode, backend = resolve_backend(args.mode, args.embedding, args.settings)
    reranker = _make_reranker(args.reranker, args.settings)

    def search(db: str, query: str, top_k: int) -> tuple[list[dict[str, object]], str]:
        return run_search(db, query, metadata_filter, top_k, backend, layers, optin, reranker,
                          settings=args.settings)

    if len(args.db) == 1:
        snippets, channel = search(args.db[0], args.query, args.top_k)
    else:
        snippets, channel = _search_libraries(args.db, args.query, args.top_k, search,
                                              args.settings)
    failure = getattr(reranker, "last_error", None)
    if failure:
        note(f"warning: reranker failed ({' '.join(failure.split())}); kept the fused order")
    if args.json:
        out_json(snippets)
        for line in optin.notes():
            note(f"note: {line}")
        return EXIT_OK
    out(f"{len(snippets)} result(s) for {args.query!r} ({channel})")
    print_results(snippets, prompt=optin.postprocessor is not None)
    for line in optin.notes():
        out(f"note: {line}")
    return EXIT_OK
