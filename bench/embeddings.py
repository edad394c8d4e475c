"""Retrieval quality of BM25, dense-only and hybrid (BM25 + dense → RRF), and embedding speed.

    python bench/embeddings.py [--data DIR] [--sets squad_train,cmrc_train,drcd_test]
                               [--backends minilm,use-multilingual,e5] [--queries N]
                               [--check N] [--cache DIR] [--browser-queries N]

DIR holds the developer retrieval sets (``corpus.jsonl``, ``queries.jsonl``, ``qrels.tsv``
per set; default: ``shared/data`` beside the repository). Every paragraph is one chunk. Per
query:

* **bm25**: every paragraph with a BM25 score > 0, by ``(-score, id)`` — the library's one
  BM25 path (``bm25_scores`` over ``tokenize``), as ``HybridRetriever`` ranks it;
* **dense**: every paragraph by ``(-cosine, id)`` of the backend's vectors;
* **hybrid**: ``rrf_fuse([bm25, dense], k=60)`` sorted by ``(-fused, id)`` — what
  ``HybridRetriever`` does with an embedding backend and no query rewriter;
* **hybrid-gated** (backends with ``coverage``): hybrid, except that a query whose word
  pieces the model does not know well (coverage < 0.9) is ranked by BM25 alone — what
  the CLI does per query. ``--check N``
  replays the first N queries through a real ``HybridRetriever`` (pre-filled in-process
  vector store) and reports how many top-10 lists are identical.

It prints one table: Recall@1, Recall@10, nDCG@10 per set × method, plus, per backend, corpus
embedding throughput (chunks/s, batch API) and query latency (ms/query, one text per call,
median of the first 50 queries) on this CPU, and MiniLM's ms/query in headless Chromium
(onnxruntime-web in the search worker, JSPI and no-JSPI paths; ``--browser-queries 0`` skips
it, and it is skipped with a note when Chromium, Playwright or ``npm ci`` are missing).
Needs the ``[embed-onnx]`` extra (and ``[embed-use]`` for ``use-multilingual``); ``--cache``
keeps corpus vectors between runs (throughput is then not re-measured and shows as "cached").
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ragspine_lite.chunking.chunking import Chunk  # noqa: E402
from ragspine_lite.lexical.retrieval import (  # noqa: E402
    DEFAULT_RRF_K,
    HybridRetriever,
    bm25_scores,
    rrf_fuse,
    tokenize,
)
from ragspine_lite.vector.embedding_backends import (  # noqa: E402
    embed_query_texts,
    make_embedding_backend,
)
from ragspine_lite.vector.onnx_backend import DEFAULT_MIN_COVERAGE  # noqa: E402
from ragspine_lite.vector.store import InProcessVectorStore, VectorRecord  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
from quality import DEFAULT_DATA, K, load_set, metrics, print_table  # noqa: E402


class Embedded:
    """Corpus vectors (numpy, unit norm) of one backend, with the time they took."""

    def __init__(self, backend: object, texts: list[str], cache: Path | None, key: str) -> None:
        import numpy as np

        self.seconds: float | None = None
        path = cache / f"{key}.npy" if cache else None
        if path is not None and path.is_file():
            self.matrix = np.load(path)
            return
        t0 = time.perf_counter()
        vectors = backend.embed_texts(texts)  # type: ignore[attr-defined]
        self.seconds = time.perf_counter() - t0
        self.matrix = np.asarray(vectors, dtype=np.float64)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, self.matrix)


class Precomputed:
    """An embedding backend that answers from a dict (for the HybridRetriever replay)."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[t] for t in texts]


def bm25_rankings(corpus: list[dict], queries: list[dict]) -> list[list[str]]:
    ids = [d["id"] for d in corpus]
    docs_tokens = [tokenize(d["text"]) for d in corpus]
    out = []
    for q in queries:
        scores = bm25_scores(tokenize(q["text"]), docs_tokens)
        hits = sorted(
            ((cid, s) for cid, s in zip(ids, scores, strict=True) if s > 0),
            key=lambda h: (-h[1], h[0]),
        )
        out.append([cid for cid, _ in hits])
    return out


def dense_rankings(matrix: object, qmatrix: object, ids: list[str]) -> list[list[str]]:
    import numpy as np

    sims = np.asarray(qmatrix) @ np.asarray(matrix).T
    order_ids = np.array(ids)
    out = []
    for row in sims:
        # (-score, id): lexsort's last key is the primary one.
        idx = np.lexsort((order_ids, -row))
        out.append([ids[i] for i in idx])
    return out


