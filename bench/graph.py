"""The relation graph at 10k chunks: build time, peak memory and a 3-hop traversal.

    python bench/graph.py [--chunks 10000] [--docs 1000] [--entities 200] [--repeat 20]

A synthetic domain: a home entity with ``--entities`` subsidiaries (each with a geography),
a list of peers, and ``--chunks`` chunks over ``--docs`` documents in a real SQLite chunk
store; every chunk names one subsidiary, so every document also yields co-occurrence pairs,
and one document in twenty is RESTRICTED. For each store (in-process, networkx when the
``[graph]`` extra is installed) and extractor (none, deterministic) the table shows the
graph's size, the median CPU time of three builds (reading the chunks back from the store
included), the peak Python memory of one more build (tracemalloc), and the median CPU time of
a 3-hop traversal from the home entity over every edge type in both directions (it reaches
every visible node). CPU time (``time.process_time``), not wall time, so a busy machine
does not inflate the figures.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from quality import print_table  # noqa: E402

from ragspine_lite.chunking.chunk_store import ChunkStore  # noqa: E402
from ragspine_lite.chunking.chunking import Chunk  # noqa: E402
from ragspine_lite.common.company_profile import DimensionSpec, DomainProfile  # noqa: E402
from ragspine_lite.graph.extractor import make_relation_extractor  # noqa: E402
from ragspine_lite.graph.relation import build_relation_graph  # noqa: E402
from ragspine_lite.graph.store import make_graph_store  # noqa: E402

HOME = "HOME"


def synthetic_profile(n_entities: int) -> DomainProfile:
    subs = [f"SUB_{i:04d}" for i in range(n_entities)]
    geography = {code: f"GEO_{i % 25:02d}" for i, code in enumerate([HOME, *subs])}
    metrics = {f"metric {m}": f"M{m}" for m in range(8)}
    return DomainProfile(
        home_company_name="Home Group", home_entity_code=HOME,
        home_entity_synonyms={code.lower(): code for code in [HOME, *subs]},
        entity_geography=geography,
        external_entities={f"peer {p}": f"Peer {p}" for p in range(30)},
        dimensions=(DimensionSpec("metric", "metric", synonyms=metrics),
                    DimensionSpec("geography", "geography", identity=False,
                                  derived_from="entity", derivation=geography)),
    )


def fill_store(db: Path, n_chunks: int, n_docs: int, n_entities: int) -> None:
    rng = random.Random(7)
    docs: dict[str, list[Chunk]] = {}
    for i in range(n_chunks):
        doc = f"doc_{i % n_docs:05d}"
        seq = len(docs.setdefault(doc, []))
        sens = "RESTRICTED" if (i % n_docs) % 20 == 0 else "INTERNAL"
        docs[doc].append(Chunk(
            chunk_id=f"{doc}#c{seq}", doc_id=doc, seq=seq, text=f"paragraph {i} of {doc}",
            source_locator=f"{doc}#para{seq + 1}", para_start=seq + 1, para_end=seq + 1,
            entity=f"SUB_{rng.randrange(n_entities):04d}", sensitivity=sens))
    with ChunkStore(db) as store:
        store.init_schema()
        store.replace_docs(docs.items())


def build(store_spec: str, extractor_spec: str, profile: DomainProfile, db: Path) -> Any:
    """Read the chunks back from the store and build the relation graph from them."""
    with ChunkStore(db, read_only=True) as chunk_store:
        chunks = chunk_store.iter_chunks()
    return build_relation_graph(profile, chunks=chunks, store=make_graph_store(store_spec),
                                relation_extractor=make_relation_extractor(extractor_spec))


def measure(store_spec: str, extractor_spec: str, profile: DomainProfile, db: Path,
            repeat: int) -> dict[str, object]:
    builds = []
    for _ in range(3):
        t0 = time.process_time()
        graph = build(store_spec, extractor_spec, profile, db)
        builds.append(time.process_time() - t0)
    tracemalloc.start()
    build(store_spec, extractor_spec, profile, db)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    times, reached = [], 0
    for _ in range(repeat):
        t = time.process_time()
        reached = len(graph.traverse(HOME, max_depth=3, direction="both"))
        times.append(time.process_time() - t)
    return {"store": store_spec, "extractor": extractor_spec,
            "nodes": graph.count_nodes(), "edges": graph.count_edges(),
            "build CPU s (median of 3)": f"{statistics.median(builds):.2f}",
            "peak MiB": f"{peak / 2**20:.1f}", "3-hop reached": reached,
            f"3-hop CPU ms (median of {repeat})": f"{statistics.median(times) * 1e3:.1f}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=10_000)
    ap.add_argument("--docs", type=int, default=1_000)
    ap.add_argument("--entities", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    profile = synthetic_profile(args.entities)
    stores = ["in_process"] + (["networkx"] if importlib.util.find_spec("networkx") else [])
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "chunks.db"
        fill_store(db, args.chunks, args.docs, args.entities)
        rows = [measure(s, e, profile, db, args.repeat)
                for s in stores for e in ("none", "deterministic")]
    print(f"Python {sys.version.split()[0]}; {args.chunks} chunks, {args.docs} documents, "
          f"{args.entities} subsidiaries")
    print_table(rows)


if __name__ == "__main__":
    main()
