"""HTML text extraction on hostile markup: ``extract_html`` vs the bare stdlib parser.

    python bench/html_extract.py [--sizes 2000,4000,8000,16000] [--limit SECONDS]

For each input (``"<a "``, ``"</a"``, ``"<!-- >"`` repeated N times, N nested
``data-ragspine-meta`` captures left open, closed, or holding sensitivity labels, plus an
ordinary page of the same size) it times ``extract_html`` and ``html.parser.HTMLParser`` fed
the same markup, side by side. The bare parser rescans the rest of the input for every
construct it cannot close, so its time grows with N²; ``extract_html`` turns such constructs
into text in one pass first. Nested captures once copied all the text inside each of them
(N² again); each now reads at most a bounded number of characters. A bare-parser run whose
previous size took longer than ``--limit`` is skipped (shown as ``-``).
"""

from __future__ import annotations

import argparse
import time
from html.parser import HTMLParser

from ragspine_lite.chunking.sources import extract_html

# name → (markup opened N times, markup closed N times after it)
UNITS = {
    "<a ": ("<a ", ""),
    "</a": ("</a", ""),
    "<!-- >": ("<!-- >", ""),
    "meta open": ('<span data-ragspine-meta="title">x ', ""),
    "meta nest": ('<span data-ragspine-meta="title">x ', "</span>"),
    "label nest": ('<b data-ragspine-meta="sensitivity">x ', "</b>"),
    "page": ("<p>Revenue <b>grew</b>.</p>", ""),
}


def _time(fn, markup: str) -> float:
    started = time.perf_counter()
    fn(markup)
    return time.perf_counter() - started


def _bare(markup: str) -> None:
    parser = HTMLParser(convert_charrefs=True)
    parser.feed(markup)
    parser.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="2000,4000,8000,16000")
    ap.add_argument("--limit", type=float, default=5.0)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'input':<12} {'N':>7} {'bytes':>9} {'extract_html s':>15} {'html.parser s':>14}")
    for name, (unit, closing) in UNITS.items():
        slow = False
        for n in sizes:
            count = n if name != "page" else max(1, n * 3 // len(unit))
            markup = unit * count + closing * count
            ours = _time(extract_html, markup)
            bare = None if slow else _time(_bare, markup)
            slow = slow or (bare is not None and bare > args.limit)
            shown = "-" if bare is None else f"{bare:.3f}"
            print(f"{name!r:<12} {n:>7} {len(markup):>9} {ours:>15.3f} {shown:>14}")


if __name__ == "__main__":
    main()
