"""float32 vs int8 vectors: bytes on disk, exact-scan time, and the ranking quality kept.

    python bench/vectors.py [--sizes 10000,100000] [--dim 384] [--scan-queries 3]
                            [--data DIR] [--set squad_train] [--queries 300]
                            [--paragraphs 3000] [--cache .cache/bench-vectors]

Prints one table, float32 and int8 side by side:

* **bytes/vector**: the stored vector (blob) and the whole SQLite file per vector, for
  ``SqliteVectorStore`` in its default float32 mode and with ``quantization="int8"``;
* **scan ms @ N**: median time of one ``k=10`` query over N synthetic unit vectors (seeded
  Gaussian, ``--dim``): the float32 store (``math.fsum`` cosine), the int8 scan in pure Python
  (what Pyodide runs) and with numpy (int32), and the int8 store end to end (numpy when
  importable); pure and numpy dots are checked to be identical;
* **recall@10 / nDCG@10** on a developer set (MiniLM, ``[embed-onnx]`` extra): recall@10 of
  the int8 store's top 10 against the exact float32 ranking, and nDCG@10 of the dense and the
  hybrid (BM25 + dense, RRF k=60) rankings with float32 and with int8 vectors. The corpus is
  subsampled: the relevant paragraphs of the first ``--queries`` queries plus the first other
  paragraphs up to ``--paragraphs``. Corpus vectors are cached under ``--cache``.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from embeddings import (  # noqa: E402
    Embedded,
    bm25_rankings,
    dense_rankings,
    hybrid_rankings,
    score,
)
from quality import DEFAULT_DATA, K, load_set, print_table  # noqa: E402

from ragspine_lite.vector.embedding_backends import (  # noqa: E402
    embed_query_texts,
    make_embedding_backend,
)
from ragspine_lite.vector.quantize import Int8Matrix  # noqa: E402
from ragspine_lite.vector.sqlite_store import SqliteVectorStore  # noqa: E402
from ragspine_lite.vector.store import VectorRecord  # noqa: E402

BATCH = 5000


def fill(store: SqliteVectorStore, ids: list[str], matrix: object) -> None:
    """Upsert rows of a numpy matrix in batches (the first batch calibrates int8)."""
    for start in range(0, len(ids), BATCH):
        rows = matrix[start : start + BATCH].tolist()  # type: ignore[index]
        batch = zip(ids[start : start + BATCH], rows, strict=True)
        store.upsert(VectorRecord(i, tuple(v), {}) for i, v in batch)


def median_ms(fn: object, queries: list[list[float]]) -> float:
    times = []
    for q in queries:
        t0 = time.perf_counter()
        fn(q)  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def synthetic(n: int, dim: int, n_queries: int, tmp: Path) -> dict[str, object]:
    """Scan times (and, for the smallest size, bytes) over n seeded unit vectors."""
    import numpy as np

    rng = np.random.default_rng(20240531 + n)
    matrix = rng.standard_normal((n + n_queries, dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    queries = matrix[n:].astype(np.float64).tolist()
    ids = [f"c{i:07d}" for i in range(n)]
    print(f"[synthetic] {n} x {dim}: filling the float32 and int8 stores …", file=sys.stderr)
    f32 = SqliteVectorStore(tmp / f"float32-{n}.db", model_id="bench")
    q8 = SqliteVectorStore(tmp / f"int8-{n}.db", model_id="bench", quantization="int8")
    fill(f32, ids, matrix[:n])
    fill(q8, ids, matrix[:n])
    row: dict[str, object] = {"N": n}
    row["float32 store ms"] = median_ms(lambda q: f32.query_scores(q, k=K), queries)
    q8.query_scores(queries[0], k=K)  # builds the in-memory matrix (and its int32 copy)
    codec, mat = q8._codec, q8._matrix
    assert codec is not None and isinstance(mat, Int8Matrix)
    codes = [codec.encode(q) for q in queries]
    for q in codes:
        if mat.dots(q, numpy=False) != mat.dots(q, numpy=True):
            raise SystemExit("vectors: pure Python and numpy int8 dots differ")
    row["int8 pure ms"] = median_ms(lambda c: mat.top_k(c, K, numpy=False), codes)
    row["int8 numpy ms"] = median_ms(lambda c: mat.top_k(c, K, numpy=True), codes)
    row["int8 store ms"] = median_ms(lambda q: q8.query_scores(q, k=K), queries)
    row["pure == numpy"] = "yes"
    for store, label in ((f32, "float32"), (q8, "int8")):
        store.close()
        row[f"{label} file B/vec"] = (tmp / f"{label}-{n}.db").stat().st_size // n
    return row


def subsample(
    corpus: list[dict], queries: list[dict], qrels: dict[str, str], n_q: int, n_p: int
) -> tuple[list[dict], list[dict]]:
    queries = [q for q in queries if q["id"] in qrels][:n_q]
    wanted = {qrels[q["id"]] for q in queries}
    kept = [d for d in corpus if d["id"] in wanted]
    kept += [d for d in corpus if d["id"] not in wanted][: max(0, n_p - len(kept))]
    return kept, queries


def int8_rankings(ids: list[str], matrix: object, qmatrix: object) -> list[list[str]]:
    store = SqliteVectorStore(":memory:", model_id="bench", quantization="int8")
    fill(store, ids, matrix)
    n = len(ids)
    return [[rid for rid, _ in store.query_scores(q, k=n)] for q in qmatrix.tolist()]  # type: ignore[attr-defined]


def quality(args: argparse.Namespace) -> list[dict[str, object]]:
    import numpy as np

    corpus, queries, qrels = load_set(args.data / args.set)
    corpus, queries = subsample(corpus, queries, qrels, args.queries, args.paragraphs)
    ids, texts = [d["id"] for d in corpus], [d["text"] for d in corpus]
    backend = make_embedding_backend("minilm")
    digest = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:16]
    print(f"[{args.set}] MiniLM over {len(texts)} paragraphs …", file=sys.stderr)
    emb = Embedded(backend, texts, args.cache, f"{args.set}-minilm-{digest}")
    qmatrix = np.asarray(embed_query_texts(backend, [q["text"] for q in queries]))
    exact = dense_rankings(emb.matrix, qmatrix, ids)
    quant = int8_rankings(ids, emb.matrix, qmatrix)
    bm25 = bm25_rankings(corpus, queries)
    overlap = statistics.fmean(
        len(set(a[:K]) & set(b[:K])) / K for a, b in zip(exact, quant, strict=True)
    )
    label = f"{args.set} ({len(queries)} q, {len(corpus)} paragraphs)"
    out = []
    for name, dense in (("float32", exact), ("int8", quant)):
        out.append({
            "set": label,
            "vectors": name,
            "recall@10 vs float32": 1.0 if name == "float32" else overlap,
            "dense nDCG@10": score(dense, queries, qrels)[2],
            "hybrid nDCG@10": score(hybrid_rankings(bm25, dense), queries, qrels)[2],
        })
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--scan-queries", type=int, default=3)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--set", default="squad_train")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--paragraphs", type=int, default=3000)
    ap.add_argument("--cache", type=Path, default=REPO / ".cache" / "bench-vectors")
    args = ap.parse_args(argv)
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("vectors: needs numpy (pip install ragspine-lite[embed-onnx])", file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.sizes.split(",") if s]
    with tempfile.TemporaryDirectory() as tmp:
        scans = [synthetic(n, args.dim, args.scan_queries, Path(tmp)) for n in sizes]
    rows = quality(args) if args.queries > 0 else []
    f32_blob, q8_blob = 4 * args.dim, args.dim
    table: list[dict[str, object]] = []
    for name, blob in (("float32", f32_blob), ("int8", q8_blob)):
        entry: dict[str, object] = {
            "vectors": name,
            "blob B/vec": f"{blob} ({100 * blob / f32_blob:.0f} %)",
            "file B/vec": f"{scans[0][f'{name} file B/vec']} @ {sizes[0]}" if scans else "-",
        }
        for scan in scans:
            n = scan["N"]
            if name == "float32":
                entry[f"scan ms @ {n}"] = f"{scan['float32 store ms']:.0f} (store, fsum)"
            else:
                entry[f"scan ms @ {n}"] = (
                    f"pure {scan['int8 pure ms']:.0f} / numpy {scan['int8 numpy ms']:.1f}"
                    f" / store {scan['int8 store ms']:.1f}"
                )
        for q in rows:
            if q["vectors"] == name:
                entry["set"] = q["set"]
                entry["recall@10 vs float32"] = f"{q['recall@10 vs float32']:.4f}"
                entry["dense nDCG@10"] = f"{q['dense nDCG@10']:.4f}"
                entry["hybrid nDCG@10"] = f"{q['hybrid nDCG@10']:.4f}"
        table.append(entry)
    print_table(table)
    print(f"\nint8 pure Python and numpy dots identical on every scan query: "
          f"{all(s['pure == numpy'] == 'yes' for s in scans)}; dim {args.dim}, "
          f"median of {args.scan_queries} queries, k={K}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
