"""``python bench/browser.py --bytes``: what a visitor's first search downloads, and how long
it takes, next to Pagefind, MiniSearch and FlexSearch in the same run.

Sites of 1k / 10k (/ 100k, opt-in) pages: squad_train paragraphs, topped up beyond 10k with
pages of sentences from non-gold paragraphs. ``--sources html,md`` writes the same pages as
HTML (indexed where they are) and/or as Markdown (``build-site`` renders them into the
bundle's ``pages/``). Each source is indexed by ragspine_lite (``build_wasm.py``) and by
Pagefind 1.6 (npm binary); Pagefind reads HTML only, so for the Markdown sources it indexes
our HTML rendering of them (the bundle's ``pages/``). MiniSearch and FlexSearch get the page
texts (index serialised at build time, loaded whole; the same for both sources).

A counting server gzips text like a static host and logs every request; ``--link
10mbit,40ms`` (``--shaped``) shapes it: every response waits 40 ms, then all bytes of all
responses share one token bucket of 10 Mbit/s. It is the server that shapes, so the Web
Worker's requests are shaped like the page's, and every engine gets the same link. Per link,
source, size and engine the bench measures:

* one cold visit per question (``--queries``; a new browser context each: empty HTTP cache
  and Cache API): the first answer, the time from navigation to it and the bytes of the
  requests completed before it (all, and of them corpus-dependent), requests and round trips
  in a row; in the first of them, ten more questions right after the first answer (ours:
  while Pyodide boots); the engines take turns, question by question;
* a cold visit (a new browser profile) with the first question until ragspine_lite's full
  engine (Pyodide) is ready (when, after how many bytes), then ten more questions (their
  corpus bytes);
* a warm visit: the browser reopened on the same profile (HTTP cache and Cache API kept) with
  the twelfth question, until the full engine is ready, then every question for quality (the
  gold page in the top 5 / 10);
* ragspine_lite's first answers (its instant lane's) and the warm visit's (its full
  engine's) against CPython's SQLite path on the chunk store of the same build;
* a page view that embeds ``<ragspine-search>`` and never searches.

``--waterfall`` also prints every request of the cold visits until the first result.
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
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus, unquote, urlsplit

import browser  # bench/browser.py: Chromium, the retrieval sets, the site checks
from browser import CHROMIUM, CHROMIUM_ARGS, REPO, TIMEOUT_MS, build_wasm

# ragspine_lite answers its first query from the worker's instant lane (JavaScript) while
# Pyodide boots behind it; "ragspine_lite:full" waits for Pyodide (open({instant: false})).
ENGINES = ("ragspine_lite", "ragspine_lite:full", "Pagefind", "MiniSearch", "FlexSearch")
SOURCES = ("html", "md")
OURS = ("ragspine_lite", "ragspine_lite:full")
# A site page embedding <ragspine-search> that the visitor never searches (boot on intent).
IDLE_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>idle</title>
<link rel="icon" href="data:,"><script type="module" src="../bytes/{site}/rs/ragspine-search.mjs">
</script></head><body><h1>A page</h1>
<ragspine-search bundle="../bytes/{site}/rs/"></ragspine-search>
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
SHAPED = "10mbit,40ms"
CHUNK = 4096  # bytes per write on a shaped link (responses interleave at this grain)
Log = list[list]  # [path, status, wire bytes, started, ended or None (epoch ms)] per request


# ---------------------------------------------------------------- the pages


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
    corpus, every = browser.load_set(data / "squad_train", 10**9)
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


def write_markdown(pages: list[dict], folder: Path) -> None:
    """The same pages as Markdown: the title as a heading, then the paragraph."""
    folder.mkdir(parents=True)
    for d in pages:
        title = " ".join(d["title"].split())
        (folder / f"{d['id']}.md").write_text(f"# {title}\n\n{d['text']}\n", "utf-8")


def build_sites(top: Path, pages: list[dict], wheels: tuple, engines: list[str],
                sources: list[str]) -> None:
    """Per source ``top/SRC/``: ``rs/`` (our bundle; from Markdown it holds the rendered
    ``pages/``), ``store.db`` (its chunk store), ``pagefind/`` (Pagefind over the HTML pages,
    or over our rendering of the Markdown ones) and the sources (``pages/`` or ``src/``);
    ``top/peers`` holds the MiniSearch and FlexSearch indexes and the page list. Parts already
    built for the same pages (and, for ``rs``, the same package) are kept."""
    stamp = hashlib.sha256(json.dumps(pages, sort_keys=True).encode()).hexdigest()
    if not (top / f".{stamp}").is_file():
        shutil.rmtree(top, ignore_errors=True)
        top.mkdir(parents=True)
        (top / f".{stamp}").touch()
    n = len(pages)
    for src in sources:
        site = top / src
        docs = site / ("pages" if src == "html" else "src")
        if not docs.is_dir():
            (write_pages if src == "html" else write_markdown)(pages, docs)
        stale = not (browser._current(site / "rs", wheels[0], demo=False)
                     and (site / STORE).is_file())
        if stale and (any(e in OURS for e in engines) or src == "md"):
            print(f"building the ragspine_lite bundle of {n:,} {src} pages…", file=sys.stderr,
                  flush=True)
            build_wasm.build_site(
                [docs], site / "rs", title=f"{n} pages", base_url="../pages/", page=False,
                wheel=wheels[0], micropip=wheels[1], force=True, keep_store=site / STORE,
                progress=build_wasm.ProgressBar(f"  {n} {src} pages", min_total=20),
            )
            shutil.rmtree(site / "pagefind", ignore_errors=True)  # md: it indexes rs/pages
        if "Pagefind" in engines and not (site / "pagefind" / "pagefind-entry.json").is_file():
            print(f"indexing {n:,} {src} pages with Pagefind…", file=sys.stderr, flush=True)
            pagefind = REPO / "node_modules" / "pagefind" / "lib" / "runner" / "bin.cjs"
            rendered = docs if src == "html" else site / "rs" / "pages"
            subprocess.run(["node", str(pagefind), "--site", str(rendered), "--output-path",
                            str(site / "pagefind"), "--silent"], check=True)
    peers = top / "peers"
    if {"MiniSearch", "FlexSearch"} & set(engines) and not (peers / "pages.json").is_file():
        print(f"indexing {n:,} pages with MiniSearch and FlexSearch…", file=sys.stderr, flush=True)
        peers.mkdir(exist_ok=True)
        corpus = top / "peers-corpus.jsonl"
        corpus.write_text("".join(json.dumps({"text": f"{d['title']}\n{d['text']}"}) + "\n"
                                  for d in pages), "utf-8")
        script = REPO / "bench" / "lexical_node.mjs"
        for engine, name in (("minisearch", "minisearch.json"), ("flexsearch", "flexsearch.jsonl")):
            subprocess.run(["node", str(script), engine, "build", "--corpus", str(corpus),
                            "--out", str(peers / name)], check=True, stdout=subprocess.DEVNULL)
        corpus.unlink()
        (peers / "pages.json").write_text(json.dumps([d["id"] for d in pages]), "utf-8")


# ---------------------------------------------------------------- the server and its link


class Link:
    """A shaped link: each response starts ``ms`` after its request arrived, then every byte
    of every response passes one token bucket filled at ``mbit`` Mbit/s (no burst: concurrent
    responses share the rate, interleaved ``CHUNK`` bytes at a time). ``Link(None, 0)`` is the
    bare loopback."""

    def __init__(self, mbit: float | None, ms: float) -> None:
        self.mbit, self.ms = mbit, ms
        self._rate = mbit * 1e6 / 8 if mbit else None
        self._lock = threading.Lock()
        self._paid_until = 0.0  # when the bucket has refilled what was already sent

    @classmethod
    def parse(cls, spec: str) -> Link:
        """``none`` or ``10mbit,40ms`` (either part may be left out)."""
        if spec in ("none", ""):
            return cls(None, 0)
        mbit, ms = None, 0.0
        for part in spec.split(","):
            if m := re.fullmatch(r"([\d.]+)mbit", part.strip()):
                mbit = float(m.group(1))
            elif m := re.fullmatch(r"([\d.]+)ms", part.strip()):
                ms = float(m.group(1))
            else:
                raise ValueError(f"--link wants 'none' or e.g. '{SHAPED}', got {spec!r}")
        return cls(mbit, ms)

    @property
    def label(self) -> str:
        if not self.mbit and not self.ms:
            return "unshaped"
        rate = f"{self.mbit:g} Mbit/s" if self.mbit else "unlimited"
        return f"{rate}, {self.ms:g} ms"

    def wait(self) -> None:
        if self.ms:
            time.sleep(self.ms / 1000)

    def send(self, n: int) -> None:
        """Block until ``n`` bytes have passed the bucket."""
        if not self._rate:
            return
        with self._lock:
            self._paid_until = max(self._paid_until, time.monotonic()) + n / self._rate
            done = self._paid_until
        time.sleep(max(0.0, done - time.monotonic()))


class CountingHandler(build_wasm.BundleRequestHandler):
    """The bundle server, gzipping text on the fly like a static host, passing every response
    through the server's link and logging every GET as it arrives: ``[path, status, bytes on
    the wire (status line + headers + body), started, ended (epoch ms; None until it has)]``."""

    quiet = True

    def do_GET(self) -> None:
        self._gz: bytes | None = None
        self._wire = 0
        self._status = 0
        entry = [urlsplit(self.path).path, 0, 0, time.time() * 1000, None]
        self.server.log.append(entry)
        try:
            self.server.link.wait()
            super().do_GET()
        finally:
            entry[1:3], entry[4] = [self._status, self._wire], time.time() * 1000

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
        head = sum(len(b) for b in getattr(self, "_headers_buffer", []))
        self.server.link.send(head)
        self._wire += head
        super().flush_headers()

    def copyfile(self, source: Any, outputfile: Any) -> None:
        data = self._gz if self._gz is not None else source.read()
        self._wire += len(data)
        if not self.server.link.mbit:
            outputfile.write(data)
            return
        for at in range(0, len(data), CHUNK):
            piece = data[at:at + CHUNK]
            self.server.link.send(len(piece))
            outputfile.write(piece)


class CountingServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path) -> None:
        super().__init__(("127.0.0.1", 0), functools.partial(CountingHandler, directory=str(root)))
        self.log: Log = []
        self.link = Link(None, 0)
        self._gzip_cache: dict[tuple[Path, float], bytes] = {}

    def gzipped(self, path: Path) -> bytes:
        key = (path, path.stat().st_mtime)
        if key not in self._gzip_cache:
            self._gzip_cache[key] = gzip.compress(path.read_bytes(), 6, mtime=0)
        return self._gzip_cache[key]

    def take(self, since: float = 0.0) -> Log:
        """The requests logged since the last call (that started at ``since`` or later)."""
        out, self.log[:] = [r for r in self.log if r[3] >= since], []
        return out

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a page closed mid-download
            super().handle_error(request, client_address)


# ---------------------------------------------------------------- counting


def byte_kind(path: str) -> str:
    """``corpus`` (grows with the documents), ``runtime`` (the same for any site) or
    ``harness`` (the bench page itself, not counted). Paths: ``/bench/…``,
    ``/bytes/N/SRC/rs/…``, ``/bytes/N/SRC/pagefind/…``, ``/bytes/N/peers/…``."""
    parts = path.split("/")
    if parts[1] == "bench":
        return "runtime" if parts[2] == "vendor" else "harness"
    if parts[1] != "bytes" or len(parts) < 5:
        return "harness"  # e.g. a browser's own /favicon.ico
    if parts[3] == "peers":
        return "corpus"  # the serialised indexes and the page list
    part, name = parts[4], parts[-1]
    if part == "rs":
        return "corpus" if parts[5] == "data" or name == "manifest.json" else "runtime"
    pf = name == "pagefind-entry.json" or Path(name).suffix.startswith(".pf_")
    return "corpus" if pf else "runtime"


def rounds(log: Log) -> int:
    """Round trips in a row: a request that started only after every request of the current
    round had begun and the first of them had ended opens the next round."""
    count, first_end = 0, float("-inf")
    for _path, _status, _wire, started, ended in sorted(log, key=lambda r: r[3]):
        ended = float("inf") if ended is None else ended
        if started >= first_end:
            count, first_end = count + 1, ended
        else:
            first_end = min(first_end, ended)
    return count


def tally(log: Log) -> dict[str, Any]:
    out: dict[str, Any] = {"runtime": 0, "corpus": 0, "requests": 0, "files": {}}
    counted = [r for r in log if byte_kind(r[0]) != "harness"]
    for path, _status, wire, _started, _ended in counted:
        out[byte_kind(path)] += wire
        out["requests"] += 1
        out["files"][path] = out["files"].get(path, 0) + wire
    out["rounds"] = rounds(counted)
    out["log"] = [list(r) for r in counted]
    return out


def sqlite_pages(store: Path, texts: list[str]) -> list[list[str]]:
    """The pages of each query's top 10 on CPython's SQLite path (the reference ranking)."""
    from ragspine_lite.bundle.runtime import BundleSearcher

    searcher = BundleSearcher(store)
    return [[page_of(hit["url"]) for hit in searcher.search(q, top_k=10).hits] for q in texts]


# ---------------------------------------------------------------- visits


class Visits:
    """The browser visits of one run: ``playwright``, the server and its base URL."""

    def __init__(self, playwright: Any, server: CountingServer, base: str) -> None:
        self.playwright, self.server, self.base = playwright, server, base

    def _open(self, profile: str) -> Any:
        return self.playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS)

    def _search(self, context: Any, site: str, engine: str, q: str, *,
                full: bool = True) -> tuple[Any, dict[str, Any]]:
        """A visit to the search page with ``q``: its first answer (``ids``, ``lane``,
        ``hits``), ms and the requests completed before it (not those it set off, such as
        Pyodide's first file when the instant lane answers); with ``full``,
        also when ragspine_lite's full engine was ready and every request until then
        (``full``; other engines: the first result's)."""
        page = context.new_page()
        self.server.take()
        since = time.time() * 1000
        page.goto(f"{self.base}bench/bytes.html?engine={quote_plus(engine)}&site={site}"
                  f"&q={quote_plus(q)}")
        page.wait_for_function("window.first", timeout=TIMEOUT_MS)
        first = page.evaluate("window.first")
        if "error" in first:
            raise RuntimeError(f"{engine} on {site}: {first['error']}")
        seen = {"ms": first["ms"], "lane": first.get("lane"), "ids": first["ids"],
                "hits": len(first["ids"])}
        if full:
            page.wait_for_function("window.full", timeout=TIMEOUT_MS)
        log = self.server.take(since)
        out = {**seen, **tally([r for r in log if r[4] is not None and r[4] <= first["at"]])}
        if full:
            out["full"] = {"ms": page.evaluate("window.full"), **tally(log)}
        return page, out

    def firsts(self, site: str, engines: list[str],
               queries: list[dict]) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """Per engine, one cold visit per question, each in a new browser context (empty HTTP
        cache and Cache API): the first answer, its ms and the bytes until then (``firsts``);
        in the first question's visit, ten more questions right after the first answer
        (``followups``; ours: while Pyodide boots). The engines take turns question by
        question, in alternating order, so that the machine's load weighs on each alike."""
        chromium = self.playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        out: dict[str, dict[str, list]] = {e: {"firsts": [], "followups": []} for e in engines}
        try:
            for i, q in enumerate(queries):
                for engine in engines if i % 2 == 0 else engines[::-1]:
                    context = chromium.new_context()
                    try:
                        page, first = self._search(context, site, engine, q["text"], full=False)
                        out[engine]["firsts"].append(first)
                        if i == 0:
                            out[engine]["followups"] = page.evaluate(
                                "(qs) => window.run(qs)", [x["text"] for x in queries[1:11]])
                    finally:
                        context.close()
        finally:
            chromium.close()
        return out

    def search(self, site: str, engine: str, queries: list[dict]) -> dict[str, Any]:
        """A cold visit (new browser profile) with the first question, until the full
        engine is up, and ten more questions in the same page; the browser closes;
        a warm return visit (the browser reopened on the same profile: disk cache and Cache
        API kept) with the twelfth, until the full engine is up, then every question for
        quality (gold page in the top 5 / top 10)."""
        texts = [q["text"] for q in queries]
        run = "(qs) => window.run(qs)"
        out: dict[str, Any] = {}
        with tempfile.TemporaryDirectory(prefix="ragspine-profile-") as profile:
            context = self._open(profile)
            try:
                page, out["cold"] = self._search(context, site, engine, texts[0])
                out["more_answers"] = page.evaluate(run, texts[1:11])
                out["more"] = tally(self.server.take())
            finally:
                context.close()
            context = self._open(profile)
            try:
                page, out["warm"] = self._search(context, site, engine, texts[11])
                out["answers"] = page.evaluate(run, texts)
            finally:
                context.close()
        ranks = [a["ids"].index(q["rel"]) + 1 if q["rel"] in a["ids"] else None
                 for a, q in zip(out["answers"], queries, strict=True)]
        out["top5"] = sum(r is not None and r <= 5 for r in ranks) / len(ranks)
        out["top10"] = sum(r is not None for r in ranks) / len(ranks)
        return out

    def idle(self, site: str) -> dict[str, Any]:
        """A cold page view that embeds ``<ragspine-search>`` and never searches."""
        chromium = self.playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = chromium.new_page()
            self.server.take()
            since = time.time() * 1000
            page.goto(f"{self.base}bench/idle-{site.replace('/', '-')}.html")
            page.wait_for_timeout(IDLE_MS)
            state = page.eval_on_selector("ragspine-search", "e => e.dataset.state")
            return {"state": state, **tally(self.server.take(since))}
        finally:
            chromium.close()


def compare(engine: str, r: dict[str, Any], reference: list[list[str]]) -> None:
    """``same_first``: the first answers (one cold visit per question; ragspine_lite: those
    of the instant lane) and ``same_full``: the warm visit's answers (ragspine_lite: the full
    engine's), each ``[equal to CPython's top 10, questions]``."""
    def count(answers: list[dict], lane: str | None) -> list[int]:
        return [sum(a["ids"] == ref and lane in (None, a["lane"])
                    for a, ref in zip(answers, reference, strict=True)), len(answers)]

    r["same_first"] = count(r["firsts"], "instant" if engine == "ragspine_lite" else None)
    r["same_full"] = count(r["answers"], None)


# ---------------------------------------------------------------- printing


def _kb(n: float) -> str:
    return f"{n / 1000:,.0f}" if n >= 10_000 else f"{n / 1000:,.1f}"


def _s(ms: float) -> str:
    return f"{ms / 1000:.2f}"


def corpus_groups(files: dict[str, int]) -> str:
    """ragspine_lite's corpus bytes by kind of file, largest first:
    ``data/terms/t-*.bin 212 (5), …`` (kB, and how many files)."""
    groups: dict[str, list[int]] = {}
    for path, wire in files.items():
        if "/rs/" in path and byte_kind(path) == "corpus":
            name = re.sub(r"-(?:[0-9a-f]+-)?(?:[0-9a-f]{16}|[0-9a-f]{8})\.", "-*.",
                          path.split("/rs/", 1)[1])  # t-<slot>-<8 hex>, header-<16 hex>
            groups.setdefault(name, []).append(wire)
    ranked = sorted(groups.items(), key=lambda kv: -sum(kv[1]))
    return ", ".join(f"{name} {_kb(sum(w))} ({len(w)})" for name, w in ranked) or "none"


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(row[key] for row in rows)


def _same(engine: str, r: dict[str, Any]) -> str:
    """``20/20 instant, 20/20 full``: answers equal to CPython's top 10."""
    if "same_full" not in r:
        return "–"
    first = "instant" if engine == "ragspine_lite" else "first"
    return "{}/{} {first}, {}/{} full".format(*r["same_first"], *r["same_full"], first=first)


def table(head: list[str], rows: list[list[str]]) -> None:
    """A Markdown table, columns padded; the first four left-aligned, the rest right."""
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(
            str(c).ljust(w) if i < 4 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))) + " |"

    print(line(head))
    print("|" + "|".join("-" * (w + 1) + ":" if i >= 4 else "-" * (w + 2)
                         for i, w in enumerate(widths)) + "|")
    for r in rows:
        print(line(r))


