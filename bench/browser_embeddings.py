"""Dense search at scale: int8 vector shards scanned exactly, in Chromium and on CPython.

    python bench/browser_embeddings.py [--data DIR] [--set squad_train] [--sizes 10000,100000]
                                       [--queries 100] [--quality-queries 1000] [--work DIR]

For each size N (chunks) it builds a hybrid site with MiniLM vectors (``build_wasm.build_site(
..., embeddings="minilm")``, format 2: the vectors are int8 shards the worker scans in JS)
from the retrieval set: the paragraphs answering the first ``--quality-queries`` queries, then
the others in corpus order; beyond the corpus (squad_train has 10,000 paragraphs, about 22,000
chunks) the paragraphs come again as copies under new document ids, so the 100k site has the
same texts several times (an exact scan costs the same whatever the vectors hold). Chunk
vectors are computed once per distinct text and cached under ``--work``.

One table, one row per size, then:

* **Chromium** (headless, JSPI; the site served from 127.0.0.1, ``RagSpineLite.open``): p50 of
  ``rs.embed([q])`` (query embedding), ``searchDetailed(q, {mode: "bm25"})`` and
  ``searchDetailed(q, {mode: "hybrid"})`` over ``--queries`` queries, wall time around the JS
  call (worker round trip included); **dense** = hybrid − BM25 − embedding (p50s), which
  holds all a hybrid search does beyond BM25 mode (its lexical side ranks every matching
  chunk for the fusion, where BM25 mode stops at the top 10); **JS scan** = the worker's
  scanner module alone (``ragspine-dense.mjs`` over the same shards, one query's codes,
  the calibrated floor's threshold);
* **vectors**: bytes of the ``data/vectors/*.i8`` shards vs float32 (4 bytes per dimension);
* **identical**: the hybrid hits (chunk ids, vector and fused scores) of every measured query
  are the same in Chromium (JS scan), on CPython with numpy and in pure Python (the sharded
  reader, ``BundleSearcher.from_files``);
* **quality** (smallest size): hybrid nDCG@10 of the SQLite reference path with the bundle's
  int8 vectors and with the same vectors in float32, over the ``--quality-queries`` queries.

Needs the ``[embed-onnx]`` extra, ``npm ci``, Playwright and Chromium. Progress goes to stderr.

``--coarse N,…`` measures vectors by need instead (CPython, no browser): for each size, the
exact shards and the coarse lists (:mod:`ragspine_lite.bundle.coarse`) over *synthetic* int8
vectors with the structure of real ones: each row is a real MiniLM chunk vector of the cache
plus Gaussian noise (cosine ≈ 0.8 to it), the queries are held-out draws around random real
vectors. It prints bytes of vector data the dense lane reads for the first query (cold) and on
average for the next ten, recall@10 of the dense top 10 against the exact scan (over
``--queries``), and p50 of the scan (numpy). Needs ``minilm-vectors.json`` under ``--work``
(a run of the hybrid measurement writes it).

``--light`` measures vectors by need in Chromium instead: for each of ``--sizes`` the hybrid
site as ``build-site`` writes it (exact shards below ``COARSE_MIN_ROWS`` = 20,000 vectors,
coarse lists from it; ``--coarse-sizes`` adds sites with the coarse lists forced), served by
``bench/browser_bytes.py``'s counting server on each of ``--links`` (``none``: the bare loopback;
``10mbit,40ms``: every response 40 ms late, then one 10 Mbit/s bucket). Per site and link, one
cold visit (a new browser context): ``RagSpineLite.open`` until ``denseReady()`` (all bytes and
the vector bytes until then, and when), the first hybrid query and the next ten (vector bytes
each: requests under ``data/vectors/`` and ``data/lists/`` in the server's log, on the wire),
then ``--queries`` more questions timed as above (p50 of query embedding, BM25, hybrid; dense =
hybrid − BM25 − embedding, and of it the time Python waited for files fetched while it searched,
the worker's own count ``worker.fetchMs``; their vector bytes per query). Below the tables, what
a fetch costs this browser on this machine: one list file at a time, and 13 at once (a
question's lists), from the page with the HTTP cache bypassed. Recall@10 and nDCG@10 of the hybrid
top 10 against the exact scan of the same vectors (CPython: a coarse scanner probing every list
and rescoring every row), and whether Chromium's hits equal CPython's (numpy) for every query.
The sites beyond squad_train's ~22,000 chunks repeat its paragraphs as copies (new document
ids, the same texts: each text is embedded once); nDCG counts a copy of the gold paragraph as
the gold paragraph.

``--model-load`` measures the model instead, on the first of ``--sizes``: per link and server
(``on the fly``: the counting server gzips text as it goes, ``.onnx`` uncompressed;
``precompressed``: it sends a file's ``.gz`` sibling with ``Content-Encoding: gzip`` when the
browser accepts gzip, as nginx's ``gzip_static``), a cold visit (a new browser context) and a
warm one (the same context reloaded: the runtime cache holds the files): the model's load
(``loadMs``: its files fetched and checked, onnxruntime-web's session created), the time until
``denseReady()``, the first embedding the page asks for after it (the worker already ran the
model once, to warm it) and the bytes of ``models/`` and ``ort/`` on the wire.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.util
import json
import math
import re
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _load_sibling(name: str) -> ModuleType:
    """``bench/<name>.py`` as a module (it puts the repository on ``sys.path`` itself)."""
    path = Path(__file__).resolve().parent / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench_browser = _load_sibling("browser")
build_wasm: Any = bench_browser.build_wasm

K = 10
WARMUPS = ("warm up the model", "how fast is a warm query", "which river is the longest")

PAGE_JS = r"""
async ({ module, bundle, queries, warmups, scan }) => {
  const { RagSpineLite } = await import(module);
  const rs = await RagSpineLite.open({ bundle, jspi: true, timeoutMs: 0 });
  const out = { info: await rs.denseReady() };  // the model joined: hybrid searches from here
  for (const w of warmups) {
    await rs.embed([w]);
    await rs.searchDetailed(w, { topK: 10, mode: "hybrid", highlight: false });
    await rs.searchDetailed(w, { topK: 10, mode: "bm25", highlight: false });
  }
  out.embed = [];
  for (const q of queries) {
    const t = performance.now();
    await rs.embed([q]);
    out.embed.push(performance.now() - t);
  }
  for (const mode of ["bm25", "hybrid"]) {
    out[mode] = [];
    for (const q of queries) {
      const t = performance.now();
      const r = await rs.searchDetailed(q, { topK: 10, mode, highlight: false });
      out[mode].push({ ms: performance.now() - t, channel: r.semantic ? r.semantic.channel : null,
                       hits: r.results.map((s) => [s.chunk_id, s.scores.vector, s.scores.fused]) });
    }
  }
  rs.close();
  // The dense scan alone: the worker's scanner module over the same shards, one query's codes
  // at a time, with the calibrated floor's integer threshold.
  const { DenseScanner } = await import(bundle + "ragspine-dense.mjs");
  const read = async (p) => new Uint8Array(await (await fetch(bundle + p)).arrayBuffer());
  const scanner = await DenseScanner.load(scan.info, read);
  for (const codes of scan.codes.slice(0, 3)) scanner.scan(Int8Array.from(codes), scan.threshold);
  out.scan = scan.codes.map((codes) => {
    const t = performance.now();
    scanner.scan(Int8Array.from(codes), scan.threshold);
    return performance.now() - t;
  });
  return out;
}
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def p50(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else float("nan")


class CachedBackend:
    """An embedding backend that embeds each distinct text once (vectors kept in a file)."""

    def __init__(self, inner: Any, path: Path) -> None:
        self.inner = inner
        self.path = path
        self.vectors: dict[str, list[float]] = {}
        if path.is_file():
            self.vectors = json.loads(path.read_text("utf-8"))
        self.added = 0

    def __getattr__(self, name: str) -> Any:  # model_id, dim, calibration, coverage, …
        return getattr(self.inner, name)

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        missing = list(dict.fromkeys(t for t in texts if self.key(t) not in self.vectors))
        if missing:
            for text, vector in zip(missing, self.inner.embed_texts(missing), strict=True):
                self.vectors[self.key(text)] = [float(x) for x in vector]
            self.added += len(missing)
            if self.added >= 2000:
                self.save()
        return [self.vectors[self.key(t)] for t in texts]

    def save(self) -> None:
        self.path.write_text(json.dumps(self.vectors), "utf-8")
        self.added = 0


def chunk_counts(corpus: list[dict]) -> list[int]:
    """Chunks per paragraph with the export's default chunker."""
    from ragspine_lite.chunking.chunking import DocumentMeta, chunk_document

    return [len(chunk_document(d["text"], DocumentMeta(doc_id=d["id"]))) for d in corpus]


def select(corpus: list[dict], queries: list[dict], n_chunks: int) -> list[dict]:
    """Paragraphs answering ``queries`` first, then the rest, then copies: ≥ ``n_chunks``."""
    answers = list(dict.fromkeys(q["rel"] for q in queries))
    by_id = {d["id"]: d for d in corpus}
    order = [by_id[a] for a in answers] + [d for d in corpus if d["id"] not in set(answers)]
    sizes = dict(zip((d["id"] for d in order), chunk_counts(order), strict=True))
    out: list[dict] = []
    total, copy = 0, 0
    while total < n_chunks:
        for d in order:
            if total >= n_chunks:
                break
            out.append(d if copy == 0 else {**d, "id": f"{d['id']}-copy{copy}"})
            total += sizes[d["id"]]
        copy += 1
    return out


def write_docs(corpus: list[dict], folder: Path) -> None:
    """One front-matter ``.txt`` per paragraph (as ``bench/browser.py`` writes them)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for d in corpus:
        title = (d.get("title") or d["id"]).replace('"', "'").replace("\n", " ")
        (folder / f"{d['id']}.txt").write_text(
            f'---\ndoc_id: {d["id"]}\ntitle: "{title}"\nlanguage: en\n'
            f"sensitivity: PUBLIC\n---\n{d['text']}\n",
            encoding="utf-8",
        )


def build(corpus: list[dict], site: Path, wheels: tuple[Path, Path], backend: CachedBackend,
          db_copy: Path | None) -> dict[str, Any]:
    """Build (or reuse) the hybrid site; ``db_copy``: also keep its exported chunk store."""
    key = hashlib.sha256("\n".join(d["id"] for d in corpus).encode()).hexdigest()
    meta_path = site.parent / f"{site.name}.build.json"
    if meta_path.is_file() and bench_browser._current(site, wheels[0]):
        meta = json.loads(meta_path.read_text("utf-8"))
        if meta.get("key") == key and (db_copy is None or db_copy.is_file()):
            log(f"reusing {site.name} ({meta['chunks']} chunks)")
            return meta
    docs = site.parent / f"{site.name}-docs"
    write_docs(corpus, docs)
    log(f"building {site.name} ({len(corpus)} paragraphs, MiniLM vectors)…")
    started = time.perf_counter()
    from ragspine_lite.bundle import site as site_module  # build_site's own name is patched

    real_make = site_module.make_embedding_backend
    site_module.make_embedding_backend = lambda *_args, **_kw: backend  # vectors cached per text
    try:
        manifest = build_wasm.build_site(
            [docs], site, title=site.name, wheel=wheels[0], micropip=wheels[1], demo=True,
            embeddings="minilm", keep_store=db_copy,
            progress=build_wasm.ProgressBar(f"  {site.name}", min_total=20),
        )
    finally:
        site_module.make_embedding_backend = real_make
        backend.save()
        shutil.rmtree(docs, ignore_errors=True)
    meta = {"key": key, "paragraphs": len(corpus), "chunks": manifest["counts"]["chunks"],
            "build_s": round(time.perf_counter() - started, 1)}
    meta_path.write_text(json.dumps(meta, indent=2) + "\n", "utf-8")
    return meta


def vector_bytes(site: Path) -> tuple[int, int]:
    """(bytes of the int8 shards, the same vectors in float32) of a built site."""
    from ragspine_lite.bundle.shards import DirectoryFiles, ShardedBundle

    entry = ShardedBundle(DirectoryFiles(site)).vectors or {}
    shards = sum((site / p).stat().st_size for _, _, p in entry.get("shards", ()))
    rows = sum(n for _, n, _ in entry.get("shards", ())) - len(entry.get("missing", ()))
    return shards, rows * int(entry.get("dim", 0)) * 4


def cpython_hits(site: Path, backend: Any, queries: list[str], numpy: bool) -> list[list]:
    """Hybrid hits from the sharded reader on CPython, numpy or pure Python scan."""
    from ragspine_lite.bundle.dense import ShardScanner
    from ragspine_lite.bundle.runtime import BundleSearcher
    from ragspine_lite.bundle.shards import DirectoryFiles, ShardedBundle

    files = DirectoryFiles(site)
    scanner = ShardScanner(files, ShardedBundle(files).vectors or {}, numpy=numpy)
    out = []
    with BundleSearcher.from_files(files, embedding_backend=backend, scanner=scanner) as s:
        for q in queries:
            found = s.search(q, top_k=K, mode="hybrid", highlight=False).snippets
            out.append([[h["chunk_id"], h["scores"]["vector"], h["scores"]["fused"]]
                        for h in found])
    return out


def ndcg(ranked_docs: list[str], relevant: str) -> float:
    docs = list(dict.fromkeys(ranked_docs))[:K]
    return 1.0 / math.log2(docs.index(relevant) + 2) if relevant in docs else 0.0


def float32_copy(db: Path, backend: CachedBackend, target: Path) -> Path:
    """The exported store with its vectors written again in float32 (same model, same ids)."""
    from ragspine_lite.chunking.chunk_store import ChunkStore
    from ragspine_lite.vector.sqlite_store import SqliteVectorStore, embedding_model_id
    from ragspine_lite.vector.store import VectorRecord

    shutil.copyfile(db, target)
    model = embedding_model_id(backend)
    with SqliteVectorStore(target, model_id=model, read_only=True) as int8:
        metadata = int8.metadata_by_id()
    conn = sqlite3.connect(target)
    for table in ("ragspine_vector", "ragspine_vector_model", "ragspine_vector_int8"):
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.commit()
    conn.close()
    store = ChunkStore(target, read_only=True)
    try:
        texts = {c.chunk_id: c.text for c in store.iter_chunks()}
    finally:
        store.close()
    with SqliteVectorStore(target, model_id=model, quantization="float32") as f32:
        ids = sorted(metadata)
        vectors = backend.embed_texts([texts[i] for i in ids])
        rows = zip(ids, vectors, strict=True)
        f32.upsert(VectorRecord(i, tuple(v), metadata[i]) for i, v in rows)
    return target


def quality(db: Path, backend: CachedBackend, queries: list[dict], work: Path) -> dict[str, float]:
    """Hybrid nDCG@10 of the SQLite reference path, int8 (as exported) and float32 vectors."""
    from ragspine_lite.bundle.runtime import BundleSearcher

    out = {}
    for name, path in (("int8", db), ("float32", float32_copy(db, backend, work / "f32.db"))):
        scores = []
        with BundleSearcher(path, embedding_backend=backend) as searcher:
            for q in queries:
                found = searcher.search(q["text"], top_k=K, mode="hybrid", highlight=False)
                scores.append(ndcg([h["doc_id"] for h in found.snippets], q["rel"]))
        out[name] = sum(scores) / len(scores)
    return out


def scan_job(site: Path, backend: Any, queries: list[str]) -> dict[str, Any]:
    """The shards, query codes and floor threshold for timing the JS scan on its own."""
    from ragspine_lite.bundle.shards import DirectoryFiles, ShardedBundle
    from ragspine_lite.lexical.pipeline import embed_queries
    from ragspine_lite.vector.quantize import Int8Codec

    entry = ShardedBundle(DirectoryFiles(site)).vectors or {}
    codec = Int8Codec(entry["scale"])
    codes = [codec.encode(tuple(float(x) for x in v)) for v in embed_queries(backend, queries)]
    return {"info": entry, "threshold": codec.dot_threshold(backend.calibration.floor),
            "codes": [[b - 256 if b > 127 else b for b in c] for c in codes]}


def run_browser(
    browser: Any, base: str, site: str, queries: list[str], scan: dict[str, Any]
) -> dict[str, Any]:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.route("**/favicon.ico", lambda route: route.fulfill(status=204))
        page.on("pageerror", lambda err: log(f"  page error: {err}"))
        bundle = f"{base}{site}/"
        page.goto(f"{bundle}manifest.json")
        return page.evaluate(PAGE_JS, {"module": f"{bundle}ragspine-lite.mjs", "bundle": bundle,
                                       "queries": queries, "warmups": list(WARMUPS),
                                       "scan": scan})
    finally:
        context.close()


def check_prerequisites() -> str | None:
    """Why the benchmark cannot run here (``None``: it can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "needs Playwright: pip install playwright (and Chromium: apt-get install chromium)"
    if not Path(bench_browser.CHROMIUM).exists():
        return f"needs Chromium at {bench_browser.CHROMIUM}: apt-get install chromium"
    try:
        from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend

        OnnxEmbeddingBackend()
    except ImportError as exc:
        return f"needs the embed-onnx extra: {build_wasm.EMBED_ONNX_INSTALL} ({exc})"
    if not (build_wasm.PYODIDE_DIR / "pyodide.mjs").is_file():
        return "needs node_modules/pyodide: run npm ci"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=bench_browser.DEFAULT_DATA)
    parser.add_argument("--set", default="squad_train", help="retrieval set (squad_train)")
    parser.add_argument("--sizes", default="10000,100000", help="chunks per site")
    parser.add_argument("--queries", type=int, default=100, help="timed queries (100)")
    parser.add_argument("--pure-queries", type=int, default=10,
                        help="queries also checked with the pure-Python scan (10)")
    parser.add_argument("--quality-queries", type=int, default=1000, help="(1000)")
    parser.add_argument("--work", type=Path, default=REPO / ".cache" / "bench-dense",
                        help="built sites, cached vectors and quality (.cache/bench-dense)")
    parser.add_argument("--coarse", default="",
                        help="sizes for the vectors-by-need table instead (e.g. 10000,100000)")
    parser.add_argument("--coarse-real", type=int, default=0,
                        help="chunks of the real-vector coarse vs exact hybrid table (e.g. 10000)")
    parser.add_argument("--settings", default="default,x2,x4",
                        help="coarse probe:candidates pairs (default, xF = the defaults times F)")
    parser.add_argument("--light", action="store_true",
                        help="vectors by need in Chromium at --sizes (bytes per hybrid query "
                             "from the server's log, timings, recall and nDCG vs exact)")
    parser.add_argument("--coarse-sizes", default="",
                        help="--light: also sites of these sizes with coarse lists forced "
                             "(below COARSE_MIN_ROWS too)")
    parser.add_argument("--links", default="none;10mbit,40ms",
                        help="--light, --model-load: links, ';'-separated (none;10mbit,40ms)")
    parser.add_argument("--model-load", action="store_true",
                        help="model load and first embedding, cold and warm, with the .gz "
                             "siblings served precompressed or gzip on the fly")
    args = parser.parse_args(argv)
    if args.coarse:
        return coarse_bench(args, [int(x) for x in args.coarse.split(",") if x.strip()])
    if args.coarse_real:
        return coarse_real(args, args.coarse_real)
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    if not sizes or min(sizes) < 1 or args.queries < 1:
        parser.error("--sizes and --queries must be positive")
    if not (args.data / args.set / "corpus.jsonl").is_file():
        parser.error(f"no retrieval set {args.set!r} in {args.data}")
    problem = check_prerequisites()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    if args.model_load:
        return model_bench(args, sizes[0])
    return light_bench(args, sizes) if args.light else run(args, sizes)


def run(args: argparse.Namespace, sizes: list[int]) -> int:
    from playwright.sync_api import sync_playwright

    from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend

    work = args.work
    root = work / "sites"
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    backend = CachedBackend(OnnxEmbeddingBackend(), work / "minilm-vectors.json")
    corpus, queries = bench_browser.load_set(args.data / args.set, 10**9)
    seen: set[str] = set()
    queries = [q for q in queries if not (q["text"] in seen or seen.add(q["text"]))]
    quality_queries = queries[: args.quality_queries]
    timed = [q["text"] for q in quality_queries[: args.queries]]
    wheel_dir = Path(tempfile.mkdtemp(prefix="ragspine-bench-dense-"))
    try:
        wheels = (build_wasm.pack_wheel(wheel_dir), build_wasm.find_micropip())
        builds = {}
        for i, n in enumerate(sizes):
            db_copy = work / f"chunks-{n}.db" if i == 0 else None
            picked = select(corpus, quality_queries, n)
            builds[n] = build(picked, root / f"{args.set}-{n}", wheels, backend, db_copy)
    except build_wasm.BuildError as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(wheel_dir, ignore_errors=True)

    results: dict[int, dict[str, Any]] = {}
    for n in sizes:
        site = root / f"{args.set}-{n}"
        log(f"CPython: {site.name} (numpy, then pure Python on {args.pure_queries} queries)…")
        results[n] = {
            "numpy": cpython_hits(site, backend, timed, numpy=True),
            "pure": cpython_hits(site, backend, timed[: args.pure_queries], numpy=False),
            "bytes": vector_bytes(site),
        }
    db = work / f"chunks-{sizes[0]}.db"
    key = f"{hashlib.sha256(db.read_bytes()).hexdigest()}-{len(quality_queries)}"
    cached = work / "quality.json"
    scores = json.loads(cached.read_text("utf-8")) if cached.is_file() else {}
    if scores.get("key") != key:
        log("quality: int8 vs float32 on the SQLite reference path…")
        scores = {"key": key, **quality(db, backend, quality_queries, work)}
        cached.write_text(json.dumps(scores) + "\n", "utf-8")
    backend.save()

    server = build_wasm.make_server(root)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=bench_browser.CHROMIUM, args=bench_browser.CHROMIUM_ARGS
            )
            try:
                for n in sizes:
                    log(f"Chromium: {args.set}-{n}…")
                    scan = scan_job(root / f"{args.set}-{n}", backend, timed)
                    results[n]["browser"] = run_browser(
                        browser, base, f"{args.set}-{n}", timed, scan
                    )
            finally:
                browser.close()
    finally:
        server.shutdown()
    report(args, sizes, builds, results, scores, len(quality_queries))
    log(f"done in {time.perf_counter() - started:.0f} s")
    return 0


