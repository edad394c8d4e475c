"""Lexical search speed: the ragspine_lite BM25 index next to bm25s, FlexSearch, MiniSearch & co.

    python bench/lexical.py [--data DIR] [--sets squad_train,drcd_test,cmrc_train]
                            [--synthetic 100000] [--with-1m] [--pyodide-scan 30000,100000,300000]
                            [--queries N] [--k 10] [--engines ...] [--work DIR]

Corpora: the developer retrieval sets under ``--data`` (default: ``shared/data`` beside the
repository; one chunk per paragraph) and synthetic corpora made deterministically from
``squad_train`` (``--synthetic N``: N chunks, each 2-5 sentences drawn with a fixed seed from
its paragraphs; ``--with-1m`` adds the opt-in 1,000,000-chunk corpus). Queries are the set's
own (first ``--queries``); every engine returns its top ``--k``.

Every engine runs as two fresh processes: *build* (index the corpus, serialise the index)
and *serve* (open the serialised index, answer the queries), so "peak RSS" is what serving
costs, and "load" is opening a prebuilt index. Rows:

* ``ragspine_lite``: a :class:`ChunkStore` file written with ``replace_docs`` (chunks and the
  persisted BM25 index in one transaction); serve = open the file, ``NarrativeIndex.retrieve``.
* ``ragspine_lite pyodide``: the same store file searched inside Pyodide on Node.
* ``bm25s``: ``method="lucene"`` (same ranking as Okapi with the (k1+1) factor), fed the
  ragspine_lite tokenizer's tokens; saved with ``save`` and opened with ``load``.
* ``rank_bm25``: ``BM25Okapi`` on the same tokens, pickled.
* ``bm25_scores``: the pure-Python reference (no index: serve re-tokenizes the corpus).
* ``flexsearch`` / ``minisearch`` on Node with library defaults; Chinese sets add a
  ``cjk`` row each (FlexSearch ``Charset.CJK``; MiniSearch with the ragspine_lite tokenizer).

Query p50/p95 are per-query **CPU** time of the serving process (the machine may be shared,
so wall time would measure the neighbours); build and load are wall time. Slow engines
(rank_bm25, bm25_scores) answer ``--slow-queries`` queries and are skipped above
``--slow-max-docs`` chunks. Prints one table, then the target ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DEFAULT_DATA = REPO.parent / "shared" / "data"
NODE_HELPER = Path(__file__).resolve().parent / "lexical_node.mjs"
CHINESE = {"drcd_test", "cmrc_train"}
ENGINES = ("ragspine_lite", "pyodide", "bm25s", "rank_bm25", "bm25_scores", "flexsearch",
           "minisearch")
SLOW = {"rank_bm25", "bm25_scores"}


# ---------------------------------------------------------------------------------- corpora


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def write_jsonl(path: Path, rows) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


def synthetic(source: Path, n: int, out: Path) -> None:
    """``n`` chunks of 2-5 sentences drawn (seed 20240531) from ``source``'s paragraphs."""
    sentences = [s for d in read_jsonl(source / "corpus.jsonl")
                 for s in _SENTENCE_END.split(d["text"]) if s.strip()]
    rng = random.Random(20240531)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(
        out / "corpus.jsonl",
        ({"id": f"syn-{i:07d}", "text": " ".join(rng.choices(sentences, k=rng.randint(2, 5)))}
         for i in range(n)),
    )
    shutil.copy(source / "queries.jsonl", out / "queries.jsonl")


