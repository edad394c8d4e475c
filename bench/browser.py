"""ragspine_lite in headless Chromium vs MiniSearch and FlexSearch, in the same page.

    python bench/browser.py [--data DIR] [--queries N] [--repeats R] [--work DIR] [--startup-only]
    python bench/browser.py --bytes [--sizes 1000,10000,100000] [--engines …] [--plot PNG]

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

``--bytes`` instead measures what a visitor downloads: sites of 1k / 10k / 100k HTML pages
(squad_train paragraphs, topped up beyond 10k with pages of sentences from non-gold
paragraphs), each indexed by ragspine_lite (``build_wasm.py``), Pagefind 1.6 (npm binary) and
MiniSearch / FlexSearch (index serialised at build time, loaded whole). A counting server
(gzip for text, like a static host) logs every request; per engine and size it prints the
runtime vs corpus-dependent bytes of a cold first query, of ten more, and of a warm return
visit, the time from navigation to the first result, and the gold page in the top 5 / 10
over ``--queries`` SQuAD questions; ``--plot`` draws bytes and time against corpus size.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import hashlib
import html
import http.server
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus, unquote, urlsplit

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


# ---------------------------------------------------------------- bytes and time (--bytes)

# ragspine_lite answers its first query from the worker's instant lane (JavaScript) while
# Pyodide boots behind it; "ragspine_lite:full" waits for Pyodide (open({instant: false})).
BYTES_ENGINES = ("ragspine_lite", "ragspine_lite:full", "Pagefind", "MiniSearch", "FlexSearch")
# A site page embedding <ragspine-search> that the visitor never searches (boot on intent).
IDLE_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>idle</title>
<link rel="icon" href="data:,"><script type="module" src="../bytes/{n}/rs/ragspine-search.mjs">
</script></head><body><h1>A page</h1><ragspine-search bundle="../bytes/{n}/rs/"></ragspine-search>
</body></html>
"""
IDLE_MS = 2000
BYTES_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>bytes</title>
<link rel="icon" href="data:,"><script type="module" src="browser_bytes.mjs"></script></head>
<body>bytes</body></html>
"""
PAGE_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>
<body><main><h1>{title}</h1>
<p>{text}</p>
</main></body></html>
"""
# What a static host gzips on the fly (pack files, wheels and pagefind's files are compressed).
GZIP_SUFFIXES = {".html", ".mjs", ".js", ".css", ".json", ".jsonl", ".wasm", ".ts", ".txt"}
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")
MIX_SENTENCES = 5
STORE = "store.db"  # the bundle's exported chunk store, kept beside it for the SQLite path


def page_of(url: str) -> str:
    """``…/pages/en-0123.html#intro`` → ``en-0123`` (as bench/browser_bytes.mjs names pages)."""
    return unquote(url.split("#")[0].rsplit("/", 1)[-1]).removesuffix(".html")


def make_corpus(data: Path, n: int, n_queries: int) -> tuple[list[dict], list[dict]]:
    """``n`` English pages and ``n_queries`` questions with their gold page, from squad_train.

    Up to its 10,000 paragraphs: the questions' gold paragraphs plus the other paragraphs in
    file order. Beyond: every paragraph plus pages of ``MIX_SENTENCES`` sentences drawn (fixed
    seed) from paragraphs that are no question's gold, so the extra pages carry real
    vocabulary and term statistics but never a gold paragraph's text.
    """
    corpus, every = load_set(data / "squad_train", 10**9)
    queries, gold = every[:n_queries], {q["rel"] for q in every}
    wanted = {q["rel"] for q in queries}
    others = [d["id"] for d in corpus if d["id"] not in wanted][: max(0, n - len(wanted))]
    kept = wanted | set(others)
    pages = [d for d in corpus if d["id"] in kept]  # file order: the same pages, the same site
    rng = random.Random(20240531)
    pool = [(d["title"], s) for d in corpus if d["id"] not in gold
            for s in SENTENCE.split(d["text"])]
    for i in range(n - len(pages)):
        picked = rng.sample(pool, MIX_SENTENCES)
        text = " ".join(s for _, s in picked)
        pages.append({"id": f"mix-{i:06d}", "title": picked[0][0], "text": text})
    return pages, queries


def write_pages(pages: list[dict], folder: Path) -> None:
    """One HTML page per document, named by its id (what every engine indexes)."""
    folder.mkdir(parents=True)
    for d in pages:
        title, body = html.escape(d["title"]), html.escape(d["text"])
        (folder / f"{d['id']}.html").write_text(PAGE_HTML.format(title=title, text=body), "utf-8")


