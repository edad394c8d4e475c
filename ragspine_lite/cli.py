"""The ``ragspine-lite`` command: ingest documents, search them, show store stats, run a demo.

    ragspine-lite ingest docs/ --db chunks.db
    ragspine-lite search "Hong Kong revenue 2024" --db chunks.db --filter period=between:2023,2024
    ragspine-lite stats --db chunks.db
    ragspine-lite demo

Environment variables are read here, at the edge, and nowhere in the library classes:
``RAGSPINE_RETRIEVAL_MODE`` (``--mode``), ``RAGSPINE_EMBEDDING_BACKEND`` then
``RAGSPINE_EMBEDDING`` (``--embedding``; default ``auto``: the ONNX model when the
``[embed-onnx]`` extra is installed, else pure BM25), ``RAGSPINE_CHUNKER`` (``--chunker``);
for ``search``'s LLM query layers ``RAGSPINE_QUERY_TRANSFORM`` (``--query-transform``),
``RAGSPINE_QUERY_DECOMPOSE`` (``--decompose``), ``RAGSPINE_ADAPTIVE`` (``--adaptive``),
``RAGSPINE_LLM_URL`` / ``RAGSPINE_LLM_MODEL`` (``--llm-url`` / ``--llm-model``),
``RAGSPINE_LLM_API_KEY``, ``RAGSPINE_LLM_TIMEOUT``; ``RAGSPINE_RERANKER`` (``--reranker``),
``RAGSPINE_PERSISTENCE_POLICY``, ``RAGSPINE_COMPANY_CONFIG`` (glossary of the rewriter, the
filter extractor and the query layers), ``RAGSPINE_FILTER_EXTRACTOR``,
``RAGSPINE_VECTOR_STORE`` (with ``RAGSPINE_PG_URL``) and ``RAGSPINE_LIBRARY_ROUTER`` (several
``--db``): README's table.

Hybrid mode keeps chunk vectors in the chunk database itself (table ``ragspine_vector``, one
set per embedding model; RESTRICTED chunks are never persisted): ``ingest`` embeds the new
chunks, and ``search`` embeds only the query (plus any chunk whose vector is missing or out
of date).

``search`` and ``stats`` only read: they open the chunk store read-only (a read-only file or
directory is fine) and never write to it. Hybrid ``search`` stores missing chunk vectors only
when the file can be written.

Exit codes: 0 success, 1 runtime error (missing or unreadable files, bad front matter or
sensitivity labels, database errors), 2 usage error (bad options, filters, specs). Errors are
one line on stderr prefixed ``ragspine-lite: error:``. RESTRICTED chunks are never printed:
search goes through the agent link exit (``build_narrative_retriever``), and its output says
nothing about what was held back, so a query matching only RESTRICTED text prints exactly
what a query matching nothing prints. Control characters from documents (terminal escape
sequences, bidi overrides) are printed escaped, never raw.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sqlite3
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragspine_lite.chunking.chunk_store import ChunkStore, StoredChunk
from ragspine_lite.chunking.chunking import DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS
from ragspine_lite.chunking.sources import (
    SUPPORTED_EXTENSIONS,
    discover_documents,
    load_document,
)
from ragspine_lite.common.errors import RagspineError
from ragspine_lite.common.sensitivity import (
    NOT_RESTRICTED_SQL,
    effective_sensitivity,
    is_restricted,
    parse_sensitivity,
)

__all__ = ["DEFAULT_CLI_TOP_K", "PROG", "build_parser", "main", "samples_dir"]

PROG = "ragspine-lite"
DEFAULT_CLI_TOP_K = 10
EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2

_EMBEDDING_ENVS = ("RAGSPINE_EMBEDDING_BACKEND", "RAGSPINE_EMBEDDING")
_DEFAULT_EMBEDDING = "auto"
_PROGRESS_THRESHOLD = 5  # show per-file progress on stderr above this many files
_TEXT_PREVIEW_CHARS = 240
_TABLE = "narrative_chunk"
_OUTSIDE_VOCABULARY_LABEL = "bm25: query outside the embedding vocabulary"

# (query, filter expressions): fixed demo searches. The third matches only a RESTRICTED
# sample document and the fourth matches one among others: the link exit drops them.
_DEMO_QUERIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Hong Kong revenue growth in 2024", ()),
    ("why did operating profit fall", ("entity=eq:ACME_CN",)),
    ("Macau broker acquisition", ()),
    ("中国内地营运利润", ()),
    ("香港银保渠道营收增长", ("language=zh",)),
)
_DEMO_TOP_K = 3


class _UsageError(Exception):
    """A malformed command line (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors become one-line ``_UsageError``s instead of exiting."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise _UsageError(message)


def _optin() -> Any:
    """The opt-in layers' command-line wiring (imported when a command needs it)."""
    from ragspine_lite import _cli_optin

    return _cli_optin


def samples_dir() -> Path:
    """The bundled sample corpus (package data next to this module)."""
    return Path(__file__).resolve().parent / "samples"


# ---------------------------------------------------------------- argument types


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a non-negative integer, got {text!r}"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


# ---------------------------------------------------------------- parser

_INGEST_EPILOG = (
    "Directories are walked recursively for "
    + "/".join(SUPPORTED_EXTENSIONS)
    + " files (hidden entries skipped, sorted). doc_id defaults to the path relative to the "
    "directory given (a file given directly: its name). Metadata precedence: a document's "
    "front matter wins over these options, which are defaults for documents that do not "
    "set the field. Re-ingesting a doc_id makes a new version; older ones stay inactive."
)

_SEARCH_EPILOG = (
    "Filters: FIELD=VALUE (equality) or FIELD=OP:VALUE with OP one of eq ne in nin gt gte "
    "lt lte between, e.g. entity=eq:ACME_HK, language=in:en,zh, period=between:2023,2024. "
    "Several --filter options must all match; filters are strict (no fallback to unfiltered "
    "results). RESTRICTED chunks are never shown, nor counted: a query that matches only "
    "RESTRICTED text prints what a query matching nothing prints. The database is only read."
)


def _add_retrieval_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mode",
        metavar="MODE",
        help="retrieval mode: auto/hybrid (BM25 + dense when a backend is available) or "
        "economy/bm25 (pure BM25, no embeddings); default $RAGSPINE_RETRIEVAL_MODE or auto",
    )
    p.add_argument(
        "--embedding",
        metavar="SPEC",
        help="embedding backend for hybrid mode (none, auto, deterministic, onnx, ...); "
        "default $RAGSPINE_EMBEDDING_BACKEND, then $RAGSPINE_EMBEDDING, then auto",
    )


