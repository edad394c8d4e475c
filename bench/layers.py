"""What each opt-in layer does to retrieval quality on the developer sets (pure BM25 base).

    python bench/layers.py [--data DIR] [--sets squad_train,cmrc_train,drcd_test]
                           [--queries N] [--raptor-max-paragraphs 1000]

Every paragraph is one chunk (``title`` = the article title, the only metadata the sets
have). The base is ``HybridRetriever`` BM25, top 50; each row switches one layer on and
scores the first 10 snippets it leaves (Recall@1, Recall@10, nDCG@10, as bench/quality.py):

* ``contextual``: the context header (here ``[文档:<title>]``) on the indexed text;
* ``mmr`` (λ = 0.5) on the top 10, and ``mmr 50→10`` choosing 10 of the top 50;
* ``lost_in_middle``: the prompt-placement order (it is not meant to rank);
* ``compress``: the ranking is untouched; the note gives how much text ``prompt_text`` keeps;
* ``crag``: corrective retrieval with the lexical grader at the default ``min_grade`` 0.5 and
  at 0.8 (no filters to drop, no rewriter, so a weak grade refuses); a refusal scores as a
  miss, the note says how often it refused and how many refusals had the answer paragraph in
  the top 10 after all;
* ``raptor``: summaries are appended after the 10 citable snippets, so the scores cannot move;
  the note gives the tree (deterministic 256-d hashed embeddings, extractive summaries) at the
  default threshold 0.5 and at 0.8, its build time, and how often the best theme's
  provenance contains the answer paragraph (and how many paragraphs that theme spans).
  Sets above ``--raptor-max-paragraphs`` are skipped (pure-Python clustering is quadratic).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from embeddings import print_table, score  # noqa: E402
from quality import DEFAULT_DATA, K, load_set, to_chunks  # noqa: E402

from ragspine_lite.contextual import contextual_index_text  # noqa: E402
from ragspine_lite.corrective import CorrectiveRetriever  # noqa: E402
from ragspine_lite.lexical.retrieval import HybridRetriever  # noqa: E402
from ragspine_lite.postprocess import (  # noqa: E402
    CompressionPostprocessor,
    LostInTheMiddlePostprocessor,
    MMRPostprocessor,
)
from ragspine_lite.raptor import build_raptor_tree  # noqa: E402
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend  # noqa: E402

POOL = 50
CRAG_MIN_GRADES = (0.5, 0.8)
RAPTOR_DIM = 256
RAPTOR_THRESHOLDS = (0.5, 0.8)


def snippets(retriever: HybridRetriever, query: str, top_k: int = POOL) -> list[dict]:
    return [
        {"text": r.chunk.text, "chunk_id": r.chunk.chunk_id, "doc_id": r.chunk.doc_id,
         "source_locator": r.chunk.source_locator, "sensitivity": r.chunk.sensitivity}
        for r in retriever.search(query, top_k=top_k)
    ]


class _Fixed:
    """A base retriever answering from precomputed snippet lists (for corrective)."""

    def __init__(self, answers: dict[str, list[dict]]) -> None:
        self.answers = answers

    def retrieve(self, query: str, *, filters=None, top_k: int = 50) -> list[dict]:
        return self.answers[query][:top_k]


def ids(snips: list[dict]) -> list[str]:
    return [s["chunk_id"] for s in snips][:K]


def row(name: str, layer: str, rankings: list[list[str]], queries, qrels, note="") -> dict:
    r1, r10, ndcg = score(rankings, queries, qrels)
    return {"set": name, "layer": layer, "R@1": r1, "R@10": r10, "nDCG@10": ndcg, "note": note}


def run_set(name: str, path: Path, n_queries: int | None, raptor_max: int) -> list[dict]:
    corpus, queries, qrels = load_set(path)
    queries = [q for q in queries if q["id"] in qrels][:n_queries]
    chunks = to_chunks(corpus)
    texts = [q["text"] for q in queries]
    base = HybridRetriever(chunks)
    pools = {t: snippets(base, t) for t in texts}
    top10 = [pools[t][:K] for t in texts]
    rows = [row(name, "off (BM25)", [ids(s) for s in top10], queries, qrels)]

    ctx = HybridRetriever(chunks, index_text_fn=contextual_index_text)
    rows.append(row(name, "contextual", [ids(snippets(ctx, t, K)) for t in texts], queries,
                    qrels, "header = article title"))

    mmr = MMRPostprocessor()
    rows.append(row(name, "mmr", [ids(mmr.postprocess(t, s)) for t, s in zip(texts, top10,
                                                                           strict=True)],
                    queries, qrels, "λ 0.5 over the top 10"))
    pick = MMRPostprocessor(top_n=K)
    rows.append(row(name, "mmr 50→10", [ids(pick.postprocess(t, pools[t])) for t in texts],
                    queries, qrels, "λ 0.5, 10 of the top 50"))
    litm = LostInTheMiddlePostprocessor()
    rows.append(row(name, "lost_in_middle", [ids(litm.postprocess(t, s)) for t, s in
                                             zip(texts, top10, strict=True)], queries, qrels,
                    "prompt order, not a ranking"))

    comp = CompressionPostprocessor()
    kept = total = 0
    for t, s in zip(texts, top10, strict=True):
        for out in comp.postprocess(t, s):
            kept += len(out["prompt_text"])
            total += len(out["text"])
    rows.append(row(name, "compress", [ids(s) for s in top10], queries, qrels,
                    f"prompt_text keeps {100 * kept / max(total, 1):.0f}% of the text"))

    for min_grade in CRAG_MIN_GRADES:
        rows.append(crag_row(name, queries, texts, qrels, pools, min_grade))
    for threshold in RAPTOR_THRESHOLDS:
        layer = f"raptor θ {threshold}"
        if len(corpus) > raptor_max:
            rows.append({"set": name, "layer": layer, "R@1": "—", "R@10": "—", "nDCG@10": "—",
                         "note": f"skipped: {len(corpus)} paragraphs > {raptor_max}"})
            continue
        rows.append(row(name, layer, [ids(s) for s in top10], queries, qrels,
                        raptor_note(chunks, queries, texts, qrels, threshold)))
    return rows


def crag_row(name, queries, texts, qrels, pools, min_grade: float) -> dict:
    """Corrective retrieval over the top 10; a refusal counts as a miss."""
    crag = CorrectiveRetriever(_Fixed({t: pools[t][:K] for t in texts}), min_grade=min_grade,
                               emit=False)
    answered, refused, wrongly = [], 0, 0
    for q, t in zip(queries, texts, strict=True):
        out = crag.retrieve(t, top_k=K)
        if crag.refused:
            refused += 1
            wrongly += qrels[q["id"]] in ids(pools[t])
        answered.append(ids(out))
    return row(name, f"crag ≥ {min_grade}", answered, queries, qrels,
               f"refused {100 * refused / len(queries):.1f}%; {wrongly} of {refused} "
               "refusals had the answer in the top 10")


def raptor_note(chunks, queries, texts, qrels, threshold: float) -> str:
    """Tree shape, build time, and how often the best theme's provenance holds the answer."""
    t0 = time.perf_counter()
    embedder = DeterministicEmbeddingBackend(dim=RAPTOR_DIM)
    tree = build_raptor_tree(chunks, embedder=embedder, threshold=threshold)
    took = time.perf_counter() - t0
    locator = {c.chunk_id: c.source_locator for c in chunks}
    on_target = covered = 0
    for q, t in zip(queries, texts, strict=True):
        hits = tree.retrieve(t, embedder, top_k=1, granularity="summaries")
        if hits:
            covered += len(hits[0].node.source_locators)
            on_target += locator[qrels[q["id"]]] in hits[0].node.source_locators
    largest = max((len(s.source_locators) for s in tree.summaries), default=0)
    n = len(queries)
    return (f"{len(tree.summaries)} themes (largest {largest} paragraphs), levels "
            f"{tree.max_level}, {took:.0f} s; best theme holds the answer "
            f"{100 * on_target / n:.0f}% (mean {covered / n:.0f} paragraphs)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", default="squad_train,cmrc_train,drcd_test")
    ap.add_argument("--queries", type=int, default=None, help="first N queries of each set")
    ap.add_argument("--raptor-max-paragraphs", type=int, default=1000)
    args = ap.parse_args(argv)
    rows: list[dict] = []
    for name in [s for s in args.sets.split(",") if s]:
        path = args.data / name
        if not (path / "corpus.jsonl").is_file():
            print(f"layers: no retrieval set at {path} (use --data)", file=sys.stderr)
            return 2
        print(f"running {name} …", file=sys.stderr)
        rows.extend(run_set(name, path, args.queries, args.raptor_max_paragraphs))
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
