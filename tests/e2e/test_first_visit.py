"""End to end: what a visitor does in the first seconds of a page with ``<ragspine-search>``.

Real Chromium on the HTML test site (``tests/_site.py``):

- "/" outside an editable field, or in the empty box the page focused (autofocus), focuses the
  box and types nothing into it; in an editable field (the box the visitor typed in, another
  input) it is a character like any other;
- what the visitor typed while the page loaded is answered as soon as they stop, by the
  instant lane (the full engine's boot waits for a pause); what they typed before the results
  panel was wired (its module held back by the test) is searched once the engine is ready, and
  so is a ``?q=`` they typed on to;
- the debug line of a result says what its lane computed: the instant lane's BM25 results
  claim no fused or vector score (the hybrid case: ``test_hybrid_joins.py``).
"""

from __future__ import annotations

import functools
import shutil
import threading

import pytest
from _site import browser_module, html_site, load_build_wasm

pytestmark = browser_module()

BOOT_TIMEOUT_MS = 180_000
HOST = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Host</title><link rel="icon" href="data:,">
<script type="module" src="/_search/ragspine-search.mjs"></script></head>
<body><h1>A page about quokkas</h1><p>Text.</p><input id="other" aria-label="Other">
<ragspine-search bundle="/_search/" %(attrs)s label="Search"></ragspine-search></body></html>
"""
ELEMENT = "document.querySelector('ragspine-search')"


PANEL = "/_search/ragspine-panel.mjs"
GATE = threading.Event()  # set: the results panel's module is served


def serving_held(root):
    """Serve ``root``; the results panel's module waits for GATE (at most a minute)."""
    server = load_build_wasm().make_server(root)
    handler = server.RequestHandlerClass

    class Held(handler.func):  # type: ignore[misc, name-defined]
        def do_GET(self) -> None:
            if self.path.split("?")[0] == PANEL:
                GATE.wait(60)
            super().do_GET()

    server.RequestHandlerClass = functools.partial(Held, *handler.args, **handler.keywords)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    root = tmp_path_factory.mktemp("first-visit") / "public"
    shutil.copytree(html_site(tmp_path_factory), root)
    (root / "host.html").write_text(HOST % {"attrs": ""}, "utf-8")
    (root / "host-url.html").write_text(HOST % {"attrs": "sync-url"}, "utf-8")
    (root / "host-auto.html").write_text(HOST % {"attrs": "autofocus"}, "utf-8")
    (root / "host-url-auto.html").write_text(HOST % {"attrs": "sync-url autofocus"}, "utf-8")
    (root / "host-debug.html").write_text(HOST % {"attrs": "debug"}, "utf-8")
    GATE.set()
    server = serving_held(root)
    host, port = server.server_address[:2]
    yield f"http://{host}:{port}/"
    GATE.set()
    server.shutdown()
    server.server_close()


@pytest.fixture
def page(watched_page):
    return watched_page


def box_value(page) -> str:
    return page.eval_on_selector("ragspine-search", "e => e.shadowRoot.querySelector('#q').value")


def hit_count(page) -> int:
    return page.eval_on_selector(
        "ragspine-search", "e => e.shadowRoot.querySelectorAll('.hit').length"
    )


def focused_in_box(page) -> bool:
    return page.evaluate(f"{ELEMENT}.shadowRoot.activeElement?.id === 'q'")


def wait_searched(page, query: str) -> None:
    page.wait_for_function(
        f"(q) => {ELEMENT}.dataset.query === q", arg=query, timeout=BOOT_TIMEOUT_MS
    )


def hold_panel(page):
    """Hold the results panel's module (a fresh context fetches it) until the event is set."""
    GATE.clear()
    page.context.set_extra_http_headers({"Cache-Control": "no-cache"})
    return GATE


