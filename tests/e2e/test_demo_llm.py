"""End to end: ``rs.configureLLM`` in Chromium runs the query layers through a real
``ragspine-lite serve-remote`` process whose ``/v1/chat`` forwards to a stub
OpenAI-compatible LLM; a relay keeps every byte the browser sends."""

from __future__ import annotations

import json

import pytest
from _remote_server import (
    RecordingRelay,
    StubHTTPServer,
    chat_reply,
    free_port,
    serve_remote_process,
)
from _site import CANARY, browser_module
from test_demo_page import drop_file, wait_ready

pytestmark = browser_module("starlette")

TOKEN = "e2e-llm-token"
QUERY = "ACME revenue growth"
SECRET_DOC = f"""---
title: Board minutes
sensitivity: RESTRICTED
---
ACME revenue growth plans for {CANARY} are confidential until the board signs.
"""


def _scripted(method, path, headers, body):
    prompt = json.loads(body)["messages"][-1]["content"]
    if prompt.startswith("Write "):
        return 200, chat_reply('["Hong Kong new sales growth", "operating profit 2024"]')
    return 200, chat_reply("")


@pytest.fixture(scope="module")
def llm():
    with StubHTTPServer(_scripted) as stub:
        yield stub


@pytest.fixture(scope="module")
def endpoint(base_url, llm, tmp_path_factory):
    with serve_remote_process(
        "--token", TOKEN, "--cors-origin", base_url.rstrip("/"), "--no-preload",
        "--llm-url", llm.url + "/v1", "--llm-model", "stub-llm", "--log-level", "warning",
        log=tmp_path_factory.mktemp("remote-llm") / "serve-remote.log",
    ) as (url, _proc):
        yield url


def _run(page, script: str, arg=None):
    return page.evaluate(f"async (arg) => {{ const rs = window.ragspineDemo.rs; {script} }}", arg)


def test_configure_llm_runs_rag_fusion_through_the_endpoint(browser, base_url, endpoint, llm):
    port = int(endpoint.rsplit(":", 1)[1])
    context = browser.new_context()
    page = context.new_page()
    page.goto(base_url)
    wait_ready(page)
    drop_file(page, "minutes.md", SECRET_DOC)
    page.wait_for_function("document.querySelectorAll('#my-docs li').length === 1")
    plain = _run(page, "return await rs.searchDetailed(arg);", QUERY)
    assert plain["queryLayers"] is None and "heldBack" not in plain
    with RecordingRelay(port) as relay:
        info = _run(page, "return await rs.configureLLM(arg);",
                    {"url": relay.url, "token": TOKEN, "transform": "rag_fusion"})
        assert info["enabled"] and info["transform"] == "rag_fusion" and "error" not in info
        before = len(llm.requests)
        fused = _run(page, "return await rs.searchDetailed(arg);", QUERY)
        sent = relay.received
    assert fused["queryLayers"]["applied"] == ["rag_fusion"]
    assert fused["queryLayers"]["outcomes"][0]["generated"] == [
        "Hong Kong new sales growth", "operating profit 2024"]
    assert "heldBack" not in fused and len(llm.requests) == before + 1
    assert [r["chunk_id"] for r in fused["results"]] != [r["chunk_id"] for r in plain["results"]]
    assert b"POST /v1/chat" in sent and b"Bearer " + TOKEN.encode() in sent
    assert CANARY.encode() not in sent and b"confidential" not in sent
    upstream = b"".join(body for *_x, body in llm.requests)
    assert CANARY.encode() not in upstream and b"confidential" not in upstream

    dead = f"http://127.0.0.1:{free_port()}"
    _run(page, "return await rs.configureLLM(arg);",
         {"url": dead, "transform": "hyde", "timeoutS": 2, "check": False})
    fallback = _run(page, "return await rs.searchDetailed(arg);", QUERY)
    assert fallback["results"] == plain["results"]
    assert fallback["queryLayers"]["outcomes"][0]["status"] == "provider_error"
    off = _run(page, "return await rs.configureLLM({});")
    assert off["enabled"] is False
    assert _run(page, "return (await rs.searchDetailed(arg)).queryLayers;", QUERY) is None
    context.close()