# ---------------------------------------------------------------------------------- workers


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def timed_queries(run, queries) -> dict:
    """p50/p95 of per-query CPU time (this process), in ms."""
    times = []
    for q in queries:
        t = time.process_time()
        run(q)
        times.append((time.process_time() - t) * 1000)
    times.sort()
    return {"p50_ms": times[len(times) // 2], "p95_ms": times[int(0.95 * len(times))],
            "queries": len(times)}


def worker(engine: str, phase: str, corpus: Path, queries: Path, index: Path, k: int,
           n_queries: int) -> dict:
    from ragspine_lite.lexical.tokenizer import tokenize

    if phase == "build":
        docs = read_jsonl(corpus)
        t = time.perf_counter()
        if engine == "ragspine_lite":
            from ragspine_lite.chunking.chunk_store import ChunkStore
            from ragspine_lite.chunking.chunking import Chunk
            from ragspine_lite.lexical.inverted_index import StoreBM25Index

            with ChunkStore(index) as store:
                store.init_schema()
                bm25 = StoreBM25Index.attach(store)
                store.replace_docs(
                    (d["id"], [Chunk(d["id"], d["id"], 0, d["text"], f"{d['id']}#para1", 1, 1)])
                    for d in docs
                )
                build_s = time.perf_counter() - t
                size = bm25.size_bytes()
        elif engine == "bm25s":
            import bm25s

            retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
            retriever.index([tokenize(d["text"]) for d in docs], show_progress=False)
            build_s = time.perf_counter() - t
            retriever.save(str(index), show_progress=False)
            size = sum(f.stat().st_size for f in index.iterdir())
        elif engine == "rank_bm25":
            from rank_bm25 import BM25Okapi

            model = BM25Okapi([tokenize(d["text"]) for d in docs], k1=1.5, b=0.75)
            build_s = time.perf_counter() - t
            index.write_bytes(pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL))
            size = index.stat().st_size
        elif engine == "bm25_scores":
            tokens = [tokenize(d["text"]) for d in docs]
            build_s = time.perf_counter() - t
            size = 0
            del tokens
        else:
            raise ValueError(f"unknown engine {engine!r}")
        return {"build_s": build_s, "index_bytes": size, "build_rss_mb": peak_rss_mb()}

    qs = read_jsonl(queries)[:n_queries]
    t = time.perf_counter()
    if engine == "ragspine_lite":
        from ragspine_lite.chunking.chunk_store import ChunkStore
        from ragspine_lite.lexical.retrieval import NarrativeIndex

        store = ChunkStore(index)
        narrative = NarrativeIndex(store)
        narrative.retrieve("warm up", top_k=k)
        load_s = time.perf_counter() - t
        res = timed_queries(lambda q: narrative.retrieve(q["text"], top_k=k), qs)
    elif engine == "bm25s":
        import bm25s

        retriever = bm25s.BM25.load(str(index))
        load_s = time.perf_counter() - t
        vocab = retriever.vocab_dict
        token_lists = [[x for x in tokenize(q["text"]) if x in vocab] for q in qs]
        res = timed_queries(
            lambda toks: retriever.retrieve([toks], k=k, show_progress=False) if toks else None,
            token_lists,
        )
    elif engine == "rank_bm25":
        import numpy as np

        model = pickle.loads(index.read_bytes())
        load_s = time.perf_counter() - t

        def run(q):
            scores = model.get_scores(tokenize(q["text"]))
            top = np.argpartition(-scores, min(k, len(scores) - 1))[:k]
            return top[np.argsort(-scores[top])]

        res = timed_queries(run, qs)
    elif engine == "bm25_scores":
        from ragspine_lite.lexical.scoring import bm25_scores

        docs = read_jsonl(corpus)
        ids = [d["id"] for d in docs]
        tokens = [tokenize(d["text"]) for d in docs]
        load_s = time.perf_counter() - t

        def run(q):
            scores = bm25_scores(tokenize(q["text"]), tokens)
            hits = sorted(((s, i) for i, s in zip(ids, scores, strict=True) if s > 0),
                          key=lambda h: (-h[0], h[1]))
            return hits[:k]

        res = timed_queries(run, qs)
    else:
        raise ValueError(f"unknown engine {engine!r}")
    return {"load_ms": load_s * 1000, **res, "peak_rss_mb": peak_rss_mb()}


# ------------------------------------------------------------------------------ orchestrator


def run_json(cmd: list[str], timeout: float | None = None) -> dict:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} … failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def python_phase(engine, phase, corpus_dir, index, k, n_queries) -> dict:
    return run_json([
        sys.executable, __file__, "--worker", engine, phase, str(corpus_dir / "corpus.jsonl"),
        str(corpus_dir / "queries.jsonl"), str(index), str(k), str(n_queries),
    ])


def node_phase(engine, phase, corpus_dir, index, k, n_queries, cjk=False) -> dict:
    cmd = ["node", "--max-old-space-size=16384", str(NODE_HELPER), engine, phase]
    if phase == "build":
        cmd += ["--corpus", str(corpus_dir / "corpus.jsonl"), "--out", str(index)]
    elif engine == "pyodide":
        cmd += ["--store", str(index), "--repo", str(REPO)]
    else:
        cmd += ["--index", str(index)]
    if phase == "serve":
        cmd += ["--queries", str(corpus_dir / "queries.jsonl"), "--k", str(k),
                "--max-queries", str(n_queries)]
    if cjk:
        cmd.append("--cjk")
    out = run_json(cmd)
    if phase == "build":
        out["build_s"] = out.pop("build_ms") / 1000
        out["build_rss_mb"] = out.pop("peak_rss_mb")
    return out


