"""End to end: the <ragspine-search> element's language, filters, sizes and multisite search.

Four sites served from one origin: the English samples (facets: entity, topic, period …),
the Chinese book of ``tests/_generator_pages.py`` built with ``--title "ES6 入门教程"``, and
MkDocs/Material- and Sphinx-shaped sites built in place (searched alone and together from a
host page). Screenshots at 1280 and 375 px of the English and the Chinese site are written to
the test's folder (and to ``$RAGSPINE_SCREENSHOT_DIR`` when set: docs/ keeps a copy).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from _generator_pages import ES6_BOOK, MKDOCS, SPHINX, write_pages
from _site import REPO, browser_module, load_build_wasm, serving, shared_wheels
from test_site_search import (
    ELEMENT,
    axe_violations,
    hits,
    new_page,
    no_sideways_scroll,
    status,
    wait_results,
)

from ragspine_lite.bundle.runtime import BundleSearcher
from ragspine_lite.cli import samples_dir
from ragspine_lite.routing.multi_index import LibraryIndex, MultiIndexRetriever

pytestmark = browser_module()

BOOT_TIMEOUT_MS = 120_000
TOP_K = 40  # the element's first search: 5 pages x (1 + 3 sections) x 2
HOST = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<script type="module" src="/mkdocs/_search/ragspine-search.mjs"></script>
<style>body {{ margin: 1rem; font: 14px/1.5 sans-serif; }}
#small {{ --ragspine-font-size: 12px; }}</style>
</head><body>
{body}
</body></html>
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The four sites under one folder, served: {name: url}."""
    bw = load_build_wasm()
    wheel, micropip = shared_wheels(tmp_path_factory)
    root = tmp_path_factory.mktemp("element-ui")
    common = {"wheel": wheel, "micropip": micropip}
    store = root.parent / f"{root.name}-stores"

    def build(name: str, docs: Path, out: Path, **options) -> None:
        bw.build_site([docs], out, keep_store=store / f"{name}.db", **common, **options)

    build("en", samples_dir() / "en", root / "en", title="ACME annual reports")
    book = write_pages(root.parent / f"{root.name}-es6", ES6_BOOK)
    build("zh", book, root / "es6", title="ES6 入门教程")
    for name, pages in (("mkdocs", MKDOCS), ("sphinx", SPHINX)):
        write_pages(root / name, pages)
        build(name, root / name, root / name / "_search", base_url=f"/{name}/")
    both = ('<ragspine-search id="both" bundle="/mkdocs/_search/ /sphinx/_search/"'
            ' libraries="mkdocs sphinx"></ragspine-search>')
    sized = ('<div id="plain"><ragspine-search bundle="/mkdocs/_search/"></ragspine-search></div>'
             '<div id="small"><ragspine-search bundle="/mkdocs/_search/"></ragspine-search></div>')
    (root / "multi.html").write_text(HOST.format(title="Two sites", body=both), "utf-8")
    (root / "sized.html").write_text(HOST.format(title="Sizes", body=sized), "utf-8")
    with serving(root) as url:
        yield {"url": url, "root": root, "stores": store}


@pytest.fixture
def page(browser):
    context, page = new_page(browser, 1280)
    yield page
    context.close()
    assert page.errors == []


def ready(page, url: str, selector: str = ELEMENT) -> None:
    """Open ``url``, show intent on every element (focus) and wait for the full engine (the
    filter pane is built from its facets)."""
    page.goto(url)
    page.wait_for_function("customElements.get('ragspine-search') !== undefined")
    page.eval_on_selector_all(
        selector, "els => els.forEach(e => e.shadowRoot.querySelector('#q').focus())"
    )
    page.wait_for_function(
        "(sel) => [...document.querySelectorAll(sel)]"
        ".every(e => e.dataset.state === 'ready' && e.dataset.engine === 'full')",
        arg=selector, timeout=BOOT_TIMEOUT_MS,
    )


def type_query(page, query: str, selector: str = ELEMENT) -> list[dict]:
    before = int(page.eval_on_selector(selector, "e => e.dataset.searches"))
    page.locator(f"{selector} #q").fill(query)
    wait_results(page, query, selector=selector, after=before)
    return hits(page, selector)


def shadow_text(page, css: str, selector: str = ELEMENT) -> str:
    return page.eval_on_selector(
        selector, "(e, css) => e.shadowRoot.querySelector(css).textContent", css
    )


def groups(page, selector: str = ELEMENT) -> list[list[str]]:
    """Every result page's links, best first."""
    return page.eval_on_selector(
        selector,
        "e => [...e.shadowRoot.querySelectorAll('li.page')]"
        ".map(li => [...li.querySelectorAll('a.hit')].map(a => a.href))",
    )