def build_bytes_site(site: Path, pages: list[dict], wheels: tuple, engines: list[str]) -> None:
    """``site/pages`` (+ Pagefind's ``pages/pagefind``), ``site/rs`` (our bundle) and
    ``site/peers`` (MiniSearch and FlexSearch indexes, serialised whole, + the page list).
    Parts already built for the same pages (and, for ``rs``, the same package) are kept."""
    stamp = hashlib.sha256(json.dumps(pages, sort_keys=True).encode()).hexdigest()
    if not (site / "pages" / f".{stamp}").is_file():
        shutil.rmtree(site, ignore_errors=True)
        write_pages(pages, site / "pages")
        (site / "pages" / f".{stamp}").touch()
    n = len(pages)
    stale = not (_current(site / "rs", wheels[0], demo=False) and (site / STORE).is_file())
    if any(e.startswith("ragspine_lite") for e in engines) and stale:
        print(f"building the ragspine_lite bundle of {n:,} pages…", file=sys.stderr, flush=True)
        build_wasm.build_site(
            [site / "pages"], site / "rs", title=f"{n} pages", base_url="../pages/", page=False,
            wheel=wheels[0], micropip=wheels[1], force=True, keep_store=site / STORE,
            progress=build_wasm.ProgressBar(f"  {n} pages", min_total=20),
        )
    if not (site / "pages" / "pagefind" / "pagefind-entry.json").is_file():
        print(f"indexing {n:,} pages with Pagefind…", file=sys.stderr, flush=True)
        pagefind = REPO / "node_modules" / "pagefind" / "lib" / "runner" / "bin.cjs"
        subprocess.run(["node", str(pagefind), "--site", str(site / "pages"), "--silent"],
                       check=True)
    peers = site / "peers"
    if not (peers / "pages.json").is_file():
        print(f"indexing {n:,} pages with MiniSearch and FlexSearch…", file=sys.stderr, flush=True)
        peers.mkdir(exist_ok=True)
        src = site / "peers-corpus.jsonl"
        src.write_text("".join(json.dumps({"text": f"{d['title']}\n{d['text']}"}) + "\n"
                               for d in pages), "utf-8")
        script = REPO / "bench" / "lexical_node.mjs"
        for engine, name in (("minisearch", "minisearch.json"), ("flexsearch", "flexsearch.jsonl")):
            subprocess.run(["node", str(script), engine, "build", "--corpus", str(src),
                            "--out", str(peers / name)], check=True, stdout=subprocess.DEVNULL)
        src.unlink()
        (peers / "pages.json").write_text(json.dumps([d["id"] for d in pages]), "utf-8")


class CountingHandler(build_wasm.BundleRequestHandler):
    """The bundle server, gzipping text on the fly like a static host, logging every GET
    as ``(path, status, bytes on the wire: status line + headers + body, started at: epoch
    ms)``."""

    quiet = True

    def do_GET(self) -> None:
        self._gz: bytes | None = None
        self._wire = 0
        self._status = 0
        started = time.time() * 1000
        super().do_GET()
        self.server.log.append((urlsplit(self.path).path, self._status, self._wire, started))

    def send_head(self) -> Any:
        path = Path(self.translate_path(self.path))
        if (path.suffix in GZIP_SUFFIXES and path.is_file()
                and "gzip" in self.headers.get("Accept-Encoding", "")):
            self._gz = self.server.gzipped(path)
        return super().send_head()

    def send_response(self, code: int, message: str | None = None) -> None:
        self._status = code
        super().send_response(code, message)

    def send_header(self, keyword: str, value: str) -> None:
        if self._gz is not None and keyword == "Content-Length":
            value = str(len(self._gz))
            super().send_header("Content-Encoding", "gzip")
        super().send_header(keyword, value)

    def flush_headers(self) -> None:
        self._wire += sum(len(b) for b in getattr(self, "_headers_buffer", []))
        super().flush_headers()

    def copyfile(self, source: Any, outputfile: Any) -> None:
        data = self._gz if self._gz is not None else source.read()
        self._wire += len(data)
        outputfile.write(data)


class CountingServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path) -> None:
        super().__init__(("127.0.0.1", 0), functools.partial(CountingHandler, directory=str(root)))
        self.log: list[tuple[str, int, int]] = []
        self._gzip_cache: dict[tuple[Path, float], bytes] = {}

    def gzipped(self, path: Path) -> bytes:
        key = (path, path.stat().st_mtime)
        if key not in self._gzip_cache:
            self._gzip_cache[key] = gzip.compress(path.read_bytes(), 6, mtime=0)
        return self._gzip_cache[key]

    def take(self) -> list[tuple[str, int, int]]:
        """The requests logged since the last call."""
        out, self.log[:] = list(self.log), []
        return out