def bench_corpus(name, corpus_dir, work, engines, args) -> list[dict]:
    n_docs = sum(1 for _ in (corpus_dir / "corpus.jsonl").open(encoding="utf-8"))
    rows = []

    def row(label, build, serve):
        rows.append({"corpus": name, "chunks": n_docs, "engine": label, **build, **serve})
        print(f"  {label}: p50 {serve.get('p50_ms', float('nan')):.3f} ms", file=sys.stderr)

    store = work / f"{name}.ragspine.db"
    for engine in engines:
        try:
            run_engine(engine, name, corpus_dir, work, store, n_docs, rows, row, args)
        except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
            lines = str(exc).strip().splitlines()
            reason = next((x for x in lines if "Error" in x), lines[-1]).strip()[:80]
            print(f"  {engine}: failed ({reason})", file=sys.stderr)
            rows.append({"corpus": name, "chunks": n_docs, "engine": engine,
                         "note": f"failed: {reason}"})
    return rows


def run_engine(engine, name, corpus_dir, work, store, n_docs, rows, row, args) -> None:
    """Build and serve one engine on one corpus, appending its row(s)."""
    n_q = args.queries
    if engine in SLOW:
        if n_docs > args.slow_max_docs:
            print(f"  {engine}: skipped ({n_docs} chunks > --slow-max-docs)", file=sys.stderr)
            return
        n_q = min(n_q, args.slow_queries)
    if engine == "pyodide":
        if not store.exists():
            return  # needs the ragspine_lite store
        build = {"build_s": rows_by(rows, "ragspine_lite").get("build_s"),
                 "index_bytes": rows_by(rows, "ragspine_lite").get("index_bytes")}
        row("ragspine_lite pyodide", build,
            node_phase("pyodide", "serve", corpus_dir, store, args.k, n_q))
        return
    if engine in ("flexsearch", "minisearch"):
        variants = [("", False)] + ([(" cjk", True)] if name in CHINESE else [])
        for suffix, cjk in variants:
            index = work / f"{name}.{engine}{suffix.strip()}.json"
            build = node_phase(engine, "build", corpus_dir, index, args.k, n_q, cjk)
            row(engine + suffix, build,
                node_phase(engine, "serve", corpus_dir, index, args.k, n_q, cjk))
            index.unlink(missing_ok=True)
        return
    index = store if engine == "ragspine_lite" else work / f"{name}.{engine}"
    if engine == "ragspine_lite" and index.exists():
        index.unlink()
    build = python_phase(engine, "build", corpus_dir, index, args.k, n_q)
    row(engine, build, python_phase(engine, "serve", corpus_dir, index, args.k, n_q))
    if engine != "ragspine_lite" and index.is_dir():
        shutil.rmtree(index, ignore_errors=True)
    elif engine != "ragspine_lite":
        index.unlink(missing_ok=True)


def rows_by(rows, engine) -> dict:
    return next((r for r in rows if r["engine"] == engine), {})


def fmt(value, spec) -> str:
    return "—" if value is None else format(value, spec)