def hybrid_rankings(bm25: list[list[str]], dense: list[list[str]]) -> list[list[str]]:
    out = []
    for b, d in zip(bm25, dense, strict=True):
        fused = rrf_fuse([b, d], k=DEFAULT_RRF_K)
        out.append([cid for cid, _ in sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))])
    return out


def score(rankings: list[list[str]], queries: list[dict], qrels: dict[str, str]) -> list[float]:
    sums = [0.0, 0.0, 0.0]
    for ranked, q in zip(rankings, queries, strict=True):
        for j, v in enumerate(metrics(ranked, qrels[q["id"]])):
            sums[j] += v
    n = len(queries)
    return [s / n for s in sums]


def replay(
    corpus: list[dict], queries: list[dict], matrix: object, qvectors: list[list[float]],
    expected: list[list[str]],
) -> str:
    """Top-10 of a real HybridRetriever vs the bench's hybrid ranking, for these queries."""
    chunks = [
        Chunk(chunk_id=d["id"], doc_id=d["id"], seq=0, text=d["text"],
              source_locator=f"{d['id']}#para1", para_start=1, para_end=1)
        for d in corpus
    ]
    store = InProcessVectorStore()
    store.upsert(
        VectorRecord(d["id"], tuple(row)) for d, row in zip(corpus, matrix.tolist(), strict=True)  # type: ignore[attr-defined]
    )
    backend = Precomputed({q["text"]: v for q, v in zip(queries, qvectors, strict=True)})
    retriever = HybridRetriever(
        chunks, embedding_backend=backend, vector_store=store, manage_vectors=False
    )
    same = 0
    for q, want in zip(queries, expected, strict=True):
        got = [r.chunk.chunk_id for r in retriever.search(q["text"], top_k=K)]
        same += got == want[:K]
    return f"{same}/{len(queries)}"


