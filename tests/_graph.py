"""Shared by the graph tests: the samples ingested for real, and a stored graph serialised."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from pathlib import Path

from ragspine_lite import cli
from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.graph.store import InProcessGraphStore

CANARY = "ZEPHYRCANARY"  # in the two RESTRICTED sample documents' text
RESTRICTED_DOCS = ("restricted/acme_hk_acquisition_memo.md",
                   "restricted/acme_cn_board_minutes_zh.md")


def ingest_samples(db: Path) -> list:
    """The bundled samples (RESTRICTED ones included) ingested by the CLI; the active chunks."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert cli.main(["ingest", str(cli.samples_dir()), "--db", str(db), "--mode", "bm25"]) == 0
    with ChunkStore(db, read_only=True) as store:
        return store.iter_chunks()


def dump(store) -> str:
    """Every stored node and edge (RESTRICTED included), serialised."""
    if isinstance(store, InProcessGraphStore):
        nodes, edges = store._nodes.values(), store._edges.values()
    else:  # the networkx store
        nodes = [d["obj"] for _n, d in store.graph.nodes(data=True) if "obj" in d]
        edges = [d["obj"] for _s, _d, d in store.graph.edges(data=True)]
    return json.dumps({
        "nodes": sorted((dataclasses.asdict(n) for n in nodes), key=lambda n: n["id"]),
        "edges": sorted((dataclasses.asdict(e) for e in edges),
                        key=lambda e: (e["src"], e["dst"], e["type"])),
    }, sort_keys=True, ensure_ascii=False)
