"""ragspine_lite in headless Chromium vs MiniSearch and FlexSearch, in the same page.

    python bench/browser.py [--data DIR] [--queries N] [--repeats R] [--work DIR]

Builds one static bundle per retrieval set (``squad_train``: 10k English paragraphs;
``cmrc_train``: Chinese) with ``build_wasm.py``, serves everything from 127.0.0.1 and drives
Debian's Chromium (``/usr/bin/chromium``) with Playwright. It prints:

* start-up of the demo page (navigation → first result on screen) on a cold visit (fresh
  browser context, empty cache) and a warm one (same context, second visit), with the
  worker's phases (Pyodide boot, micropip + wheel install, index open) and, for reference,
  a bare Pyodide boot in a worker on the same visit;
* per set, one row per engine: index build/open time, query latency p50/p95 (ours measured
  around the JS call: worker round trip + Python), and Recall@10 on the set's qrels, with
  MiniSearch 7 and FlexSearch 0.8 (npm) indexing the same paragraphs in the same page;
* the bundle's bytes by part, raw and gzip.

Peers get the same tokenizer as ours (lower-cased ASCII words, CJK unigrams + bigrams) so
Chinese is comparable; MiniSearch runs OR queries, FlexSearch ``suggest: true``. Ours indexes
chunks (a long paragraph becomes two), peers whole paragraphs; a hit is a chunk or paragraph
whose paragraph id is the relevant one. ``--work DIR`` keeps the built sites and reuses them
while the package code is unchanged.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import sys
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import build_wasm  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
SETS = ("squad_train", "cmrc_train")
TIMEOUT_MS = 600_000

BENCH_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>bench</title>
<link rel="icon" href="data:,"><script type="module" src="bench.mjs"></script></head>
<body>bench</body></html>
"""

BARE_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>bare</title>
<link rel="icon" href="data:,"></head><body><script type="module">
const set = new URLSearchParams(location.search).get("set");
const worker = new Worker(new URL("bare-worker.mjs", location.href), {type: "module"});
worker.onmessage = (e) => { window.bareResult = {...e.data, readyAt: performance.now()}; };
worker.postMessage(new URL(`../${set}/pyodide/`, location.href).href);
</script></body></html>
"""

BARE_WORKER = """self.onmessage = async (e) => {
  const t0 = performance.now();
  const { loadPyodide } = await import(e.data + "pyodide.mjs");
  await loadPyodide({ indexURL: e.data });
  self.postMessage({ boot: performance.now() - t0 });
};
"""

BENCH_JS = r"""
import { RagSpineLite } from "../SET_PLACEHOLDER/ragspine-lite.mjs";
import MiniSearch from "./vendor/minisearch.js";
import { Index as FlexIndex } from "./vendor/flexsearch.mjs";

const params = new URLSearchParams(location.search);
const set = params.get("set");
const TOKEN = /[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+/g;
function tokenize(text) {
  const out = [];
  for (const run of text.toLowerCase().match(TOKEN) || []) {
    if (run.charCodeAt(0) < 128) { out.push(run); continue; }
    for (const c of run) out.push(c);
    for (let i = 0; i + 1 < run.length; i++) out.push(run.slice(i, i + 2));
  }
  return out;
}
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};

