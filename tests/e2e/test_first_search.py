"""End to end: the instant lane answers first, the full engine takes over unchanged, and a
page that embeds ``<ragspine-search>`` moves only a few kB until the visitor shows intent.

Real Chromium on the HTML test site (``tests/_site.py``): the JS API's first answers come
from the worker's instant lane (before Pyodide is up) and equal, hit for hit, what the full
engine answers once booted; a host page that never searches loads no worker, no runtime and
at most 30 kB of the bundle's files; pointing at the box, focusing it, "/" or ``?q=`` start
the runtime, and the first results are rendered from the instant lane.
"""

from __future__ import annotations

import shutil

import pytest
from _site import browser_module, html_site, serving

from ragspine_lite.bundle.site_files import WORKER_MODULES

pytestmark = browser_module()

BOOT_TIMEOUT_MS = 180_000
QUIET_BYTES = 30 * 1024
QUIET_FILES = sorted(f"_search/ragspine-{name}.mjs" for name in ("search", "i18n", "ui"))
QUERIES = [
    "quokka heat", "tag numbers", "2026 season", "高温", "短尾矮袋鼠 高温", "burrow", "clipboard",
    "season transect quokka", "xqzvbnm plokijuh", "Quokka, heat!", "weather 🌡️ burrows",
]
HOST = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Host</title><link rel="icon" href="data:,">
<script type="module" src="/_search/ragspine-search.mjs"></script></head>
<body><h1>A page about quokkas</h1><p>Text.</p>
<ragspine-search bundle="/_search/" %(attrs)s label="Search"></ragspine-search></body></html>
"""
API = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>API</title><link rel="icon" href="data:,">
</head><body><p>API page</p></body></html>
"""


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    root = tmp_path_factory.mktemp("instant") / "public"
    shutil.copytree(html_site(tmp_path_factory), root)
    (root / "host.html").write_text(HOST % {"attrs": ""}, "utf-8")
    (root / "host-url.html").write_text(HOST % {"attrs": "sync-url"}, "utf-8")
    (root / "api.html").write_text(API, "utf-8")
    with serving(root) as url:
        yield url


@pytest.fixture
def page(watched_page):
    return watched_page


SEARCH_ALL = """async (queries) => {
    const { RagSpineLite } = await import('/_search/ragspine-lite.mjs');
    const rs = await RagSpineLite.open({ bundle: '/_search/' });
    const opened = { engine: rs.engine, info: rs.info.engine };
    const ask = async () => {
        const out = [];
        for (const q of queries) {
            const d = await rs.searchDetailed(q, { topK: 12 });
            out.push({ lane: d.lane, engine: rs.engine, hits: d.hits });
        }
        return out;
    };
    const first = await ask();
    const full = await rs.fullEngine();
    const second = await ask();
    rs.close();
    return { opened, first, second, fullEngine: full.engine, versions: full.versions };
}"""


def test_first_answers_come_from_the_instant_lane_and_equal_the_full_engine(page, origin):
    page.goto(origin + "api.html")
    out = page.evaluate(SEARCH_ALL, QUERIES)
    assert out["opened"] == {"engine": "instant", "info": "instant"}
    assert out["fullEngine"] == "full" and out["versions"]["pyodide"]
    first, second = out["first"], out["second"]
    # Pyodide takes seconds to boot: the first round is answered in JavaScript.
    assert [r["lane"] for r in first] == ["instant"] * len(QUERIES)
    assert [r["lane"] for r in second] == ["full"] * len(QUERIES)
    assert sum(bool(r["hits"]) for r in first) >= len(QUERIES) - 2
    for query, a, b in zip(QUERIES, first, second, strict=True):
        assert a["hits"] == b["hits"], query  # ids, scores, order, sections, excerpts, spans


def _count_ours(page, origin):
    """Requests and bytes of the site's ``/_search/`` files, and the workers started."""
    seen = {"requests": [], "bytes": 0, "workers": 0}

    def on_response(response):
        if response.url.startswith(origin + "_search/"):
            seen["requests"].append(response.url[len(origin):])
            seen["bytes"] += len(response.body())

    page.on("response", on_response)
    page.on("worker", lambda _w: seen.__setitem__("workers", seen["workers"] + 1))
    return seen


def test_a_page_view_that_never_searches_moves_only_a_few_kb(page, origin):
    seen = _count_ours(page, origin)
    page.goto(origin + "host.html")
    page.wait_for_function("customElements.get('ragspine-search') !== undefined")
    page.wait_for_timeout(1500)  # anything eager would have started by now
    state = page.eval_on_selector("ragspine-search", "e => e.dataset.state")
    assert state == "idle"
    box = page.locator("ragspine-search #q")
    assert box.get_attribute("placeholder") == "Search" and box.get_attribute("aria-busy") is None
    # The box only: the element, its words and its style sheet (no panel, runtime or bundle file).
    assert sorted(seen["requests"]) == QUIET_FILES, seen["requests"]
    assert 0 < seen["bytes"] <= QUIET_BYTES, seen["bytes"]
    assert seen["workers"] == 0
    # Focusing is intent: the element says at once that the search is loading.
    at_focus = page.eval_on_selector("ragspine-search", """e => {
        const box = e.shadowRoot.querySelector('#q');
        box.focus();
        return [e.dataset.state, box.getAttribute('aria-busy'), box.placeholder,
                e.shadowRoot.querySelector('.status').textContent];
    }""")
    assert at_focus == ["booting", "true", "Loading search…", "Loading search…"]
    page.wait_for_function("document.querySelector('ragspine-search').dataset.state === 'ready'",
                           timeout=BOOT_TIMEOUT_MS)
    assert page.eval_on_selector("ragspine-search", "e => e.dataset.engine") == "instant"


@pytest.mark.parametrize("intent", ["hover", "focus", "slash", "query-in-url"])
def test_intent_starts_the_instant_lane_and_its_results_come_first(page, origin, intent):
    seen = _count_ours(page, origin)
    page.add_init_script("""
        window.__engines = [];
        document.addEventListener('ragspine-results', (e) => {
            window.__engines.push(e.target.dataset.engine);
        }, true);
    """)
    url = origin + ("host-url.html?q=quokka%20heat" if intent == "query-in-url" else "host.html")
    page.goto(url)
    page.wait_for_function("customElements.get('ragspine-search') !== undefined")
    box = page.locator("ragspine-search #q")
    if intent == "hover":
        box.hover()
    elif intent == "focus":
        box.focus()
    elif intent == "slash":
        page.click("h1")
        page.keyboard.press("/")
    if intent != "query-in-url":
        page.wait_for_function("document.querySelector('ragspine-search').dataset.state !== 'idle'")
        box.fill("quokka heat")
    page.wait_for_function(
        "document.querySelector('ragspine-search').dataset.query === 'quokka heat'",
        timeout=BOOT_TIMEOUT_MS,
    )
    found = page.eval_on_selector(
        "ragspine-search", "e => e.shadowRoot.querySelectorAll('.hit').length"
    )
    assert found >= 1
    assert page.evaluate("window.__engines")[-1] == "instant"
    assert seen["workers"] == 1
    assert "_search/ragspine-worker.mjs" in seen["requests"]
    # The full engine's modules come with its boot, once the instant lane was idle a second.
    modules = {f"_search/{name}" for name in WORKER_MODULES}
    for _ in range(150):
        if modules <= set(seen["requests"]):
            break
        page.wait_for_timeout(200)
    assert modules <= set(seen["requests"])
