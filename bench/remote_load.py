"""Load on the remote endpoint: throughput and p50/p99 latency per operation and concurrency.

    python bench/remote_load.py [--data DIR] [--concurrency 1,4,16] [--seconds 4]
                                [--max-requests 400] [--ops colbert,splade,embed,llm]
                                [--cross-encoder-model DIR] [--workers 1]

The script starts ``ragspine-lite serve-remote`` on a free loopback port (a second
process; ``llm`` runs against a stub OpenAI-compatible server, a third process, so it
measures the endpoint's own overhead) and drives it from this process with one thread
per concurrent client (stdlib urllib through the library's own clients). Payloads are
real: SQuAD train questions with their BM25 top-10 paragraphs (``--data``, default the
shared data folder beside the repository). Every cell is bounded by ``--seconds`` and
``--max-requests``; everything stops by itself. It prints one table (operation ×
concurrency: requests, errors, req/s, p50, p99), the rerankers' P@1 on the same candidate
lists next to BM25's, and where each operation saturates (the lowest concurrency within 10%
of its peak throughput).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ragspine_lite.chunking.chunking import Chunk  # noqa: E402
from ragspine_lite.lexical.retrieval import HybridRetriever  # noqa: E402
from ragspine_lite.remote.client import (  # noqa: E402
    RemoteClient,
    RemoteEmbeddingBackend,
    RemoteListwiseJudge,
    RemoteReranker,
)
from ragspine_lite.remote.errors import RemoteError  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data"
CANDIDATES = 10


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stub_llm(port: int) -> None:
    """A stub chat server: answers every listwise prompt with the identity ranking."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"object": "chat.completion", "model": "stub", "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "0,1,2,3,4,5,6,7,8,9"}}
            ]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.timeout = 1
    deadline = time.monotonic() + 3600  # stops by itself
    while time.monotonic() < deadline:
        server.handle_request()


def load_workload(data: Path, n_queries: int) -> list[tuple[str, list[str], int | None]]:
    """(question, BM25 top-10 paragraphs, index of the relevant one or None)."""
    folder = data / "squad_train"

    def jsonl(p: Path) -> list[dict]:
        return [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines() if x]

    corpus, queries = jsonl(folder / "corpus.jsonl"), jsonl(folder / "queries.jsonl")
    rows = (folder / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]
    qrels = {q: d for q, d, _ in (r.split("\t") for r in rows if r)}
    text = {d["id"]: d["text"] for d in corpus}
    retriever = HybridRetriever([
        Chunk(chunk_id=d["id"], doc_id=d["id"], seq=0, text=d["text"],
              source_locator=f"{d['id']}#para1", para_start=1, para_end=1)
        for d in corpus
    ])
    out = []
    for q in [q for q in queries if q["id"] in qrels][:n_queries]:
        ids = [r.chunk.chunk_id for r in retriever.search(q["text"], top_k=CANDIDATES)]
        if len(ids) < 2:
            continue
        rel = ids.index(qrels[q["id"]]) if qrels[q["id"]] in ids else None
        out.append((q["text"], [text[i] for i in ids], rel))
    return out


def make_call(op: str, url: str, workload: list) -> object:
    """A zero-argument-per-item callable for ``op``: call(i) → one request."""
    if op == "embed":
        backend = RemoteEmbeddingBackend(url, timeout=60, batch_size=CANDIDATES)
        return lambda i: backend.embed_texts(workload[i % len(workload)][1])
    judge = RemoteListwiseJudge(url, timeout=60) if op == "llm" else RemoteReranker(
        url, op, timeout=60
    )
    return lambda i: judge.judge(workload[i % len(workload)][0], workload[i % len(workload)][1])


def run_cell(op, url, workload, concurrency, seconds, max_requests):
    calls = [make_call(op, url, workload) for _ in range(concurrency)]  # a client per thread
    latencies: list[float] = []
    errors = [0]
    counter = [0]
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def worker(k: int) -> None:
        call = calls[k]
        while True:
            with lock:
                if counter[0] >= max_requests or time.monotonic() >= stop_at:
                    return
                i = counter[0]
                counter[0] += 1
            t0 = time.perf_counter()
            try:
                call(i)
                ok = True
            except RemoteError:
                ok = False
            dt = time.perf_counter() - t0
            with lock:
                if ok:
                    latencies.append(dt)
                else:
                    errors[0] += 1

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    lat = sorted(latencies)

    def pct(p: float) -> float:
        return 1000 * lat[min(len(lat) - 1, int(p * len(lat)))] if lat else float("nan")

    return {"op": op, "c": concurrency, "requests": len(lat), "errors": errors[0],
            "req/s": len(lat) / wall, "p50 ms": pct(0.50), "p99 ms": pct(0.99),
            "mean ms": 1000 * statistics.fmean(lat) if lat else float("nan")}


