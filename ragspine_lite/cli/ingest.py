"""``ragspine-lite ingest``: chunk documents into a chunk database (all loaded before any write)."""

from __future__ import annotations

import argparse
from contextlib import closing
from pathlib import Path
from typing import Any

from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.chunking.chunking import DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS
from ragspine_lite.chunking.sources import (
    SUPPORTED_EXTENSIONS,
    discover_documents,
    load_document,
)
from ragspine_lite.cli import optin as optin_cli
from ragspine_lite.cli.common import (
    EXIT_OK,
    UsageError,
    add_retrieval_options,
    edge_settings,
    err,
    non_negative_int,
    note,
    out,
    pick,
    positive_int,
    resolve_backend,
)
from ragspine_lite.cli.stores import TABLE, embed_db, model_label
from ragspine_lite.common.sensitivity import is_restricted, parse_sensitivity

_PROGRESS_THRESHOLD = 5  # show per-file progress on stderr above this many files
_INGEST_EPILOG = (
    "Directories are walked recursively for "
    + "/".join(SUPPORTED_EXTENSIONS)
    + " files (hidden entries skipped, sorted). doc_id defaults to the path relative to the "
    "directory given (a file given directly: its name). Metadata precedence: a document's "
    "front matter wins over these options, which are defaults for documents that do not "
    "set the field. Re-ingesting a doc_id makes a new version; older ones stay inactive."
)



def register(sub: Any) -> None:
    """Add the ``ingest`` subcommand."""
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
        "--max-chars", type=positive_int, default=DEFAULT_CHUNK_CHARS, metavar="N",
        help=f"chunk size budget in characters (default {DEFAULT_CHUNK_CHARS})",
    )
    p.add_argument(
        "--overlap-chars", type=non_negative_int, default=DEFAULT_OVERLAP_CHARS, metavar="N",
        help=f"paragraph overlap budget, < --max-chars (default {DEFAULT_OVERLAP_CHARS})",
    )
    p.add_argument(
        "--chunker", metavar="NAME",
        help="chunking strategy (default $RAGSPINE_CHUNKER, else the paragraph chunker)",
    )
    add_retrieval_options(p)
    optin_cli.add_ingest_options(p)
    p.set_defaults(handler=_cmd_ingest)


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
            err(f"[{i}/{len(files)}] reading {path}")
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
        raise UsageError(f"argument --chunker: {exc}") from None


def _latest_version(store: ChunkStore, doc_id: str) -> int:
    rows = store.execute_read(
        f"SELECT MAX(version) AS v FROM {TABLE} WHERE doc_id = ?", (doc_id,)
    )
    value = rows[0]["v"] if rows else None
    return int(value) if value is not None else 0


def ingest_into(
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

    with closing(ChunkStore(db)) as store:
        store.init_schema()
        index = NarrativeIndex(store, max_chars=max_chars, overlap_chars=overlap_chars,
                               chunker=chunker, index_text_fn=index_text_fn)
        before = optin_cli.record_index_text(store, index_text_fn)
        if before is not None and store.count():
            note(f"note: index text changed from {before!r}: the whole database is now "
                 "indexed and embedded with the new setting")
        return len(docs), sum(_ingest_one(index, text, meta, echo) for _p, text, meta in docs)


def _ingest_one(index: Any, text: str, meta: Any, echo: bool) -> int:
    """Ingest one document → chunks written; ``echo`` prints its line."""
    n = index.ingest(text, meta)
    if echo:
        flag = "  [RESTRICTED]" if is_restricted(meta.sensitivity) else ""
        if n == 0:  # nothing written, so no new version row exists
            out(f"{meta.doc_id}\tchunks=0\t(empty: retired from the active set){flag}")
        else:
            version = _latest_version(index.store, meta.doc_id)
            out(f"{meta.doc_id}\tchunks={n}\tversion={version}{flag}")
    return n


def _cmd_ingest(args: argparse.Namespace) -> int:
    if args.overlap_chars >= args.max_chars:
        raise UsageError(
            f"argument --overlap-chars: must be smaller than --max-chars "
            f"({args.overlap_chars!r} >= {args.max_chars!r})"
        )
    try:
        args.sensitivity = parse_sensitivity(args.sensitivity, source="argument --sensitivity")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    chunker = _make_chunker(pick(args.chunker, args.settings.chunker, "none"))
    try:
        index_text_fn = optin_cli.ingest_index_text(args.contextual, args.settings)
    except ValueError as exc:
        raise UsageError(f"argument --contextual: {exc}") from None
    _mode, backend = resolve_backend(args.mode, args.embedding, args.settings)
    edge_settings(args.settings)
    docs = _load_all(args)
    n_docs, n_chunks = ingest_into(
        args.db,
        docs,
        max_chars=args.max_chars,
        overlap_chars=args.overlap_chars,
        chunker=chunker,
        echo=True,
        index_text_fn=index_text_fn,
    )
    out(f"ingested {n_docs} document(s), {n_chunks} chunk(s) into {args.db}")
    if backend is not None:
        embedded = embed_db(args.db, backend, args.settings, index_text_fn)
        if embedded is not None:
            out(f"embedded {embedded} chunk(s) with {model_label(backend)}")
    return EXIT_OK
