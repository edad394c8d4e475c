"""Speed of the semantic channel (MiniLM) on CPython and in headless Chromium, side by side.

    python bench/browser_embeddings.py [--data DIR] [--sets squad_train,cmrc_train]
                                       [--paragraphs 1000] [--queries 100] [--work DIR]

Per retrieval set (``squad_train``: English; ``cmrc_train``: Chinese) it builds a site with
``build_wasm.build_site(..., embeddings="minilm")`` from a subset of the corpus: the paragraphs
that answer the first ``--queries`` queries, then other paragraphs up to ``--paragraphs``
(every chunk is embedded at build time on CPython, which takes a while). Then, in one run:

* **CPython**: ``OnnxEmbeddingBackend().embed_texts([q])`` per query, and
  ``BundleSearcher(site/data/chunks.db, embedding_backend=...)`` ``.search(q, top_k=10,
  mode="hybrid" | "bm25", highlight=False)``;
* **Chromium, JSPI**: the site served from 127.0.0.1 and opened with
  ``RagSpineLite.open({bundle, jspi: true})`` in Debian's Chromium driven by Playwright:
  ``rs.embed([q])`` and ``rs.searchDetailed(q, {topK: 10, mode, highlight: false})``, wall
  time per call around the JS call (worker round trip included), all queries in one
  ``page.evaluate``; Python awaits onnxruntime-web through JSPI (``run_sync``);
* **Chromium, no JSPI**: the same with ``jspi: false``: the worker runs the model in JS
  before the (synchronous) Python search.

It prints one table (p50/p95 ms per set × operation × runtime) and, below it, the model load
time in the browser per path, the bundle bytes of ``models/``, ``ort/`` and ``data/``, the
build time and chunks/s of the build-time embedding, passage-embedding throughput (one batch
of paragraphs) per runtime, and which channel the hybrid searches took (``hybrid`` or
``bm25:outside-vocabulary``: MiniLM is English-only, so Chinese queries are gated to BM25
and their "hybrid" row measures the gate plus BM25).

The no-JSPI path keeps the vectors it was handed (primed) per text, so query embedding and
the searches run in two separately opened instances, and warm-up calls use other texts.
CPython's onnxruntime uses its default threads; onnxruntime-web runs single-threaded (the
page is not cross-origin isolated). ``--work DIR`` keeps the built sites and reuses them
while the package/web code and the subset are unchanged. Needs the ``[embed-onnx]`` extra,
``npm ci`` (Pyodide, onnxruntime-web), Playwright and Chromium. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _load_sibling(name: str) -> ModuleType:
    """``bench/<name>.py`` as a module (it puts the repository on ``sys.path`` itself)."""
    path = Path(__file__).resolve().parent / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench_browser = _load_sibling("browser")
build_wasm: Any = bench_browser.build_wasm

SETS = ("squad_train", "cmrc_train")
LANGUAGES = {"squad_train": "en", "cmrc_train": "zh", "drcd_test": "zh"}
PATHS = ("jspi", "nojspi")
PATH_LABELS = {"cpython": "CPython", "jspi": "Chromium JSPI", "nojspi": "Chromium no-JSPI"}
OPERATIONS = (("embed", "query embedding"), ("hybrid", "hybrid search"), ("bm25", "BM25 search"))
# Not among the measured queries: the no-JSPI path caches primed vectors per text.
WARMUPS = ("warm up the model", "how fast is a warm query", "预热一下查询")
PASSAGES = 64  # paragraphs embedded in one call, for throughput

PAGE_JS = r"""
async ({ module, bundle, jspi, queries, warmups, passages }) => {
  const { RagSpineLite } = await import(module);
  const out = { opens: [] };
  const open = async () => {
    const t = performance.now();
    const rs = await RagSpineLite.open({ bundle, jspi, timeoutMs: 0 });
    out.opens.push({ ms: performance.now() - t, embeddings: rs.info.embeddings,
                     timings: rs.info.timings });
    return rs;
  };
  let rs = await open();
  for (const w of warmups) await rs.embed([w]);
  out.embed = [];
  for (const q of queries) {
    const t = performance.now();
    await rs.embed([q]);
    out.embed.push({ ms: performance.now() - t });
  }
  let t = performance.now();
  await rs.embed(passages);
  out.passageMs = performance.now() - t;
  rs.close();
  rs = await open();  // nothing primed yet for the searches
  for (const mode of ["hybrid", "bm25"]) {
    const opts = { topK: 10, mode, highlight: false };
    for (const w of warmups) await rs.searchDetailed(w, opts);
    const rows = [];
    for (const q of queries) {
      const t = performance.now();
      const r = await rs.searchDetailed(q, opts);
      const ms = performance.now() - t;
      rows.push({ ms, took: r.tookMs, channel: r.semantic ? r.semantic.channel : null,
                  path: r.worker ? r.worker.path : null,
                  modelMs: r.worker && r.worker.modelMs !== undefined ? r.worker.modelMs : null });
    }
    out[mode] = rows;
  }
  rs.close();
  return out;
}
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def pct(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else float("nan")


def select(
    corpus: list[dict], queries: list[dict], n_paragraphs: int, n_queries: int
) -> tuple[list[dict], list[dict]]:
    """The first ``n_queries`` distinct queries and a corpus subset: their answers, then
    other paragraphs in corpus order, ``n_paragraphs`` in all (kept in corpus order)."""
    seen: set[str] = set()
    chosen = []
    for q in queries:
        if q["text"] not in seen:
            seen.add(q["text"])
            chosen.append(q)
    chosen = chosen[:n_queries]
    wanted = list(dict.fromkeys(q["rel"] for q in chosen))[:n_paragraphs]
    keep = set(wanted)
    for d in corpus:
        if len(keep) >= n_paragraphs:
            break
        keep.add(d["id"])
    return [d for d in corpus if d["id"] in keep], chosen


def write_docs(corpus: list[dict], folder: Path, language: str) -> None:
    """One front-matter ``.txt`` per paragraph (as ``bench/browser.py`` writes them)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for d in corpus:
        title = (d.get("title") or d["id"]).replace('"', "'").replace("\n", " ")
        (folder / f"{d['id']}.txt").write_text(
            f'---\ndoc_id: {d["id"]}\ntitle: "{title}"\nlanguage: {language}\n'
            f"sensitivity: PUBLIC\n---\n{d['text']}\n",
            encoding="utf-8",
        )


def build(
    name: str, corpus: list[dict], site: Path, wheels: tuple[Path, Path], meta_path: Path
) -> dict[str, Any]:
    """Build (or reuse) the site with MiniLM vectors; → build facts (times, counts)."""
    key = hashlib.sha256("\n".join(d["id"] for d in corpus).encode()).hexdigest()
    if meta_path.is_file() and bench_browser._current(site, wheels[0]):
        meta = json.loads(meta_path.read_text("utf-8"))
        manifest = json.loads((site / "manifest.json").read_text("utf-8"))
        if meta.get("key") == key and "embeddings" in manifest["entry"]:
            log(f"reusing the {name} site ({len(corpus)} paragraphs)")
            return {**meta, "reused": True}
    docs = site.parent / f"{site.name}-docs"
    write_docs(corpus, docs, LANGUAGES.get(name, ""))
    log(f"building the {name} site ({len(corpus)} paragraphs, MiniLM vectors)…")
    bar = build_wasm.ProgressBar(f"  {name}", min_total=20)
    last: dict[str, float] = {}

    def progress(done: int, total: int, item: str) -> None:
        last[item.partition(" ")[0]] = time.perf_counter()
        bar(done, total, item)

    started = time.perf_counter()
    try:
        manifest = build_wasm.build_site(
            [docs], site, title=name, wheel=wheels[0], micropip=wheels[1], demo=True,
            embeddings="minilm", progress=progress,
        )
    finally:
        shutil.rmtree(docs, ignore_errors=True)
    # The embedding phase follows indexing; its last report ends it.
    embed_s = last.get("embedding", started) - last.get("indexing", started)
    counts = manifest["counts"]
    meta = {
        "key": key,
        "paragraphs": len(corpus),
        "chunks": counts["chunks"],
        "vectors": manifest["entry"]["embeddings"]["vectors"],
        "build_s": time.perf_counter() - started,
        "embed_s": embed_s,
    }
    meta_path.write_text(json.dumps(meta, indent=2) + "\n", "utf-8")
    return {**meta, "reused": False}


def timed(call: Callable[[str], Any], texts: Sequence[str]) -> list[tuple[float, Any]]:
    out = []
    for text in texts:
        t = time.perf_counter()
        result = call(text)
        out.append(((time.perf_counter() - t) * 1000, result))
    return out


def run_cpython(site: Path, queries: list[str], passages: list[str]) -> dict[str, Any]:
    from ragspine_lite.bundle.runtime import BundleSearcher
    from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend

    backend = OnnxEmbeddingBackend()
    t = time.perf_counter()
    backend.embed_texts(["load the model"])
    result: dict[str, Any] = {"load_ms": (time.perf_counter() - t) * 1000}
    for w in WARMUPS:
        backend.embed_texts([w])
    result["embed"] = [{"ms": ms} for ms, _ in timed(lambda q: backend.embed_texts([q]), queries)]
    t = time.perf_counter()
    backend.embed_texts(passages)
    result["passageMs"] = (time.perf_counter() - t) * 1000
    with BundleSearcher(site / "data" / "chunks.db", embedding_backend=backend) as searcher:
        for mode in ("hybrid", "bm25"):
            def search(q: str, mode: str = mode) -> Any:
                return searcher.search(q, top_k=10, mode=mode, highlight=False)

            for w in WARMUPS:
                search(w)
            result[mode] = [
                {"ms": ms, "channel": (o.semantic or {}).get("channel")}
                for ms, o in timed(search, queries)
            ]
    return result


def run_browser(
    browser: Any, base: str, site_name: str, jspi: bool, queries: list[str], passages: list[str]
) -> dict[str, Any]:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.route("**/favicon.ico", lambda route: route.fulfill(status=204))
        page.on("pageerror", lambda err: log(f"  page error: {err}"))
        bundle = f"{base}{site_name}/"
        page.goto(f"{bundle}manifest.json")
        return page.evaluate(
            PAGE_JS,
            {"module": f"{bundle}ragspine-lite.mjs", "bundle": bundle, "jspi": jspi,
             "queries": queries, "warmups": list(WARMUPS), "passages": passages},
        )
    finally:
        context.close()


def folder_bytes(folder: Path) -> tuple[int, int]:
    files = [p for p in sorted(folder.rglob("*")) if p.is_file()]
    raw = sum(p.stat().st_size for p in files)
    return raw, sum(len(gzip.compress(p.read_bytes(), 6)) for p in files)


def check_prerequisites() -> str | None:
    """Why the benchmark cannot run here (``None``: it can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "needs Playwright: pip install playwright (and Chromium: apt-get install chromium)"
    if not Path(bench_browser.CHROMIUM).exists():
        return f"needs Chromium at {bench_browser.CHROMIUM}: apt-get install chromium"
    try:
        from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend

        OnnxEmbeddingBackend()
    except ImportError as exc:
        return f"needs the embed-onnx extra: {build_wasm.EMBED_ONNX_INSTALL} ({exc})"
    if not (build_wasm.PYODIDE_DIR / "pyodide.mjs").is_file():
        return "needs node_modules/pyodide: run npm ci"
    missing = [n for n in build_wasm.ORT_FILES if not (build_wasm.ORT_DIR / n).is_file()]
    if missing:
        return f"needs onnxruntime-web ({', '.join(missing)} missing): run npm ci"
    return None


def report(
    sets: list[str], results: dict[str, dict[str, Any]], builds: dict[str, dict[str, Any]],
    root: Path, args: argparse.Namespace,
) -> None:
    runtimes = ("cpython", *PATHS)
    first = results[sets[0]]
    versions = json.loads((root / f"{sets[0]}-p{args.paragraphs}" / "manifest.json")
                          .read_text("utf-8"))["runtimes"]
    print(f"\nSemantic channel speed: CPython vs headless Chromium "
          f"(Pyodide {versions.get('pyodide', '?')}, onnxruntime-web "
          f"{versions.get('onnxruntime_web', '?')}), model "
          f"{first['jspi']['opens'][0]['embeddings']['modelId']}, {os.cpu_count()} CPUs")
    print("ms per call, one query per call, wall time (Chromium: around the JS call, worker "
          "round trip included)\n")
    labels = {n: f"{n} ({builds[n]['paragraphs']} par.)" for n in sets}
    width = max(len(x) for x in labels.values())
    head = f"  {'set':{width}} {'operation':16}" + "".join(
        f" | {PATH_LABELS[r]:^17}" for r in runtimes)
    sub = f"  {'':{width}} {'':16}" + " | {:>8} {:>8}".format("p50", "p95") * len(runtimes)
    print(head)
    print(sub)
    print("  " + "-" * (len(head) - 2))
    for name in sets:
        label = labels[name]
        for key, op in OPERATIONS:
            row = f"  {label:{width}} {op:16}"
            label = ""
            for r in runtimes:
                ms = [x["ms"] for x in results[name][r][key]]
                row += f" | {pct(ms, 0.5):8.2f} {pct(ms, 0.95):8.2f}"
            print(row)
    counts = [f"{n}: {len(results[n]['cpython']['embed'])} queries" for n in sets]
    print(f"  ({', '.join(counts)})")

    print("\nModel load in the browser (ms): loadMs = fetch + onnxruntime-web session, overlapped"
          " with the Pyodide boot;\n  model phase = what open() still waited for it after the"
          " install; open = the whole open() call")
    for name in sets:
        for path in PATHS:
            opened = results[name][path]["opens"][0]
            emb = opened["embeddings"] or {}
            print(f"  {name:12} {PATH_LABELS[path]:17} loadMs {emb.get('loadMs', 0):7.0f}"
                  f"   model phase {opened['timings'].get('model', 0):6.0f}"
                  f"   open {opened['ms']:7.0f}   jspi in use: {emb.get('jspi')}")
        print(f"  {name:12} {'CPython':17} first embed_texts call (session create) "
              f"{results[name]['cpython']['load_ms']:7.0f}")

    print("\nBrowser split of a hybrid search (p50 ms): Python = tookMs in Pyodide (with JSPI it"
          " includes the model);\n  model = the no-JSPI worker's modelMs (run in JS before"
          " Python)")
    for name in sets:
        parts = []
        for path in PATHS:
            rows = results[name][path]["hybrid"]
            took = pct([x["took"] for x in rows], 0.5)
            text = f"{PATH_LABELS[path]}: Python {took:.2f}"
            model = [x["modelMs"] for x in rows if x["modelMs"] is not None]
            if model:
                text += f", model {pct(model, 0.5):.2f}"
            parts.append(text)
        print(f"  {name:12} " + "; ".join(parts))

    print("\nBundle bytes (raw / gzip -6)")
    shared = root / f"{sets[0]}-p{args.paragraphs}"
    for part in ("models", "ort"):
        raw, gz = folder_bytes(shared / part)
        print(f"  {part + '/':24} {raw:12,} {gz:12,}")
    for name in sets:
        raw, gz = folder_bytes(root / f"{name}-p{args.paragraphs}" / "data")
        print(f"  {'data/ (' + name + ')':24} {raw:12,} {gz:12,}")

    print("\nBuild-time embedding (CPython onnxruntime, build_site(embeddings='minilm'))")
    for name in sets:
        b = builds[name]
        rate = b["vectors"] / b["embed_s"] if b["embed_s"] > 0 else float("nan")
        reused = " (reused from --work; times of its build)" if b["reused"] else ""
        print(f"  {name:12} {b['paragraphs']} paragraphs, {b['chunks']} chunks: build "
              f"{b['build_s']:.1f} s, embedding ≈{b['embed_s']:.1f} s = {rate:.1f} chunks/s"
              f"{reused}")
    print(f"  passage embedding, {PASSAGES} paragraphs in one call (paragraphs/s):")
    for name in sets:
        n = min(PASSAGES, builds[name]["paragraphs"])
        rates = "   ".join(
            f"{PATH_LABELS[r]} {n / results[name][r]['passageMs'] * 1000:6.1f}" for r in runtimes
        )
        print(f"  {name:12} {rates}")

    print("\nChannel of the hybrid searches (share of queries)")
    for name in sets:
        parts = []
        for r in runtimes:
            counts = Counter(x["channel"] for x in results[name][r]["hybrid"])
            total = sum(counts.values())
            parts.append(f"{PATH_LABELS[r]}: " + ", ".join(
                f"{c} {n / total:.0%}" for c, n in counts.most_common()))
        print(f"  {name:12} " + (";\n" + " " * 15).join(parts))
    print("  MiniLM is English-only: a query whose word pieces it mostly does not know (Chinese)"
          " is gated to\n  BM25 ('bm25:outside-vocabulary'), so there 'hybrid search' = the"
          " coverage check + BM25,\n  while 'query embedding' still runs the model.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=bench_browser.DEFAULT_DATA)
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated set names")
    parser.add_argument("--paragraphs", type=int, default=1000,
                        help="paragraphs per set, answers of the queries first (1000)")
    parser.add_argument("--queries", type=int, default=100, help="queries per set (100)")
    parser.add_argument("--work", type=Path, help="keep built sites here and reuse them")
    args = parser.parse_args(argv)
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    if not sets or args.paragraphs < 1 or args.queries < 1:
        parser.error("--sets, --paragraphs and --queries must be non-empty / positive")
    for name in sets:
        if not (args.data / name / "corpus.jsonl").is_file():
            parser.error(f"no retrieval set {name!r} in {args.data}")
    problem = check_prerequisites()
    if problem:
        print(problem, file=sys.stderr)
        return 2

    work = args.work or Path(tempfile.mkdtemp(prefix="ragspine-bench-emb-"))
    try:
        return run(args, sets, work)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, sets: list[str], work: Path) -> int:
    from playwright.sync_api import sync_playwright

    root = work / "root"
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        log("building the ragspine_lite wheel…")
        wheel_dir = work / "wheels"
        shutil.rmtree(wheel_dir, ignore_errors=True)
        wheels = (build_wasm.build_wheel(wheel_dir), build_wasm.find_micropip())
        subsets: dict[str, tuple[list[str], list[str]]] = {}
        builds: dict[str, dict[str, Any]] = {}
        for name in sets:
            corpus, queries = bench_browser.load_set(args.data / name, 10**9)
            corpus, queries = select(corpus, queries, args.paragraphs, args.queries)
            site = root / f"{name}-p{args.paragraphs}"
            builds[name] = build(name, corpus, site, wheels, work / f"{site.name}.build.json")
            subsets[name] = ([q["text"] for q in queries], [d["text"] for d in corpus][:PASSAGES])
    except build_wasm.BuildError as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1

    results: dict[str, dict[str, Any]] = {name: {} for name in sets}
    for name in sets:
        log(f"CPython: {name}…")
        results[name]["cpython"] = run_cpython(root / f"{name}-p{args.paragraphs}", *subsets[name])

    server = build_wasm.make_server(root)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=bench_browser.CHROMIUM, args=bench_browser.CHROMIUM_ARGS
            )
            try:
                for name in sets:
                    for path in PATHS:
                        log(f"{PATH_LABELS[path]}: {name}…")
                        results[name][path] = run_browser(
                            browser, base, f"{name}-p{args.paragraphs}", path == "jspi",
                            *subsets[name],
                        )
            finally:
                browser.close()
    finally:
        server.shutdown()

    report(sets, results, builds, root, args)
    log(f"done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