def byte_kind(engine: str, path: str) -> str:
    """``corpus`` (grows with the documents), ``runtime`` (the same for any site) or
    ``harness`` (the bench page itself, not counted)."""
    parts = path.split("/")
    if parts[1] == "bench":
        return "runtime" if parts[2] == "vendor" else "harness"
    part, name = parts[3], parts[-1]
    if part == "rs":
        return "corpus" if parts[4] == "data" or name == "manifest.json" else "runtime"
    if part == "pages":
        pf = name == "pagefind-entry.json" or Path(name).suffix.startswith(".pf_")
        return "corpus" if pf else "runtime"
    return "corpus"  # peers/: the serialised indexes and the page list


def tally(engine: str, log: list[tuple[str, int, int]]) -> dict[str, Any]:
    out: dict[str, Any] = {"runtime": 0, "corpus": 0, "requests": 0, "files": {}}
    for path, _status, wire, _started in log:
        kind = byte_kind(engine, path)
        if kind == "harness":
            continue
        out[kind] += wire
        out["requests"] += 1
        out["files"][path] = out["files"].get(path, 0) + wire
    return out


def bytes_visit(playwright: Any, server: CountingServer, base: str, n: int, engine: str,
                queries: list[dict]) -> dict[str, Any]:
    """A cold visit (new browser profile) with the first query and ten more in the same page;
    the browser closes; a warm return visit (the browser reopened on the same profile: disk
    cache and Cache API kept) with the twelfth, then every query for quality (gold page in
    the top 5 / top 10)."""
    texts = [q["text"] for q in queries]

    def visit(context: Any, q: str) -> tuple[Any, dict[str, Any]]:
        """Bytes of the requests started before the first result; for ragspine_lite, also
        when the full engine was ready and the bytes until then (``full``)."""
        page = context.new_page()
        server.take()
        page.goto(f"{base}bench/bytes.html?engine={quote_plus(engine)}&n={n}&q={quote_plus(q)}")
        page.wait_for_function("window.first", timeout=TIMEOUT_MS)
        first = page.evaluate("window.first")
        if "error" in first:
            raise RuntimeError(f"{engine} on {n} pages: {first['error']}")
        page.wait_for_function("window.full", timeout=TIMEOUT_MS)
        log = server.take()
        out = {"ms": first["ms"], "lane": first.get("lane"),
               **tally(engine, [r for r in log if r[3] <= first["at"]])}
        out["full"] = {"ms": page.evaluate("window.full"), **tally(engine, log)}
        return page, out

    with tempfile.TemporaryDirectory(prefix="ragspine-profile-") as profile:
        def browser() -> Any:
            return playwright.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS)

        context = browser()
        try:
            page, cold = visit(context, texts[0])
            page.evaluate("(qs) => window.run(qs)", texts[1:11])
            more = tally(engine, server.take())
        finally:
            context.close()
        context = browser()
        try:
            page, warm = visit(context, texts[11])
            ranked = page.evaluate("(qs) => window.run(qs)", texts)
        finally:
            context.close()
    ranks = [ids.index(q["rel"]) + 1 if q["rel"] in ids else None
             for ids, q in zip(ranked, queries, strict=True)]
    return {
        "cold": cold, "more": more, "warm": warm,
        "top5": sum(r is not None and r <= 5 for r in ranks) / len(ranks),
        "top10": sum(r is not None for r in ranks) / len(ranks), "ranked": ranked,
    }


