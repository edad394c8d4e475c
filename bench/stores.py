"""Vector stores at scale: ingest, query latency and recall@10, and pgvector under load.

    python bench/stores.py [--n 100000] [--dim 384] [--queries 50] [--scan-queries 3]
                           [--stores sqlite,sqlite_vec,qdrant,pgvector] [--clients 2,8,32]
                           [--client-queries 20] [--pool-ceilings 4096,256]

Needs the ``[vector]`` extra, ``pgserver`` (a real Postgres with pgvector, started into a
temp dir and stopped after) and numpy. Qdrant runs in local mode in memory; pgvector on a
named table (HNSW index). Prints one table:

* **ingest s**: upserting ``--n`` synthetic unit vectors (``--dim``; 200 seeded Gaussian
  clusters, like sentence embeddings) in batches of 1000, metadata ``{"doc_id", "group"}``;
* **p50 / p95 ms**: one ``k=10`` query, ``--queries`` of them (``--scan-queries`` for the
  pure-Python full scan of the stdlib SQLite store);
* **recall@10**: the hits against the exact float64 cosine scan (numpy);
* pgvector under load: ``--clients`` processes, each with its own connection to the one
  server, each running ``--client-queries`` queries at once: throughput (queries/s over the
  wall time) and p95.

Each adapter is run at every ``--pool-ceilings`` value (the default 4096, and a smaller pool
that trades recall for latency; the in-process rule is ``max(k, ef_search, min(count,
ceiling))`` candidates re-ranked exactly).
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

import numpy as np  # noqa: E402
from _pgserver import running_pgserver  # noqa: E402
from quality import print_table  # noqa: E402

from ragspine_lite.vector.store import VectorRecord, make_vector_store  # noqa: E402

BATCH = 1000
K = 10


def make_data(n: int, dim: int, queries: int, seed: int = 1) -> tuple[Any, Any]:
    """``n`` corpus and ``queries`` query unit vectors (float32) around 200 cluster centres."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((200, dim)).astype(np.float32)

    def draw(count: int) -> Any:
        pick = centres[rng.integers(0, len(centres), count)]
        x = pick + 0.7 * rng.standard_normal((count, dim)).astype(np.float32)
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    return draw(n), draw(queries)


def exact_top(corpus: Any, qs: Any) -> list[set[str]]:
    """The true top-``K`` ids per query (float64 cosine; the corpus is unit length)."""
    c64 = corpus.astype(np.float64)
    out = []
    for q in qs.astype(np.float64):
        scores = c64 @ (q / np.linalg.norm(q))
        best = np.argpartition(-scores, K)[:K]
        out.append({f"v{i:06d}" for i in best})
    return out


def ingest(store: Any, corpus: Any) -> float:
    start = time.perf_counter()
    for lo in range(0, len(corpus), BATCH):
        rows = corpus[lo : lo + BATCH].tolist()
        store.upsert(
            VectorRecord(f"v{lo + j:06d}", tuple(row), {"doc_id": f"d{(lo + j) // 10}",
                                                       "group": f"g{(lo + j) % 4}"})
            for j, row in enumerate(rows)
        )
    return time.perf_counter() - start


def timed_queries(store: Any, qs: Any) -> tuple[list[float], list[set[str]]]:
    times, found = [], []
    for q in qs.tolist():
        start = time.perf_counter()
        hits = store.query(q, k=K)
        times.append((time.perf_counter() - start) * 1000)
        found.append({h.id for h in hits})
    return times, found


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def row(name: str, ceiling: Any, ingest_s: Any, times: list[float], found: list[set[str]],
        truth: list[set[str]]) -> dict[str, object]:
    recall = statistics.fmean(len(f & t) / K for f, t in zip(found, truth, strict=False))
    return {"store": name, "pool ceiling": ceiling, "ingest s": ingest_s, "queries": len(times),
            "p50 ms": statistics.median(times), "p95 ms": p95(times), "recall@10": recall}


