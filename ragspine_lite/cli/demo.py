"""``ragspine-lite demo``: ingest the bundled sample corpus and run a few searches."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from ragspine_lite.chunking.chunking import DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS
from ragspine_lite.chunking.sources import discover_documents, load_document
from ragspine_lite.cli.common import (
    EXIT_OK,
    add_retrieval_options,
    edge_settings,
    out,
    parse_filters,
    resolve_backend,
    samples_dir,
)
from ragspine_lite.cli.ingest import ingest_into
from ragspine_lite.cli.search import print_results, run_search
from ragspine_lite.cli.stores import embed_db
from ragspine_lite.common.sensitivity import is_restricted
from ragspine_lite.common.settings import Settings

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



def register(sub: Any) -> None:
    """Add the ``demo`` subcommand."""
    p = sub.add_parser(
        "demo", help="ingest the bundled sample corpus and run a few searches",
        epilog="Without --db a temporary database is used and removed afterwards.",
    )
    p.add_argument("--db", metavar="FILE", help="keep the demo database here")
    add_retrieval_options(p)
    p.set_defaults(handler=_cmd_demo)


def _demo(db: str, backend: Any, settings: Settings) -> None:
    root = samples_dir()
    if not root.is_dir():
        raise FileNotFoundError(f"bundled sample corpus not found at {str(root)!r}")
    docs = [
        (path, *load_document(path, root=r)) for path, r in discover_documents([root])
    ]
    n_docs, n_chunks = ingest_into(
        db,
        docs,
        max_chars=DEFAULT_CHUNK_CHARS,
        overlap_chars=DEFAULT_OVERLAP_CHARS,
        chunker=None,
        echo=False,
    )
    restricted = sum(1 for _p, _t, meta in docs if is_restricted(meta.sensitivity))
    out(
        f"ingested {n_docs} sample documents ({n_chunks} chunks, {restricted} RESTRICTED) "
        f"into {db}"
    )
    if backend is not None:
        embed_db(db, backend, settings)
    for query, filters in _DEMO_QUERIES:
        out("")
        shown = f"  filters: {' '.join(filters)}" if filters else ""
        out(f"> search {query!r}{shown}")
        snippets, channel = run_search(db, query, parse_filters(filters), _DEMO_TOP_K, backend,
                                       settings=settings)
        out(f"  {len(snippets)} result(s) ({channel})")
        print_results(snippets, indent="  ")
    out("")
    out(
        f"The {restricted} RESTRICTED sample documents are in the chunk store, but the "
        "retrieval exit drops them before any result is built: the third search matches only "
        "RESTRICTED text and so shows nothing, just like a search that matches nothing."
    )


def _cmd_demo(args: argparse.Namespace) -> int:
    _mode, backend = resolve_backend(args.mode, args.embedding, args.settings)
    edge_settings(args.settings)
    if args.db:
        _demo(args.db, backend, args.settings)
        return EXIT_OK
    with tempfile.TemporaryDirectory(prefix="ragspine-lite-demo-") as tmp:
        _demo(str(Path(tmp) / "demo.db"), backend, args.settings)
    return EXIT_OK
