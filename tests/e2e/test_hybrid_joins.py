"""End to end: a hybrid site (``--embeddings minilm``) answers first from the instant lane, and
its dense lane joins without reordering results under the visitor's pointer or keyboard focus.

Chromium on the samples site built with MiniLM, served with the model file held back until
the test lets it through (so "before the model loads" is a state the test controls, not a
race): the first results of a query come from the instant lane (BM25, the element says so);
with the keyboard focus on a result and the pointer over the results, the rendered order
stays when the engine turns hybrid (the element says hybrid is ready), also after the focus
went back to the box; the next key in the box applies the hybrid results. With nothing on the
results, they are replaced in place by the hybrid ones, without a layout jump, in English at
1280 px and in Chinese at 375 px. The query's hybrid page order differs from its BM25 one
(checked first, in the page).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from _site import browser_module, load_build_wasm
from test_site_search import axe_violations, no_sideways_scroll

pytestmark = browser_module("onnxruntime")

BOOT_TIMEOUT_MS = 180_000
HELD_S = 300  # the longest the server holds the model back
QUERY = "hong kong revenue"
ELEMENT = "ragspine-search"
HOST = """<!doctype html>
<html lang="%(lang)s"><head><meta charset="utf-8"><title>Reports</title>
<link rel="icon" href="data:,">
<meta name="viewport" content="width=device-width, initial-scale=1">
<script type="module" src="/ragspine-search.mjs"></script></head>
<body style="margin: 1em; font: 16px/1.5 system-ui, sans-serif">
<h1>Annual reports</h1>
<ragspine-search bundle="/" label="Search the reports"></ragspine-search>
</body></html>
"""
LANE = {
    "en": {"lane.loading": "Keyword results — semantic search loading…",
           "lane.ready": "Keyword results — semantic search ready",
           "lane.hybrid": "Keyword + semantic results"},
    "zh-CN": {"lane.loading": "关键词结果 — 语义搜索加载中…",
              "lane.ready": "关键词结果 — 语义搜索已就绪",
              "lane.hybrid": "关键词 + 语义结果"},
}
STATE = """e => {
    const root = e.shadowRoot;
    const lane = root.querySelector('.lane');
    const top = e.getBoundingClientRect().top;  // a part's place in the element
    const box = (sel) => { const r = root.querySelector(sel).getBoundingClientRect();
                           return [Math.round(r.top - top), Math.round(r.height)]; };
    return {
        hits: [...root.querySelectorAll('.hit')]
            .map((h) => `${h.dataset.docId}|${h.dataset.locator}`),
        engine: e.dataset.engine, lane: e.dataset.lane, mode: e.dataset.mode,
        searches: Number(e.dataset.searches), laneKey: lane.dataset.key,
        laneText: lane.textContent, laneLive: lane.getAttribute('aria-live'),
        laneBox: box('.lane'), resultsBox: box('.results'),
        focused: root.activeElement
            ? (root.activeElement.dataset.docId || root.activeElement.id) : null,
    };
}"""
# What the element shows for a search (its first 5 pages, each best hit and 3 sections).
EXPECTED = """async ([q, mode]) => {
    const e = document.querySelector('ragspine-search');
    const { groupByPage } = await import('/ragspine-ui.mjs');
    const d = await e.runtime.searchDetailed(q, { topK: 40, mode });
    return groupByPage(d.hits).slice(0, 5).flatMap((g) => g.slice(0, 4))
        .map((h) => `${h.snippet.doc_id}|${h.snippet.source_locator}`);
}"""


@contextmanager
def held_model(site: Path) -> Iterator[tuple[str, threading.Event]]:
    """Serve ``site`` with its embedding model held back until the event is set."""
    manifest = json.loads((site / "manifest.json").read_text("utf-8"))
    model = "/" + manifest["entry"]["embeddings"]["model"]
    gate = threading.Event()
    server = load_build_wasm().make_server(site)
    handler = server.RequestHandlerClass

    class Held(handler.func):  # type: ignore[misc, name-defined]
        def do_GET(self) -> None:
            if self.path.split("?")[0] == model:
                gate.wait(HELD_S)
            try:
                super().do_GET()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the page was closed while the model was held

    server.RequestHandlerClass = functools.partial(Held, *handler.args, **handler.keywords)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host}:{port}/", gate
    finally:
        gate.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def visit(browser, semantic):
    """A fresh browser context (no runtime cache: the model does come from the server) on the
    host page; yields (page, gate)."""
    contexts = []

    @contextmanager
    def open_visit(width: int = 1280, lang: str = "en"):
        with held_model(semantic) as (url, gate):
            context = browser.new_context(viewport={"width": width, "height": 900})
            contexts.append(context)
            page = context.new_page()
            page.errors = []
            page.on("pageerror", lambda err: page.errors.append(f"pageerror: {err}"))
            page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
            page.route(url + "host.html", lambda route: route.fulfill(
                content_type="text/html", body=HOST % {"lang": lang}))
            page.goto(url + "host.html")
            yield page, gate
            assert page.errors == []

    yield open_visit
    for context in contexts:
        context.close()


def state(page) -> dict:
    return page.eval_on_selector(ELEMENT, STATE)


def first_results(page, lang: str) -> dict:
    """Type the query; its first results, from the instant lane while the model is held."""
    box = page.locator(f"{ELEMENT} #q")
    box.focus()  # intent: the panel, the runtime and the instant lane load
    box.fill(QUERY)  # one search (Pyodide's boot, once started, holds the worker's thread)
    page.wait_for_function(
        f"(q) => document.querySelector('{ELEMENT}').dataset.query === q", arg=QUERY,
        timeout=BOOT_TIMEOUT_MS,
    )
    first = state(page)
    assert first["lane"] == "instant" and first["mode"] == "bm25", first
    assert first["laneText"] == LANE[lang]["lane.loading"] and first["laneLive"] == "polite"
    assert first["hits"] and first["hits"] == page.evaluate(EXPECTED, [QUERY, "bm25"])
    # Pyodide boots behind the instant lane; the model stays on the server meanwhile.
    page.wait_for_function(f"document.querySelector('{ELEMENT}').dataset.engine === 'full'",
                           timeout=BOOT_TIMEOUT_MS)
    # ... and builds the filter pane (above the results) from the full engine's facets.
    page.wait_for_function(
        f"!document.querySelector('{ELEMENT}').shadowRoot.querySelector('details.filters').hidden")
    assert state(page)["hits"] == first["hits"]
    return first


def wait_engine_hybrid(page, gate) -> None:
    gate.set()
    page.wait_for_function(f"document.querySelector('{ELEMENT}').dataset.engine === 'hybrid'",
                           timeout=BOOT_TIMEOUT_MS)


def keep_screenshot(page, name: str, tmp_path: Path) -> None:
    """The element's top (box, status, lane line, first results) to ``tmp_path`` (and to
    ``$RAGSPINE_SCREENSHOT_DIR`` when set: docs/ keeps a copy)."""
    path = tmp_path / name
    page.evaluate("window.scrollTo(0, 0)")
    box = page.locator(ELEMENT).bounding_box()
    width = page.viewport_size["width"]
    height = 560 if width < 600 else 430
    clip = {"x": 0, "y": max(0, box["y"] - 12), "height": min(height, box["height"] + 12),
            "width": min(width, box["x"] * 2 + box["width"])}
    page.screenshot(path=str(path), clip=clip)
    keep = os.environ.get("RAGSPINE_SCREENSHOT_DIR")
    if keep:
        shutil.copy2(path, Path(keep) / name)


def test_hybrid_results_wait_while_the_focus_and_the_pointer_are_on_the_results(
    visit, tmp_path
):
    with visit() as (page, gate):
        bm25 = first_results(page, "en")["hits"]
        page.locator(f"{ELEMENT} .hit").nth(1).hover()  # the pointer over the results
        page.keyboard.press("ArrowDown")  # the keyboard focus on the first result
        held = state(page)
        assert held["focused"] == bm25[0].split("|")[0]
        wait_engine_hybrid(page, gate)
        hybrid = page.evaluate(EXPECTED, [QUERY, None])
        assert hybrid != bm25, "the query's hybrid order must differ from its BM25 order"
        page.wait_for_function(
            f"document.querySelector('{ELEMENT}').shadowRoot.querySelector('.lane')"
            ".dataset.key === 'lane.ready'")
        page.wait_for_timeout(800)  # a replacement would have happened by now
        now = state(page)
        assert now["hits"] == bm25 and now["mode"] == "bm25", now
        assert now["searches"] == held["searches"] and now["focused"] == held["focused"]
        assert now["laneText"] == LANE["en"]["lane.ready"]
        keep_screenshot(page, "hybrid-held-1280.png", tmp_path)
        page.keyboard.press("ArrowUp")  # the focus back in the box, the pointer still over
        page.wait_for_timeout(500)
        assert state(page)["hits"] == bm25 and state(page)["focused"] == "q"
        page.keyboard.press("End")  # the next key applies the hybrid results
        page.wait_for_function(f"document.querySelector('{ELEMENT}').dataset.mode === 'hybrid'")
        after = state(page)
        assert after["hits"] == hybrid and after["lane"] == "full"
        assert after["laneText"] == LANE["en"]["lane.hybrid"]


@pytest.mark.parametrize(("width", "lang"), [(1280, "en"), (375, "zh-CN")])
def test_with_nothing_on_the_results_the_hybrid_ones_replace_them_in_place(
    visit, tmp_path, width, lang
):
    with visit(width, lang) as (page, gate):
        first_results(page, lang)
        page.mouse.move(2, 2)  # nothing hovered; the focus stays in the box
        before = state(page)
        keep_screenshot(page, f"hybrid-keyword-{width}.png", tmp_path)
        wait_engine_hybrid(page, gate)
        page.wait_for_function(f"document.querySelector('{ELEMENT}').dataset.mode === 'hybrid'")
        after = state(page)
        assert after["hits"] == page.evaluate(EXPECTED, [QUERY, None]) != before["hits"]
        assert after["searches"] == before["searches"] + 1  # searched again once, in place
        assert after["laneText"] == LANE[lang]["lane.hybrid"] and after["focused"] == "q"
        # No layout jump: the lane line keeps its one line, the results their place.
        assert after["laneBox"] == before["laneBox"]
        assert after["resultsBox"][0] == before["resultsBox"][0]
        assert no_sideways_scroll(page)
        keep_screenshot(page, f"hybrid-joined-{width}.png", tmp_path)
        assert axe_violations(page) == []


DEBUG_LINES = f"""() => [...document.querySelector('{ELEMENT}').shadowRoot
    .querySelectorAll('.debug')].map((d) => d.textContent)"""


def test_a_keyword_result_claims_no_fused_or_vector_score(visit):
    """The debug line says what the lane computed: the instant lane's BM25 results a BM25
    score (no fused or vector one, though the site is hybrid), the hybrid ones all three."""
    with visit() as (page, gate):
        page.eval_on_selector(ELEMENT, "e => e.setAttribute('debug', '')")
        first_results(page, "en")
        keyword = page.evaluate(DEBUG_LINES)
        assert keyword
        for line in keyword:
            assert " · instant lane · bm25 " in line and "fused" not in line, line
            assert "vector" not in line, line
        page.mouse.move(2, 2)
        wait_engine_hybrid(page, gate)
        page.wait_for_function(f"document.querySelector('{ELEMENT}').dataset.mode === 'hybrid'")
        hybrid = page.evaluate(DEBUG_LINES)
        assert hybrid and all(" · fused " in line and " · vector " in line for line in hybrid)
