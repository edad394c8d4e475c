"""End to end: search on a site built from HTML pages, in Chromium at 1280 px and 375 px.

The site (``tests/_site.py``: HTML pages with page chrome, a Markdown page, a Chinese page and
a RESTRICTED page) is indexed in place into ``public/_search/`` and served from its root, so
every result link is checked against the real page and its ``id``. Covered: links, marked
excerpts, no result for nonsense (BM25), the keyboard path from the box to the opened page,
``?q=`` round trips, honest boot feedback, no sideways scroll on a phone, axe-core (no serious
or critical violation), no demo text, the ``<ragspine-search>`` element inline and as a
Ctrl/⌘-K modal with CSS custom properties, and drops outside the demo's drop zone.
"""

from __future__ import annotations

import re
import shutil
from urllib.parse import quote, unquote, urlsplit

import pytest
from _site import REPO, SITE_TITLE, browser_module, html_site, serving

pytestmark = browser_module()

AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
BOOT_TIMEOUT_MS = 120_000
WIDTHS = {"desktop": 1280, "phone": 375}
ELEMENT = "ragspine-search"
DEMO_WORDS = (
    "ACME", "hong kong revenue", "营运利润", "RESTRICTED", "ragspine_lite demo", "wallaby",
)
# A host page of the site that embeds the element twice: inline, and as a modal.
HOST_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Embedded search</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<script type="module" src="/_search/ragspine-search.mjs"></script>
<style>
  body { margin: 0; font-family: sans-serif; }
  .bar { display: flex; justify-content: space-between; align-items: center; padding: 0.6rem 1rem; }
  #modal { --ragspine-accent: rgb(150, 0, 60); }
</style></head>
<body>
<div class="bar"><strong>Quokka Handbook</strong>
<ragspine-search id="modal" bundle="/_search/" modal label="Search the handbook"></ragspine-search>
</div>
<main style="padding: 0 1rem"><h1>Embedded</h1>
<ragspine-search id="inline" bundle="/_search/" label="Search the handbook"></ragspine-search>
</main>
</body></html>
"""


@pytest.fixture(scope="module")
def public(tmp_path_factory):
    # A copy: the built site is shared with other test modules, which count its pages.
    root = shutil.copytree(html_site(tmp_path_factory), tmp_path_factory.mktemp("embed") / "public")
    (root / "embed.html").write_text(HOST_PAGE, "utf-8")  # written after the build: not indexed
    return root


@pytest.fixture(scope="module")
def origin(public):
    with serving(public) as url:
        yield url


@pytest.fixture(params=sorted(WIDTHS), scope="module")
def width(request):
    return WIDTHS[request.param]


def new_page(browser, width):
    context = browser.new_context(viewport={"width": width, "height": 800})
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda err: page.errors.append(f"pageerror: {err}"))
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    return context, page


@pytest.fixture
def page(browser, width):
    """A fresh page (its own context) for a test that loads pages itself."""
    context, page = new_page(browser, width)
    yield page
    context.close()
    assert page.errors == []


@pytest.fixture(scope="module")
def booted(browser, width, origin):
    """One search page per width, booted once, for the tests that only search."""
    context, page = new_page(browser, width)
    open_search(page, origin)
    yield page
    context.close()
    assert page.errors == []


def element_state(page, selector: str = ELEMENT) -> dict:
    return page.eval_on_selector(selector, "e => ({...e.dataset})")


def wait_results(page, query: str, *, selector: str = ELEMENT, after: int = 0) -> None:
    page.wait_for_function(
        "([sel, q, n]) => { const e = document.querySelector(sel);"
        " return e.dataset.state === 'ready' && e.dataset.query === q"
        " && Number(e.dataset.searches) > n; }",
        arg=[selector, query, after],
        timeout=BOOT_TIMEOUT_MS,
    )


def hits(page, selector: str = ELEMENT) -> list[dict]:
    """The rendered hits: link, title, section crumb, excerpt text and marked words."""
    return page.eval_on_selector(
        selector,
        """e => [...e.shadowRoot.querySelectorAll('.hit')].map(h => ({
            href: h.href || null,
            title: h.querySelector('.title')?.textContent ?? null,
            crumb: h.querySelector('.crumb')?.textContent ?? null,
            excerpt: h.querySelector('.excerpt').textContent,
            marks: [...h.querySelectorAll('mark')].map(m => m.textContent),
            sub: Boolean(h.closest('ul.subs')),
        }))""",
    )


def status(page, selector: str = ELEMENT) -> str:
    return page.eval_on_selector(selector, "e => e.shadowRoot.querySelector('.status').textContent")


def open_search(page, origin: str, query: str = "") -> None:
    """Load the search page (booting the runtime) and wait until it is ready."""
    page.goto(f"{origin}_search/" + (f"?q={quote(query)}" if query else ""))
    if query:
        wait_results(page, query)
    else:
        page.wait_for_function(
            f"document.querySelector('{ELEMENT}').dataset.state === 'ready'",
            timeout=BOOT_TIMEOUT_MS,
        )


def search(page, query: str, *, selector: str = ELEMENT) -> list[dict]:
    """Type ``query`` into a booted element's box and return the hits it renders."""
    before = int(element_state(page, selector).get("searches", "0"))
    page.locator(f"{selector} #q").fill(query)
    wait_results(page, query, selector=selector, after=before)
    return hits(page, selector)