def _rows(results: dict[str, Any]) -> list[tuple[str, str, int, str, dict, dict]]:
    """``(link, source, pages, engine, result, the size's results)`` in run order."""
    return [(link, src, n, engine, r, engines)
            for link, by_src in results.items() for src, by_n in by_src.items()
            for n, engines in by_n.items() for engine, r in engines.items() if engine != "idle"]


def print_first(results: dict[str, Any], n_queries: int) -> None:
    """The first-search table: one row per link, source, size and engine."""
    print(f"A visitor's first search: {n_queries} cold visits, one per question (first s, max, "
          "kB: their median, slowest, median; hits: answers that listed any result; req, rtt: "
          "median), then a cold visit until the full engine is up and a warm one (the browser "
          "reopened on the same profile); s from navigation, kB on the wire (gzip like a "
          "static host)\n")
    rows, notes = [], []
    for link, src, n, engine, r, engines in _rows(results):
        c, w, firsts = r["cold"], r["warm"], r["firsts"]
        ours = engine in OURS
        idle = engines.get("idle") if engine == "ragspine_lite" else None
        med = functools.partial(_median, firsts)
        rows.append([
            link, src, f"{n:,}",
            "Pagefind (HTML)" if engine == "Pagefind" and src == "md" else engine,
            _s(med("ms")), _s(max(f["ms"] for f in firsts)),
            _kb(statistics.median(f["corpus"] + f["runtime"] for f in firsts)),
            f"{sum(f['hits'] > 0 for f in firsts)}/{len(firsts)}", f"{med('requests'):.0f}",
            f"{med('rounds'):.0f}" if link != "unshaped" else "–",
            _s(c["full"]["ms"]) if ours else "–",
            _kb(c["full"]["corpus"] + c["full"]["runtime"]) if ours else "–",
            _s(w["ms"]), _kb(w["corpus"] + w["runtime"]), _s(w["full"]["ms"]) if ours else "–",
            _kb(idle["runtime"] + idle["corpus"]) if idle else "–",
            f"{round(r['top5'] * n_queries)}/{n_queries}", _same(engine, r),
        ])
        peer = engines.get("Pagefind")
        if engine == "ragspine_lite" and peer:
            pairs = list(zip(firsts, peer["firsts"], strict=True))
            notes.append(f"- {link}, {src}, {n:,} pages: ragspine_lite's first result no later "
                         f"than Pagefind's for {sum(a['ms'] <= b['ms'] for a, b in pairs)} of "
                         f"{len(pairs)} questions")
        follow = r["followups"]
        if follow:
            lanes = sum(f["lane"] == "instant" for f in follow) if engine in OURS else None
            notes.append(f"- {link}, {src}, {n:,} pages, {engine}: {len(follow)} questions "
                         f"right after the first answer took {_median(follow, 'ms'):.0f} ms "
                         f"(median), {max(f['ms'] for f in follow):.0f} ms (slowest)"
                         + (f", {lanes} answered by the instant lane" if lanes is not None
                            else ""))
    table(["link", "source", "pages", "engine", "first s", "max s", "kB", "hits", "req", "rtt",
           "full s", "full kB", "warm s", "warm kB", "warm full s", "idle kB", "top 5",
           "= Python top 10"], rows)
    print("\nreq / rtt = requests and round trips in a row until the first result (the bench "
          "page's own two not counted; round trips on a shaped link only); full = the full "
          "engine (Pyodide) ready, in the cold visit; warm full = the same in the warm visit; "
          "idle = a page view with <ragspine-search> that never searches; top 5 = gold page in "
          "the top 5 of the warm visit's answers; = Python = top 10 equal to CPython's SQLite "
          "path on the same build (instant: the first answers, from the instant lane; full: "
          "the warm visit's, from the full engine); Pagefind (HTML) = Pagefind on our HTML "
          "rendering of the Markdown pages")
    print("\n".join(notes))
    print()