def last_hits(page, selector: str = ELEMENT) -> list[dict]:
    """The hits of the element's last search, as its ragspine-results event carried them."""
    return page.evaluate("(sel) => window.__hits[sel] || []", selector)


def record_hits(page) -> None:
    page.add_init_script(
        "window.__hits = {}; document.addEventListener('ragspine-results', (e) => {"
        " window.__hits[e.target.id ? '#' + e.target.id : 'ragspine-search'] ="
        " e.detail.hits.map(h => ({library: h.snippet.library_id, chunk: h.snippet.chunk_id,"
        " url: h.url, entity: h.snippet.entity, language: h.snippet.language})); }, true);"
    )


def shoot(page, name: str, tmp_path: Path) -> Path:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    keep = os.environ.get("RAGSPINE_SCREENSHOT_DIR")
    if keep:
        shutil.copy2(path, Path(keep) / path.name)
    return path


# ---------------------------------------------------------------- language


@pytest.mark.parametrize("width", [1280, 375])
def test_the_chinese_site_speaks_chinese(browser, served, width, tmp_path):
    context, page = new_page(browser, width)
    record_hits(page)
    ready(page, f"{served['url']}es6/")
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    assert page.title() == "搜索 · ES6 入门教程"
    assert page.get_attribute(f"{ELEMENT} #q", "placeholder") == "搜索"
    found = type_query(page, "暂时性死区 typeof")
    assert re.fullmatch(r"找到 \d+ 个与“暂时性死区 typeof”相关的页面", status(page)), status(page)
    assert shadow_text(page, "button.more") == "更多结果"
    assert found
    assert all("javascript" not in h["excerpt"] and "`" not in h["excerpt"] for h in found)
    assert found[0]["title"] == "let 和 const 命令"
    urls = [h["url"] for h in last_hits(page)]
    assert len(urls) > len(set(urls))  # overlapping chunks of one section came back …
    for links in groups(page):
        assert len(links) == len(set(links)), links  # … and each section is listed once
    rendered = page.request.get(f"{served['url']}es6/pages/docs/let.html").text()
    assert '<html lang="zh-CN">' in rendered and ">搜索</a>" in rendered
    assert no_sideways_scroll(page)
    shoot(page, f"element-zh-{width}", tmp_path)
    assert axe_violations(page) == []
    context.close()
    assert page.errors == []


def test_the_element_follows_lang_and_per_string_overrides(page, served):
    ready(page, f"{served['url']}en/")
    assert page.evaluate("document.documentElement.lang") == "en"
    type_query(page, "operating profit")
    assert re.fullmatch(r"\d+ pages? for “operating profit”", status(page))
    page.evaluate("document.documentElement.lang = 'zh-TW'")
    page.wait_for_function(
        "document.querySelector('ragspine-search').shadowRoot.querySelector('button.more')"
        ".textContent === '更多結果'"
    )
    assert status(page).startswith("找到 ") and "「operating profit」" in status(page)
    assert page.get_attribute(f"{ELEMENT} #q", "placeholder") == "搜尋"
    page.eval_on_selector(ELEMENT, "e => e.setAttribute('lang', 'zh-CN')")  # its own lang wins
    assert page.get_attribute(f"{ELEMENT} #q", "placeholder") == "搜索"
    page.eval_on_selector(ELEMENT, "e => e.setAttribute('lang', 'en')")
    page.eval_on_selector(ELEMENT, """e => e.setAttribute('strings',
        JSON.stringify({none: 'Nothing matches {query}', placeholder: 'Find a report'}))""")
    assert page.get_attribute(f"{ELEMENT} #q", "placeholder") == "Find a report"
    type_query(page, "xqzvbnm wombatically")
    assert status(page) == "Nothing matches xqzvbnm wombatically"
    page.eval_on_selector(ELEMENT, "e => { e.strings = {more: 'Show more'}; }")
    assert shadow_text(page, "button.more") == "Show more"


# ---------------------------------------------------------------- filters and sizes