def _add_query_layer_options(p: argparse.ArgumentParser) -> None:
    for flag, env, choices in (
        ("--query-transform", "RAGSPINE_QUERY_TRANSFORM", "none, hyde, rag_fusion, step_back"),
        ("--decompose", "RAGSPINE_QUERY_DECOMPOSE", "none, llm"),
        ("--adaptive", "RAGSPINE_ADAPTIVE", "none, heuristic, llm (decompose multi-part only)"),
    ):
        p.add_argument(flag, metavar="SPEC", help=f"{choices}; default ${env} or none")
    p.add_argument("--llm-url", metavar="URL",
                   help="OpenAI-compatible chat server (.../v1) for the query layers; "
                   "default $RAGSPINE_LLM_URL")
    p.add_argument("--llm-model", metavar="NAME", help="its model; default $RAGSPINE_LLM_MODEL")


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser for all subcommands (errors raise instead of exiting)."""
    parser = _Parser(
        prog=PROG,
        description="Citation-honest hybrid retrieval over a versioned SQLite chunk store.",
        epilog="Exit codes: 0 ok, 1 runtime error, 2 usage error.",
    )
    from ragspine_lite import __version__

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "ingest", help="chunk documents into a chunk database", epilog=_INGEST_EPILOG
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="a .md/.txt file or a directory")
    p.add_argument("--db", required=True, metavar="FILE", help="chunk database (created if absent)")
    p.add_argument(
        "--sensitivity", default="INTERNAL",
        help="default sensitivity: PUBLIC, INTERNAL (default), CONFIDENTIAL or RESTRICTED",
    )
    for name in ("topic", "entity", "geography", "period", "language"):
        p.add_argument(f"--{name}", default="", metavar="VALUE", help=f"default {name}")
    p.add_argument(
        "--max-chars", type=_positive_int, default=DEFAULT_CHUNK_CHARS, metavar="N",
        help=f"chunk size budget in characters (default {DEFAULT_CHUNK_CHARS})",
    )
    p.add_argument(
        "--overlap-chars", type=_non_negative_int, default=DEFAULT_OVERLAP_CHARS, metavar="N",
        help=f"paragraph overlap budget, < --max-chars (default {DEFAULT_OVERLAP_CHARS})",
    )
    p.add_argument(
        "--chunker", metavar="NAME",
        help="chunking strategy (default $RAGSPINE_CHUNKER, else the paragraph chunker)",
    )
    _add_retrieval_options(p)
    _optin().add_ingest_options(p)
    p.set_defaults(handler=_cmd_ingest)

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
        "--top-k", type=_positive_int, default=DEFAULT_CLI_TOP_K, metavar="N",
        help=f"number of results (default {DEFAULT_CLI_TOP_K})",
    )
    p.add_argument("--json", action="store_true", help="print the snippet dicts as JSON")
    p.add_argument(
        "--reranker", metavar="SPEC",
        help="rerank the fused results: none, auto, cross_encoder/ce/ms_marco, colbert/"
        "late_interaction, splade/learned_sparse, remote:<name> (endpoint from "
        "$RAGSPINE_REMOTE_URL); default $RAGSPINE_RERANKER, else none",
    )
    _add_retrieval_options(p)
    _add_query_layer_options(p)
    _optin().add_search_options(p)
    p.set_defaults(handler=_cmd_search)

    p = sub.add_parser(
        "stats", help="show what a chunk database holds",
        epilog="documents = documents with active chunks (retired = none active); versions = "
        "distinct (doc_id, version) batches; by-sensitivity/by-language count active chunks "
        "and the documents they belong to.",
    )
    p.add_argument("--db", required=True, metavar="FILE", help="an existing chunk database")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON")
    p.set_defaults(handler=_cmd_stats)

    p = sub.add_parser(
        "demo", help="ingest the bundled sample corpus and run a few searches",
        epilog="Without --db a temporary database is used and removed afterwards.",
    )
    p.add_argument("--db", metavar="FILE", help="keep the demo database here")
    _add_retrieval_options(p)
    p.set_defaults(handler=_cmd_demo)

    # Every argument goes to the site builder's own parser (its options start with '-').
    p = sub.add_parser(
        "build-site", help="build a static browser-search site (DOCS_DIR [--out DIR] ...)",
        add_help=False, prefix_chars="+",
    )
    p.add_argument("args", nargs="*", metavar="ARGS", help="DOCS_DIR [--out DIR] [...]")
    p.set_defaults(handler=_cmd_build_site)

    from ragspine_lite.remote.server.launch import SERVE_REMOTE_EPILOG, add_serve_remote_arguments

    p = sub.add_parser(
        "serve-remote", help="serve the remote endpoint (rerank, embed, visual; [server] extra)",
        epilog=SERVE_REMOTE_EPILOG,
    )
    add_serve_remote_arguments(p)
    p.set_defaults(handler=_cmd_serve_remote)
    from ragspine_lite.graph.cli import add_graph_command

    add_graph_command(sub, out=_out, out_json=_out_json)
    return parser


# ---------------------------------------------------------------- helpers


# C0/C1 controls but newline and tab, DEL, and the bidi embedding/override/isolate controls:
# a document could otherwise drive the terminal (escape sequences) or reorder what is shown.
_UNSAFE_CHARS = frozenset(
    [*map(chr, range(0x20)), *map(chr, range(0x7F, 0xA0)), *map(chr, range(0x202A, 0x202F)),
     *map(chr, range(0x2066, 0x206A))]
) - {"\n", "\t"}


def _escape_controls(text: str, *, json_escape: bool = False) -> str:
    """``text`` with :data:`_UNSAFE_CHARS` written as ``\\xNN``/``\\uNNNN`` (``\\uNNNN`` in
    JSON, where the escape decodes back to the same character)."""

    def esc(ch: str) -> str:
        code = ord(ch)
        return f"\\u{code:04x}" if json_escape or code > 0xFF else f"\\x{code:02x}"

    return "".join(esc(ch) if ch in _UNSAFE_CHARS else ch for ch in text)


def _out(line: str = "") -> None:
    print(_escape_controls(line), file=sys.stdout)


def _out_json(value: object) -> None:
    text = json.dumps(value, ensure_ascii=False, indent=2)
    print(_escape_controls(text, json_escape=True), file=sys.stdout)


def _err(message: str) -> None:
    print(_escape_controls(f"{PROG}: {message}"), file=sys.stderr)


def _note(message: str) -> None:
    _err(message)


def _shorten(text: str, limit: int = _TEXT_PREVIEW_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _open_existing_store(db: str) -> ChunkStore:
    """Open a chunk database that must already exist (never creates one)."""
    path = Path(db)
    if not path.exists():
        raise FileNotFoundError(
            f"chunk database {db!r} does not exist; create it with "
            f"'{PROG} ingest PATH --db {db}'"
        )
    if not path.is_file():
        raise ValueError(f"chunk database {db!r} is not a file")
    conn = sqlite3.connect(str(path))
    try:
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (_TABLE,)
        ).fetchone()
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"{db!r} is not a readable SQLite database ({exc})") from None
    finally:
        conn.close()
    if found is None:
        raise ValueError(f"{db!r} is not a {PROG} chunk database (no {_TABLE!r} table)")
    return ChunkStore(path, read_only=True)


def _writable(db: str) -> bool:
    """Whether SQLite could write ``db`` (the file and, for its journal, its directory)."""
    path = Path(db).resolve()
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _latest_version(store: ChunkStore, doc_id: str) -> int:
    rows = store.execute_read(
        f"SELECT MAX(version) AS v FROM {_TABLE} WHERE doc_id = ?", (doc_id,)
    )
    value = rows[0]["v"] if rows else None
    return int(value) if value is not None else 0


def _parse_filters(expressions: Sequence[str]) -> Any:
    """``--filter`` expressions → a MetadataFilter (AND) or ``None``; bad ones are usage errors."""
    if not expressions:
        return None
    from ragspine_lite.filtering.metadata_filter import MetadataFilter, parse_filter_expression

    valid = [f.name for f in dataclasses.fields(StoredChunk)]
    conditions = []
    for expr in expressions:
        try:
            condition = parse_filter_expression(expr)
        except ValueError as exc:
            raise _UsageError(f"argument --filter: {exc}") from None
        if condition.field not in valid:
            raise _UsageError(
                f"argument --filter: unknown field {condition.field!r} in {expr!r}; "
                f"valid fields: {', '.join(valid)}"
            )
        conditions.append(condition)
    return MetadataFilter(tuple(conditions))


def _resolve_backend(mode_spec: str | None, embedding_spec: str | None) -> tuple[Any, Any]:
    """(mode, embedding backend or None) from options, then env; bad specs are usage errors."""
    from ragspine_lite.mode import make_retrieval_mode, resolve_embedding_backend

    try:
        mode = make_retrieval_mode(mode_spec)
    except ValueError as exc:
        raise _UsageError(f"argument --mode: {exc}") from None
    if not mode.uses_embedding:
        return mode, None
    spec = embedding_spec
    if spec is None:
        spec = next((os.environ[e] for e in _EMBEDDING_ENVS if os.environ.get(e)), None)
    if spec is None:
        spec = _DEFAULT_EMBEDDING
    try:
        backend = resolve_embedding_backend(mode, spec)
    except ValueError as exc:
        raise _UsageError(f"argument --embedding: {exc}") from None
    return mode, backend


def _edge_settings() -> dict[str, Any]:
    """The retriever settings read from the environment here, at the edge (see README):
    ``RAGSPINE_PERSISTENCE_POLICY``, ``RAGSPINE_COMPANY_CONFIG`` (the glossary, also the
    filter extractor's), ``RAGSPINE_FILTER_EXTRACTOR``. A bad value is a usage error naming
    the variable; commands call this first, so nothing is written before it is checked."""
    from ragspine_lite.common.glossary import COMPANY_CONFIG_ENV, load_glossary
    from ragspine_lite.filtering.automatic import FILTER_EXTRACTOR_ENV, make_filter_extractor
    from ragspine_lite.vector.persistence_policy import (
        PERSISTENCE_POLICY_ENV,
        make_persistence_policy,
    )

    settings: dict[str, Any] = {}
    env = PERSISTENCE_POLICY_ENV
    try:
        settings["persistence_policy"] = make_persistence_policy(os.environ.get(env) or None)
        env = COMPANY_CONFIG_ENV
        profile = os.environ.get(env, "").strip()
        settings["glossary"] = load_glossary(profile) if profile else None
        env = FILTER_EXTRACTOR_ENV
        settings["filter_extractor"] = make_filter_extractor(None, glossary=settings["glossary"])
        _vector_store_spec()
    except ValueError as exc:
        raise _UsageError(f"{env}: {exc}") from None
    return settings


def _vector_store_spec() -> str:
    """``RAGSPINE_VECTOR_STORE`` as a store kind
    (:func:`~ragspine_lite.vector.store_env.store_kind`); a bad value is a usage error."""
    from ragspine_lite.vector.store import VECTOR_STORE_ENV
    from ragspine_lite.vector.store_env import store_kind

    try:
        return store_kind()
    except ValueError as exc:
        raise _UsageError(f"{VECTOR_STORE_ENV}: {exc}") from None


def _open_vector_store(
    db: str, backend: Any, index_text_fn: Any = None, *, read_only: bool = False
) -> Any:
    """The persistent vector table of ``db`` for ``backend``'s model (created if absent, or
    opened ``read_only``), or that model's table in the external store
    ``RAGSPINE_VECTOR_STORE`` names; an in-process store when it asks for one, or, with a
    warning, when the store cannot be opened. A non-default index text gets its own vector
    set, so the two never mix."""
    from ragspine_lite.vector.sqlite_store import (
        SqliteVectorStore,
        VectorStoreError,
        embedding_model_id,
    )
    from ragspine_lite.vector.store import InProcessVectorStore

    spec = _vector_store_spec()
    if spec == "in_process":
        return InProcessVectorStore()
    policy = _edge_settings()["persistence_policy"]
    try:
        from ragspine_lite.contextual import index_text_setting

        setting = index_text_setting(index_text_fn)
        model_id = embedding_model_id(backend) + ("" if setting == "none" else f"+{setting}")
        if spec != "sqlite":
            from ragspine_lite.vector.store_env import open_external_store

            return open_external_store(spec, db, model_id)
        return SqliteVectorStore(db, model_id=model_id, persistence_policy=policy,
                                 read_only=read_only)
    except VectorStoreError as exc:
        _note(f"warning: vectors cannot be persisted ({_one_line(exc)}); embedding in memory")
        return InProcessVectorStore()


def _close_quietly(vector_store: Any) -> None:
    close = getattr(vector_store, "close", None)
    if close is not None:
        close()


def _sync_vectors(index: Any, vector_store: Any) -> tuple[int, int]:
    """Bring ``vector_store`` in line with the index's active, persistable chunks →
    (embedded, removed): :func:`~ragspine_lite.vector.chunk_vectors.sync_chunk_vectors`."""
    from ragspine_lite.vector.chunk_vectors import sync_chunk_vectors

    return sync_chunk_vectors(
        index.store.iter_chunks(),
        index.embedding_backend,
        vector_store,
        persistence_policy=index.persistence_policy,
        index_text_fn=index.index_text_fn,
    )


def _sync_or_fallback(index: Any) -> tuple[int, int]:
    """:func:`_sync_vectors` on the index's store; if the database cannot be written (e.g. a
    read-only file), warn and embed into an in-process store instead."""
    from ragspine_lite.vector.sqlite_store import VectorStoreError
    from ragspine_lite.vector.store import InProcessVectorStore

    try:
        return _sync_vectors(index, index.vector_store)
    except VectorStoreError as exc:
        _note(f"warning: vectors cannot be persisted ({_one_line(exc)}); embedding in memory")
        index.vector_store = InProcessVectorStore()
        return _sync_vectors(index, index.vector_store)


def _make_reranker(spec: str | None) -> Any:
    """``--reranker`` (else ``$RAGSPINE_RERANKER``) → a judge or ``None``; a remote spec
    takes its endpoint from ``$RAGSPINE_REMOTE_URL`` / ``$RAGSPINE_REMOTE_TOKEN``."""
    from ragspine_lite.rerank.factory import REMOTE_PREFIX, make_reranker

    kwargs = {}
    if spec is not None and spec.strip().lower().startswith(REMOTE_PREFIX):
        for name, env in (("url", "RAGSPINE_REMOTE_URL"), ("token", "RAGSPINE_REMOTE_TOKEN")):
            if os.environ.get(env):
                kwargs[name] = os.environ[env]
    try:
        return make_reranker(spec, **kwargs)
    except ValueError as exc:
        raise _UsageError(f"argument --reranker: {exc}") from None


class _QueryLayers:
    """The LLM query layers of a search, built (and so validated) once over the link.

    ``label`` names the layers the last search actually applied; a degraded layer (no
    answer, garbage) is not named, so its output is exactly the plain search's.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        from ragspine_lite.common.glossary import DEFAULT_GLOSSARY
        from ragspine_lite.query import apply_query_layers
        from ragspine_lite.remote.openai_chat import provider_from_env

        glossary = _edge_settings()["glossary"] or DEFAULT_GLOSSARY
        self.link: Any = None
        try:
            provider = provider_from_env(os.environ, url=args.llm_url, model=args.llm_model)
            self.top = apply_query_layers(
                self, transform=args.query_transform, decompose=args.decompose,
                adaptive=args.adaptive, provider=provider,
                glossary=glossary,
            )
        except ValueError as exc:
            raise _UsageError(str(exc)) from None

    def retrieve(self, query: str, **kwargs: Any) -> list[dict[str, object]]:
        return self.link.retrieve(query, **kwargs)

    def search(self, link: Any, query: str, top_k: int) -> list[dict[str, object]]:
        self.link = link
        return self.top.retrieve(query, top_k=top_k)

    def label(self) -> str:
        names, layer = [], self.top
        while layer is not self:
            outcome = getattr(layer, "last_outcome", None)
            if outcome is not None and outcome.status == "applied":
                names.insert(0, outcome.transform)
            layer = layer.base
        return "".join(f" + {name}" for name in names)


