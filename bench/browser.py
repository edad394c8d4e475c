"""ragspine_lite in headless Chromium vs MiniSearch and FlexSearch, in the same page.

    python bench/browser.py [--data DIR] [--queries N] [--repeats R] [--work DIR] [--startup-only]
    python bench/browser.py --bytes [--sizes 1000,10000] [--sources html,md] [--shaped]
                            [--engines …] [--waterfall] [--plot PNG]

Builds one static bundle per retrieval set (``squad_train``: 10k English paragraphs;
``cmrc_train``: Chinese) and the sample-corpus site with ``build_wasm.py``, serves everything
from 127.0.0.1 and drives Debian's Chromium (``/usr/bin/chromium``) with Playwright. It prints:

* start-up to the first result (navigation → ``rs.search()`` resolved) on the samples and
  squad_train sites, on a cold visit (fresh browser context: empty HTTP cache and Cache API)
  and a warm one (same context, second visit), for the shipped boot (runtime files kept in the
  Cache API, the wheel unpacked into site-packages) and the former one (HTTP cache only,
  micropip), with the bytes Chromium received and the worker's phases (Pyodide boot, wheel
  install, index open);
* per set, one row per engine: index build/open time, query latency p50/p95 (ours measured
  around the JS call: worker round trip + Python), and Recall@10 on the set's qrels, with
  MiniSearch 7 and FlexSearch 0.8 (npm) indexing the same paragraphs in the same page;
* the bundle's bytes by part, raw and gzip.

Peers get the same tokenizer as ours (lower-cased ASCII words, CJK unigrams + bigrams) so
Chinese is comparable; MiniSearch runs OR queries, FlexSearch ``suggest: true``. Ours indexes
chunks (a long paragraph becomes two), peers whole paragraphs; a hit is a chunk or paragraph
whose paragraph id is the relevant one. ``--work DIR`` keeps the built sites and reuses them
while the package code is unchanged.

``--bytes`` instead measures what a visitor's first search downloads and how long it takes
(sites of 1k / 10k / 100k pages, HTML and/or Markdown sources, on a bare or a shaped link,
next to Pagefind, MiniSearch and FlexSearch): see ``bench/browser_bytes.py``.
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
from urllib.parse import quote_plus

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import build_wasm  # noqa: E402
from ragspine_lite.cli import samples_dir  # noqa: E402

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

STARTUP_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>startup</title>
<link rel="icon" href="data:,"></head><body><script type="module">
const p = new URLSearchParams(location.search);
const site = `../${p.get("site")}/`;
try {
  const { RagSpineLite } = await import(site + "ragspine-lite.mjs");
  const rs = await RagSpineLite.open({
    bundle: site, cache: p.get("cache") !== "0", install: p.get("install") || "unpack",
    snapshot: p.get("snapshot") !== "0" });
  const hits = await rs.search(p.get("q"), { topK: 10 });
  window.startup = { firstResult: performance.now(), hits: hits.length, timings: rs.info.timings,
                     cache: rs.info.cache };
  rs.close();
} catch (err) { window.startup = { error: String(err && err.stack || err) }; }
</script></body></html>
"""
# Start-up variants: the shipped default first, then one step of it off at a time, down to
# the former boot (HTTP cache only, micropip, no snapshot).
VARIANTS = {
    "Cache API + unpack + snapshot (default)": "cache=1&install=unpack&snapshot=1",
    "Cache API + unpack, no snapshot": "cache=1&install=unpack&snapshot=0",
    "Cache API + micropip, no snapshot": "cache=1&install=micropip&snapshot=0",
    "HTTP cache only + micropip (before)": "cache=0&install=micropip&snapshot=0",
}

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


def _current(site: Path, wheel: Path, *, demo: bool = True) -> bool:
    """A site kept in --work is reused only if it holds the same package and web code
    (``demo``: and the same demo page)."""
    shipped = sorted((site / "wheels").glob("ragspine_lite-*.whl"))
    if not (site / "manifest.json").is_file() or len(shipped) != 1:
        return False
    web = build_wasm.WEB_DIR
    same_web = all(
        (site / n).is_file() and (site / n).read_bytes() == (web / n).read_bytes()
        for n in (*build_wasm.RUNTIME_FILES, *(build_wasm.DEMO_FILES if demo else ()))
    )
    return same_web and _members(shipped[0]) == _members(wheel)


