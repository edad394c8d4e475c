"""``ragspine-lite stats``: what a chunk database holds (read only)."""

from __future__ import annotations

import argparse
from typing import Any

from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.cli.common import EXIT_OK, out, out_json
from ragspine_lite.cli.stores import TABLE, open_existing_store
from ragspine_lite.common.sensitivity import effective_sensitivity


def register(sub: Any) -> None:
    """Add the ``stats`` subcommand."""
    p = sub.add_parser(
        "stats", help="show what a chunk database holds",
        epilog="documents = documents with active chunks (retired = none active); versions = "
        "distinct (doc_id, version) batches; by-sensitivity/by-language count active chunks "
        "and the documents they belong to.",
    )
    p.add_argument("--db", required=True, metavar="FILE", help="an existing chunk database")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON")
    p.set_defaults(handler=_cmd_stats)


def _collect_stats(store: ChunkStore, db: str) -> dict[str, Any]:
    rows = store.execute_read(
        f"SELECT doc_id, version, active, sensitivity, language, COUNT(*) AS n "
        f"FROM {TABLE} GROUP BY doc_id, version, active, sensitivity, language"
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
    store = open_existing_store(args.db)
    try:
        stats = _collect_stats(store, args.db)
    finally:
        store.close()
    if args.json:
        out_json(stats)
        return EXIT_OK
    out(f"database:          {stats['db']}")
    out(f"schema version:    {stats['schema_version']}")
    out(f"documents:         {stats['documents']} active, {stats['retired_documents']} retired")
    out(f"active chunks:     {stats['active_chunks']}")
    out(f"total rows:        {stats['total_rows']} (all versions)")
    out(f"versions:          {stats['versions']} (highest {stats['max_version']})")
    for title, key in (("by sensitivity", "by_sensitivity"), ("by language", "by_language")):
        out(f"{title}:")
        for label, entry in stats[key].items():
            out(
                f"  {label or '(unset)':<14} {entry['documents']} document(s), "
                f"{entry['chunks']} chunk(s)"
            )
    return EXIT_OK