def print_corpus(results: dict[str, Any]) -> None:
    """Corpus vs runtime bytes: the first question, ten more, and which files ours fetched."""
    print("Corpus kB (grow with the documents: manifest, index header, term shards, text "
          "fragments; Pagefind's metadata, index chunks, fragments; the peers' whole index) and "
          "runtime kB (the same for any site)\n")
    rows, notes = [], []
    for link, src, n, engine, r, _ in _rows(results):
        c, m = r["cold"], r["more"]
        rows.append([link, src, f"{n:,}", engine, _kb(c["corpus"]), _kb(c["runtime"]),
                     _kb(m["corpus"]), _kb(m["corpus"] + m["runtime"])])
        if engine == "ragspine_lite":
            notes.append(f"- {link}, {src}, {n:,} pages: first question "
                         f"{corpus_groups(c['files'])}; ten more {corpus_groups(m['files'])}")
    table(["link", "source", "pages", "engine", "cold: corpus", "runtime", "+10 q: corpus",
           "+10 q: all"], rows)
    print("\nragspine_lite's corpus kB by file (how many):")
    print("\n".join(notes))
    print()


def print_waterfall(results: dict[str, Any]) -> None:
    """Every request of the cold visits of ragspine_lite and Pagefind until the first result:
    ms after the first request started, until it ended, kB, path."""
    for link, by_src in results.items():
        for src, by_n in by_src.items():
            for n, engines in by_n.items():
                for engine in ("ragspine_lite", "Pagefind"):
                    r = engines.get(engine)
                    if not r:
                        continue
                    log = r["cold"]["log"]
                    t0 = min(row[3] for row in log)
                    print(f"Waterfall until the first result: {engine}, {link}, {src}, {n:,} "
                          f"pages ({r['cold']['requests']} requests, {r['cold']['rounds']} "
                          f"round trips)")
                    for path, status, wire, started, ended in sorted(log, key=lambda x: x[3]):
                        short = re.sub(r"^/bytes/\d+/(\w+/)?", "", path)
                        print(f"  {started - t0:6.0f} {ended - t0:6.0f} ms {_kb(wire):>6} kB "
                              f"{status} {short}")
                    print()