def idle_visit(playwright: Any, server: CountingServer, base: str, n: int) -> dict[str, Any]:
    """A cold page view that embeds ``<ragspine-search>`` and never searches: what it moves."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    try:
        page = browser.new_page()
        server.take()
        page.goto(f"{base}bench/idle-{n}.html")
        page.wait_for_timeout(IDLE_MS)
        state = page.eval_on_selector("ragspine-search", "e => e.dataset.state")
        return {"state": state, **tally("ragspine_lite", server.take())}
    finally:
        browser.close()


def sqlite_pages(store: Path, texts: list[str]) -> list[list[str]]:
    """The pages of each query's top 10 on CPython's SQLite path (the reference ranking)."""
    from ragspine_lite.bundle.runtime import BundleSearcher

    searcher = BundleSearcher(store)
    return [[page_of(hit["url"]) for hit in searcher.search(q, top_k=10).hits] for q in texts]


def _kb(n: float) -> str:
    return f"{n / 1000:,.0f}" if n >= 10_000 else f"{n / 1000:,.1f}"


def corpus_groups(files: dict[str, int]) -> str:
    """ragspine_lite's corpus bytes by kind of file, largest first:
    ``data/terms/t-*.bin 212 (5), …`` (kB, and how many files)."""
    groups: dict[str, list[int]] = {}
    for path, wire in files.items():
        if byte_kind("ragspine_lite", path) == "corpus":
            name = re.sub(r"-[0-9a-f]{16}\.", "-*.", path.split("/rs/", 1)[1])
            groups.setdefault(name, []).append(wire)
    ranked = sorted(groups.items(), key=lambda kv: -sum(kv[1]))
    return ", ".join(f"{name} {_kb(sum(w))} ({len(w)})" for name, w in ranked) or "none"


def print_bytes(results: dict[int, dict[str, dict]], n_queries: int) -> None:
    print("Bytes on the wire (kB; gzip where a static host would) and time to the first result "
          "(ms from navigation), one run per engine and size")
    print("  corpus = files that grow with the documents (index shards, fragments, manifest, "
          "whole indexes); runtime = the same for any site (Pyodide, wheel, JS, wasm)")
    head = (f"  {'pages':>7} {'engine':18} | {'cold: corpus':>12} {'runtime':>8} {'ms':>6} | "
            f"{'+10 q: corpus':>13} {'all':>7} | {'warm: bytes':>11} {'ms':>6} {'warm/cold':>9} | "
            f"{'top5':>5} {'top10':>5}")
    print(head)
    for n, engines in results.items():
        for engine, r in engines.items():
            if engine == "idle":
                continue
            c, m, w = r["cold"], r["more"], r["warm"]
            print(f"  {n:7,} {engine:18} | {_kb(c['corpus']):>12} {_kb(c['runtime']):>8} "
                  f"{c['ms']:6.0f} | {_kb(m['corpus']):>13} {_kb(m['corpus'] + m['runtime']):>7}"
                  f" | {_kb(w['corpus'] + w['runtime']):>11} {w['ms']:6.0f} "
                  f"{w['ms'] / c['ms']:9.2f} | {r['top5']:5.2f} {r['top10']:5.2f}")
    print(f"  quality = gold page in the top 5 / top 10 over {n_queries} SQuAD questions; "
          "+10 q = ten more queries in the same page; warm = a return visit (same browser "
          "profile, browser restarted) with a twelfth question")
    for n, engines in results.items():
        r = engines.get("ragspine_lite")
        if not r:
            continue
        print(f"  ragspine_lite at {n:,} pages: first query {_kb(r['cold']['corpus'])} kB of "
              f"corpus (goal ≤ 500, stretch ≤ 300), ten more {_kb(r['more']['corpus'])} kB "
              f"(goal ≤ 2,000), return visit {r['warm']['ms'] / r['cold']['ms']:.2f} of the cold "
              f"time (goal ≤ 0.5); top 10 the same as CPython's SQLite path (same build) for "
              f"{r['same_as_sqlite']} of {len(r['ranked'])} questions")
        for phase, label in (("cold", "first query"), ("more", "ten more")):
            print(f"  ragspine_lite at {n:,} pages, corpus kB of the {label}: "
                  f"{corpus_groups(r[phase]['files'])}")
    for n, engines in results.items():
        for engine in ("ragspine_lite", "ragspine_lite:full"):
            r = engines.get(engine)
            if r:
                c = r["cold"]
                print(f"  {engine} at {n:,} pages, cold: first result after {c['ms']:,.0f} ms "
                      f"and {_kb(c['corpus'] + c['runtime'])} kB in all ({c['lane']} lane); "
                      f"full engine ready after {c['full']['ms']:,.0f} ms and "
                      f"{_kb(c['full']['corpus'] + c['full']['runtime'])} kB")
        idle = engines.get("idle")
        if idle:
            print(f"  a page view at {n:,} pages that never searches: {idle['requests']} "
                  f"request(s), {_kb(idle['runtime'] + idle['corpus'])} kB of ours "
                  f"(goal ≤ 30), element {idle['state']}")
    print()


def plot_bytes(results: dict[int, dict[str, dict]], png: Path) -> None:
    """Three panels against the number of pages, one colour per engine: corpus bytes of the
    first query (solid) and of the first eleven (dashed); all bytes of the cold visit; time
    to the first result, cold (solid) and on the return visit (dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    def corpus11(r: dict) -> float:
        return r["cold"]["corpus"] + r["more"]["corpus"]

    panels = (
        ("corpus-dependent kB: first query (—), first 11 (--)",
         lambda r: r["cold"]["corpus"], corpus11, 1000),
        ("all kB of the cold visit (runtime + corpus)",
         lambda r: r["cold"]["corpus"] + r["cold"]["runtime"], None, 1000),
        ("seconds to the first result: cold (—), return visit (--)",
         lambda r: r["cold"]["ms"], lambda r: r["warm"]["ms"], 1000),
    )
    sizes = sorted(results)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for ax, (title, solid, dashed, unit) in zip(axes, panels, strict=True):
        for colour, engine in enumerate(BYTES_ENGINES):
            xs = [n for n in sizes if engine in results[n] and "cold" in results[n][engine]]
            if not xs:
                continue
            rows = [results[n][engine] for n in xs]
            ax.plot(xs, [solid(r) / unit for r in rows], marker="o", color=f"C{colour}",
                    label=engine)
            if dashed:
                ax.plot(xs, [dashed(r) / unit for r in rows], marker=".", linestyle="--",
                        color=f"C{colour}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
        ax.set_xlabel("pages")
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].axhline(500, color="grey", linestyle=":", linewidth=1)
    axes[0].text(sizes[0], 450, "goal at 10,000 pages: 500 kB", fontsize=7, color="grey",
                 va="top")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=100)