def _search_once(
    db: str, query: str, metadata_filter: Any, top_k: int, backend: Any,
    layers: _QueryLayers | None = None, *, optin: Any = None, index_text_fn: Any = None,
    reranker: Any = None,
) -> tuple[list[dict[str, object]], str]:
    from ragspine_lite.link.narrative_link import (
        NarrativeIndexRetriever,
        OpenOnlyIndex,
        build_narrative_retriever,
    )

    vector_store = None
    if backend is not None:
        vector_store = _open_vector_store(db, backend, index_text_fn, read_only=not _writable(db))
    try:
        retriever, store = build_narrative_retriever(
            db, embedding_backend=backend, vector_store=vector_store, index_text_fn=index_text_fn,
            reranker=reranker, read_only=True, **_edge_settings(),
        )
        retriever.index.rerank_top_n = top_k
        try:
            if backend is not None:
                _sync_or_fallback(retriever.index)
            # ranks as if RESTRICTED chunks were absent; the fixed --filter wins
            wrapped = OpenOnlyIndex(retriever.index, metadata_filter)
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
        _close_quietly(vector_store)
    label = _channel_label(retriever.index.last_channel, backend)
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


def _run_search(
    db: str, query: str, metadata_filter: Any, top_k: int, backend: Any,
    layers: _QueryLayers | None = None, optin: Any = None, reranker: Any = None,
) -> tuple[list[dict[str, object]], int, str]:
    """Search ``db`` through the link exit → (snippets, held-back count, channel label).

    A failing embedding backend degrades to pure BM25 with a warning on stderr; a query the
    backend's vocabulary mostly does not know (the library gate,
    :func:`~ragspine_lite.vector.embedding_backends.outside_vocabulary`, e.g. Chinese for the
    English MiniLM) is searched with BM25 alone, since a dense lane of ``[UNK]`` vectors
    would only add noise to the fusion. The database's recorded index-text setting is used.
    """
    store = _open_existing_store(db)
    try:
        active = store.count()
        extra = {"optin": optin, "index_text_fn": _optin().recorded_index_text(store, repr(db)),
                 "reranker": reranker}
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
            _note(f"warning: embedding backend failed ({_one_line(exc)}); using BM25 only")
    return _search_once(db, query, metadata_filter, top_k, None, layers, **extra)