def precision_at_1(op: str, url: str, workload: list) -> float:
    judge = RemoteReranker(url, op, timeout=60)
    scored = [(q, c, r) for q, c, r in workload if r is not None]
    hits = sum(judge.judge(q, c)[0] == r for q, c, r in scored)
    return hits / len(scored) if scored else float("nan")


def table(rows: list[dict]) -> str:
    cols = list(rows[0])
    cells = [[f"{r[c]:.1f}" if isinstance(r[c], float) else str(r[c]) for c in cols]
             for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)),
             "-|-".join("-" * w for w in widths)]
    lines += [" | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--queries", type=int, default=48, help="distinct payloads (default 48)")
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--seconds", type=float, default=4.0, help="time bound per cell")
    ap.add_argument("--max-requests", type=int, default=400, help="request bound per cell")
    ap.add_argument("--ops", default="colbert,splade,embed,llm")
    ap.add_argument("--cross-encoder-model", help="a cross-encoder ONNX directory to add")
    ap.add_argument("--workers", type=int, default=1, help="uvicorn workers of the server")
    ap.add_argument("--stub-llm-port", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.stub_llm_port:
        stub_llm(args.stub_llm_port)
        return 0
    if not (args.data / "squad_train" / "corpus.jsonl").is_file():
        print(f"remote_load: no squad_train set under {args.data} (use --data)", file=sys.stderr)
        return 2
    ops = [o for o in args.ops.split(",") if o]
    if args.cross_encoder_model:
        ops.insert(0, "cross_encoder")
    levels = [int(c) for c in args.concurrency.split(",") if c]

    print("building the workload (BM25 top-10 per question) …", file=sys.stderr)
    workload = load_workload(args.data, args.queries)
    port, llm_port = _free_port(), _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = [subprocess.Popen([sys.executable, __file__, "--stub-llm-port", str(llm_port)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    cmd = [sys.executable, "-m", "ragspine_lite", "serve-remote", "--port", str(port),
           "--log-level", "warning", "--max-concurrency", str(os.cpu_count() or 2),
           "--llm-url", f"http://127.0.0.1:{llm_port}/v1", "--llm-model", "stub",
           "--workers", str(args.workers)]
    if args.cross_encoder_model:
        cmd += ["--cross-encoder-model", args.cross_encoder_model]
    procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL))
    url = f"http://127.0.0.1:{port}"
    try:
        client = RemoteClient(url, timeout=2)
        deadline = time.monotonic() + 120
        while True:
            try:
                client.health()
                break
            except RemoteError:
                if time.monotonic() > deadline or procs[1].poll() is not None:
                    print("remote_load: the endpoint did not start", file=sys.stderr)
                    return 1
                time.sleep(0.3)
        loaded = {r["id"]: r for r in client.models()["data"]}
        rows = []
        for op in ops:
            key = "llm" if op == "llm" else op
            if not loaded.get(key, {}).get("available"):
                print(f"skipping {op}: {loaded.get(key, {}).get('reason')}", file=sys.stderr)
                continue
            make_call(op, url, workload)(0)  # warm-up (loads the model when lazy)
            for c in levels:
                print(f"{op} at concurrency {c} …", file=sys.stderr)
                rows.append(run_cell(op, url, workload, c, args.seconds, args.max_requests))
        print(f"endpoint {url}, {args.workers} worker(s), {os.cpu_count()} CPU(s); "
              f"payload: 1 question + {CANDIDATES} SQuAD paragraphs (embed: the 10 paragraphs); "
              f"bounds {args.seconds:g} s / {args.max_requests} requests per cell")
        print(table(rows))
        print()
        judged = [r for _q, _c, r in workload if r is not None]
        quality = [{"ranking": "bm25 order (input)",
                    "P@1": f"{sum(r == 0 for r in judged) / max(1, len(judged)):.3f}"}]
        for op in ops:
            if op in ("colbert", "splade", "cross_encoder") and loaded.get(op, {}).get("loaded"):
                quality.append({"ranking": f"{op}: {loaded[op]['description']}",
                                "P@1": f"{precision_at_1(op, url, workload):.3f}"})
        print(f"rerank quality on the same lists ({len(judged)} with the answer in the top 10)")
        print(table(quality))
        print()
        for op in dict.fromkeys(r["op"] for r in rows):
            cells = [r for r in rows if r["op"] == op]
            best = max(cells, key=lambda r: r["req/s"])
            knee = next(r for r in cells if r["req/s"] >= 0.9 * best["req/s"])
            more = "; more clients only add latency" if knee is not cells[-1] else (
                "; not saturated at the highest level tried")
            print(f"{op}: peak {best['req/s']:.1f} req/s at concurrency {best['c']}; within 10% "
                  f"of it from concurrency {knee['c']} (p50 {knee['p50 ms']:.0f} ms, p99 "
                  f"{knee['p99 ms']:.0f} ms){more}")
        return 0 if all(r["errors"] == 0 for r in rows) else 1
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    raise SystemExit(main())