def sizes(site: Path) -> list[tuple[str, int, int]]:
    parts: dict[str, list[Path]] = {
        "Pyodide runtime (pyodide/)": sorted((site / "pyodide").iterdir()),
        "micropip wheel": sorted((site / "wheels").glob("micropip-*.whl")),
        "ragspine_lite wheel": sorted((site / "wheels").glob("ragspine_lite-*.whl")),
        "index shards (data/)": sorted(p for p in (site / "data").rglob("*") if p.is_file()),
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


def _network_bytes(request: Any) -> int:
    """Bytes a finished request moved over the network (0 when the HTTP cache answered)."""
    try:
        sizes = request.sizes()
    except Exception:
        return 0
    return sizes["responseBodySize"] + sizes["responseHeadersSize"]


def startup(browser: Any, base: str, sites: dict[str, str], repeats: int) -> dict[str, Any]:
    """Cold and warm start-up per site and per (install, cache) variant: ms to the first
    result, bytes over the network, and which runtime files the Cache API served."""
    samples: dict[str, list[float]] = {}
    files: dict[str, Any] = {}

    def add(key: str, value: float) -> None:
        samples.setdefault(key, []).append(value)

    def visit(context: Any, page: Any, key: str, url: str) -> None:
        finished: list[Any] = []
        listener = lambda request: finished.append(request)  # noqa: E731
        context.on("requestfinished", listener)
        page.goto(url)
        page.wait_for_function("window.startup", timeout=TIMEOUT_MS)
        out = page.evaluate("window.startup")
        context.remove_listener("requestfinished", listener)
        if "error" in out:
            raise RuntimeError(f"{url}: {out['error']}")
        add(f"{key} first result", out["firstResult"])
        add(f"{key} network bytes", sum(_network_bytes(r) for r in finished))
        for phase in ("boot", "install", "index"):
            add(f"{key} {phase}", out["timings"][phase])
        files[key] = out["cache"]

    for _ in range(repeats):
        for site, query in sites.items():
            for variant, params in VARIANTS.items():
                url = f"{base}bench/startup.html?site={site}&q={quote_plus(query)}&{params}"
                context = browser.new_context()
                page = context.new_page()
                visit(context, page, f"{site}|{variant}|cold", url)
                visit(context, page, f"{site}|{variant}|warm", url)
                context.close()
    return {"samples": samples, "files": files}


def print_startup(result: dict[str, Any], sites: list[str], repeats: int) -> None:
    samples = result["samples"]
    med = lambda key: statistics.median(samples[key])  # noqa: E731
    print(f"Start-up to the first result (navigation → rs.search() resolved), median of {repeats}; "
          "network = bytes Chromium received (HTTP-cache and Cache API hits move none)")
    print(f"  {'site':12} {'variant':40} {'cold ms':>8} {'warm ms':>8} {'warm/cold':>9} "
          f"{'cold net':>11} {'warm net':>11}   warm: boot / install / index ms")
    for site in sites:
        for variant in VARIANTS:
            k = f"{site}|{variant}"
            cold, warm = med(f"{k}|cold first result"), med(f"{k}|warm first result")
            phases = " / ".join(f"{med(f'{k}|warm {p}'):.0f}" for p in ("boot", "install", "index"))
            print(f"  {site:12} {variant:40} {cold:8.0f} {warm:8.0f} {warm / cold:9.2f} "
                  f"{med(f'{k}|cold network bytes'):11,.0f} {med(f'{k}|warm network bytes'):11,.0f}"
                  f"   {phases}")
    warm = result["files"].get(f"{sites[-1]}|{next(iter(VARIANTS))}|warm")
    if warm:
        print(f"  warm visit of {sites[-1]}: from the Cache API {', '.join(warm['cached'])}; "
              f"fetched {', '.join(warm['fetched']) or 'nothing'}")
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--queries", type=int, default=200,
                        help="queries per set; --bytes: questions, each a cold visit and "
                        "all of them for quality (200)")
    parser.add_argument("--repeats", type=int, default=3, help="start-up repeats (3)")
    parser.add_argument("--work", type=Path, help="keep built sites here and reuse them")
    parser.add_argument("--startup-only", action="store_true",
                        help="only the cold/warm start-up table (skip the query comparison)")
    parser.add_argument("--bytes", action="store_true",
                        help="bytes and time to the first result vs Pagefind, MiniSearch and "
                        "FlexSearch at --sizes pages (instead of the start-up and query tables)")
    import browser_bytes  # the --bytes mode (bench/browser_bytes.py)

    browser_bytes.add_arguments(parser)
    args = parser.parse_args(argv)
    browser_bytes.check_arguments(parser, args)
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
    (bench_dir / "startup.html").write_text(STARTUP_HTML, "utf-8")

    wheel_dir = work / "wheels"
    shutil.rmtree(wheel_dir, ignore_errors=True)
    wheels = (build_wasm.pack_wheel(wheel_dir), build_wasm.find_micropip())
    if args.bytes:
        return browser_bytes.bytes_main(args, work, wheels)
    languages = {"squad_train": "en", "cmrc_train": "zh"}
    first_query = ""
    if not _current(root / "samples", wheels[0]):
        shutil.rmtree(root / "samples", ignore_errors=True)
        build_wasm.build_site([samples_dir()], root / "samples", title="samples", wheel=wheels[0],
                              micropip=wheels[1], demo=True)
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
            sites = {"samples": "Hong Kong new sales", "squad_train": first_query}
            boot = startup(browser, base, sites, args.repeats)
            for name in () if args.startup_only else SETS:
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
    print_startup(boot, list(sites), args.repeats)
    if args.startup_only:
        return 0

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
    print("Bundle bytes (squad_train site; cmrc_train differs only in its index shards)")
    print(f"  {'part':32} {'raw':>12} {'gzip':>12}")
    total_raw = total_gz = 0
    for label, raw, gz in sizes(root / "squad_train"):
        total_raw += raw
        total_gz += gz
        print(f"  {label:32} {raw:12,} {gz:12,}")
    print(f"  {'total':32} {total_raw:12,} {total_gz:12,}")
    index = [p for p in (root / "cmrc_train" / "data").rglob("*") if p.is_file()]
    print(f"  {'cmrc_train index shards':32} {sum(p.stat().st_size for p in index):12,} "
          f"{sum(len(gzip.compress(p.read_bytes(), 6)) for p in index):12,}")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