def _print_results(
    snippets: list[dict[str, object]], *, indent: str = "", prompt: bool = False
) -> None:
    """Ranked snippets; a RAPTOR summary is shown as a theme, never as a citation."""
    for rank, snip in enumerate(snippets, 1):
        scores: Any = snip["scores"]
        if snip.get("is_synthesis"):
            _out(f"{indent}{rank:>2}. theme (level {snip['raptor_level']} summary, not a "
                 f"citation)  raptor={scores['raptor']:.4f}")
            _out(f"{indent}    sources: {snip['source_locator']}")
            _out(f"{indent}    {_shorten(str(snip['text']))}")
            continue
        _out(f"{indent}{rank:>2}. {snip['title']}  [{snip['doc_id']}]")
        _out(f"{indent}    cite: {snip['source_locator']}")
        _out(
            f"{indent}    fused={scores['fused']:.6f}  bm25={scores['bm25']:.4f}"
            f"  vector={scores['vector']:.4f}"
        )
        _out(f"{indent}    {_shorten(str(snip['text']))}")
        if prompt and snip.get("prompt_text", snip["text"]) != snip["text"]:
            _out(f"{indent}    prompt: {_shorten(str(snip['prompt_text']))}")


# ---------------------------------------------------------------- commands


def _load_all(args: argparse.Namespace) -> list[tuple[Path, str, Any]]:
    """Discover and load every document before anything is written (all-or-nothing)."""
    files = discover_documents(args.paths)
    if not files:
        shown = ", ".join(repr(p) for p in args.paths)
        raise ValueError(
            f"no {'/'.join(SUPPORTED_EXTENSIONS)} documents found in {shown}"
        )
    defaults = {
        "sensitivity": args.sensitivity,
        "topic": args.topic,
        "entity": args.entity,
        "geography": args.geography,
        "period": args.period,
        "language": args.language,
    }
    show_progress = len(files) > _PROGRESS_THRESHOLD
    loaded: list[tuple[Path, str, Any]] = []
    seen: dict[str, Path] = {}
    for i, (path, root) in enumerate(files, 1):
        if show_progress:
            _err(f"[{i}/{len(files)}] reading {path}")
        text, meta = load_document(path, root=root, **defaults)
        if meta.doc_id in seen:
            raise ValueError(
                f"doc_id {meta.doc_id!r} is used by both {str(seen[meta.doc_id])!r} "
                f"and {str(path)!r}"
            )
        seen[meta.doc_id] = path
        loaded.append((path, text, meta))
    return loaded


