"""End to end: a hybrid site's worker scans the int8 vector shards in JS (ragspine-dense.mjs).

The hits of a hybrid search in Chromium (JSPI and no-JSPI) carry the same chunk ids and the
same BM25, vector and fused scores as CPython over the same site: the sharded reader with its
pure-Python scan, and the SQLite chunk store the site was exported from.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _site import browser_module, kept_store
from test_demo_page import Console

from ragspine_lite.bundle.dense import ShardScanner
from ragspine_lite.bundle.runtime import BundleSearcher
from ragspine_lite.bundle.shards import DirectoryFiles, ShardedBundle

pytestmark = browser_module("onnxruntime")

DATA = Path(__file__).resolve().parents[1] / "data"
SEARCH_JS = """async ([queries, jspi]) => {
  const { RagSpineLite } = await import('./ragspine-lite.mjs');
  const rs = await RagSpineLite.open({ bundle: './', jspi });
  try {
    const out = [];
    const read = [];  // what Python read through the worker: never a vector shard
    for (const q of queries) {
      const r = await rs.searchDetailed(q, { topK: 10, highlight: false });
      const row = (s) => [s.chunk_id, s.scores.bm25, s.scores.vector, s.scores.fused];
      out.push([r.semantic.channel, r.results.map(row)]);
      read.push(...r.worker.files.map((f) => f.path));
    }
    return { read, out };
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


@pytest.mark.parametrize("jspi", [True, False], ids=["jspi", "no-jspi"])
def test_the_js_scan_gives_cpythons_hybrid_hits(browser, semantic_url, semantic, jspi):
    from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend

    queries = _queries()
    page = browser.new_page()
    console = Console(page)
    page.route("**/favicon.ico", lambda route: route.fulfill(status=204, body=""))
    page.goto(semantic_url + "manifest.json")
    got = page.evaluate(SEARCH_JS, [queries, jspi])
    page.close()
    assert console.messages == []
    assert got["read"] and not [p for p in got["read"] if p.startswith("data/vectors/")]
    backend = OnnxEmbeddingBackend()
    files = DirectoryFiles(semantic)
    pure = ShardScanner(files, ShardedBundle(files).vectors, numpy=False)
    with BundleSearcher.from_files(files, embedding_backend=backend, scanner=pure) as lazy, \
            BundleSearcher(kept_store(semantic), embedding_backend=backend) as reference:
        want = _cpython(reference, queries)
        assert _cpython(lazy, queries) == want
    assert got["out"] == want
    assert {channel for channel, _ in want} == {"hybrid"}
    assert any(hit[2] != 0.0 for _, hits in want for hit in hits)
