"""End to end: a foreign web page in Chromium cannot drive the tokenless loopback endpoint.

The endpoint (no token, no CORS origins, an LLM behind ``/v1/chat``) sits behind a relay that
keeps every byte the browser sends. A page of another site posts the simple cross-site
requests a browser sends without asking (``text/plain`` and form-encoded ``fetch``es, an HTML
form with ``enctype="text/plain"`` whose field spells a JSON body): they all reach the
endpoint, and the LLM is never called. A name re-pointed at 127.0.0.1 (DNS rebinding, here by
a host-resolver rule) gets a 421 instead of the endpoint's answers.
"""

from __future__ import annotations

import json

import pytest
from _remote_server import EndpointServer, RecordingRelay, StubHTTPServer, chat_reply
from _site import CHROMIUM, CHROMIUM_ARGS, browser_module, serving

pytestmark = browser_module("starlette", "uvicorn")

from ragspine_lite.remote.server import ServerConfig, create_app  # noqa: E402
from ragspine_lite.remote.server.app import build_models  # noqa: E402

CHAT = {"messages": [{"role": "user", "content": "drive the LLM", "sensitivity": "INTERNAL"}]}
# The classic text/plain form trick: the body is `name=value`, here a whole JSON object.
FORM_NAME = json.dumps(CHAT)[:-1] + ', "x": "'
FORM_VALUE = '"}'

ATTACK = """<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,">
</head><body>
<iframe name="sink"></iframe>
<form id="f" method="POST" enctype="text/plain" target="sink" action="TARGET">
  <input type="hidden" id="field"></form>
<script>
const target = "TARGET";
const chat = CHAT;
window.attack = async () => {
  const sent = [];
  for (const init of [
    { headers: { "Content-Type": "text/plain" }, body: JSON.stringify(chat) },
    { body: new URLSearchParams({ payload: JSON.stringify(chat) }) },
  ]) {
    try {
      await fetch(target, { method: "POST", mode: "no-cors", ...init });
      sent.push("fetch");
    } catch (err) {
      sent.push(String(err));
    }
  }
  const field = document.getElementById("field");
  field.name = FORM_NAME;
  field.value = FORM_VALUE;
  const sink = document.querySelector("iframe");
  const loaded = new Promise((resolve) => sink.addEventListener("load", resolve));
  document.getElementById("f").submit();
  await loaded;
  sent.push("form");
  return sent;
};
</script></body></html>"""


@pytest.fixture
def stack():
    with StubHTTPServer(lambda *_: (200, chat_reply("driven"))) as llm:
        config = ServerConfig(llm_url=llm.url + "/v1", llm_model="stub-llm")
        app = create_app(config, models=build_models(config))
        with EndpointServer(app) as endpoint, RecordingRelay(endpoint.port) as relay:
            yield llm, endpoint, relay


def test_a_foreign_page_cannot_post_simple_cross_site_requests_to_chat(browser, stack, tmp_path):
    llm, _endpoint, relay = stack
    target = relay.url + "/v1/chat"
    page_html = (ATTACK.replace("TARGET", target).replace("CHAT", json.dumps(CHAT))
                 .replace("FORM_NAME", json.dumps(FORM_NAME))
                 .replace("FORM_VALUE", json.dumps(FORM_VALUE)))
    (tmp_path / "attack.html").write_text(page_html, "utf-8")
    with serving(tmp_path) as url:
        foreign = url.replace("127.0.0.1", "localhost")  # another site than the endpoint's
        context = browser.new_context()
        page = context.new_page()
        page.goto(foreign + "attack.html")
        assert page.evaluate("window.attack()") == ["fetch", "fetch", "form"]
        context.close()
    sent = relay.received
    assert sent.count(b"POST /v1/chat HTTP/1.1") == 3  # the browser did send all three
    origin = foreign.rstrip("/").encode()
    assert sent.lower().count(b"origin: " + origin) == 3
    assert b"content-type: text/plain" in sent.lower()
    assert b"content-type: application/x-www-form-urlencoded" in sent.lower()
    assert llm.requests == []  # ... and none of them reached the LLM


def test_a_rebound_name_gets_421_not_the_endpoint(playwright, stack):
    _llm, endpoint, _relay = stack
    args = [*CHROMIUM_ARGS, "--host-resolver-rules=MAP rebound.test 127.0.0.1"]
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
    try:
        page = browser.new_page()
        response = page.goto(f"http://rebound.test:{endpoint.port}/v1/models")
        assert response is not None and response.status == 421
        assert "rebound.test" in page.content() and '"data"' not in page.content()
        response = page.goto(f"http://127.0.0.1:{endpoint.port}/v1/models")
        assert response is not None and response.status == 200  # positive control
    finally:
        browser.close()