def _make_chunker(spec: str | None) -> Any:
    from ragspine_lite.chunking.chunker import make_chunker

    try:
        return make_chunker(spec)
    except ValueError as exc:
        raise _UsageError(f"argument --chunker: {exc}") from None


def _ingest_into(
    db: str,
    docs: list[tuple[Path, str, Any]],
    *,
    max_chars: int,
    overlap_chars: int,
    chunker: Any,
    echo: bool,
    index_text_fn: Any = None,
) -> tuple[int, int]:
    """Ingest loaded documents → (documents, chunks written); records the index text."""
    from ragspine_lite.pipeline.retrievers import NarrativeIndex

    store = ChunkStore(db)
    try:
        store.init_schema()
        index = NarrativeIndex(
            store, max_chars=max_chars, overlap_chars=overlap_chars, chunker=chunker,
            index_text_fn=index_text_fn,
        )
        before = _optin().record_index_text(store, index_text_fn)
        if before is not None and store.count():
            _note(f"note: index text changed from {before!r}: the whole database is now "
                  "indexed and embedded with the new setting")
        total = 0
        for _path, text, meta in docs:
            n = index.ingest(text, meta)
            total += n
            if not echo:
                continue
            flag = "  [RESTRICTED]" if is_restricted(meta.sensitivity) else ""
            if n == 0:  # nothing written, so no new version row exists
                _out(f"{meta.doc_id}\tchunks=0\t(empty: retired from the active set){flag}")
            else:
                version = _latest_version(store, meta.doc_id)
                _out(f"{meta.doc_id}\tchunks={n}\tversion={version}{flag}")
        return len(docs), total
    finally:
        store.close()