def _client(args: tuple[str, str, int, list[list[float]], Any]) -> list[float]:
    """One client process: its own connection, wait for the others, run the queries."""
    url, table, ceiling, qs, barrier = args
    store = make_vector_store("pgvector", dsn=url, table=table, pool_ceiling=ceiling)
    store.query(qs[0], k=K)  # connect and warm up outside the timing
    barrier.wait()
    times = []
    for q in qs:
        start = time.perf_counter()
        store.query(q, k=K)
        times.append((time.perf_counter() - start) * 1000)
    store.close()
    return times


def concurrency(url: str, table: str, ceiling: int, qs: Any, clients: int, per: int
                ) -> dict[str, object]:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(clients + 1)
        work = [(url, table, ceiling, np.roll(qs, -i, axis=0)[:per].tolist(), barrier)
                for i in range(clients)]
        with ctx.Pool(clients) as pool:
            pending = pool.map_async(_client, work)
            barrier.wait()
            start = time.perf_counter()
            results = pending.get()
            wall = time.perf_counter() - start
    times = [t for r in results for t in r]
    return {"store": f"pgvector x{clients} clients", "pool ceiling": ceiling, "ingest s": "",
            "queries": len(times), "p50 ms": statistics.median(times), "p95 ms": p95(times),
            "recall@10": f"{len(times) / wall:.1f} q/s"}


def open_store(name: str, where: Path, url: str, ceiling: int, table: str) -> Any:
    if name == "sqlite":
        return make_vector_store("sqlite", db_path=where / "sqlite.db", model_id="bench")
    if name == "sqlite_vec":
        return make_vector_store("sqlite_vec", db_path=where / "vec.db", pool_ceiling=ceiling)
    if name == "qdrant":
        return make_vector_store("qdrant", pool_ceiling=ceiling)  # local mode, in memory
    return make_vector_store("pgvector", dsn=url, table=table, pool_ceiling=ceiling)


def run(args: argparse.Namespace) -> list[dict[str, object]]:
    corpus, qs = make_data(args.n, args.dim, max(args.queries, args.client_queries))
    truth = exact_top(corpus, qs)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, running_pgserver() as url:
        table = "bench_items"
        for name in args.stores:
            store = open_store(name, Path(tmp), url, args.pool_ceilings[0], table)
            took = ingest(store, corpus)
            ceilings = ["-"] if name == "sqlite" else args.pool_ceilings
            for ceiling in ceilings:
                if ceiling != "-":
                    store.pool_ceiling = ceiling
                n_q = args.scan_queries if name == "sqlite" else args.queries
                times, found = timed_queries(store, qs[:n_q])
                rows.append(row(name, ceiling, took, times, found, truth[:n_q]))
                print(rows[-1], file=sys.stderr, flush=True)
                took = ""
            store.close()
        if "pgvector" in args.stores:
            for ceiling in args.pool_ceilings:
                for clients in args.clients:
                    rows.append(concurrency(url, table, ceiling, qs, clients,
                                            args.client_queries))
                    print(rows[-1], file=sys.stderr, flush=True)
    return rows


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--scan-queries", type=int, default=3)
    p.add_argument("--stores", type=lambda s: s.split(","),
                   default=["sqlite", "sqlite_vec", "qdrant", "pgvector"])
    p.add_argument("--clients", type=_ints, default=[2, 8, 32])
    p.add_argument("--client-queries", type=int, default=20)
    p.add_argument("--pool-ceilings", type=_ints, default=[4096, 256])
    args = p.parse_args()
    print(f"n={args.n} dim={args.dim} k={K}")
    print_table(run(args), lambda c, v: f"{v:.1f}" if isinstance(v, float) and c != "recall@10"
                else (f"{v:.3f}" if isinstance(v, float) else str(v)))


if __name__ == "__main__":
    main()