def plot_bytes(results: dict[int, dict[str, dict]], png: Path) -> None:
    """Three panels against the number of pages, one colour per engine: corpus bytes of the
    first query (solid) and of the first eleven (dashed); all bytes of the cold visit; time
    to the first result, cold (solid) and on the return visit (dashed). ``results``: one
    link and source (by size, then engine)."""
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
        for colour, engine in enumerate(ENGINES):
            xs = [n for n in sizes if engine in results[n]]
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


# ---------------------------------------------------------------- the run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",")],
                        default=[1000, 10000], help="--bytes: pages per site (default "
                        "1000,10000; 100000 is opt-in: its build takes long)")
    parser.add_argument("--engines", type=lambda v: v.split(","), default=list(ENGINES),
                        help=f"--bytes: engines to measure (default {','.join(ENGINES)})")
    parser.add_argument("--sources", type=lambda v: v.split(","), default=["html"],
                        help="--bytes: html, md or html,md: the pages as HTML and/or as "
                        "Markdown that build-site renders (default html)")
    parser.add_argument("--link", action="append", type=Link.parse, dest="links",
                        help=f"--bytes: 'none' (bare loopback, the default) or e.g. '{SHAPED}':"
                        " a per-request latency and one throughput cap for all responses, "
                        "applied by the server; repeat to measure several links in one run")
    parser.add_argument("--shaped", action="append_const", const=Link.parse(SHAPED),
                        dest="links", help=f"--bytes: the same as --link {SHAPED}")
    parser.add_argument("--waterfall", action="store_true",
                        help="--bytes: print every request until the first result")
    parser.add_argument("--plot", type=Path, help="--bytes: write a PNG plot here (the "
                        "first link and source)")
    parser.add_argument("--build-only", action="store_true",
                        help="--bytes: build the sites into --work, measure nothing")


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    unknown = set(args.engines) - set(ENGINES)
    if unknown:
        parser.error(f"unknown --engines {sorted(unknown)}; valid: {', '.join(ENGINES)}")
    if set(args.sources) - set(SOURCES) or not args.sources:
        parser.error(f"--sources takes html, md or html,md, got {','.join(args.sources)}")
    args.links = args.links or [Link(None, 0)]