def _cmd_ingest(args: argparse.Namespace) -> int:
    if args.overlap_chars >= args.max_chars:
        raise _UsageError(
            f"argument --overlap-chars: must be smaller than --max-chars "
            f"({args.overlap_chars!r} >= {args.max_chars!r})"
        )
    try:
        args.sensitivity = parse_sensitivity(args.sensitivity, source="argument --sensitivity")
    except ValueError as exc:
        raise _UsageError(str(exc)) from None
    chunker = _make_chunker(args.chunker)
    try:
        index_text_fn = _optin().ingest_index_text(args.contextual)
    except ValueError as exc:
        raise _UsageError(f"argument --contextual: {exc}") from None
    _mode, backend = _resolve_backend(args.mode, args.embedding)
    _edge_settings()
    docs = _load_all(args)
    n_docs, n_chunks = _ingest_into(
        args.db,
        docs,
        max_chars=args.max_chars,
        overlap_chars=args.overlap_chars,
        chunker=chunker,
        echo=True,
        index_text_fn=index_text_fn,
    )
    _out(f"ingested {n_docs} document(s), {n_chunks} chunk(s) into {args.db}")
    if backend is not None:
        embedded = _embed_db(args.db, backend, index_text_fn)
        if embedded is not None:
            _out(f"embedded {embedded} chunk(s) with {_model_label(backend)}")
    return EXIT_OK


def _model_label(backend: Any) -> str:
    from ragspine_lite.vector.sqlite_store import embedding_model_id

    return embedding_model_id(backend)