def print_table(rows) -> None:
    cols = [("corpus", "corpus", "s"), ("chunks", "chunks", "d"), ("engine", "engine", "s"),
            ("build_s", "build s", ".2f"), ("index_bytes", "index MB", "mb"),
            ("load_ms", "load ms", ".1f"), ("p50_ms", "p50 ms", ".3f"),
            ("p95_ms", "p95 ms", ".3f"), ("peak_rss_mb", "serve RSS MB", ".0f"),
            ("queries", "queries", "d")]
    if any("note" in r for r in rows):
        cols.append(("note", "note", "s"))
    cells = []
    for r in rows:
        line = []
        for key, _, spec in cols:
            v = r.get(key)
            if spec == "mb":
                line.append("—" if not v else f"{v / 1e6:.1f}")
            else:
                line.append(fmt(v, spec))
        cells.append(line)
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, (_, h, _) in enumerate(cols)]
    print("| " + " | ".join(h.ljust(w) for (_, h, _), w in zip(cols, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for c in cells:
        print("| " + " | ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)) + " |")


def print_targets(rows, scan) -> None:
    print("\nTargets (ratio = ours / peer; <= 1.00 meets it):")
    for name in dict.fromkeys(r["corpus"] for r in rows):
        ours, peer = (rows_by([r for r in rows if r["corpus"] == name], e)
                      for e in ("ragspine_lite", "bm25s"))
        if ours and peer:
            print(f"- CPython p50 vs bm25s on {name}: {ours['p50_ms']:.3f} / "
                  f"{peer['p50_ms']:.3f} ms = {ours['p50_ms'] / peer['p50_ms']:.2f}")
    sq = [r for r in rows if r["corpus"] == "squad_train"]
    py, fx = rows_by(sq, "ragspine_lite pyodide"), rows_by(sq, "flexsearch")
    if py and fx:
        print(f"- Pyodide p50 vs FlexSearch (Node) on squad_train: {py['p50_ms']:.3f} / "
              f"{fx['p50_ms']:.3f} ms = {py['p50_ms'] / fx['p50_ms']:.2f}")
    for r in rows:
        if r["engine"] == "ragspine_lite" and r["chunks"] >= 1_000_000:
            print(f"- {r['chunks']:,} chunks on CPython: p50 {r['p50_ms']:.1f} ms (target 20), "
                  f"store open {r['load_ms'] / 1000:.2f} s (target 1)")
    # Every Pyodide measurement counts, table rows and scan points alike.
    seen = {n for n, _, _ in scan}
    scan = sorted([*scan, *((r["chunks"], r["p50_ms"], r["p95_ms"]) for r in rows
                            if r["engine"] == "ragspine_lite pyodide" and "p50_ms" in r
                            and r["chunks"] not in seen)])
    if scan:
        print("\nPyodide query latency by corpus size:")
        for n, p50, p95 in scan:
            print(f"- {n:,} chunks: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
        under = [n for n, p50, _ in scan if p50 < 50]
        print(f"- largest measured corpus with Pyodide p50 < 50 ms: "
              f"{max(under):,} chunks" if under else "- none under 50 ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", default="squad_train,drcd_test,cmrc_train")
    ap.add_argument("--synthetic", default="100000",
                    help="comma-separated chunk counts of synthetic corpora ('' for none)")
    ap.add_argument("--with-1m", action="store_true", help="add the 1,000,000-chunk corpus")
    ap.add_argument("--pyodide-scan", default="",
                    help="synthetic sizes to time in Pyodide, to find the largest under 50 ms")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--slow-queries", type=int, default=100)
    ap.add_argument("--slow-max-docs", type=int, default=200_000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--work", type=Path, default=None, help="scratch dir (default: a temp dir)")
    ap.add_argument("--worker", nargs=7, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        engine, phase, corpus, queries, index, k, n = args.worker
        print(json.dumps(worker(engine, phase, Path(corpus), Path(queries), Path(index),
                                int(k), int(n))))
        return 0
    engines = [e for e in args.engines.split(",") if e]
    bad = sorted(set(engines) - set(ENGINES))
    if bad:
        ap.error(f"unknown engines {bad}; valid: {', '.join(ENGINES)}")
    work = args.work or Path(tempfile.mkdtemp(prefix="ragspine-lexical-"))
    work.mkdir(parents=True, exist_ok=True)
    corpora = []
    for name in [s for s in args.sets.split(",") if s]:
        path = args.data / name
        if not (path / "corpus.jsonl").is_file():
            print(f"lexical: no retrieval set at {path} (use --data)", file=sys.stderr)
            return 2
        corpora.append((name, path))
    sizes = [int(x) for x in args.synthetic.split(",") if x]
    if args.with_1m:
        sizes.append(1_000_000)
    squad = args.data / "squad_train"
    for n in sizes:
        out = work / f"synthetic_{n}"
        if not (out / "corpus.jsonl").is_file():
            synthetic(squad, n, out)
        corpora.append((f"synthetic_{n // 1000}k", out))
    rows = []
    try:
        for name, path in corpora:
            print(f"{name} …", file=sys.stderr)
            rows += bench_corpus(name, path, work, engines, args)
        scan = []
        for n in [int(x) for x in args.pyodide_scan.split(",") if x]:
            out = work / f"synthetic_{n}"
            if not (out / "corpus.jsonl").is_file():
                synthetic(squad, n, out)
            store = work / f"synthetic_{n // 1000}k.ragspine.db"
            if not store.exists():
                python_phase("ragspine_lite", "build", out, store, args.k, args.queries)
            try:
                res = node_phase("pyodide", "serve", out, store, args.k, args.queries)
            except RuntimeError as exc:
                print(f"pyodide scan {n}: failed ({str(exc).strip().splitlines()[-1]})",
                      file=sys.stderr)
                continue
            print(f"pyodide scan {n}: p50 {res['p50_ms']:.1f} ms", file=sys.stderr)
            scan.append((n, res["p50_ms"], res["p95_ms"]))
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print_table(rows)
    print_targets(rows, scan)
    print(f"\n(k={args.k}; machine: {os.cpu_count()} CPUs; Python {sys.version.split()[0]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