def report(args: argparse.Namespace, sizes: list[int], builds: dict[int, dict[str, Any]],
           results: dict[int, dict[str, Any]], scores: dict[str, float], n_quality: int) -> None:
    first = results[sizes[0]]["browser"]
    print(f"\nDense search at scale, {args.set}, MiniLM (int8 vector shards, exact integer scan),"
          f" headless Chromium (JSPI), {args.queries} queries, p50 ms per call (wall time around"
          " the JS call)\n")
    head = ("| chunks | query embedding | BM25 | dense (hybrid − BM25 − embedding) | JS scan "
            "| hybrid | vectors: int8 / float32 bytes | identical: browser = numpy = pure |")
    print(head)
    print("|---:|---:|---:|---:|---:|---:|---|---|")
    for n in sizes:
        r = results[n]
        b = r["browser"]
        embed = p50(b["embed"])
        bm25 = p50([x["ms"] for x in b["bm25"]])
        hybrid = p50([x["ms"] for x in b["hybrid"]])
        int8, f32 = r["bytes"]
        browser_hits = [x["hits"] for x in b["hybrid"]]
        same = browser_hits == r["numpy"] and r["pure"] == r["numpy"][: len(r["pure"])]
        print(f"| {builds[n]['chunks']:,} | {embed:.1f} | {bm25:.1f} | {hybrid - bm25 - embed:.1f}"
              f" | {p50(b['scan']):.1f} | {hybrid:.1f} | {int8:,} / {f32:,} ({int8 / f32:.0%}) | "
              f"{'yes' if same else 'NO'} ({len(browser_hits)} + {len(r['pure'])} pure) |")
    channels = sorted({x["channel"] for n in sizes for x in results[n]["browser"]["hybrid"]})
    print(f"\nhybrid channels: {', '.join(map(str, channels))}; model "
          f"{(first['info'].get('embeddings') or {}).get('modelId', '?')}")
    print(f"hybrid nDCG@10 on {args.set} ({n_quality} queries, the {sizes[0]:,}-chunk corpus, "
          f"SQLite reference path): int8 {scores['int8']:.4f}, float32 {scores['float32']:.4f}, "
          f"difference {scores['int8'] - scores['float32']:+.4f}")
    print("sites: " + "; ".join(
        f"{n:,} chunks = {builds[n]['paragraphs']:,} paragraphs, built in {builds[n]['build_s']} s"
        for n in sizes))


