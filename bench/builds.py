"""Site builds against Pagefind, in the same run: clean build time and peak RSS, a one-page
edit's rebuild time and files changed, and the corpus bytes of a first query.
Our clean builds pass ``--clean``; the edit is rebuilt with the same command as a deploy.

    python bench/builds.py [--sizes 1000 10000] [--100k] [--1m] [--hybrid] [--data DIR]
                           [--pagefind-max N]

Pages are English HTML pages from squad_train (``bench/browser_bytes.py``'s generator:
beyond its 10,000 paragraphs, pages of sentences drawn with a fixed seed). Each build is its
own process (``ragspine-lite build-site PAGES --out OUT --no-page``; Pagefind:
``node node_modules/pagefind/lib/runner/bin.cjs --site PAGES --output-path OUT``); its wall
time and peak RSS (``wait4``, the process and its children) are reported. The edit replaces
one word of one page with a new one; "files changed" counts the output files added, removed
or rewritten with other bytes (what a deploy uploads or deletes); "found" says that a search
for the new word ranks the edited page first after the rebuild and nothing once the page is
restored. "first query" is what ``BundleSearcher`` reads of the bundle (manifest, header,
shards, length files, fragments) for one query. Pagefind runs up to ``--pagefind-max`` pages
(default 100,000).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

import browser  # noqa: E402
import browser_bytes  # noqa: E402  (the page generator)

PAGEFIND = REPO / "node_modules" / "pagefind" / "lib" / "runner" / "bin.cjs"
QUERY = "what year did the university open"
NEW_WORD = "zorblaxian"


def run(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of ``cmd`` (its output discarded)."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[:3]} failed: {proc.stderr.read().decode()[-2000:]}")
    return seconds, usage.ru_maxrss / 1024


def snapshot(root: Path) -> dict[str, str]:
    """``relative path → sha256`` of every file under ``root``."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*") if p.is_file()
    }


def changed(before: dict[str, str], after: dict[str, str]) -> int:
    """Files added, removed or rewritten with other bytes."""
    return len(before.keys() ^ after.keys()) + sum(
        1 for k in before.keys() & after.keys() if before[k] != after[k]
    )


def first_query_bytes(site: Path) -> int:
    """The bundle bytes a first query reads (manifest, header, the shards it needs)."""
    from ragspine_lite.bundle.runtime import BundleSearcher
    from ragspine_lite.bundle.shards import DirectoryFiles

    class Counting(DirectoryFiles):
        total = 0

        def read(self, path: str) -> bytes:
            data = super().read(path)
            Counting.total += len(data)
            return data

    searcher = BundleSearcher.from_files(Counting(site))
    searcher.search(QUERY)
    return Counting.total


def finds(site: Path, word: str, page: str | None) -> bool:
    """Whether a search for ``word`` ranks ``page`` first (``None``: finds nothing)."""
    from ragspine_lite.bundle.runtime import BundleSearcher
    from ragspine_lite.bundle.shards import DirectoryFiles

    hits = BundleSearcher.from_files(DirectoryFiles(site)).search(word, top_k=1).hits
    if page is None:
        return not hits
    return bool(hits) and hits[0]["snippet"]["doc_id"] == page


