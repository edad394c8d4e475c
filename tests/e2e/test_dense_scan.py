"""End to end: a hybrid site's worker scans the int8 vector shards in JS (ragspine-dense.mjs).

What is deterministic is asserted exactly, what is not within a stated bound:

- Given the SAME query vector (the browser's, from onnxruntime-web), the hits of a hybrid
  search in Chromium (JSPI and no-JSPI) carry the same chunk ids and bit-equal BM25, vector
  and fused scores as CPython over the same site: the sharded reader with its pure-Python
  scan, and the SQLite chunk store the site was exported from.
- onnxruntime-web and native onnxruntime need not give bit-equal embeddings on every CPU:
  they agree within :data:`COSINE_MIN` / :data:`MAX_ABS_DIFF`, and the two rankings are
  compared only where a near-tie cannot flip them. The margin comes from the two query
  vectors' int8 codes (what the scan multiplies): a code difference ``Δc`` moves any row's
  cosine by at most ``‖Δc‖ · max‖row‖ / scale²`` and the fused score by ``(1 - w) /
  (ceiling - floor)`` times that (the calibrated fusion's dense slope).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from _site import ReplayedVectors, browser_module, kept_store
from test_demo_page import Console

from ragspine_lite.bundle.dense import ShardScanner
from ragspine_lite.bundle.runtime import BundleSearcher
from ragspine_lite.bundle.shards import DirectoryFiles, ShardedBundle
from ragspine_lite.vector.quantize import Int8Codec

pytestmark = browser_module("onnxruntime")

#: How close the two runtimes' query embeddings must be (observed: cosine 1 - 1e-7).
COSINE_MIN = 0.9999
MAX_ABS_DIFF = 1e-4
#: Float slack for scores recomputed through different summation orders.
FLOAT_SLACK = 1e-9

DATA = Path(__file__).resolve().parents[1] / "data"
SEARCH_JS = """async ([queries, batches, jspi]) => {
  const { RagSpineLite } = await import('./ragspine-lite.mjs');
  const rs = await RagSpineLite.open({ bundle: './', jspi });
  try {
    await rs.denseReady();  // until the model joins, searches are answered with BM25
    const out = [];
    const read = [];  // what Python read through the worker: never a vector shard
    const sync = [];  // of it, what came by synchronous request (one after the other)
    const waits = [];  // how long Python awaited files while searching (worker.fetchMs)
    for (const q of queries) {
      const r = await rs.searchDetailed(q, { topK: 10, highlight: false });
      const row = (s) => [s.chunk_id, s.scores.bm25, s.scores.vector, s.scores.fused];
      out.push([r.semantic.channel, r.results.map(row)]);
      read.push(...r.worker.files.map((f) => f.path));
      sync.push(...r.worker.files.filter((f) => f.from === "sync").map((f) => f.path));
      waits.push(r.worker.fetchMs);
    }
    const vectors = {};  // the texts a search embeds (query variants), batch by batch
    for (const texts of batches) {
      const got = await rs.embed(texts);
      texts.forEach((t, i) => { vectors[t] = got[i]; });
    }
    return { read, sync, waits, out, vectors };
  } finally {
    rs.close();
  }
}"""


def _queries() -> list[str]:
    lines = (DATA / "squad_slice" / "queries.jsonl").read_text("utf-8").splitlines()[:6]
    return ["why did operating profit fall", "hk revenue", *(json.loads(x)["text"] for x in lines)]


def _cpython(searcher: BundleSearcher, queries: list[str]) -> list:
    out = []
    for q in queries:
        found = searcher.search(q, top_k=10, highlight=False)
        out.append([(found.semantic or {}).get("channel"), [
            [s["chunk_id"], s["scores"]["bm25"], s["scores"]["vector"], s["scores"]["fused"]]
            for s in found.snippets
        ]])
    return out


@pytest.fixture(scope="module")
def backend():
    from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend

    return OnnxEmbeddingBackend()


@pytest.fixture(scope="module")
def native(semantic, backend):
    """CPython's hits with native onnxruntime, and the batches of texts its searches embed."""
    recording = ReplayedVectors(backend)
    with BundleSearcher(kept_store(semantic), embedding_backend=recording) as reference:
        return _cpython(reference, _queries()), recording.batches