def bytes_main(args: argparse.Namespace, work: Path, wheels: tuple) -> int:
    root = work / "root"
    shutil.copy2(REPO / "bench" / "browser_bytes.mjs", root / "bench" / "browser_bytes.mjs")
    (root / "bench" / "bytes.html").write_text(BYTES_HTML, "utf-8")
    n_queries = max(args.queries, 12)
    queries: list[dict] = []
    for n in args.sizes:
        pages, queries = make_corpus(args.data, n, n_queries)
        build_bytes_site(root / "bytes" / str(n), pages, wheels, args.engines)
        (root / "bench" / f"idle-{n}.html").write_text(IDLE_HTML.format(n=n), "utf-8")
    if args.build_only:
        return 0
    from playwright.sync_api import sync_playwright

    server = CountingServer(root)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    results: dict[int, dict[str, dict]] = {}
    try:
        with sync_playwright() as p:
            for n in args.sizes:
                for engine in args.engines:
                    print(f"measuring {engine} on {n:,} pages…", file=sys.stderr, flush=True)
                    results.setdefault(n, {})[engine] = bytes_visit(
                        p, server, base, n, engine, queries)
                if "ragspine_lite" in args.engines:
                    results[n]["idle"] = idle_visit(p, server, base, n)
    finally:
        server.shutdown()
    for n, engines in results.items():
        if "ragspine_lite" in engines:
            r = engines["ragspine_lite"]
            ref = sqlite_pages(root / "bytes" / str(n) / STORE, [q["text"] for q in queries])
            r["same_as_sqlite"] = sum(a == b for a, b in zip(r["ranked"], ref, strict=True))
    print(f"\nragspine_lite bytes benchmark — headless Chromium ({CHROMIUM}), Pagefind 1.6, "
          "MiniSearch 7, FlexSearch 0.8, served from 127.0.0.1\n")
    print_bytes(results, n_queries)
    if args.plot:
        plot_bytes(results, args.plot)
        print(f"plot: {args.plot}")
    (work / "bytes-results.json").write_text(json.dumps(results, indent=1), "utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--queries", type=int, default=200,
                        help="queries per set; --bytes: questions for quality (200)")
    parser.add_argument("--repeats", type=int, default=3, help="start-up repeats (3)")
    parser.add_argument("--work", type=Path, help="keep built sites here and reuse them")
    parser.add_argument("--startup-only", action="store_true",
                        help="only the cold/warm start-up table (skip the query comparison)")
    parser.add_argument("--bytes", action="store_true",
                        help="bytes and time to the first result vs Pagefind, MiniSearch and "
                        "FlexSearch at --sizes pages (instead of the start-up and query tables)")
    parser.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",")],
                        default=[1000, 10000, 100000], help="--bytes: pages per site "
                        "(default 1000,10000,100000)")
    parser.add_argument("--engines", type=lambda v: v.split(","), default=list(BYTES_ENGINES),
                        help=f"--bytes: engines to measure (default {','.join(BYTES_ENGINES)})")
    parser.add_argument("--plot", type=Path, help="--bytes: write a PNG plot here")
    parser.add_argument("--build-only", action="store_true",
                        help="--bytes: build the sites into --work, measure nothing")
    args = parser.parse_args(argv)
    unknown = set(args.engines) - set(BYTES_ENGINES)
    if unknown:
        parser.error(f"unknown --engines {sorted(unknown)}; valid: {', '.join(BYTES_ENGINES)}")
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
        return bytes_main(args, work, wheels)
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