def _embed_db(db: str, backend: Any, index_text_fn: Any = None) -> int | None:
    """Persist vectors for ``db``'s active chunks now, so searches embed only the query.

    Returns how many chunks were embedded, or ``None`` (with a warning) when the backend
    fails: the chunks are stored either way and a later search retries.
    """
    from ragspine_lite.link.narrative_link import build_narrative_retriever

    vector_store = _open_vector_store(db, backend, index_text_fn)
    try:
        retriever, store = build_narrative_retriever(
            db, embedding_backend=backend, vector_store=vector_store, index_text_fn=index_text_fn,
            **_edge_settings(),
        )
        try:
            return _sync_or_fallback(retriever.index)[0]
        finally:
            store.close()
    except (sqlite3.Error, OSError):
        raise
    except Exception as exc:  # a model/backend failure must not lose the ingest
        _note(f"warning: embedding backend failed ({_one_line(exc)}); vectors not stored")
        return None
    finally:
        _close_quietly(vector_store)


class _DbLibrary:
    """One chunk database as a library of a multi-database search."""

    def __init__(self, db: str, search: Any) -> None:
        self.db, self.search, self.searched = db, search, False

    def retrieve(self, query: str, *, filters: Any = None, top_k: int = 50) -> list[Any]:
        snippets, _label = self.search(self.db, query, top_k)
        self.searched = True
        return snippets


def _describe_library(db: str) -> str:
    """A library's description for the router: its documents' titles, topics and entities."""
    store = _open_existing_store(db)
    try:
        rows = store.execute_read(
            f"SELECT DISTINCT title, topic, entity FROM {_TABLE} WHERE active = 1 "
            f"AND {NOT_RESTRICTED_SQL} ORDER BY title, topic, entity"
        )
    finally:
        store.close()
    return " ".join(dict.fromkeys(v for row in rows for v in row if v))


def _search_libraries(
    dbs: list[str], query: str, top_k: int, search: Any
) -> tuple[list[dict[str, object]], str]:
    """Several ``--db``: one library each (id = file name), fused by RRF; with
    ``RAGSPINE_LIBRARY_ROUTER`` only the libraries the router picks are searched."""
    from ragspine_lite.routing.multi_index import LibraryIndex, MultiIndexRetriever
    from ragspine_lite.routing.router import LIBRARY_ROUTER_ENV, make_library_router

    try:
        router = make_library_router()
    except ValueError as exc:
        raise _UsageError(f"{LIBRARY_ROUTER_ENV}: {exc}") from None
    libraries, seen = [], set()
    for db in dbs:
        name = Path(db).name
        library_id = name if name not in seen else f"{name}#{len(seen)}"
        seen.add(library_id)
        libraries.append(LibraryIndex(library_id, _describe_library(db), _DbLibrary(db, search)))
    multi = MultiIndexRetriever(libraries, router=router, top_k=top_k)
    snippets = multi.retrieve(query, top_k=top_k)
    searched = [lib.library_id for lib in libraries if lib.retriever.searched]
    label = f"libraries searched: {', '.join(searched)} of {len(libraries)}"
    if router is not None:
        label += f", routed by {type(router).__name__}"
    return snippets, label


def _cmd_search(args: argparse.Namespace) -> int:
    metadata_filter = _parse_filters(args.filters)
    if not args.query.strip():
        raise _UsageError("argument QUERY: must not be blank")
    layers = _QueryLayers(args)
    try:
        optin = _optin().LayerOptions(args)
    except ValueError as exc:
        raise _UsageError(str(exc)) from None
    _mode, backend = _resolve_backend(args.mode, args.embedding)
    reranker = _make_reranker(args.reranker)

    def search(db: str, query: str, top_k: int) -> tuple[list[dict[str, object]], str]:
        return _run_search(db, query, metadata_filter, top_k, backend, layers, optin, reranker)

    if len(args.db) == 1:
        snippets, channel = search(args.db[0], args.query, args.top_k)
    else:
        snippets, channel = _search_libraries(args.db, args.query, args.top_k, search)
    failure = getattr(reranker, "last_error", None)
    if failure:
        _note(f"warning: reranker failed ({' '.join(failure.split())}); kept the fused order")
    if args.json:
        _out_json(snippets)
        for line in optin.notes():
            _note(f"note: {line}")
        return EXIT_OK
    _out(f"{len(snippets)} result(s) for {args.query!r} ({channel})")
    _print_results(snippets, prompt=optin.postprocessor is not None)
    for line in optin.notes():
        _out(f"note: {line}")
    return EXIT_OK


def _collect_stats(store: ChunkStore, db: str) -> dict[str, Any]:
    rows = store.execute_read(
        f"SELECT doc_id, version, active, sensitivity, language, COUNT(*) AS n "
        f"FROM {_TABLE} GROUP BY doc_id, version, active, sensitivity, language"
    )
    all_docs: set[str] = set()
    active_docs: set[str] = set()
    versions: set[tuple[str, int]] = set()
    by_sensitivity: dict[str, dict[str, Any]] = {}
    by_language: dict[str, dict[str, Any]] = {}
    for row in rows:
        doc_id, version = row["doc_id"], int(row["version"])
        all_docs.add(doc_id)
        versions.add((doc_id, version))
        if not row["active"]:
            continue
        active_docs.add(doc_id)
        label = effective_sensitivity(row["sensitivity"])  # unknown labels count as RESTRICTED
        for table, key in ((by_sensitivity, label), (by_language, row["language"])):
            entry = table.setdefault(key, {"documents": set(), "chunks": 0})
            entry["documents"].add(doc_id)
            entry["chunks"] += int(row["n"])

    def finish(table: dict[str, dict[str, Any]]) -> dict[str, dict[str, int]]:
        return {
            key: {"documents": len(v["documents"]), "chunks": v["chunks"]}
            for key, v in sorted(table.items())
        }

    return {
        "db": db,
        "schema_version": store.schema_version(),
        "documents": len(active_docs),
        "retired_documents": len(all_docs - active_docs),
        "active_chunks": store.count(),
        "total_rows": store.count(include_inactive=True),
        "versions": len(versions),
        "max_version": max((v for _, v in versions), default=0),
        "by_sensitivity": finish(by_sensitivity),
        "by_language": finish(by_language),
    }