@pytest.fixture(scope="module", params=[True, False], ids=["jspi", "no-jspi"])
def browser_run(request, browser, semantic_url, native):
    return _search_page(browser, semantic_url, native[1], request.param)


def _search_page(browser, url: str, batches: list, jspi: bool) -> dict:
    """SEARCH_JS's answer on the site at ``url`` (the console stays quiet)."""
    page = browser.new_page()
    console = Console(page)
    page.route("**/favicon.ico", lambda route: route.fulfill(status=204, body=""))
    page.goto(url + "manifest.json")
    got = page.evaluate(SEARCH_JS, [_queries(), batches, jspi])
    page.close()
    assert console.messages == []
    return got


def test_given_the_same_query_vector_the_js_scan_gives_cpythons_hybrid_hits(
    browser_run, semantic, backend
):
    got, queries = browser_run, _queries()
    assert got["read"] and not [p for p in got["read"] if p.startswith("data/vectors/")]
    same = ReplayedVectors(backend, got["vectors"])
    files = DirectoryFiles(semantic)
    pure = ShardScanner(files, ShardedBundle(files).vectors, numpy=False)
    with BundleSearcher.from_files(files, embedding_backend=same, scanner=pure) as lazy, \
            BundleSearcher(kept_store(semantic), embedding_backend=same) as reference:
        want = _cpython(reference, queries)
        assert _cpython(lazy, queries) == want
    assert got["out"] == want
    assert {channel for channel, _ in want} == {"hybrid"}
    assert any(hit[2] != 0.0 for _, hits in want for hit in hits)


def _cosine_and_diff(u: list[float], v: list[float]) -> tuple[float, float]:
    dot = sum(a * b for a, b in zip(u, v, strict=True))
    norm = math.sqrt(sum(a * a for a in u)) * math.sqrt(sum(b * b for b in v))
    return dot / norm, max(abs(a - b) for a, b in zip(u, v, strict=True))


def _cosine_margin(codec: Int8Codec, u: list[float], v: list[float]) -> float:
    """The most any row's cosine can move between query vectors ``u`` and ``v``."""
    cu, cv = (memoryview(codec.encode(x)).cast("b") for x in (u, v))
    code_diff = math.sqrt(sum((a - b) ** 2 for a, b in zip(cu, cv, strict=True)))
    # A row's codes round scale * (unit vector) per component: norm <= scale + 0.5 sqrt(dim).
    row_norm = codec.scale + 0.5 * math.sqrt(len(u))
    return code_diff * row_norm / codec.scale**2


def _assert_ranked_alike(browser_hits: list, native_hits: list, margin: float) -> None:
    """Hits ``[id, bm25, vector, fused]`` of two runs whose fused scores may differ by
    ``margin`` per chunk: equal BM25, close scores, the same order wherever the native
    scores are further apart than twice the margin, no clear hit missing."""
    b = {h[0]: h for h in browser_hits}
    n = {h[0]: h for h in native_hits}
    for cid in b.keys() & n.keys():
        assert b[cid][1] == n[cid][1], cid  # BM25: the same pure-Python arithmetic
        assert abs(b[cid][3] - n[cid][3]) <= margin + FLOAT_SLACK, cid
    order = [h[0] for h in browser_hits]
    for i, hi in enumerate(native_hits):
        for lo in native_hits[i + 1:]:
            if hi[3] - lo[3] > 2 * margin + FLOAT_SLACK and hi[0] in b and lo[0] in b:
                assert order.index(hi[0]) < order.index(lo[0]), (hi, lo)
    cut = native_hits[-1][3] if native_hits else 0.0
    clear = [h[0] for h in native_hits if h[3] - cut > 2 * margin + FLOAT_SLACK]
    assert set(clear) <= set(b), (clear, order)