class CountingFiles:
    """A bundle folder's files, counting the bytes read (of paths under ``prefixes``)."""

    def __init__(self, root: Path, prefixes: tuple[str, ...] = ("",)) -> None:
        self.root, self.prefixes, self.bytes = root, prefixes, 0

    def read(self, path: str) -> bytes:
        data = (self.root / path).read_bytes()
        if path.startswith(self.prefixes):
            self.bytes += len(data)
        return data


def synthetic(real: list[list[float]], n: int, seed: int) -> list[list[float]]:
    """``n`` vectors around random real ones (noise of norm ≈ 0.75: cosine ≈ 0.8)."""
    import numpy as np

    rnd = np.random.default_rng(seed)
    base = np.asarray(real, dtype=np.float64)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    picked = base[rnd.integers(0, len(base), n)]
    noise = rnd.normal(0.0, 0.75 / math.sqrt(base.shape[1]), picked.shape)
    out: list[list[float]] = (picked + noise).tolist()
    return out


def coarse_bench(args: argparse.Namespace, sizes: list[int]) -> int:
    from ragspine_lite.bundle.coarse import write_vectors
    from ragspine_lite.bundle.dense import ShardScanner
    from ragspine_lite.vector.quantize import Int8Codec
    from ragspine_lite.vector.sqlite_store import SqliteVectorStore
    from ragspine_lite.vector.store import VectorRecord

    cache = args.work / "minilm-vectors.json"
    if not cache.is_file():
        print(f"no cached vectors at {cache}: run the hybrid measurement first", file=sys.stderr)
        return 2
    real = list(json.loads(cache.read_text("utf-8")).values())
    print(f"\nVectors by need, synthetic vectors around {len(real):,} real MiniLM chunk vectors, "
          f"{args.queries} queries, CPython (numpy)\n")
    print("| chunks | layout | lists / probe / candidates | vector bytes, first query (cold) | "
          "next ten, mean per query | recall@10 vs exact | scan p50 ms |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for n in sizes:
        folder = Path(tempfile.mkdtemp(prefix="ragspine-coarse-"))
        try:
            rows = synthetic(real, n, seed=n)
            ids = [f"c{i:07d}" for i in range(n)]
            with SqliteVectorStore(folder / "v.db", model_id="m", quantization="int8") as store:
                store.upsert(VectorRecord(i, tuple(v)) for i, v in zip(ids, rows, strict=True))
            write = functools.partial(_write, folder / "site")
            log(f"coarse: {n:,} rows, building the lists…")
            entry = write_vectors(folder / "v.db", ids, write, model_id="m", min_rows=0)
            exact_entry = write_vectors(folder / "v.db", ids, write, model_id="m", min_rows=n + 1)
            codec = Int8Codec(entry["scale"])
            queries = [codec.encode(v) for v in synthetic(real, args.queries + 10, seed=n + 1)]
            exact = ShardScanner(CountingFiles(folder / "site"), exact_entry)
            wanted = [sorted(exact.scan(q, None), key=_best)[:K] for q in queries]
            print(f"| {n:,} | exact shards | – | {n * int(entry['dim']):,} | 0 | 1.000 | – |")
            for probe, wanted_rows in settings(args, entry):
                row = coarse_row(folder / "site", entry, probe, wanted_rows, queries, wanted)
                print(f"| {n:,} | coarse | {len(entry['lists'])} / {probe} / {wanted_rows} | "
                      + row + " |")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


def coarse_sites(args: argparse.Namespace, n: int, backend: Any,
                 corpus: list[dict], quality: list[dict]) -> tuple[Path, Path, Path]:
    """(chunk store, exact site, coarse site) of the first ``n`` chunks (real vectors)."""
    from ragspine_lite.bundle.export import export_store, load_corpus
    from ragspine_lite.bundle.manifest import BUNDLE_FORMAT_VERSION
    from ragspine_lite.bundle.shards import write_shards

    work = args.work / f"coarse-real-{n}"
    db = work / "chunks.db"
    if not db.is_file():
        write_docs(select(corpus, quality, n), work / "docs")
        work.mkdir(parents=True, exist_ok=True)
        export_store(load_corpus([work / "docs"]), db, embedding_backend=backend)
        backend.save()
    sites = []
    for name, least in (("exact", 10**12), ("coarse", 0)):
        root = work / name
        shutil.rmtree(root, ignore_errors=True)
        report = write_shards(db, root, coarse_min_rows=least)
        manifest = {"format_version": BUNDLE_FORMAT_VERSION, "entry": {"index": report.header},
                    "files": {p: {} for p in report.files}}
        (root / "manifest.json").write_text(json.dumps(manifest), "utf-8")
        sites.append(root)
    return db, sites[0], sites[1]


def coarse_real(args: argparse.Namespace, n: int) -> int:
    """Hybrid nDCG@10, recall and vector bytes of the coarse lists vs the exact scan, real
    MiniLM vectors of the developer set (CPython, the sharded reader)."""
    from ragspine_lite.bundle.coarse import CoarseScanner
    from ragspine_lite.bundle.runtime import BundleSearcher
    from ragspine_lite.bundle.shards import DirectoryFiles, ShardedBundle
    from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend

    backend = CachedBackend(OnnxEmbeddingBackend(), args.work / "minilm-vectors.json")
    corpus, queries = bench_browser.load_set(args.data / args.set, 10**9)
    seen: set[str] = set()
    queries = [q for q in queries if not (q["text"] in seen or seen.add(q["text"]))]
    quality = queries[: args.quality_queries]
    _db, exact_root, coarse_root = coarse_sites(args, n, backend, corpus, quality)
    entry = ShardedBundle(DirectoryFiles(coarse_root)).vectors or {}
    asked = quality[: args.queries]
    with BundleSearcher.from_files(DirectoryFiles(exact_root), embedding_backend=backend) as s:
        want = [s.search(q["text"], top_k=K, mode="hybrid", highlight=False).snippets
                for q in asked]
    print(f"\nCoarse lists vs the exact scan, {args.set}, real MiniLM vectors, "
          f"{len(asked)} queries, CPython, hybrid searches (sharded reader)\n")
    print("| chunks | lists / probe / candidates | vector bytes, first query (cold) | "
          "next ten, mean | hybrid recall@10 vs exact | hybrid nDCG@10 coarse / exact |")
    print("|---:|---|---:|---:|---:|---|")
    exact_ndcg = sum(ndcg([h["doc_id"] for h in w], q["rel"])
                     for w, q in zip(want, asked, strict=True)) / len(asked)
    for probe, wanted_rows in settings(args, entry):
        files = CountingFiles(coarse_root, prefixes=("data/vectors/", "data/lists/"))
        scanner = CoarseScanner(files, entry, probe=probe, candidates=wanted_rows)
        per_query, recall, score = [], 0.0, 0.0
        with BundleSearcher.from_files(files, embedding_backend=backend, scanner=scanner) as s:
            for q, w in zip(asked, want, strict=True):
                before = files.bytes
                got = s.search(q["text"], top_k=K, mode="hybrid", highlight=False).snippets
                per_query.append(files.bytes - before)
                top = {h["chunk_id"] for h in w}
                recall += len(top & {h["chunk_id"] for h in got}) / max(1, len(top))
                score += ndcg([h["doc_id"] for h in got], q["rel"])
        print(f"| {entry['rows']:,} | {len(entry['lists'])} / {probe} / {wanted_rows} | "
              f"{per_query[0]:,} | "
              f"{sum(per_query[1:11]) // 10:,} | {recall / len(asked):.3f} | "
              f"{score / len(asked):.4f} / {exact_ndcg:.4f} |")
    return 0


def _best(hit: tuple[int, int]) -> tuple[int, int]:
    return -hit[1], hit[0]


def settings(args: argparse.Namespace, entry: dict[str, Any]) -> list[tuple[int, int]]:
    """The ``(probe, candidates)`` pairs of ``--settings`` (``P:C,…``; ``default`` is the
    entry's own, ``xF`` the entry's times F)."""
    out = []
    for item in args.settings.split(","):
        if item == "default":
            out.append((int(entry["probe"]), int(entry["candidates"])))
        elif item.startswith("x"):
            f = float(item[1:])
            out.append((round(f * entry["probe"]), round(f * entry["candidates"])))
        elif item:
            probe, wanted = item.split(":")
            out.append((int(probe), int(wanted)))
    return out


def coarse_row(root: Path, entry: dict[str, Any], probe: int, wanted_rows: int,
               queries: list[bytes], wanted: list[list[tuple[int, int]]]) -> str:
    """Bytes (first, next ten), recall@10 and scan p50 of one setting, a cold reader."""
    from ragspine_lite.bundle.coarse import CoarseScanner

    files = CountingFiles(root)
    scanner = CoarseScanner(files, entry, probe=probe, candidates=wanted_rows)
    per_query, recalls, times = [], [], []
    for q, want in zip(queries, wanted, strict=True):
        before, started = files.bytes, time.perf_counter()
        top = sorted(scanner.scan(q, None), key=_best)[:K]
        times.append((time.perf_counter() - started) * 1000)
        per_query.append(files.bytes - before)
        recalls.append(len({d for d, _ in top} & {d for d, _ in want}) / K)
    return (f"{per_query[0]:,} | {sum(per_query[1:11]) // 10:,} | "
            f"{sum(recalls) / len(recalls):.3f} | {p50(times[11:] or times):.1f}")


def _write(root: Path, folder: str, data: bytes) -> str:
    path = f"{folder}/v-{hashlib.sha256(data).hexdigest()[:16]}.i8"
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_bytes(data)
    return path



# ---------------------------------------------------------------- vectors by need in Chromium

LIGHT_OPEN_JS = r"""
async ({ module, bundle }) => {
  const { RagSpineLite } = await import(module);
  const t = performance.now();
  window.rs = await RagSpineLite.open({ bundle, jspi: true, timeoutMs: 0 });
  const info = await window.rs.denseReady();
  return { readyMs: performance.now() - t, engine: info.engine, dense: info.dense ?? null };
}
"""
LIGHT_SEARCH_JS = r"""
async ({ q }) => {
  const t = performance.now();
  const r = await window.rs.searchDetailed(q, { topK: 10, mode: "hybrid", highlight: false });
  return { ms: performance.now() - t, channel: r.semantic ? r.semantic.channel : null,
           hits: r.results.map((s) => [s.chunk_id, s.scores.vector, s.scores.fused]) };
}
"""
LIGHT_TIMED_JS = r"""
async ({ queries, warmups }) => {
  const rs = window.rs;
  for (const w of warmups) {
    await rs.embed([w]);
    await rs.searchDetailed(w, { topK: 10, mode: "bm25", highlight: false });
  }
  const out = { embed: [], bm25: [], hybrid: [] };
  for (const q of queries) {
    const t = performance.now();
    await rs.embed([q]);
    out.embed.push(performance.now() - t);
    // The files both modes read (term shards, the BM25 hits' fragments), loaded untimed: BM25
    // and hybrid are then timed alike, hybrid's extra is its own (vectors, dense-only hits).
    await rs.searchDetailed(q, { topK: 10, mode: "bm25", highlight: false });
  }
  for (const mode of ["bm25", "hybrid"]) {
    for (const q of queries) {
      const t = performance.now();
      const r = await rs.searchDetailed(q, { topK: 10, mode, highlight: false });
      out[mode].push({ ms: performance.now() - t, fetchMs: r.worker ? r.worker.fetchMs : null,
                       hits: r.results.map((s) => [s.chunk_id, s.scores.vector, s.scores.fused]) });
    }
  }
  rs.close();
  return out;
}
"""
# The visitor's path, as the element types it: a prefetch of the question so far after each
# word and of the whole question (it prefetches 40 ms after a keystroke, searches 120 ms
# after the last one), a typist's pause between words, then the search, timed.
LIGHT_TYPED_JS = r"""
async ({ queries, pauseMs, lastMs }) => {
  const rs = window.rs;
  const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
  const out = [];
  for (const q of queries) {
    const words = q.split(" ");
    for (let k = 1; k <= words.length; k++) {
      await rs.prefetch(words.slice(0, k).join(" "), { topK: 10 });
      await sleep(k < words.length ? pauseMs : lastMs);
    }
    const t = performance.now();
    await rs.searchDetailed(q, { topK: 10, mode: "hybrid", highlight: false });
    out.push(performance.now() - t);
  }
  return out;
}
"""
TYPING_PAUSE_MS, LAST_KEY_MS = 150, 80  # between words; the last prefetch to the search
# What a fetch costs this browser on this machine, from the page, the HTTP cache bypassed: one
# file at a time, then PROBE_FILES at once (a question's lists), three times each.
LIGHT_PROBE_JS = r"""
async ({ paths, many }) => {
  const get = async (p) => (await fetch(p, { cache: "no-store" })).arrayBuffer();
  const one = [];
  for (const p of paths.slice(0, 9)) {
    const t = performance.now();
    await get(p);
    one.push(performance.now() - t);
  }
  const together = [];
  for (let k = 0; k < 3; k++) {
    const t = performance.now();
    await Promise.all(paths.slice(many * k, many * (k + 1)).map(get));
    together.push(performance.now() - t);
  }
  return { one, together };
}
"""
PROBE_FILES = 13
VECTOR_DIRS = ("data/vectors/", "data/lists/")


def _vector_wire(log: list[list]) -> int:
    """Bytes on the wire of the logged requests for vector data (shards, centroids, lists,
    blocks, the docno → list map)."""
    return sum(r[2] for r in log if any(f"/{d}" in r[0] for d in VECTOR_DIRS))


def light_reference(site: Path, backend: Any, queries: list[str]) -> dict[str, list[list]]:
    """CPython hybrid hits of the built site: with its own scanner (``site``: coarse lists or
    exact shards, numpy) and with the exact scan of the same vectors (``exact``: a coarse
    scanner that probes every list and rescores every row)."""
    from ragspine_lite.bundle.coarse import CoarseScanner, open_scanner
    from ragspine_lite.bundle.runtime import BundleSearcher
    from ragspine_lite.bundle.shards import DirectoryFiles, ShardedBundle

    files = DirectoryFiles(site)
    entry = ShardedBundle(files).vectors or {}
    scanners = {"site": open_scanner(files, entry, numpy=True)}
    scanners["exact"] = (CoarseScanner(files, entry, probe=10**9, candidates=10**9, numpy=True)
                         if "lists" in entry else scanners["site"])
    out: dict[str, list[list]] = {}
    for name, scanner in scanners.items():
        hits = []
        with BundleSearcher.from_files(files, embedding_backend=backend, scanner=scanner) as s:
            for q in queries:
                found = s.search(q, top_k=K, mode="hybrid", highlight=False).snippets
                hits.append([[h["chunk_id"], h["scores"]["vector"], h["scores"]["fused"],
                              h["doc_id"]] for h in found])
        out[name] = hits
    return out


def light_visit(browser: Any, server: Any, base: str, site: str, first: list[str],
                timed: list[str], typed: list[str], folder: Path) -> dict[str, Any]:
    """One cold visit (new context): open until the dense lane is ready, the first hybrid
    query, ten more, then the timed queries (embedding, BM25, hybrid); then another cold
    visit, the ``typed`` questions as a visitor types them (:data:`LIGHT_TYPED_JS`); the
    server's log says what went over the wire."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.on("pageerror", lambda err: log(f"  page error: {err}"))
        bundle = f"{base}{site}/"
        server.take()
        page.goto(f"{bundle}manifest.json")
        opened = page.evaluate(LIGHT_OPEN_JS, {"module": f"{bundle}ragspine-lite.mjs",
                                               "bundle": bundle})
        boot = server.take()
        out: dict[str, Any] = {**opened, "ready_bytes": sum(r[2] for r in boot),
                               "ready_vector_bytes": _vector_wire(boot), "first": []}
        for q in first:
            found = page.evaluate(LIGHT_SEARCH_JS, {"q": q})
            found["vector_bytes"] = _vector_wire(server.take())
            out["first"].append(found)
        out.update(page.evaluate(LIGHT_TIMED_JS, {"queries": timed, "warmups": list(WARMUPS)}))
        out["timed_vector_bytes"] = _vector_wire(server.take())
        paths = _probe_paths(bundle, folder)
        out["probe"] = paths and page.evaluate(LIGHT_PROBE_JS, {"paths": paths,
                                                                "many": PROBE_FILES})
        server.take()
    finally:
        context.close()
    context = browser.new_context()  # the typed questions: another cold visit
    try:
        page = context.new_page()
        page.goto(f"{bundle}manifest.json")
        page.evaluate(LIGHT_OPEN_JS, {"module": f"{bundle}ragspine-lite.mjs", "bundle": bundle})
        server.take()
        out["typed"] = page.evaluate(LIGHT_TYPED_JS, {"queries": typed, "pauseMs": TYPING_PAUSE_MS,
                                                      "lastMs": LAST_KEY_MS})
        out["typed_vector_bytes"] = _vector_wire(server.take())
        return out
    finally:
        context.close()


def _probe_paths(bundle: str, folder: Path) -> list[str]:
    """URLs of a coarse site's first list files (``[]``: exact shards, no probe)."""
    from ragspine_lite.bundle.shards import DirectoryFiles, ShardedBundle

    entry = ShardedBundle(DirectoryFiles(folder)).vectors or {}
    paths = [p for n, p, _ in entry.get("lists", []) if n]
    return [bundle + p for p in paths[: 9 + 3 * PROBE_FILES]]


def light_bench(args: argparse.Namespace, sizes: list[int]) -> int:
    """Vectors by need in Chromium: hybrid sites as built (exact shards below
    COARSE_MIN_ROWS, coarse lists from it; ``--coarse-sizes``: coarse lists at any size),
    bytes of vector data per query from the server's log, on the bare loopback and a shaped
    link, timings, recall and nDCG against exact."""
    from playwright.sync_api import sync_playwright

    from ragspine_lite.bundle import coarse
    from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend

    bench_bytes = _load_bytes()
    work = args.work
    root = work / "sites"
    root.mkdir(parents=True, exist_ok=True)
    backend = CachedBackend(OnnxEmbeddingBackend(), work / "minilm-vectors.json")
    corpus, queries = bench_browser.load_set(args.data / args.set, 10**9)
    seen: set[str] = set()
    queries = [q for q in queries if not (q["text"] in seen or seen.add(q["text"]))]
    quality = queries[: args.quality_queries]
    first, timed = quality[:11], quality[11 : 11 + args.queries]
    typed = quality[11 + args.queries : 11 + 2 * args.queries]
    texts = [q["text"] for q in first + timed]
    forced = [int(x) for x in args.coarse_sizes.split(",") if x.strip()]
    plan = [(f"{args.set}-{n}", n, False) for n in sizes]
    plan += [(f"{args.set}-{n}-coarse", n, True) for n in forced]
    wheel_dir = Path(tempfile.mkdtemp(prefix="ragspine-bench-light-"))
    builds: dict[str, dict[str, Any]] = {}
    try:
        wheels = (build_wasm.pack_wheel(wheel_dir), build_wasm.find_micropip())
        for name, n, force in plan:
            least = coarse.COARSE_MIN_ROWS
            coarse.COARSE_MIN_ROWS = 1 if force else least
            try:
                builds[name] = build(select(corpus, quality, n), root / name, wheels, backend,
                                     work / f"{name}.db")
            finally:
                coarse.COARSE_MIN_ROWS = least
    finally:
        shutil.rmtree(wheel_dir, ignore_errors=True)
    refs = {}
    for name, _, _ in plan:
        log(f"CPython: {name}, the site's scanner and the exact scan…")
        refs[name] = light_reference(root / name, backend, texts)
    backend.save()
    links = [bench_bytes.Link.parse(spec) for spec in args.links.split(";")]
    server = bench_bytes.CountingServer(root)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    visits: dict[tuple[str, str], dict[str, Any]] = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=bench_browser.CHROMIUM, args=bench_browser.CHROMIUM_ARGS
            )
            try:
                for name, _, _ in plan:
                    for link in links:
                        server.link = link
                        log(f"Chromium: {name}, {link.label}…")
                        visits[name, link.label] = light_visit(
                            browser, server, base, name, [q["text"] for q in first],
                            [q["text"] for q in timed], [q["text"] for q in typed], root / name)
            finally:
                browser.close()
    finally:
        server.shutdown()
    light_report(args, [name for name, _, _ in plan], builds, refs, visits, first + timed)
    return 0