def no_sideways_scroll(page) -> bool:
    return page.evaluate(
        "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )


def axe_violations(page, impacts=("serious", "critical")) -> list[str]:
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("async () => (await axe.run(document)).violations"
                          ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.length}))")
    return [
        f"{v['id']} ({v['impact']}, {v['nodes']} nodes)" for v in found if v["impact"] in impacts
    ]


# ---------------------------------------------------------------- results (one booted page)


@pytest.mark.parametrize(
    "query, expected",
    [
        ("quokka heat", "/guide/#weather"),
        ("tag numbers", "/guide/tagging.html#numbers"),
        ("2026 season", "/_search/pages/notes/changelog.html#2026-season"),
        ("高温", "/zh/#zh-heat"),
    ],
)
def test_result_links_name_an_existing_page_and_id(booted, origin, query, expected):
    found = search(booted, query)
    assert found and found[0]["href"] == origin.rstrip("/") + expected
    for hit in found:
        response = booted.request.get(hit["href"])
        assert response.status == 200, hit["href"]
        fragment = unquote(urlsplit(hit["href"]).fragment)
        if fragment:
            assert re.search(rf'\bid="{re.escape(fragment)}"', response.text()), hit["href"]


def test_results_show_title_section_and_a_short_marked_excerpt(booted):
    top = search(booted, "quokka heat")[0]
    assert top["title"] == "Field guide" and top["crumb"] == "Weather and heat"
    assert "heat" in [m.lower() for m in top["marks"]]
    assert len(top["excerpt"].split()) <= 34
    assert status(booted) == "2 pages for “quokka heat”"
    chinese = search(booted, "短尾矮袋鼠 高温")
    assert "高温" in "".join(chinese[0]["marks"])


def test_hits_are_grouped_by_page_with_sections_under_it(booted, origin):
    found = search(booted, "season transect quokka")
    pages = [h for h in found if not h["sub"]]
    assert len(pages) >= 2 and all(h["title"] for h in pages)
    assert len({h["href"].split("#")[0] for h in pages}) == len(pages)
    found = search(booted, "burrow")  # one page, several chunks in several sections
    assert [h["sub"] for h in found][:2] == [False, True]
    assert found[0]["title"] == "Burrows" and all(h["title"] is None for h in found[1:])
    assert {h["href"].split("#")[0] for h in found} == {f"{origin}guide/burrows.html"}
    assert len({h["href"] for h in found}) == len(found)
    assert status(booted) == "1 page for “burrow”"


def test_nonsense_finds_nothing_in_bm25_mode(booted):
    assert search(booted, "xqzvbnm plokijuh") == []
    assert status(booted) == "No results for “xqzvbnm plokijuh”."