@pytest.mark.parametrize("host", ["host.html", "host-auto.html"])
def test_slash_focuses_the_box_and_types_nothing(page, origin, host):
    page.goto(origin + host)
    page.wait_for_function("customElements.get('ragspine-search') !== undefined")
    if host == "host.html":
        page.click("h1")
    else:  # the page focused the box: "/", as the page's hint says, still only focuses
        assert focused_in_box(page)
    page.keyboard.press("/")
    assert focused_in_box(page)
    assert box_value(page) == ""
    page.keyboard.type("quokka")
    assert box_value(page) == "quokka"
    # Once ready, "/" still only focuses (from outside the box) ...
    wait_searched(page, "quokka")
    page.click("h1")
    page.keyboard.press("/")
    assert focused_in_box(page) and box_value(page) == "quokka"
    # ... and in an editable field it is a character.
    page.keyboard.press("End")
    page.keyboard.press("/")
    assert box_value(page) == "quokka/"
    page.click("#other")
    page.keyboard.press("/")
    assert page.input_value("#other") == "/"
    assert box_value(page) == "quokka/"


@pytest.mark.parametrize(
    ("host", "before"), [("host-auto.html", ""), ("host-url-auto.html?q=quokka", "quokka")]
)
def test_keys_typed_while_the_page_loads_are_searched_at_once(page, origin, host, before):
    """The visitor types into the focused box from the first moment: the query in the box
    when they stop is answered at once (by the instant lane; the full engine's boot waits
    until the visitor paused, so it does not hold the answer for seconds)."""
    page.goto(origin + host, wait_until="commit")
    page.wait_for_function(f"{ELEMENT}?.shadowRoot?.activeElement?.id === 'q'")
    typed = " heat" if before else "quokka heat"
    page.keyboard.type(typed, delay=90)
    assert box_value(page) == before + typed
    wait_searched_soon = f"(q) => {ELEMENT}.dataset.query === q"
    # Answered by the instant lane: a query held behind the full engine's boot would be
    # answered by the full engine, seconds later (the bound leaves room for a loaded machine).
    page.wait_for_function(wait_searched_soon, arg="quokka heat", timeout=8000)
    assert page.evaluate(f"{ELEMENT}.dataset.lane") == "instant"
    assert hit_count(page) >= 1


@pytest.mark.parametrize("host", ["host.html", "host-auto.html"])
def test_what_was_typed_before_the_panel_was_wired_is_searched(page, origin, host):
    gate = hold_panel(page)
    page.goto(origin + host)
    page.wait_for_function("customElements.get('ragspine-search') !== undefined")
    page.locator("ragspine-search #q").click()
    page.keyboard.type("quokka heat", delay=30)
    assert page.evaluate(f"{ELEMENT}.dataset.state") == "booting"
    gate.set()
    wait_searched(page, "quokka heat")
    assert hit_count(page) >= 1


def test_a_query_in_the_url_typed_on_is_searched_as_typed(page, origin):
    gate = hold_panel(page)
    page.goto(origin + "host-url.html?q=quokka")
    page.wait_for_function("customElements.get('ragspine-search') !== undefined")
    page.locator("ragspine-search #q").click()
    page.keyboard.press("End")
    page.keyboard.type(" heat", delay=30)
    gate.set()
    wait_searched(page, "quokka heat")
    assert "q=quokka+heat" in page.url


def test_the_instant_lanes_debug_line_claims_no_fused_or_vector_score(page, origin):
    page.goto(origin + "host-debug.html")
    page.wait_for_function("customElements.get('ragspine-search') !== undefined")
    page.locator("ragspine-search #q").click()
    page.keyboard.type("quokka heat")
    wait_searched(page, "quokka heat")
    assert page.evaluate(f"{ELEMENT}.dataset.lane") == "instant"
    lines = page.eval_on_selector(
        "ragspine-search",
        "e => [...e.shadowRoot.querySelectorAll('.debug')].map((d) => d.textContent)",
    )
    assert lines
    for line in lines:
        assert "fused" not in line and "vector" not in line, line
        assert "instant" in line and "bm25 " in line, line
