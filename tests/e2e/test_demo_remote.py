"""End to end: the demo page reranking with a real ``ragspine-lite serve-remote`` process.

The test starts the endpoint (late interaction over MiniLM token embeddings, bearer token,
CORS for the demo's origin) behind a relay that keeps every byte the browser sends. The page
reranks with it; its order must equal what the CPython client gets from the same endpoint
for the same bundle, no RESTRICTED text may be among the bytes sent, and a wrong token or a
stopped endpoint leaves the fused order on screen instead of an error.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from _remote_server import RecordingRelay, serve_remote_process
from _site import CANARY, browser_module, kept_store, with_page_vectors
from test_demo_page import (
    BOOT_TIMEOUT_MS,
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
from ragspine_lite.vector.onnx_backend import minilm_packages_available

pytestmark = browser_module("starlette", "onnxruntime")
if not minilm_packages_available():
    pytest.skip("the MiniLM model packages are not installed", allow_module_level=True)

TOKEN = "e2e-remote-token"
QUERY = "ACME revenue growth"
SECRET_DOC = f"""---
title: Board minutes
sensitivity: RESTRICTED
---
ACME revenue growth plans for {CANARY} are confidential until the board signs.
"""


@pytest.fixture(scope="module")
def endpoint(base_url, semantic_url, tmp_path_factory):
    """``ragspine-lite serve-remote`` in a child process (CORS for both demo sites) → its URL."""
    origins = [base_url.rstrip("/"), semantic_url.rstrip("/")]
    with serve_remote_process(
        "--token", TOKEN, "--cors-origin", origins[0], "--cors-origin", origins[1],
        "--splade-model", "none", "--embed-model", "none", "--log-level", "warning",
        log=tmp_path_factory.mktemp("remote") / "serve-remote.log",
    ) as (url, proc):
        yield {"url": url, "proc": proc}


@pytest.fixture
def relay(endpoint):
    with RecordingRelay(int(endpoint["url"].rsplit(":", 1)[1])) as r:
        yield r


def _configure(page, url: str, method: str, token: str) -> str:
    if not page.evaluate("document.querySelector('#remote-panel').open"):
        page.click("#remote-panel summary")
    page.fill("#remote-url", url)
    page.select_option("#remote-method", method)
    page.fill("#remote-token", token)
    page.evaluate("delete document.body.dataset.reranker")
    page.click("#remote-apply")
    page.wait_for_function("document.body.dataset.reranker !== undefined")
    return page.inner_text("#remote-status")


def _cpython_order(site: Path, url: str | None, backend=None) -> list[str]:
    with BundleSearcher(kept_store(site), embedding_backend=backend) as searcher:
        if url:
            info = searcher.configure_reranker("remote:colbert", url=url, token=TOKEN)
            assert "error" not in info, info
        outcome = searcher.search(QUERY, top_k=TOP_K)
        if url:
            assert outcome.rerank["applied"], outcome.rerank
        return [s["source_locator"] for s in outcome.snippets]


def test_the_demo_reranks_with_the_remote_endpoint_and_sends_no_restricted_text(
    browser, base_url, site, endpoint, relay
):
    context = browser.new_context()
    page = context.new_page()
    console = Console(page)
    page.goto(base_url)
    wait_ready(page)
    drop_file(page, "minutes.md", SECRET_DOC)
    page.wait_for_function("document.querySelectorAll('#my-docs li').length === 1")

    fused = [h["locator"] for h in search(page, QUERY)]
    status = _configure(page, relay.url, "colbert", TOKEN)
    assert status.startswith("On: remote:colbert"), status
    assert page.evaluate("document.body.dataset.reranker") == "remote:colbert"
    page.wait_for_function(
        "document.querySelector('ragspine-search').dataset.rerank === 'applied'",
        timeout=BOOT_TIMEOUT_MS,
    )
    reranked = [h["locator"] for h in page.evaluate(LAST_HITS)]
    assert page.locator(HITS).count() > 0
    assert "reranked by remote:colbert" in status_text(page)
    expected = _cpython_order(site, endpoint["url"])
    assert reranked == expected
    assert sorted(reranked) == sorted(fused) and reranked != fused
    assert _cpython_order(site, None) == fused
    assert "RESTRICTED: never shown" in page.inner_text("#my-docs")  # it was added, unshown

    sent = relay.received
    assert b"POST /v1/rerank" in sent and b"Bearer " + TOKEN.encode() in sent
    assert CANARY.encode() not in sent and b"Board minutes" not in sent
    assert b"confidential" not in sent
    context.close()
    assert console.messages == []


def test_a_wrong_token_or_a_dead_endpoint_keeps_the_fused_order(browser, base_url, endpoint):
    context = browser.new_context()
    page = context.new_page()
    page.goto(base_url)
    wait_ready(page)
    fused = [h["locator"] for h in search(page, QUERY)]

    status = _configure(page, endpoint["url"], "colbert", "wrong-token")
    assert "check failed" in status and "403: wrong bearer token" in status, status
    hits = search(page, QUERY + " ")
    assert [h["locator"] for h in hits] == fused
    assert "remote:colbert failed, fused order kept" in status_text(page)

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    _configure(page, dead, "colbert", TOKEN)
    hits = search(page, QUERY)
    assert [h["locator"] for h in hits] == fused
    assert page.get_attribute("ragspine-search", "data-rerank") == "failed"
    assert page.inner_text("#error") == ""

    status = _configure(page, "", "none", "")
    assert status.startswith("Off"), status
    hits = search(page, QUERY + "  ")
    assert [h["locator"] for h in hits] == fused
    assert page.get_attribute("ragspine-search", "data-rerank") == "off"
    context.close()


def test_the_hybrid_demo_reranks_through_fetch_under_jspi(
    browser, semantic_url, semantic, endpoint
):
    """With embeddings and JSPI every search runs inside callPromising: the transport then
    uses fetch + run_sync instead of synchronous XHR."""
    from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend

    page = browser.new_page()
    console = Console(page)
    page.goto(semantic_url)
    wait_ready(page)
    assert page.evaluate("window.ragspineDemo.info.embeddings.jspi") is True
    status = _configure(page, endpoint["url"], "colbert", TOKEN)
    assert status.startswith("On: remote:colbert"), status
    hits = search(page, QUERY)
    assert page.get_attribute("ragspine-search", "data-rerank") == "applied"
    assert page.get_attribute("ragspine-search", "data-channel") == "hybrid"
    expected = with_page_vectors(  # the page's query vector (not bit-equal to native ORT's)
        page, OnnxEmbeddingBackend(), lambda b: _cpython_order(semantic, endpoint["url"], b)
    )
    assert [h["locator"] for h in hits] == expected
    page.close()
    assert console.messages == []