def test_page_chrome_restricted_pages_and_scores_stay_out(booted):
    assert search(booted, "membership") == []  # only in the footer and an <aside>
    assert search(booted, "wallaby acquisition") == []  # the RESTRICTED page
    assert search(booted, "clipboard")
    shadow = booted.eval_on_selector(ELEMENT, "e => e.shadowRoot.textContent")
    assert " · bm25 " not in shadow and "fused" not in shadow and "INTERNAL" not in shadow
    booted.eval_on_selector(ELEMENT, "e => e.setAttribute('debug', '')")  # the debug view
    search(booted, "clipboard transect")
    shadow = booted.eval_on_selector(ELEMENT, "e => e.shadowRoot.textContent")
    booted.eval_on_selector(ELEMENT, "e => e.removeAttribute('debug')")
    assert " · bm25 " in shadow and "INTERNAL" in shadow  # a BM25 answer: its BM25 score


def test_a_user_build_shows_no_demo_text(booted, origin):
    assert booted.title() == f"Search · {SITE_TITLE}"
    assert booted.inner_text("h1") == SITE_TITLE
    search(booted, "quokka")
    visible = booted.evaluate(
        "document.body.innerText + document.querySelector('ragspine-search').shadowRoot.textContent"
    )
    for word in DEMO_WORDS:
        assert word not in visible, word
    for path in ("_search/", "_search/ragspine-search.mjs", "_search/ragspine-lite.mjs"):
        body = booted.request.get(origin + path).text()
        for word in ("ACME", "hong kong revenue", "营运利润", "ragspine_lite demo"):
            assert word not in body, (path, word)


def test_no_sideways_scroll_and_no_serious_accessibility_violation(booted, width, tmp_path):
    search(booted, "quokka heat")
    assert no_sideways_scroll(booted)
    booted.screenshot(path=str(tmp_path / f"search-{width}.png"), full_page=True)
    assert axe_violations(booted) == []
    search(booted, "xqzvbnm")
    assert axe_violations(booted) == []


# ---------------------------------------------------------------- boot, keyboard and URL


def test_boot_typing_keyboard_and_the_url_from_box_to_page_and_back(page, origin):
    """A query typed while booting runs when ready; / focuses, arrows move, Enter opens;
    ?q= follows the box (replaceState) and brings the results back."""
    page.add_init_script("""
        window.__progress = [];
        new MutationObserver(() => {
            const e = document.querySelector('ragspine-search');
            if (e && e.dataset.progress && window.__progress.at(-1) !== e.dataset.progress)
                window.__progress.push(e.dataset.progress);
        }).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-progress']});
    """)
    page.goto(f"{origin}_search/")
    entries = page.evaluate("history.length")
    box = page.locator(f"{ELEMENT} #q")
    box.wait_for()
    # The page focuses its box (autofocus): intent, so the runtime starts at once; the instant
    # lane is ready after the index header (tests/e2e/test_first_search.py checks the booting
    # feedback), Pyodide boots behind it.
    assert element_state(page)["state"] in ("booting", "ready")
    box.type("quokka")
    wait_results(page, "quokka")
    assert box.get_attribute("aria-busy") is None
    page.wait_for_function(f"document.querySelector('{ELEMENT}').dataset.engine === 'full'",
                           timeout=BOOT_TIMEOUT_MS)
    progress = [int(p) for p in page.evaluate("window.__progress")]
    assert progress == sorted(progress) and progress[-1] == 100
    assert len(set(progress)) >= 3  # it moved with the downloads, not in one jump
    assert page.url == f"{origin}_search/?q=quokka"

    links = [h["href"] for h in hits(page)]
    assert len(links) >= 2
    focused = "() => { const a = document.querySelector('ragspine-search').shadowRoot" \
              ".activeElement; return a ? (a.href || a.id) : null; }"
    page.click("h1")
    page.keyboard.press("/")
    assert page.evaluate(focused) == "q"
    page.keyboard.press("ArrowDown")
    assert page.evaluate(focused) == links[0]
    page.keyboard.press("ArrowDown")
    assert page.evaluate(focused) == links[1]
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    assert page.evaluate(focused) == "q"
    before = int(element_state(page)["searches"])
    page.keyboard.press("Escape")
    wait_results(page, "", after=before)
    assert hits(page) == [] and page.url == f"{origin}_search/"
    page.keyboard.type("tag numbers")
    wait_results(page, "tag numbers")
    assert page.url == f"{origin}_search/?q=tag+numbers"
    assert page.evaluate("history.length") == entries  # replaceState: no entry per keystroke
    page.keyboard.press("ArrowDown")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url == f"{origin}guide/tagging.html#numbers"
    assert page.evaluate("document.getElementById('numbers') !== null")
    page.go_back()
    wait_results(page, "tag numbers")
    assert box.input_value() == "tag numbers"
    assert hits(page)[0]["href"] == f"{origin}guide/tagging.html#numbers"