def _cmd_stats(args: argparse.Namespace) -> int:
    store = _open_existing_store(args.db)
    try:
        stats = _collect_stats(store, args.db)
    finally:
        store.close()
    if args.json:
        _out_json(stats)
        return EXIT_OK
    _out(f"database:          {stats['db']}")
    _out(f"schema version:    {stats['schema_version']}")
    _out(f"documents:         {stats['documents']} active, {stats['retired_documents']} retired")
    _out(f"active chunks:     {stats['active_chunks']}")
    _out(f"total rows:        {stats['total_rows']} (all versions)")
    _out(f"versions:          {stats['versions']} (highest {stats['max_version']})")
    for title, key in (("by sensitivity", "by_sensitivity"), ("by language", "by_language")):
        _out(f"{title}:")
        for label, entry in stats[key].items():
            _out(
                f"  {label or '(unset)':<14} {entry['documents']} document(s), "
                f"{entry['chunks']} chunk(s)"
            )
    return EXIT_OK


def _demo(db: str, backend: Any) -> None:
    root = samples_dir()
    if not root.is_dir():
        raise FileNotFoundError(f"bundled sample corpus not found at {str(root)!r}")
    docs = [
        (path, *load_document(path, root=r)) for path, r in discover_documents([root])
    ]
    n_docs, n_chunks = _ingest_into(
        db,
        docs,
        max_chars=DEFAULT_CHUNK_CHARS,
        overlap_chars=DEFAULT_OVERLAP_CHARS,
        chunker=None,
        echo=False,
    )
    restricted = sum(1 for _p, _t, meta in docs if is_restricted(meta.sensitivity))
    _out(
        f"ingested {n_docs} sample documents ({n_chunks} chunks, {restricted} RESTRICTED) "
        f"into {db}"
    )
    if backend is not None:
        _embed_db(db, backend)
    for query, filters in _DEMO_QUERIES:
        _out("")
        shown = f"  filters: {' '.join(filters)}" if filters else ""
        _out(f"> search {query!r}{shown}")
        snippets, channel = _run_search(db, query, _parse_filters(filters), _DEMO_TOP_K, backend)
        _out(f"  {len(snippets)} result(s) ({channel})")
        _print_results(snippets, indent="  ")
    _out("")
    _out(
        f"The {restricted} RESTRICTED sample documents are in the chunk store, but the "
        "retrieval exit drops them before any result is built: the third search matches only "
        "RESTRICTED text and so shows nothing, just like a search that matches nothing."
    )


def _cmd_demo(args: argparse.Namespace) -> int:
    _mode, backend = _resolve_backend(args.mode, args.embedding)
    _edge_settings()
    if args.db:
        _demo(args.db, backend)
        return EXIT_OK
    with tempfile.TemporaryDirectory(prefix="ragspine-lite-demo-") as tmp:
        _demo(str(Path(tmp) / "demo.db"), backend)
    return EXIT_OK


def _cmd_build_site(args: argparse.Namespace) -> int:
    """``ragspine_lite.bundle.site_cli.build_main`` (the package carries the site runtime)."""
    from ragspine_lite.bundle.site_cli import build_main

    return int(build_main(args.args, prog=f"{PROG} build-site"))


def _cmd_serve_remote(args: argparse.Namespace) -> int:
    from ragspine_lite.remote.server.launch import config_from_args, serve

    try:
        config = config_from_args(args, os.environ)
    except ValueError as exc:  # bad settings or a non-loopback host without a token
        raise _UsageError(str(exc)) from None
    serve(config, workers=args.workers, preload=not args.no_preload, log_level=args.log_level)
    return EXIT_OK


# ---------------------------------------------------------------- entry point


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (never raises for user errors)."""
    parser = build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
        return int(args.handler(args))
    except _UsageError as exc:
        _err(f"error: {exc}")
        return EXIT_USAGE
    except BrokenPipeError:  # e.g. piped into `head`: stop quietly
        _silence_stdout()
        return EXIT_RUNTIME
    except SystemExit as exc:  # --help / --version
        code = exc.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_RUNTIME)
    except (ValueError, OSError, sqlite3.Error, RagspineError, ImportError) as exc:
        _err(f"error: {_one_line(exc)}")
        return EXIT_RUNTIME
    except KeyboardInterrupt:
        print(f"{PROG}: error: interrupted", file=sys.stderr)
        return 130


def _silence_stdout() -> None:
    """Point stdout at devnull so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, sqlite3.Error):
        text = f"database error: {text}"
    return " ".join(text.split())


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