def run_set(
    name: str, path: Path, backends: dict[str, object], n_queries: int | None, check: int,
    cache: Path | None, speed: dict[str, dict[str, object]],
) -> list[dict[str, object]]:
    import numpy as np

    corpus, queries, qrels = load_set(path)
    queries = [q for q in queries if q["id"] in qrels][:n_queries]
    ids = [d["id"] for d in corpus]
    texts = [d["text"] for d in corpus]
    print(f"[{name}] BM25 over {len(corpus)} paragraphs, {len(queries)} queries …",
          file=sys.stderr)
    bm25 = bm25_rankings(corpus, queries)
    rows: list[dict[str, object]] = [
        {"set": name, "method": "bm25", "backend": "-", "queries": len(queries),
         "paragraphs": len(corpus), **dict(zip(("R@1", "R@10", "nDCG@10"),
                                             score(bm25, queries, qrels), strict=True)),
         "HybridRetriever": "-"}
    ]
    digest = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:16]
    for label, backend in backends.items():
        model = str(getattr(backend, "model_id", label)).replace("/", "_").replace("@", "_")
        print(f"[{name}] embedding {len(texts)} paragraphs with {label} …", file=sys.stderr)
        emb = Embedded(backend, texts, cache, f"{name}-{model}-{digest}")
        entry = speed.setdefault(label, {"chunks": 0, "seconds": 0.0, "lat": []})
        if emb.seconds is not None:
            entry["chunks"] = int(entry["chunks"]) + len(texts)  # type: ignore[call-overload]
            entry["seconds"] = float(entry["seconds"]) + emb.seconds  # type: ignore[arg-type]
        qtexts = [q["text"] for q in queries]
        qvectors = embed_query_texts(backend, qtexts)  # the query role, as the retrievers do
        lat = entry["lat"]
        for t in qtexts[:50]:
            t0 = time.perf_counter()
            embed_query_texts(backend, [t])
            lat.append(time.perf_counter() - t0)  # type: ignore[attr-defined]
        qmatrix = np.asarray(qvectors, dtype=np.float64)
        dense = dense_rankings(emb.matrix, qmatrix, ids)
        hybrid = hybrid_rankings(bm25, dense)
        # gated: the dense lane only for queries the model's vocabulary covers
        cover = getattr(backend, "coverage", None)
        gated = hybrid
        n_gated = 0
        if cover is not None:
            keep = [cover(t) >= DEFAULT_MIN_COVERAGE for t in qtexts]
            n_gated = keep.count(False)
            gated = [h if k else b for h, b, k in zip(hybrid, bm25, keep, strict=True)]
        checked = "-"
        if check:
            checked = replay(corpus, queries[:check], emb.matrix, qvectors[:check],
                             hybrid[:check])
        methods = [("dense", dense, "-"), ("hybrid", hybrid, checked)]
        if cover is not None:
            methods.append((f"hybrid-gated ({n_gated} bm25-only)", gated, "-"))
        for method, ranking, chk in methods:
            rows.append(
                {"set": name, "method": method, "backend": label, "queries": len(queries),
                 "paragraphs": len(corpus),
                 **dict(zip(("R@1", "R@10", "nDCG@10"), score(ranking, queries, qrels),
                            strict=True)),
                 "HybridRetriever": chk}
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", default="squad_train,cmrc_train,drcd_test")
    ap.add_argument("--backends", default="minilm",
                    help="comma-separated embedding specs (minilm, use-multilingual, …)")
    ap.add_argument("--queries", type=int, default=None, help="first N queries of each set")
    ap.add_argument("--check", type=int, default=20,
                    help="replay the first N queries through HybridRetriever (0: off)")
    ap.add_argument("--cache", type=Path, default=None, help="keep corpus vectors here")
    ap.add_argument("--threads", type=int, default=None, help="embedding threads")
    ap.add_argument("--browser-queries", type=int, default=50,
                    help="also time N query embeddings of the first set in headless Chromium "
                    "(MiniLM on onnxruntime-web; 0: skip)")
    args = ap.parse_args(argv)
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("embeddings: needs numpy (pip install ragspine-lite[embed-onnx])", file=sys.stderr)
        return 2
    backends: dict[str, object] = {}
    for spec in [s.strip() for s in args.backends.split(",") if s.strip()]:
        kwargs = {"threads": args.threads} if args.threads else {}
        backends[spec] = make_embedding_backend(spec, **kwargs)
    rows: list[dict[str, object]] = []
    speed: dict[str, dict[str, object]] = {}
    for name in [s for s in args.sets.split(",") if s]:
        path = args.data / name
        if not (path / "corpus.jsonl").is_file():
            print(f"embeddings: no retrieval set at {path} (use --data)", file=sys.stderr)
            return 2
        rows.extend(run_set(name, path, backends, args.queries, args.check, args.cache, speed))
    print_table(rows)
    print()
    for label, entry in speed.items():
        chunks, seconds = int(entry["chunks"]), float(entry["seconds"])  # type: ignore[call-overload, arg-type]
        rate = f"{chunks / seconds:.1f} chunks/s ({chunks} paragraphs)" if seconds else "cached"
        lat = entry["lat"]
        ms = 1000 * statistics.median(lat) if lat else float("nan")  # type: ignore[arg-type]
        print(f"{label}: corpus embedding {rate}; query embedding {ms:.1f} ms/query (median)")
    sets = [s for s in args.sets.split(",") if s]
    if args.browser_queries > 0 and sets:
        queries = [q["text"] for q in load_set(args.data / sets[0])[1][: args.browser_queries]]
        print(browser_query_line(sets[0], queries))
    return 0


def browser_query_line(set_name: str, queries: list[str]) -> str:
    """Median ms per query embedding in headless Chromium (JSPI and no-JSPI paths), as a line.

    Builds the bundled samples with MiniLM vectors in a temporary folder (query embedding does
    not depend on the corpus) and times ``rs.embed([q])`` for each query; the whole
    comparison with searches is ``bench/browser_embeddings.py``.
    """
    import tempfile

    sys.path.insert(0, str(REPO / "bench"))
    import browser_embeddings as be

    why = be.check_prerequisites()
    if why:
        return f"minilm in Chromium: skipped ({why})"
    from playwright.sync_api import sync_playwright

    from ragspine_lite.cli import samples_dir

    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        be.build_wasm.build_site([samples_dir()], site, embeddings="minilm", demo=True)
        server = be.build_wasm.make_server(Path(tmp))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        host, port = server.server_address[:2]
        medians = {}
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(
                    executable_path=be.bench_browser.CHROMIUM, args=be.bench_browser.CHROMIUM_ARGS
                )
                for jspi in (True, False):
                    out = be.run_browser(browser, f"http://{host}:{port}/", "site", jspi,
                                         queries, [])
                    medians[jspi] = statistics.median(r["ms"] for r in out["embed"])
                browser.close()
        finally:
            server.shutdown()
            server.server_close()
    return (
        f"minilm in headless Chromium (onnxruntime-web, 1 thread), {len(queries)} {set_name} "
        f"queries: query embedding {medians[True]:.1f} ms/query with JSPI, "
        f"{medians[False]:.1f} ms/query without (median; searches: bench/browser_embeddings.py)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