def _assert_alike_within_tolerance(site: Path, backend, native: tuple, vectors: dict,
                                   got: list) -> float:
    """``got`` (hits searched with ``vectors``) against CPython's ``native`` hits: vectors
    within the tolerance, rankings alike beyond the margin they allow. Returns the margin."""
    want, batches = native
    texts = [t for batch in batches for t in batch]
    calibration = backend.calibration
    slope = (1 - calibration.lexical_weight) / (calibration.ceiling - calibration.floor)
    codec = Int8Codec(ShardedBundle(DirectoryFiles(site)).vectors["scale"])
    margins = []
    for text, v in zip(texts, backend.embed_texts(texts), strict=True):
        u = [float(x) for x in vectors[text]]
        cosine, diff = _cosine_and_diff(u, v)
        assert cosine >= COSINE_MIN and diff <= MAX_ABS_DIFF, (text, cosine, diff)
        margins.append(_cosine_margin(codec, u, v))
    # A query's hits may come from several embedded variants: the largest move bounds them.
    margin = slope * max(margins)
    compared = 0
    for (channel, hits), (want_channel, want_hits) in zip(got, want, strict=True):
        assert channel == want_channel == "hybrid"
        _assert_ranked_alike(hits, want_hits, margin)
        for cid, _, vector, _ in hits:  # each row's cosine within the code margin
            other = next((h for h in want_hits if h[0] == cid), None)
            if other is not None:
                assert abs(vector - other[2]) <= max(margins) + FLOAT_SLACK, cid
        compared += len(hits)
    assert compared >= 5 * len(want)
    return margin


def test_the_two_runtimes_embed_alike_and_rank_alike_beyond_near_ties(
    browser_run, semantic, backend, native
):
    _assert_alike_within_tolerance(semantic, backend, native, browser_run["vectors"],
                                   browser_run["out"])


def test_the_margin_holds_for_any_vectors_within_the_tolerance(semantic, backend, native):
    """The bound itself, on any machine: native vectors nudged by up to the tolerance (which
    moves some int8 codes, so the margin is not zero) searched in CPython."""
    rng = random.Random(23)
    texts = [t for batch in native[1] for t in batch]
    nudged = {t: [x + rng.uniform(-0.9, 0.9) * MAX_ABS_DIFF for x in v]
              for t, v in zip(texts, backend.embed_texts(texts), strict=True)}
    with BundleSearcher(kept_store(semantic),
                        embedding_backend=ReplayedVectors(backend, nudged)) as searcher:
        got = _cpython(searcher, _queries())
    assert _assert_alike_within_tolerance(semantic, backend, native, nudged, got) > 0