def edit_one_page(pages: Path) -> Path:
    """Replace one word of one page with :data:`NEW_WORD`; returns the page."""
    every = sorted(pages.glob("*.html"))
    for page in every[len(every) // 2:]:
        text = page.read_text("utf-8")
        if " the " in text:
            page.write_text(text.replace(" the ", f" {NEW_WORD} ", 1), "utf-8")
            return page
    raise SystemExit(f"no page of {pages} has the word 'the' to replace")


def ours(pages: Path, out: Path, hybrid: bool) -> list[str]:
    cmd = [sys.executable, "-m", "ragspine_lite.cli", "build-site", str(pages), "--out", str(out),
           "--no-page"]
    return [*cmd, "--embeddings", "minilm"] if hybrid else cmd


def bench_size(n: int, work: Path, hybrid: bool, data: Path, pagefind: bool) -> list[dict]:
    pages = work / f"pages-{n}"
    if not (pages / ".complete").is_file():
        shutil.rmtree(pages, ignore_errors=True)
        corpus, _ = browser_bytes.make_corpus(data, n, 0)
        browser_bytes.write_pages(corpus, pages)
        (pages / ".complete").touch()
    rows = []
    engines = ["ragspine_lite", *(["ragspine_lite hybrid"] if hybrid else []),
               *(["pagefind"] if pagefind else [])]
    for engine in engines:
        out = work / f"out-{n}-{engine.replace(' ', '-')}"
        shutil.rmtree(out, ignore_errors=True)
        if engine == "pagefind":
            cmd = ["node", str(PAGEFIND), "--site", str(pages), "--output-path", str(out),
                   "--silent"]
        else:
            cmd = ours(pages, out, engine.endswith("hybrid"))
        print(f"{n:,} pages: {engine} clean build…", file=sys.stderr, flush=True)
        seconds, rss = run(cmd if engine == "pagefind" else [*cmd, "--clean"])
        before = snapshot(out)
        page = edit_one_page(pages)
        original = page.read_text("utf-8").replace(f" {NEW_WORD} ", " the ", 1)
        try:
            edit_seconds, _ = run(cmd)
        finally:
            page.write_text(original, "utf-8")
        after = snapshot(out)
        ours_engine = engine != "pagefind"
        found = ours_engine and finds(out, NEW_WORD, page.name)
        rows.append({
            "pages": n, "engine": engine, "build_s": seconds, "rss_mb": rss,
            "edit_s": edit_seconds, "changed": changed(before, after), "files": len(after),
            "first_kb": first_query_bytes(out) / 1e3 if ours_engine else None,
        })
        run(cmd)  # back to the unedited site for the next engine
        if ours_engine:
            rows[-1]["found"] = found and finds(out, NEW_WORD, None)
        print(f"  {rows[-1]}", file=sys.stderr, flush=True)
    return rows


def print_table(rows: list[dict]) -> None:
    head = ("pages", "engine", "clean build s", "peak RSS MB", "1-page edit s",
            "files changed", "found", "files", "first query kB")
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for r in rows:
        first = "n/a" if r["first_kb"] is None else f"{r['first_kb']:.0f}"
        found = {None: "n/a", True: "yes", False: "NO"}[r.get("found")]
        print(f"| {r['pages']:,} | {r['engine']} | {r['build_s']:.1f} | {r['rss_mb']:.0f} | "
              f"{r['edit_s']:.1f} | {r['changed']} | {found} | {r['files']:,} | {first} |",
              flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--100k", dest="k100", action="store_true", help="also 100,000 pages")
    parser.add_argument("--1m", dest="m1", action="store_true", help="also 1,000,000 pages")
    parser.add_argument("--hybrid", action="store_true", help="also hybrid (MiniLM) builds")
    parser.add_argument("--pagefind-max", type=int, default=100_000,
                        help="the most pages Pagefind builds (larger sizes: ours only)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "rs-builds",
                        help="where pages and sites go (kept: pages are generated once)")
    parser.add_argument("--data", type=Path, default=browser.DEFAULT_DATA,
                        help="the folder holding squad_train/")
    args = parser.parse_args(argv)
    sizes = [*args.sizes, *([100_000] if args.k100 else []), *([1_000_000] if args.m1 else [])]
    if not PAGEFIND.is_file() and min(sizes) <= args.pagefind_max:
        raise SystemExit(f"Pagefind not found at {PAGEFIND}: run 'npm ci'")
    rows = []
    for n in sizes:
        rows.extend(bench_size(n, args.work, args.hybrid, args.data, n <= args.pagefind_max))
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
