"""What a visitor's first query reads of a built site, file kind by file kind.

    python bench/first_query.py SITE [QUERY ...] [--top-k 10]

For each query (default: the queries of docs/builds.md's table), a fresh ``BundleSearcher``
over the site's folder searches it, and every file it reads is counted: ``manifest.json``, the
index header, the term shards (``t-``), the length files of common words (``l-``), the text
fragments (``f-``) and anything else. Python's searcher and the worker's instant lane read the
same files for a plain query (``tests/test_instant_lane.py``). Sizes are the files' bytes: the
``.bin`` files are compressed already; a static host gzips ``manifest.json`` (about 40 %).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ragspine_lite.bundle.runtime import BundleSearcher
from ragspine_lite.bundle.shards import DirectoryFiles

QUERIES = ("what year did the university open", "hong kong revenue",
           "when was the treaty signed", "history of the city", "the")
KINDS = ("manifest", "header", "t", "l", "f", "other")


def kind_of(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    if name == "manifest.json":
        return "manifest"
    prefix = name.partition("-")[0]
    return prefix if prefix in KINDS else "other"


class Counting(DirectoryFiles):
    """A site folder that logs every read: ``(path, bytes)``."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.log: list[tuple[str, int]] = []

    def read(self, path: str) -> bytes:
        data = super().read(path)
        self.log.append((path, len(data)))
        return data


def first_query(site: Path, query: str, top_k: int) -> dict[str, list[int]]:
    """``kind → [bytes, files]`` read by a first search for ``query``."""
    files = Counting(site)
    searcher = BundleSearcher.from_files(files)
    try:
        searcher.search(query, top_k=top_k)
    finally:
        searcher.close()
    out = {kind: [0, 0] for kind in KINDS}
    for path, size in files.log:
        out[kind_of(path)][0] += size
        out[kind_of(path)][1] += 1
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path)
    parser.add_argument("queries", nargs="*", default=list(QUERIES))
    parser.add_argument("--top-k", type=int, default=10)
    args = parser.parse_args(argv)
    print("| query | header | term shards | length files | fragments | manifest | kB |")
    print("|---|---|---|---|---|---|---|")
    totals = []
    for query in args.queries:
        found = first_query(args.site, query, args.top_k)
        total = sum(size for size, _ in found.values())
        totals.append(total)
        cells = [f"{found[k][0] / 1e3:.0f} ({found[k][1]})" for k in ("header", "t", "l", "f")]
        print(f"| {query} | {' | '.join(cells)} | {found['manifest'][0] / 1e3:.0f} | "
              f"{total / 1e3:.0f} |")
    print(f"\nmedian {statistics.median(totals) / 1e3:.0f} kB, most {max(totals) / 1e3:.0f} kB "
          f"({len(totals)} queries; cells: kB (files))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