@pytest.fixture(scope="module")
def coarse_semantic(semantic, tmp_path_factory):
    """The MiniLM samples site with its vectors rewritten as coarse lists (every row count)."""
    import shutil

    from ragspine_lite.bundle.shards import write_shards
    from ragspine_lite.bundle.site import _file_table

    root = tmp_path_factory.mktemp("coarse-site") / "site"
    shutil.copytree(semantic, root)
    report = write_shards(kept_store(semantic), root, coarse_min_rows=1)
    manifest = json.loads((root / "manifest.json").read_text("utf-8"))
    manifest["entry"]["index"] = report.header
    manifest["files"] = _file_table(root)
    (root / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    return root


@pytest.mark.parametrize("jspi", [True, False], ids=["jspi", "no-jspi"])
def test_given_the_same_query_vector_the_js_coarse_scanner_gives_cpythons_hits(
    browser, coarse_semantic, backend, native, jspi
):
    from _site import serving

    with serving(coarse_semantic) as url:
        got = _search_page(browser, url, native[1], jspi)
    assert [p for p in got["read"] if p.startswith("data/lists/")]  # lists come by need
    # With JSPI the scanner fetches a query's lists, then its blocks, each round in parallel,
    # and the search fetches the text of hits only the dense lane found together, before
    # Python reads it: nothing of either is read synchronously.
    assert bool([p for p in got["sync"] if p.startswith("data/lists/")]) is not jspi
    if jspi:
        assert not [p for p in got["sync"] if p.startswith("data/text/")], got["sync"]
    # The worker counts the time Python awaited those fetches (none without JSPI).
    assert all(isinstance(w, (int, float)) and w >= 0 for w in got["waits"]), got["waits"]
    assert (max(got["waits"]) > 0) is jspi, got["waits"]
    files = DirectoryFiles(coarse_semantic)
    assert "lists" in (ShardedBundle(files).vectors or {})
    same = ReplayedVectors(backend, got["vectors"])
    with BundleSearcher.from_files(files, embedding_backend=same) as lazy:
        want = _cpython(lazy, _queries())  # the Python CoarseScanner
    assert got["out"] == want
    assert {channel for channel, _ in want} == {"hybrid"}


TYPED_JS = """async ([queries, batches, jspi]) => {
  const { RagSpineLite } = await import('./ragspine-lite.mjs');
  const rs = await RagSpineLite.open({ bundle: './', jspi });
  try {
    await rs.denseReady();
    const lists = (files) => files.map((f) => f.path).filter((p) => p.startsWith('data/lists/'));
    const out = [];
    const ahead = [];  // vector files each prefetch fetched
    const searched = [];  // the files each search loaded after it (any)
    for (const q of queries) {
      ahead.push(lists((await rs.prefetch(q, { topK: 10 })).files));
      const r = await rs.searchDetailed(q, { topK: 10, highlight: false });
      searched.push(r.worker.files.map((f) => f.path));
      const row = (s) => [s.chunk_id, s.scores.bm25, s.scores.vector, s.scores.fused];
      out.push([r.semantic.channel, r.results.map(row)]);
    }
    const vectors = {};
    for (const texts of batches) {
      const got = await rs.embed(texts);
      texts.forEach((t, i) => { vectors[t] = got[i]; });
    }
    return { ahead, searched, out, vectors };
  } finally {
    rs.close();
  }
}"""


@pytest.mark.parametrize("jspi", [True, False], ids=["jspi", "no-jspi"])
def test_a_prefetch_while_typing_fetches_the_vectors_the_coarse_search_reads(
    browser, coarse_semantic, backend, native, jspi
):
    """The visitor's path: ``prefetch(q)`` embeds the question and fetches the coarse lists and
    blocks its hybrid search reads, then the text of its fused hits; the search that follows
    loads no file, and its hits are CPython's for the same query vectors. Without JSPI too:
    the worker fetches them, not Python."""
    from _site import serving

    with serving(coarse_semantic) as url:
        page = browser.new_page()
        console = Console(page)
        page.route("**/favicon.ico", lambda route: route.fulfill(status=204, body=""))
        page.goto(url + "manifest.json")
        got = page.evaluate(TYPED_JS, [_queries(), native[1], jspi])
        page.close()
    assert console.messages == []
    assert sum(map(len, got["ahead"])) > 0, got["ahead"]
    assert got["searched"] == [[] for _ in _queries()], got["searched"]
    same = ReplayedVectors(backend, got["vectors"])
    with BundleSearcher.from_files(DirectoryFiles(coarse_semantic), embedding_backend=same) as lazy:
        assert got["out"] == _cpython(lazy, _queries())


PRIMED_JS = """async ([asked, unasked]) => {
  const { RagSpineLite } = await import('./ragspine-lite.mjs');
  const rs = await RagSpineLite.open({ bundle: './', jspi: false });
  try {
    await rs.denseReady();
    await rs.prefetch(asked, { topK: 10 });
    const after = await rs.searchDetailed(asked, { topK: 10, highlight: false });
    const cold = await rs.searchDetailed(unasked, { topK: 10, highlight: false });
    return [after, cold].map((r) => [r.semantic.channel, r.worker.modelMs]);
  } finally {
    rs.close();
  }
}"""


def test_a_prefetch_runs_the_model_so_the_search_that_follows_does_not(browser, semantic_url):
    """On an exact-scan site too, the prefetch embeds the question: the hybrid search after it
    takes the vector from the embedding cache (no model time), a question not prefetched runs
    the model."""
    page = browser.new_page()
    console = Console(page)
    page.route("**/favicon.ico", lambda route: route.fulfill(status=204, body=""))
    page.goto(semantic_url + "manifest.json")
    after, cold = page.evaluate(PRIMED_JS, ["why did operating profit fall", "hk revenue"])
    page.close()
    assert console.messages == []
    assert after == ["hybrid", 0] and cold[0] == "hybrid" and cold[1] > 0, (after, cold)
