"""End to end: sites built with ``--embeddings minilm`` / ``use-multilingual`` in Chromium.

The browser backend (Python WordPiece or SentencePiece + onnxruntime-web + Python pooling, in
the worker) must give the CPython backend's vectors (cosine >= 0.999) with JSPI and with the
no-JSPI path; the demo searches hybrid by default with the same ranking as the CPython
searcher over the same bundle given the page's query vector, has a visible hybrid/BM25
switch, and falls back to BM25 for Chinese queries that MiniLM cannot represent (USE
multilingual searches them hybrid).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from _site import browser_module, kept_store, with_page_vectors
from test_demo_page import (
    HITS,
    LAST_HITS,
    TOP_K,
    Console,
    drop_file,
    search,
    status_text,
    wait_ready,
)

from ragspine_lite.bundle.runtime import BundleSearcher

pytestmark = browser_module("onnxruntime")

DATA = Path(__file__).resolve().parents[1] / "data"
EMBED_JS = """async ([texts, jspi]) => {
  const { RagSpineLite } = await import('./ragspine-lite.mjs');
  const rs = await RagSpineLite.open({ bundle: './', jspi });
  try {
    const vectors = await rs.embed(texts);  // waits for the model to join
    return { info: rs.info.embeddings, vectors };
  } finally {
    rs.close();
  }
}"""


def _texts() -> list[str]:
    out = []
    for name in ("squad_slice", "cmrc_slice"):
        lines = (DATA / name / "queries.jsonl").read_text("utf-8").splitlines()[:12]
        out.extend(json.loads(line)["text"] for line in lines)
        lines = (DATA / name / "corpus.jsonl").read_text("utf-8").splitlines()[:4]
        out.extend(json.loads(line)["text"] for line in lines)  # long: truncated at 256 pieces
    return [*out, "a", "Café déjà vu — naïve résumé", "   "]


@pytest.fixture(scope="module")
def cpython():
    from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend

    return OnnxEmbeddingBackend()


def _cosines(got: list[list[float]], expected: list[list[float]], dim: int) -> list[float]:
    out = []
    for u, v in zip(got, expected, strict=True):
        assert len(u) == dim
        norm = math.sqrt(sum(x * x for x in u)) * math.sqrt(sum(x * x for x in v))
        out.append(sum(a * b for a, b in zip(u, v, strict=True)) / (norm or 1.0))
    return out


def _browser_vectors(browser, url: str, texts: list[str], jspi: bool) -> dict:
    page = browser.new_page()
    console = Console(page)
    # A JSON document gets no favicon link: answer the browser's /favicon.ico probe here.
    page.route("**/favicon.ico", lambda route: route.fulfill(status=204, body=""))
    page.goto(url + "manifest.json")
    out = page.evaluate(EMBED_JS, [texts, jspi])
    page.close()
    assert console.messages == []
    assert out["info"]["jspi"] is jspi  # Debian's Chromium has JSPI; false forces the JS path
    return out


@pytest.mark.parametrize("jspi", [True, False], ids=["jspi", "no-jspi"])
def test_browser_vectors_match_the_cpython_backend(browser, semantic_url, cpython, jspi):
    texts = _texts()
    out = _browser_vectors(browser, semantic_url, texts, jspi)
    assert out["info"]["modelId"] == cpython.model_id
    cosines = _cosines(out["vectors"], cpython.embed_texts(texts), 384)
    assert min(cosines) >= 0.999, min(cosines)


@pytest.mark.parametrize("jspi", [True, False], ids=["jspi", "no-jspi"])
def test_use_multilingual_vectors_match_the_cpython_onnx_export(
    browser, use_url, tmp_path_factory, jspi
):
    from ragspine_lite.vector.use_backend import UseOnnxEmbeddingBackend, export_use_onnx

    folder = tmp_path_factory.mktemp("use-export")
    export_use_onnx(folder)
    cpu = UseOnnxEmbeddingBackend(folder)
    texts = _texts()[:20]
    out = _browser_vectors(browser, use_url, texts, jspi)
    assert out["info"]["modelId"] == cpu.model_id and out["info"]["dim"] == 512
    cosines = _cosines(out["vectors"], cpu.embed_texts(texts), 512)
    assert min(cosines) >= 0.999, min(cosines)


def test_use_multilingual_searches_chinese_queries_hybrid(browser, use_url):
    page = browser.new_page()
    console = Console(page)
    page.goto(use_url)
    wait_ready(page)
    hits = search(page, "中国内地营运利润")
    assert page.get_attribute("ragspine-search", "data-channel") == "hybrid"
    assert hits[0]["docId"].startswith("zh/")
    page.close()
    assert console.messages == []


def _cpython_locators(site: Path, query: str, backend, mode: str | None) -> list[str]:
    with BundleSearcher(kept_store(site), embedding_backend=backend) as s:
        return [h["source_locator"] for h in s.search(query, top_k=TOP_K, mode=mode).snippets]


def test_the_demo_searches_hybrid_with_a_switch_to_bm25(browser, semantic_url, semantic, cpython):
    site = semantic
    page = browser.new_page()
    console = Console(page)
    page.goto(semantic_url)
    wait_ready(page)
    assert "hybrid search with minilm" in page.inner_text("#bundle-info")
    assert page.is_visible("ragspine-search fieldset.mode")

    query = "why did operating profit fall"
    hybrid = search(page, query)
    assert page.get_attribute("ragspine-search", "data-channel") == "hybrid"
    assert "hybrid: BM25 + minilm" in status_text(page)
    # CPython with the page's own query vector (onnxruntime-web's, not bit-equal to native
    # onnxruntime's on every CPU): the same ranking.
    same = with_page_vectors(page, cpython, lambda b: _cpython_locators(site, query, b, None))
    assert [h["locator"] for h in hybrid] == same
    scores = page.locator(f"{HITS} .debug").all_inner_texts()
    assert any("vector 0.000" not in s for s in scores)
    # The vector shards came with the boot and are scanned in JavaScript: Python reads none.
    booted = page.evaluate("ragspineDemo.info.cache.fetched")
    assert any(p.startswith("data/vectors/v-") for p in booted)
    other = page.evaluate(
        "async (q) => (await ragspineDemo.rs.searchDetailed(q, {topK: 5}))",
        "hong kong revenue growth",
    )
    assert other["semantic"]["channel"] == "hybrid"
    assert not [f for f in other["worker"]["files"] if f["path"].startswith("data/vectors/")]

    page.check("ragspine-search fieldset.mode input[value=bm25]")
    page.wait_for_function("document.querySelector('ragspine-search').dataset.channel === 'bm25'")
    bm25 = [h["locator"] for h in page.evaluate(LAST_HITS)]
    assert bm25 == _cpython_locators(site, query, None, None)
    assert bm25 != [h["locator"] for h in hybrid]

    page.check("ragspine-search fieldset.mode input[value=hybrid]")
    hits = search(page, "中国内地营运利润")
    assert page.get_attribute("ragspine-search", "data-channel") == "bm25:outside-vocabulary"
    assert hits[0]["docId"] == "zh/acme_cn_2024_profit_zh.md"
    assert "outside minilm's vocabulary" in status_text(page)
    page.close()
    assert console.messages == []


def test_a_bundle_without_vectors_shows_no_switch(browser, base_url):
    page = browser.new_page()
    page.goto(base_url)
    wait_ready(page)
    assert page.is_hidden("ragspine-search fieldset.mode")
    assert page.evaluate("window.ragspineDemo.info.embeddings") is None
    search(page, "operating profit")
    assert page.get_attribute("ragspine-search", "data-channel") == "bm25"
    page.close()


def test_a_model_that_cannot_load_leaves_bm25_search_working(browser, semantic_url, semantic):
    page = browser.new_page()
    page.route("**/ort/ort-wasm-simd-threaded.wasm", lambda route: route.fulfill(status=404))
    page.goto(semantic_url)
    wait_ready(page)
    note = page.inner_text("#semantic-note")
    assert note.startswith("Semantic search is unavailable"), note
    assert page.evaluate("window.ragspineDemo.info.embeddings") is None
    assert page.is_hidden("ragspine-search fieldset.mode")
    query = "why did operating profit fall"
    hits = search(page, query)
    assert [h["locator"] for h in hits] == _cpython_locators(semantic, query, None, None)
    assert page.get_attribute("ragspine-search", "data-channel") == "bm25"
    page.close()


CAT_DOC = (
    "# Cat notes\n\nOur cat Zorblax refuses dry food and will only eat fresh tuna every evening.\n"
)
STORED_JS = """async () => {
  const names = (await indexedDB.databases()).map((d) => d.name)
    .filter((n) => n.startsWith("ragspine-lite:"));
  const db = await new Promise((ok, fail) => {
    const r = indexedDB.open(names[0]);
    r.onsuccess = () => ok(r.result);
    r.onerror = () => fail(r.error);
  });
  const all = await new Promise((ok, fail) => {
    const r = db.transaction("documents").objectStore("documents").getAll();
    r.onsuccess = () => ok(r.result);
    r.onerror = () => fail(r.error);
  });
  db.close();
  return all.map((d) => ({ name: d.name, model: d.vectors && d.vectors.model_id,
                           items: d.vectors ? d.vectors.items.length : 0 }));
}"""


def _first_scores(page) -> str:
    return page.locator(f"{HITS} .debug").first.inner_text()


def test_a_dropped_document_is_found_by_a_paraphrase_and_by_its_rare_word(browser, semantic_url):
    context = browser.new_context()
    page = context.new_page()
    console = Console(page)
    page.goto(semantic_url)
    wait_ready(page)
    drop_file(page, "cat_notes.md", CAT_DOC)
    page.wait_for_function(
        "document.querySelector('#ingest-status').textContent.includes('Indexed cat_notes.md')"
    )
    for _ in range(2):  # as dropped, then restored after a reload from its stored vectors
        hits = search(page, "feline that dislikes kibble")  # no word in common: dense only
        assert hits[0]["docId"] == "cat_notes.md" and hits[0]["library"] == "page"
        scores = _first_scores(page)
        assert "bm25 0.000" in scores and "vector 0.000" not in scores
        assert search(page, "zorblax")[0]["docId"] == "cat_notes.md"
        assert search(page, "xyzzyplugh frobnicate") == []
        assert status_text(page).startswith("No results for")
        stored = page.evaluate(STORED_JS)
        assert stored == [{"name": "cat_notes.md", "model": stored[0]["model"], "items": 1}]
        assert stored[0]["model"].startswith("sentence-transformers/all-MiniLM-L6-v2")
        page.reload()
        wait_ready(page)
        assert "Restored 1 document(s)" in page.inner_text("#ingest-status")
    context.close()
    assert console.messages == []


NO_JSPI_JS = """async ([doc, queries]) => {
  const { RagSpineLite } = await import('./ragspine-lite.mjs');
  const rounds = [];
  for (let round = 0; round < 2; round++) {
    const rs = await RagSpineLite.open({ bundle: './', jspi: false });
    try {
      if (round === 0) await rs.ingest([doc]);
      const results = [];
      for (const q of queries) {
        const hits = await rs.search(q);
        results.push(hits.map((s) => [s.doc_id, s.library_id, s.scores.bm25 > 0,
                                      s.scores.vector > 0]));
      }
      rounds.push({ jspi: rs.info.embeddings.jspi, restored: rs.info.restored, results });
    } finally {
      rs.close();
    }
  }
  return rounds;
}"""


def test_without_jspi_a_page_document_is_embedded_and_restored_too(browser, semantic_url):
    context = browser.new_context()
    page = context.new_page()
    console = Console(page)
    page.route("**/favicon.ico", lambda route: route.fulfill(status=204, body=""))
    page.goto(semantic_url + "manifest.json")
    doc = {"name": "cat_notes.md", "text": CAT_DOC}
    rounds = page.evaluate(NO_JSPI_JS, [doc, ["feline that dislikes kibble", "zorblax"]])
    context.close()
    assert console.messages == []
    assert [(r["jspi"], r["restored"]) for r in rounds] == [(False, 0), (False, 1)]
    for r in rounds:
        paraphrase, rare = r["results"]
        assert paraphrase[0] == ["cat_notes.md", "page", False, True]
        assert rare[0][:3] == ["cat_notes.md", "page", True]