# ---------------------------------------------------------------- the element


def test_the_element_inline_and_as_a_ctrl_k_modal_on_a_host_page(page, origin, width):
    page.goto(f"{origin}embed.html")
    inline = f"{ELEMENT}#inline"
    page.locator(f"{inline} #q").focus()  # intent: the runtime loads only now
    page.wait_for_function(f"document.querySelector('{inline}').dataset.state === 'ready'",
                           timeout=BOOT_TIMEOUT_MS)
    page.locator(f"{inline} #q").fill("tag numbers")
    wait_results(page, "tag numbers", selector=inline)
    assert hits(page, inline)[0]["href"] == f"{origin}guide/tagging.html#numbers"
    assert page.url == f"{origin}embed.html"  # no sync-url: the host's URL is left alone
    page.click("h1")
    page.keyboard.press("Control+k")
    modal = f"{ELEMENT}#modal"
    dialog = page.locator(f"{modal} dialog")
    assert dialog.is_visible()
    page.keyboard.type("2026 season")
    wait_results(page, "2026 season", selector=modal)
    found = hits(page, modal)
    assert found[0]["href"] == f"{origin}_search/pages/notes/changelog.html#2026-season"
    colour = page.eval_on_selector(
        modal, "e => getComputedStyle(e.shadowRoot.querySelector('.title')).color"
    )
    assert colour == "rgb(150, 0, 60)"  # --ragspine-accent set by the host page
    assert no_sideways_scroll(page)
    assert axe_violations(page) == []
    page.keyboard.press("Escape")  # clears the box
    assert dialog.is_visible()
    page.keyboard.press("Escape")  # closes the dialog
    assert not dialog.is_visible()


# ---------------------------------------------------------------- hybrid bundles on a phone


def test_the_hybrid_switch_is_reachable_on_a_phone(browser, semantic_url):
    """On the demo page and in the element, with a bundle built with --embeddings minilm."""
    context, page = new_page(browser, WIDTHS["phone"])
    try:
        page.goto(semantic_url)
        page.wait_for_function("document.body.dataset.state === 'ready'", timeout=BOOT_TIMEOUT_MS)
        page.fill("#q", "operating profit")
        page.wait_for_function("Number(document.body.dataset.searches || 0) > 0")
        assert no_sideways_scroll(page)
        page.check(f"{ELEMENT} fieldset.mode input[value=bm25]")  # the demo's element
        assert page.is_checked(f"{ELEMENT} fieldset.mode input[value=bm25]")
        assert axe_violations(page) == []
        # The element on a host page of the same origin, served by the route below.
        host = semantic_url + "host.html"
        page.route(host, lambda route: route.fulfill(
            content_type="text/html", body=HOST_PAGE.replace("/_search/", "/")))
        page.goto(host)
        inline = f"{ELEMENT}#inline"
        page.locator(f"{inline} #q").focus()  # intent: the runtime loads only now
        page.wait_for_function(f"document.querySelector('{inline}').dataset.state === 'ready'",
                               timeout=BOOT_TIMEOUT_MS)
        bm25 = page.locator(f"{inline} input[value=bm25]")
        assert bm25.is_visible()
        search(page, "operating profit", selector=inline)
        before = int(element_state(page, inline)["searches"])
        bm25.check()
        wait_results(page, "operating profit", selector=inline, after=before)
        assert no_sideways_scroll(page)
        assert axe_violations(page) == []
    finally:
        context.close()
    assert page.errors == []
