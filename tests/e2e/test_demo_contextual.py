"""End to end: a site built with ``--contextual`` searched in headless Chromium.

The page must search with the header the build recorded (a query naming only a document's
metadata code finds it), return the cited text unchanged, and rank exactly as the CPython
runtime does over the same bundle; postprocessing runs on top of it.
"""

from __future__ import annotations

import pytest
from _site import CANARY, browser_module, load_build_wasm, serving, shared_wheels

from ragspine_lite.bundle.runtime import BundleSearcher
from ragspine_lite.bundle.shards import DirectoryFiles
from ragspine_lite.cli import samples_dir

pytestmark = browser_module()

BOOT_TIMEOUT_MS = 120_000
QUERIES = ["ACME_CN", "acme_hk 2024", "香港 营收"]


@pytest.fixture(scope="module")
def contextual_site(tmp_path_factory):
    wheel, micropip = shared_wheels(tmp_path_factory)
    out = tmp_path_factory.mktemp("contextual-site") / "site"
    manifest = load_build_wasm().build_site(
        [samples_dir()], out, canaries=[CANARY], wheel=wheel, micropip=micropip,
        demo=True, contextual=True,
    )
    assert manifest["chunking"]["index_text"] == "contextual"
    return out, manifest


@pytest.fixture(scope="module")
def page(browser, contextual_site):
    site, _ = contextual_site
    with serving(site) as url:
        context = browser.new_context()
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        page.goto(url)
        page.wait_for_function(
            "document.body.dataset.state !== 'booting'", timeout=BOOT_TIMEOUT_MS
        )
        yield page
        context.close()
        assert errors == []


def test_the_page_searches_a_contextual_bundle_like_cpython(page, contextual_site):
    site, _ = contextual_site
    with BundleSearcher.from_files(DirectoryFiles(site)) as cpython:
        for query in QUERIES:
            expected = cpython.search(query, top_k=5).snippets
            got = page.evaluate("(q) => window.ragspineDemo.rs.search(q, {topK: 5})", query)
            assert [s["chunk_id"] for s in got] == [s["chunk_id"] for s in expected], query
            assert [s["text"] for s in got] == [s["text"] for s in expected]
    found = page.evaluate("window.ragspineDemo.rs.search('ACME_CN', {topK: 3})")
    assert found and found[0]["entity"] == "ACME_CN"
    assert not any(s["text"].startswith("[") for s in found)


def test_postprocessing_runs_on_a_contextual_bundle(page):
    from ragspine_lite.postprocess import make_postprocessor

    plain = page.evaluate("window.ragspineDemo.rs.search('acme revenue', {topK: 6})")
    litm = page.evaluate(
        "window.ragspineDemo.rs.search('acme revenue', {topK: 6, postprocess: 'litm'})"
    )
    assert litm == make_postprocessor("litm").postprocess("acme revenue", plain)