def _load_bytes() -> ModuleType:
    bench = str(Path(__file__).resolve().parent)
    if bench not in sys.path:
        sys.path.insert(0, bench)  # browser_bytes imports its sibling as ``browser``
    return _load_sibling("browser_bytes")


def _origin(doc_id: str) -> str:
    """A copied paragraph's id (or chunk id) → the paragraph's (``en-1-copy3`` → ``en-1``)."""
    return re.sub(r"-copy\d+", "", doc_id)


def light_report(args: argparse.Namespace, names: list[str], builds: dict[str, dict[str, Any]],
                 refs: dict[str, dict[str, list[list]]],
                 visits: dict[tuple[str, str], dict[str, Any]], asked: list[dict]) -> None:
    print(f"\nHybrid sites, vectors by need, {args.set}, MiniLM, headless Chromium (JSPI), "
          f"{len(asked) - 11} timed queries after 11 cold ones; bytes of vector data "
          f"({', '.join(VECTOR_DIRS)}) on the wire; p50 ms per call\n")
    print("| chunks | layout | link | vector bytes before the dense lane is ready (all bytes, "
          "time) | first hybrid query | next ten, mean | timed queries, mean | query embedding "
          "| BM25 | dense (hybrid − BM25 − embedding) | of which waiting for files "
          "| hybrid | first hybrid query ms "
          "| typed: hybrid | typed: hybrid − BM25 (the prefetch ran the model) "
          "| typed: vector bytes, mean |")
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in names:
        for (site, label), v in visits.items():
            if site != name:
                continue
            embed, bm25 = p50(v["embed"]), p50([x["ms"] for x in v["bm25"]])
            hybrid = p50([x["ms"] for x in v["hybrid"]])
            later = [x["vector_bytes"] for x in v["first"][1:11]]
            print(f"| {builds[name]['chunks']:,} | {root_layout(args, name)} | {label} | "
                  f"{v['ready_vector_bytes']:,} ({v['ready_bytes'] / 1e6:.1f} MB, "
                  f"{v['readyMs'] / 1000:.1f} s) | "
                  f"{v['first'][0]['vector_bytes']:,} | {sum(later) // max(1, len(later)):,} | "
                  f"{v['timed_vector_bytes'] // max(1, len(v['hybrid'])):,} | {embed:.1f} | "
                  f"{bm25:.1f} | {hybrid - bm25 - embed:.1f} | "
                  f"{p50([x['fetchMs'] or 0.0 for x in v['hybrid']]):.1f} | {hybrid:.1f} | "
                  f"{v['first'][0]['ms']:.0f} | {p50(v['typed']):.1f} | "
                  f"{p50(v['typed']) - bm25:.1f} | "
                  f"{v['typed_vector_bytes'] // max(1, len(v['typed'])):,} |")
    print("\n| chunks | layout | hybrid recall@10 vs exact (of texts: a copy counts as its "
          "original) | hybrid nDCG@10 site / exact | "
          "Chromium = CPython (numpy), hybrid hits |")
    print("|---:|---|---:|---|---|")
    for name in names:
        ref = refs[name]
        pairs = list(zip(ref["site"], ref["exact"], strict=True))
        recall = sum(len({h[0] for h in a} & {h[0] for h in b}) / max(1, len(b))
                     for a, b in pairs) / len(asked)
        texts = sum(len({_origin(h[0]) for h in a} & {_origin(h[0]) for h in b})
                    / max(1, len({_origin(h[0]) for h in b})) for a, b in pairs) / len(asked)
        score = {key: sum(ndcg([_origin(h[3]) for h in hits], q["rel"])
                          for hits, q in zip(ref[key], asked, strict=True)) / len(asked)
                 for key in ("site", "exact")}
        same = []
        for (site, label), v in visits.items():
            if site == name:
                got = [x["hits"] for x in v["first"] + v["hybrid"]]
                same.append(f"{label}: "
                            + ("yes" if got == [[h[:3] for h in r] for r in ref["site"]]
                               else "NO"))
        print(f"| {builds[name]['chunks']:,} | {root_layout(args, name)} | {recall:.3f} "
              f"({texts:.3f}) | "
              f"{score['site']:.4f} / {score['exact']:.4f} | {'; '.join(same)} "
              f"({len(asked)} queries) |")
    for (site, label), v in visits.items():
        if v.get("probe"):
            print(f"\nfetch cost, {site}, {label} (this Chromium on this machine, from the page, "
                  f"HTTP cache bypassed): one list file {p50(v['probe']['one']):.1f} ms, "
                  f"{PROBE_FILES} at once {p50(v['probe']['together']):.1f} ms (p50)")
    channels = sorted({str(x.get("channel")) for v in visits.values() for x in v["first"]})
    print(f"\nhybrid channels: {', '.join(channels)}; nDCG: the gold paragraph or a copy of it "
          f"(sites beyond squad_train's ~22k chunks repeat its paragraphs as copies)")
    print("sites: " + "; ".join(
        f"{name}: {builds[name]['chunks']:,} chunks = {builds[name]['paragraphs']:,} "
        f"paragraphs, built in {builds[name]['build_s']} s" for name in names))