async function run() {
  const data = await (await fetch(`./${set}.json`)).json();
  const queries = data.queries;
  const result = { set, paragraphs: data.corpus.length, queries: queries.length, engines: {} };
  const measure = async (name, search, openMs) => {
    for (const q of queries.slice(0, 5)) await search(q.text);  // warm-up, not counted
    const lat = []; let hits = 0;
    for (const q of queries) {
      const t = performance.now();
      const ids = await search(q.text);
      lat.push(performance.now() - t);
      if (ids.slice(0, 10).includes(q.rel)) hits += 1;
    }
    result.engines[name] = {
      open_ms: openMs, p50: pct(lat, 0.5), p95: pct(lat, 0.95), recall10: hits / queries.length,
    };
  };

  let t0 = performance.now();
  const rs = await RagSpineLite.open({ bundle: `../${set}/` });
  const openMs = performance.now() - t0;
  const pyTimes = [];
  await measure("ragspine_lite", async (q) => {
    const r = await rs.searchDetailed(q, { topK: 10, highlight: false }); // = rs.search()
    pyTimes.push(r.tookMs);
    return r.results.map((s) => s.doc_id);
  }, openMs);
  result.engines.ragspine_lite.python_p50 = pct(pyTimes, 0.5);
  result.engines.ragspine_lite.timings = rs.info.timings;
  rs.close();

  t0 = performance.now();
  const mini = new MiniSearch({ fields: ["text"], idField: "id", tokenize, processTerm: (t) => t });
  mini.addAll(data.corpus);
  const miniMs = performance.now() - t0;
  await measure("MiniSearch", async (q) =>
    mini.search(q, { combineWith: "OR" }).slice(0, 10).map((h) => h.id), miniMs);

  t0 = performance.now();
  const flex = new FlexIndex({ tokenize: "strict", encode: tokenize });
  data.corpus.forEach((d, i) => flex.add(i, d.text));
  const flexMs = performance.now() - t0;
  await measure("FlexSearch", async (q) =>
    flex.search(q, { limit: 10, suggest: true }).map((i) => data.corpus[i].id), flexMs);
  window.benchResult = result;
}
run().catch((err) => { window.benchResult = { error: String(err && err.stack || err) }; });
"""


def load_set(path: Path, n_queries: int) -> tuple[list[dict], list[dict]]:
    def jsonl(p: Path) -> list[dict]:
        return [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines() if x.strip()]

    corpus = jsonl(path / "corpus.jsonl")
    rows = (path / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]
    qrels = {q: d for q, d, *_ in (r.split("\t") for r in rows if r)}
    queries = [
        {"text": q["text"], "rel": qrels[q["id"]]}
        for q in jsonl(path / "queries.jsonl")
        if q["id"] in qrels
    ][:n_queries]
    return corpus, queries


def build_set(name: str, corpus: list[dict], site: Path, language: str, wheels: tuple) -> None:
    docs = site.parent / f"{name}-docs"
    if docs.exists():
        shutil.rmtree(docs)
    docs.mkdir(parents=True)
    for d in corpus:
        title = (d.get("title") or d["id"]).replace('"', "'").replace("\n", " ")
        (docs / f"{d['id']}.txt").write_text(
            f'---\ndoc_id: {d["id"]}\ntitle: "{title}"\nlanguage: {language}\n'
            f"sensitivity: PUBLIC\n---\n{d['text']}\n",
            encoding="utf-8",
        )
    print(f"building the {name} bundle ({len(corpus)} documents)…", file=sys.stderr, flush=True)
    build_wasm.build_site(
        [docs], site, title=name, wheel=wheels[0], micropip=wheels[1], demo=True,
        progress=build_wasm.ProgressBar(f"  {name}", min_total=20),
    )
    shutil.rmtree(docs)


def _members(wheel: Path) -> list[tuple[str, int]]:
    with zipfile.ZipFile(wheel) as archive:
        return sorted((i.filename, i.CRC) for i in archive.infolist())


def _current(site: Path, wheel: Path) -> bool:
    """A site kept in --work is reused only if it holds the same package and web code."""
    shipped = sorted((site / "wheels").glob("ragspine_lite-*.whl"))
    if not (site / "manifest.json").is_file() or len(shipped) != 1:
        return False
    web = build_wasm.WEB_DIR
    same_web = all(
        (site / n).is_file() and (site / n).read_bytes() == (web / n).read_bytes()
        for n in (*build_wasm.RUNTIME_FILES, *build_wasm.DEMO_FILES)
    )
    return same_web and _members(shipped[0]) == _members(wheel)


def sizes(site: Path) -> list[tuple[str, int, int]]:
    parts: dict[str, list[Path]] = {
        "Pyodide runtime (pyodide/)": sorted((site / "pyodide").iterdir()),
        "micropip wheel": sorted((site / "wheels").glob("micropip-*.whl")),
        "ragspine_lite wheel": sorted((site / "wheels").glob("ragspine_lite-*.whl")),
        "chunk store + BM25 index": [site / "data" / "chunks.db"],
        "web runtime (.mjs, .d.ts)": [site / n for n in build_wasm.RUNTIME_FILES],
        "demo page": [site / n for n in build_wasm.DEMO_FILES],
        "manifest.json": [site / "manifest.json"],
    }
    out = []
    for label, files in parts.items():
        raw = sum(f.stat().st_size for f in files)
        gz = sum(len(gzip.compress(f.read_bytes(), 6)) for f in files)
        out.append((label, raw, gz))
    return out


def startup(browser: Any, base: str, query: str, repeats: int) -> dict[str, list[float]]:
    url = f"{base}squad_train/index.html?q={query}"
    samples: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        samples.setdefault(key, []).append(value)

    def visit(page: Any, prefix: str) -> None:
        page.goto(url)
        page.wait_for_function(
            "window.ragspineDemo && (window.ragspineDemo.marks.firstResult"
            " || document.body.dataset.state === 'error')", timeout=TIMEOUT_MS,
        )
        demo = page.evaluate(
            "({marks: ragspineDemo.marks, timings: ragspineDemo.info.timings,"
            " origin: performance.timeOrigin})"
        )
        add(f"{prefix} first result", demo["marks"]["firstResult"])
        first_at = demo["origin"] + demo["marks"]["firstResult"]
        add(f"{prefix} Pyodide up → first result", first_at - demo["timings"]["bootEndedAt"])
        for phase in ("boot", "install", "index"):
            add(f"{prefix} {phase}", demo["timings"][phase])

    def bare(page: Any, prefix: str) -> None:
        page.goto(f"{base}bench/bare.html?set=squad_train")
        page.wait_for_function("window.bareResult", timeout=TIMEOUT_MS)
        result = page.evaluate("window.bareResult")
        add(f"{prefix} bare Pyodide boot (worker)", result["boot"])
        add(f"{prefix} bare Pyodide ready (navigation)", result["readyAt"])

    for _ in range(repeats):
        context = browser.new_context()
        page = context.new_page()
        visit(page, "cold")
        visit(page, "warm")
        bare(page, "warm")
        context.close()
        context = browser.new_context()
        bare(context.new_page(), "cold")
        context.close()
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--queries", type=int, default=200, help="queries per set (200)")
    parser.add_argument("--repeats", type=int, default=3, help="start-up repeats (3)")
    parser.add_argument("--work", type=Path, help="keep built sites here and reuse them")
    args = parser.parse_args(argv)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("needs playwright: pip install playwright (and apt-get install chromium)")
        return 2
    if not Path(CHROMIUM).exists():
        print(f"needs Chromium at {CHROMIUM}: apt-get install chromium")
        return 2

    work = args.work or Path(tempfile.mkdtemp(prefix="ragspine-bench-"))
    root = work / "root"
    root.mkdir(parents=True, exist_ok=True)
    bench_dir = root / "bench"
    vendor = bench_dir / "vendor"
    vendor.mkdir(parents=True, exist_ok=True)
    node = REPO / "node_modules"
    shutil.copy2(node / "minisearch" / "dist" / "es" / "index.js", vendor / "minisearch.js")
    shutil.copy2(
        node / "flexsearch" / "dist" / "flexsearch.bundle.module.min.mjs", vendor / "flexsearch.mjs"
    )
    (bench_dir / "bench.html").write_text(BENCH_HTML, "utf-8")
    (bench_dir / "bare.html").write_text(BARE_HTML, "utf-8")
    (bench_dir / "bare-worker.mjs").write_text(BARE_WORKER, "utf-8")

    wheel_dir = work / "wheels"
    shutil.rmtree(wheel_dir, ignore_errors=True)
    wheels = (build_wasm.build_wheel(wheel_dir), build_wasm.find_micropip())
    languages = {"squad_train": "en", "cmrc_train": "zh"}
    first_query = ""
    for name in SETS:
        corpus, queries = load_set(args.data / name, args.queries)
        if name == "squad_train":
            first_query = queries[0]["text"]
        site = root / name
        if not _current(site, wheels[0]):
            build_set(name, corpus, site, languages[name], wheels)
        (bench_dir / f"{name}.json").write_text(
            json.dumps({"corpus": [{"id": d["id"], "text": d["text"]} for d in corpus],
                        "queries": queries}, ensure_ascii=False), "utf-8")

    server = build_wasm.make_server(root)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    results = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            boot = startup(browser, base, first_query.replace(" ", "+"), args.repeats)
            for name in SETS:
                js = BENCH_JS.replace("SET_PLACEHOLDER", name)
                (bench_dir / "bench.mjs").write_text(js, "utf-8")
                context = browser.new_context()
                page = context.new_page()
                page.goto(f"{base}bench/bench.html?set={name}")
                page.wait_for_function("window.benchResult", timeout=TIMEOUT_MS)
                results[name] = page.evaluate("window.benchResult")
                context.close()
                if "error" in results[name]:
                    print(f"{name}: {results[name]['error']}")
                    return 1
        finally:
            browser.close()
            server.shutdown()

    version = json.loads((root / "squad_train" / "manifest.json").read_text("utf-8"))["runtimes"]
    print(f"\nragspine_lite browser benchmark — headless Chromium ({CHROMIUM}), Pyodide "
          f"{version['pyodide']} (Python {version['python']}), served from 127.0.0.1, "
          f"median of {args.repeats}\n")
    print("Start-up of the demo page on squad_train (ms)")
    print(f"  {'':44} {'cold':>8} {'warm':>8}")
    keys = ["first result", "boot", "install", "index", "Pyodide up → first result",
            "bare Pyodide boot (worker)", "bare Pyodide ready (navigation)"]
    for key in keys:
        cold = boot.get(f"cold {key}")
        warm = boot.get(f"warm {key}")
        label = "navigation → first result" if key == "first result" else f"  {key}"
        fmt = lambda xs: f"{statistics.median(xs):8.0f}" if xs else f"{'-':>8}"  # noqa: E731
        print(f"  {label:44} {fmt(cold or [])} {fmt(warm or [])}")
    gap = statistics.median(boot["warm Pyodide up → first result"])
    print(f"  warm visit, Pyodide booted → first result on screen: {gap:.0f} ms (goal ≤ 1500)\n")

    header = f"  {'engine':16}" + "".join(
        f" | {name + ' (' + str(results[name]['paragraphs']) + ' par.)':^37}" for name in SETS)
    print("Queries (ms; ours = rs.search(): JS → worker → Python → back; peers in the page thread)")
    print(header)
    print(f"  {'':16}" + " | {:>8} {:>6} {:>6} {:>6} {:>6}".format(
        "open/idx", "p50", "p95", "R@10", "") * len(SETS))
    for engine in ("ragspine_lite", "MiniSearch", "FlexSearch"):
        row = f"  {engine:16}"
        for name in SETS:
            e = results[name]["engines"][engine]
            row += (
                f" | {e['open_ms']:8.0f} {e['p50']:6.2f} {e['p95']:6.1f}"
                f" {e['recall10']:6.3f} {'':6}"
            )
        print(row)
    for name in SETS:
        ours = results[name]["engines"]["ragspine_lite"]
        mini = results[name]["engines"]["MiniSearch"]
        print(f"  {name}: ours p50 / MiniSearch p50 = {ours['p50'] / max(mini['p50'], 1e-6):.1f}× "
              f"(goal ≤ 3×); Python-side p50 {ours['python_p50']:.2f} ms; "
              f"{results[name]['queries']} queries")
    print()
    print("Bundle bytes (squad_train site; cmrc_train differs only in the chunk store)")
    print(f"  {'part':32} {'raw':>12} {'gzip':>12}")
    total_raw = total_gz = 0
    for label, raw, gz in sizes(root / "squad_train"):
        total_raw += raw
        total_gz += gz
        print(f"  {label:32} {raw:12,} {gz:12,}")
    print(f"  {'total':32} {total_raw:12,} {total_gz:12,}")
    store = root / "cmrc_train" / "data" / "chunks.db"
    print(f"  {'cmrc_train chunk store':32} {store.stat().st_size:12,} "
          f"{len(gzip.compress(store.read_bytes(), 6)):12,}")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