@pytest.mark.parametrize("width", [1280, 375])
def test_the_filter_pane_offers_the_sites_facets_by_keyboard(browser, served, width, tmp_path):
    context, page = new_page(browser, width)
    record_hits(page)
    ready(page, f"{served['url']}en/")
    type_query(page, "acme group results")
    everything = last_hits(page)
    assert len({h["entity"] for h in everything}) > 1
    fields = page.eval_on_selector(
        ELEMENT,
        "e => [...e.shadowRoot.querySelectorAll('.facets select')].map(s => s.dataset.field)",
    )
    assert "entity" in fields and "language" not in fields  # one language: nothing to choose
    page.locator(f"{ELEMENT} #q").focus()
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # the summary opens the pane
    assert page.eval_on_selector(ELEMENT, "e => e.shadowRoot.querySelector('details').open")
    entity = page.locator(f"{ELEMENT} select[data-field=entity]")
    before = int(page.eval_on_selector(ELEMENT, "e => e.dataset.searches"))
    entity.focus()
    page.keyboard.press("ArrowDown")  # the first entity
    wait_results(page, "acme group results", after=before)
    chosen = entity.input_value()
    assert chosen and {h["entity"] for h in last_hits(page)} == {chosen}
    assert shadow_text(page, "summary") == "Filters (1)"
    assert no_sideways_scroll(page)
    shoot(page, f"element-en-{width}", tmp_path)
    assert axe_violations(page) == []
    before = int(page.eval_on_selector(ELEMENT, "e => e.dataset.searches"))
    page.locator(f"{ELEMENT} button.clear").click()
    wait_results(page, "acme group results", after=before)
    assert len({h["entity"] for h in last_hits(page)}) > 1
    context.close()
    assert page.errors == []


def test_sizes_follow_the_host_font_and_the_custom_property(page, served):
    ready(page, f"{served['url']}sized.html")
    sizes = page.evaluate(
        "() => ['#plain', '#small'].map(id => {"
        " const e = document.querySelector(id + ' ragspine-search');"
        " const px = (n) => parseFloat(getComputedStyle(n).fontSize);"
        " const inner = (css) => px(e.shadowRoot.querySelector(css));"
        " return [px(e), inner('#q'), inner('.status')]; })"
    )
    assert sizes[0] == pytest.approx([14, 14.7, 12.6])  # the page's 14 px, in em
    assert sizes[1] == pytest.approx([12, 12.6, 10.8])  # --ragspine-font-size: 12px
    source = (REPO / "web" / "ragspine-ui.mjs").read_text("utf-8")
    assert not re.search(r"\drem\b", source.split("const STYLE")[1].split("`;")[0])


# ---------------------------------------------------------------- generators and multisite


def test_a_mkdocs_site_shows_clean_titles_and_crumbs(page, served):
    ready(page, f"{served['url']}mkdocs/_search/")
    found = type_query(page, "primary color palette")
    assert found[0]["title"] == "Changing the colors"
    assert found[0]["crumb"] == "Color palette"
    assert found[0]["href"].endswith("/mkdocs/setup/changing-the-colors/#color-palette")
    for hit in found:
        assert "¶" not in (hit["crumb"] or "") + hit["excerpt"]
        assert " - Material for MkDocs" not in (hit["title"] or "")
    for links in groups(page):
        assert len(links) == len(set(links))


def python_router(served, query: str) -> list[tuple[str, str]]:
    """The two sites' CPython searches fused by Python's MultiIndexRetriever."""
    searchers = [BundleSearcher(kept_store_of(served, n)) for n in ("mkdocs", "sphinx")]
    try:
        class Site:
            def __init__(self, searcher):
                self.searcher = searcher

            def retrieve(self, q, *, filters=None, top_k=50):
                return [h["snippet"] for h in self.searcher.search(q, top_k=top_k).hits]

        names = ("mkdocs", "sphinx")
        libraries = [LibraryIndex(n, n, Site(s)) for n, s in zip(names, searchers, strict=True)]
        fused = MultiIndexRetriever(libraries).retrieve(query, top_k=TOP_K)
        return [(s["library_id"], s["chunk_id"]) for s in fused]
    finally:
        for searcher in searchers:
            searcher.close()


def kept_store_of(served, name: str) -> Path:
    return served["stores"] / f"{name}.db"


def test_several_sites_are_searched_together_as_the_python_router_fuses_them(page, served):
    record_hits(page)
    ready(page, f"{served['url']}multi.html")
    found = type_query(page, "documentation generator static site", "#both")
    got = [(h["library"], h["chunk"]) for h in last_hits(page, "#both")]
    assert got == python_router(served, "documentation generator static site")
    assert {library for library, _ in got} == {"mkdocs", "sphinx"}
    sites = page.eval_on_selector(
        "#both", "e => [...e.shadowRoot.querySelectorAll('.site')].map(s => s.textContent)"
    )
    assert set(sites) == {"Material for MkDocs", "sphinx"}  # the manifests' titles
    hrefs = {h["href"] for h in found}
    assert any("/mkdocs/" in h for h in hrefs) and any("/sphinx/" in h for h in hrefs)
    for href in hrefs:  # every link resolves against its own site
        assert page.request.get(href.split("#")[0]).ok, href