def root_layout(args: argparse.Namespace, name: str) -> str:
    """``exact shards`` or ``coarse L / P / C`` of a built site."""
    from ragspine_lite.bundle.shards import DirectoryFiles, ShardedBundle

    entry = ShardedBundle(DirectoryFiles(args.work / "sites" / name)).vectors or {}
    if "lists" not in entry:
        return "exact shards"
    return f"coarse {len(entry['lists'])} / {entry['probe']} / {entry['candidates']}"


# ---------------------------------------------------------------- model load, cold and warm

MODEL_JS = r"""
async ({ module, bundle, first }) => {
  const { RagSpineLite } = await import(module);
  const t = performance.now();
  const rs = await RagSpineLite.open({ bundle, jspi: true, timeoutMs: 0 });
  const info = await rs.denseReady();
  const readyMs = performance.now() - t;
  const e = performance.now();
  await rs.embed([first]);
  const out = { readyMs, embedMs: performance.now() - e, loadMs: info.embeddings.loadMs };
  rs.close();
  return out;
}
"""
MODEL_DIRS = ("/models/", "/ort/")


def precompressed(server: Any, root: Path) -> None:
    """Make the counting ``server`` send a file's ``.gz`` sibling, ``Content-Encoding: gzip``,
    to a browser that accepts gzip (as ``gzip_static``); other files as before."""
    base = server.RequestHandlerClass.func

    class Handler(base):  # type: ignore[misc, valid-type]
        def send_head(self) -> Any:
            path = Path(self.translate_path(self.path))
            sibling = path.with_name(path.name + ".gz")
            if not (sibling.is_file() and "gzip" in self.headers.get("Accept-Encoding", "")):
                return super().send_head()
            self._gz = sibling.read_bytes()  # sent instead of the file, Content-Encoding: gzip
            return super(base, self).send_head()  # the file's own head, not gzipped again

    server.RequestHandlerClass = functools.partial(Handler, directory=str(root))


