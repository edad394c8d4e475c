"""Retrieval quality of pure BM25 through HybridRetriever, and parity with bm25_scores.

    python bench/quality.py [--data DIR] [--sets squad_train,cmrc_train] [--queries N]

DIR holds the developer retrieval sets (``corpus.jsonl``, ``queries.jsonl``, ``qrels.tsv``
per set; default: ``shared/data`` beside the repository). Every paragraph becomes one chunk
(chunk_id = paragraph id). For each query the script ranks with ``HybridRetriever.search``
(no embedding backend, no rewriter) and, independently, with a direct ``bm25_scores`` ranking
over all paragraphs sorted by ``(-score, id)``; it prints one table with Recall@1, Recall@10,
nDCG@10, whether the two rankings are identical (ids and scores to 1e-12), and ms/query.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ragspine_lite.chunking.chunking import Chunk  # noqa: E402
from ragspine_lite.lexical.retrieval import HybridRetriever, bm25_scores, tokenize  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data"
K = 10


def load_set(path: Path) -> tuple[list[dict], list[dict], dict[str, str]]:
    def jsonl(p: Path) -> list[dict]:
        return [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines() if x]

    corpus, queries = jsonl(path / "corpus.jsonl"), jsonl(path / "queries.jsonl")
    rows = (path / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]
    qrels = {q: d for q, d, _ in (r.split("\t") for r in rows if r)}
    return corpus, queries, qrels


def to_chunks(corpus: list[dict]) -> list[Chunk]:
    return [
        Chunk(chunk_id=d["id"], doc_id=d["id"], seq=0, text=d["text"],
              source_locator=f"{d['id']}#para1", para_start=1, para_end=1,
              title=d.get("title", ""))
        for d in corpus
    ]


def metrics(ranked: list[str], relevant: str) -> tuple[float, float, float]:
    if relevant not in ranked[:K]:
        return 0.0, 0.0, 0.0
    rank = ranked.index(relevant) + 1
    return float(rank == 1), 1.0, 1.0 / math.log2(rank + 1)


def print_table(rows: list[dict[str, object]], fmt: Any = None) -> None:
    """Rows of one dict each as a plain-text table; ``fmt(column, value)`` formats a cell
    (default: floats to 3 decimals)."""
    cols = list(rows[0])

    def cell(col: str, value: object) -> str:
        if fmt is not None:
            return fmt(col, value)
        return f"{value:.3f}" if isinstance(value, float) else str(value)

    cells = [[cell(c, r[c]) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print(" | ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    print("-|-".join("-" * w for w in widths))
    for row in cells:
        print(" | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))


def run_set(name: str, path: Path, n_queries: int | None) -> dict[str, object]:
    corpus, queries, qrels = load_set(path)
    queries = [q for q in queries if q["id"] in qrels][:n_queries]
    retriever = HybridRetriever(to_chunks(corpus))
    ids = [d["id"] for d in corpus]
    docs_tokens = [tokenize(d["text"]) for d in corpus]
    sums = [0.0, 0.0, 0.0]
    identical = 0
    t_ret = t_ref = 0.0
    for q in queries:
        t0 = time.perf_counter()
        results = retriever.search(q["text"], top_k=K)
        t1 = time.perf_counter()
        scores = bm25_scores(tokenize(q["text"]), docs_tokens)
        ref = sorted((s, i) for s, i in zip(scores, ids, strict=True) if s > 0)
        ref = sorted(ref, key=lambda p: (-p[0], p[1]))[:K]
        t2 = time.perf_counter()
        t_ret += t1 - t0
        t_ref += t2 - t1
        got = [(r.bm25_score, r.chunk.chunk_id) for r in results]
        same = [i for _, i in got] == [i for _, i in ref] and all(
            math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)
            for (a, _), (b, _) in zip(got, ref, strict=True)
        )
        identical += same
        for j, v in enumerate(metrics([i for _, i in got], qrels[q["id"]])):
            sums[j] += v
    n = len(queries)
    return {
        "set": name, "queries": n, "paragraphs": len(corpus),
        "R@1": sums[0] / n, "R@10": sums[1] / n, "nDCG@10": sums[2] / n,
        "identical": f"{identical}/{n}",
        "ms/q HybridRetriever": 1000 * t_ret / n, "ms/q bm25_scores": 1000 * t_ref / n,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", default="squad_train,cmrc_train")
    ap.add_argument("--queries", type=int, default=None, help="first N queries of each set")
    args = ap.parse_args(argv)
    rows = []
    for name in [s for s in args.sets.split(",") if s]:
        path = args.data / name
        if not (path / "corpus.jsonl").is_file():
            print(f"quality: no retrieval set at {path} (use --data)", file=sys.stderr)
            return 2
        print(f"running {name} …", file=sys.stderr)
        rows.append(run_set(name, path, args.queries))
    print_table(rows)
    return 0 if all(r["identical"].split("/")[0] == str(r["queries"]) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