def bytes_main(args: argparse.Namespace, work: Path, wheels: tuple) -> int:
    root = work / "root"
    shutil.copy2(REPO / "bench" / "browser_bytes.mjs", root / "bench" / "browser_bytes.mjs")
    (root / "bench" / "bytes.html").write_text(BYTES_HTML, "utf-8")
    n_queries = max(args.queries, 12)
    queries: list[dict] = []
    for n in args.sizes:
        pages, queries = make_corpus(args.data, n, n_queries)
        build_sites(root / "bytes" / str(n), pages, wheels, args.engines, args.sources)
        for src in args.sources:
            (root / "bench" / f"idle-{n}-{src}.html").write_text(
                IDLE_HTML.format(site=f"{n}/{src}"), "utf-8")
    if args.build_only:
        return 0
    from playwright.sync_api import sync_playwright

    server = CountingServer(root)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    results: dict[str, Any] = {}
    try:
        with sync_playwright() as p:
            visits = Visits(p, server, base)
            for link in args.links:
                server.link = link
                for src in args.sources:
                    for n in args.sizes:
                        site = f"{n}/{src}"
                        print(f"measuring first answers on {n:,} {src} pages ({link.label})…",
                              file=sys.stderr, flush=True)
                        out: dict[str, Any] = visits.firsts(site, args.engines, queries)
                        for engine in args.engines:
                            print(f"measuring {engine} on {n:,} {src} pages ({link.label})…",
                                  file=sys.stderr, flush=True)
                            out[engine].update(visits.search(site, engine, queries))
                        if "ragspine_lite" in args.engines:
                            out["idle"] = visits.idle(site)
                        results.setdefault(link.label, {}).setdefault(src, {})[n] = out
    finally:
        server.shutdown()
    texts = [q["text"] for q in queries]
    for by_src in results.values():
        for src, by_n in by_src.items():
            for n, engines in by_n.items():
                reference = sqlite_pages(root / "bytes" / str(n) / src / STORE, texts)
                for engine in OURS:
                    if engine in engines:
                        compare(engine, engines[engine], reference)
    print(f"\nragspine_lite bytes benchmark — headless Chromium ({CHROMIUM}), Pagefind 1.6, "
          f"MiniSearch 7, FlexSearch 0.8, {n_queries} SQuAD questions, served from 127.0.0.1; "
          f"a shaped link delays each response by its ms, then caps the rate of all "
          f"responses together (one token bucket)\n")
    print_first(results, n_queries)
    print_corpus(results)
    if args.waterfall:
        print_waterfall(results)
    if args.plot:
        first = next(iter(next(iter(results.values())).values()))
        plot_bytes(first, args.plot)
        print(f"plot: {args.plot}")
    (work / "bytes-results.json").write_text(json.dumps(results, indent=1), "utf-8")
    return 0