def model_visits(browser: Any, server: Any, base: str, site: str) -> list[dict[str, Any]]:
    """A cold visit (new context) and a warm one (the same context again)."""
    context = browser.new_context()
    out = []
    try:
        page = context.new_page()
        bundle = f"{base}{site}/"
        for visit in ("cold", "warm"):
            server.take()
            page.goto(f"{bundle}manifest.json")
            found = page.evaluate(MODEL_JS, {"module": f"{bundle}ragspine-lite.mjs",
                                             "bundle": bundle, "first": "who wrote it"})
            wire = sum(r[2] for r in server.take() if any(d in r[0] for d in MODEL_DIRS))
            out.append({"visit": visit, **found, "model_bytes": wire})
    finally:
        context.close()
    return out


def model_bench(args: argparse.Namespace, n: int) -> int:
    """Model load and first embedding, cold and warm, gzip on the fly vs precompressed."""
    from playwright.sync_api import sync_playwright

    from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend

    bench_bytes = _load_bytes()
    root = args.work / "sites"
    backend = CachedBackend(OnnxEmbeddingBackend(), args.work / "minilm-vectors.json")
    corpus, queries = bench_browser.load_set(args.data / args.set, 10**9)
    wheel_dir = Path(tempfile.mkdtemp(prefix="ragspine-bench-model-"))
    try:
        wheels = (build_wasm.pack_wheel(wheel_dir), build_wasm.find_micropip())
        name = f"{args.set}-{n}"
        build(select(corpus, queries[: args.quality_queries], n), root / name, wheels, backend,
              args.work / f"{name}.db")
    finally:
        shutil.rmtree(wheel_dir, ignore_errors=True)
    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=bench_browser.CHROMIUM, args=bench_browser.CHROMIUM_ARGS
        )
        try:
            for served in ("on the fly", "precompressed"):
                server = bench_bytes.CountingServer(root)
                if served == "precompressed":
                    precompressed(server, root)
                threading.Thread(target=server.serve_forever, daemon=True).start()
                base = f"http://127.0.0.1:{server.server_address[1]}/"
                try:
                    for spec in args.links.split(";"):
                        server.link = bench_bytes.Link.parse(spec)
                        log(f"Chromium: model load, {served}, {server.link.label}…")
                        rows += [(served, server.link.label, v)
                                 for v in model_visits(browser, server, base, name)]
                finally:
                    server.shutdown()
        finally:
            browser.close()
    print(f"\nModel load and first embedding, {name}, MiniLM int8, headless Chromium (JSPI); "
          "model load = its files fetched and checked + onnxruntime-web's session\n")
    print("| served | link | visit | model + runtime bytes on the wire (models/, ort/) | "
          "model load ms | open → dense ready s | first embedding ms |")
    print("|---|---|---|---:|---:|---:|---:|")
    for served, label, v in rows:
        print(f"| {served} | {label} | {v['visit']} | {v['model_bytes']:,} | {v['loadMs']:,} | "
              f"{v['readyMs'] / 1000:.1f} | {v['embedMs']:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
