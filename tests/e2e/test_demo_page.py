"""End to end: the built demo site in headless Chromium, served from 127.0.0.1.

The demo searches with the <ragspine-search> element (in debug mode: locators and scores).
Boot, English and Chinese search with locators and highlights, filters, drag-and-drop ingest
that survives reloads (also one in the middle of an ingest), boot failures shown instead of
hanging, no RESTRICTED text in the DOM nor in any byte the browser fetched, and a clean
console throughout.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import zipfile
import zlib
from pathlib import Path

import pytest
from _site import CANARY, browser_module, serving
from test_site_search import axe_violations

from ragspine_lite.bundle.export import load_corpus, restricted_needles
from ragspine_lite.cli import samples_dir

pytestmark = browser_module()

BOOT_TIMEOUT_MS = 120_000
QUOKKA_DOC = """---
title: Quokka field notes
entity: ACME_HK
language: en
sensitivity: PUBLIC
---
# Quokka field notes

Quokkas on Rottnest Island were counted by the ACME volunteers in spring.

## Method

Each volunteer walked a fixed transect at dawn.
"""
SECRET_DOC = """---
sensitivity: RESTRICTED
---
The wombat merger terms are confidential until the board signs.
"""


class Console:
    """Console errors/warnings and uncaught page errors, from the page and its worker."""

    def __init__(self, page):
        self.messages: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda err: self.messages.append(f"pageerror: {err}"))

    def _console(self, message):
        if message.type in ("error", "warning"):
            self.messages.append(f"{message.type}: {message.text}")


def wait_ready(page):
    page.wait_for_function(
        "document.body.dataset.state !== 'booting'", timeout=BOOT_TIMEOUT_MS
    )
    state = page.evaluate("document.body.dataset.state")
    assert state == "ready", page.inner_text("#error")


BOX = "ragspine-search #q"
TOP_K = 40  # the element's first search: 5 pages x (1 + 3 sections) x 2 hits
HITS = "ragspine-search .hit"  # Playwright's CSS reaches into the element's shadow root
LAST_HITS = (
    "window.ragspineDemo.lastHits.map((h) => ({docId: h.snippet.doc_id,"
    " locator: h.snippet.source_locator, library: h.snippet.library_id,"
    " language: h.snippet.language, entity: h.snippet.entity}))"
)


def search(page, query: str, *, typed: bool = False) -> list[dict[str, str]]:
    """Run a query through the search box; the hits of the search, best first."""
    before = int(page.evaluate("document.body.dataset.searches || '0'"))
    if typed:
        page.fill(BOX, "")
        page.type(BOX, query, delay=15)
    else:
        page.fill(BOX, query)
    page.wait_for_function(
        "([n, q]) => Number(document.body.dataset.searches || 0) > n"
        " && window.ragspineDemo.lastQuery === q",
        arg=[before, query],
    )
    return page.evaluate(LAST_HITS)


def status_text(page) -> str:
    return page.eval_on_selector(
        "ragspine-search", "e => e.shadowRoot.querySelector('.status').textContent"
    )


def every_hit(page, condition: str) -> None:
    """Wait until the last search's hits (at least one) all meet ``condition`` (JS on h)."""
    page.wait_for_function(
        f"(() => {{ const hits = ({LAST_HITS}); return hits.length > 0"
        f" && hits.every((h) => {condition}); }})()"
    )


# The page's HTML with every shadow root's (what the visitor's DOM holds).
SHADOW_HTML = """() => [document.documentElement.outerHTML, ...[...document.querySelectorAll('*')]
    .filter((e) => e.shadowRoot).map((e) => e.shadowRoot.innerHTML)].join('\\n')"""


def drop_file(page, name: str, text: str):
    handle = page.evaluate_handle(
        """([name, text]) => {
            const dt = new DataTransfer();
            dt.items.add(new File([text], name, {type: "text/markdown"}));
            return dt;
        }""",
        [name, text],
    )
    page.dispatch_event("#dropzone", "drop", {"dataTransfer": handle})


@pytest.fixture(scope="module")
def needles():
    corpus = load_corpus([samples_dir()])
    return [n.text for n in restricted_needles(corpus, canaries=[CANARY])]


@pytest.fixture(scope="module")
def shared(browser, base_url):
    """One booted demo page for the read-only tests, with every response recorded."""
    context = browser.new_context()
    responses = []
    context.on("response", lambda response: responses.append(response))
    page = context.new_page()
    console = Console(page)
    page.goto(base_url)
    wait_ready(page)
    yield page, console, responses
    context.close()


@pytest.fixture
def demo(shared):
    page, console, _ = shared
    page.click("ragspine-search button.clear")
    yield page
    assert console.messages == []


@pytest.fixture
def fresh(browser, base_url):
    """A new browser context (its own IndexedDB) on the demo page; console checked after."""
    context = browser.new_context()
    page = context.new_page()
    console = Console(page)
    page.goto(base_url)
    wait_ready(page)
    yield page
    context.close()
    assert console.messages == []


def test_boot_shows_the_bundle_and_the_restricted_rule_without_a_count(demo):
    assert demo.is_enabled(BOX)
    info = demo.inner_text("#bundle-info")
    assert "8 documents" in info and "Python 3.14" in info
    note = demo.inner_text("#restricted-note")
    assert note.startswith("RESTRICTED documents are never part of a bundle")
    assert not any(ch.isdigit() for ch in note)  # nothing about what this build withheld
    options = demo.eval_on_selector_all(
        "ragspine-search select[data-field=language] option", "els => els.map(e => e.value)"
    )
    assert options == ["", "en", "zh"]


def test_english_results_appear_as_you_type_with_locators_and_highlights(demo, tmp_path):
    before = int(demo.evaluate("document.body.dataset.searches || '0'"))
    hits = search(demo, "why did operating profit fall", typed=True)
    searches = int(demo.evaluate("document.body.dataset.searches")) - before
    assert 1 <= searches <= 4  # debounced: not one search per keystroke
    assert hits[0]["docId"] == "en/acme_cn_2023_profit.md"
    assert re.fullmatch(r"en/acme_cn_2023_profit\.md#para\d+(-\d+)?", hits[0]["locator"])
    first = demo.locator(HITS).first
    assert first.locator(".debug").inner_text().startswith(f"{hits[0]['locator']} · ")
    marks = {m.lower() for m in first.locator("mark").all_inner_texts()}
    assert {"operating", "profit"} <= marks
    # A BM25 site: the lane's BM25 score, no fused or vector one.
    assert " · bm25 " in first.locator(".debug").inner_text()
    assert first.locator(".title").inner_text() == "ACME China 2023 operating profit commentary"
    href = first.get_attribute("href")  # a link to the rendered page, at the cited section
    assert "/pages/en/acme_cn_2023_profit.html#" in href
    assert demo.request.get(href.split("#")[0]).ok
    shot = tmp_path / "demo.png"
    demo.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000


def test_chinese_search_finds_the_chinese_document(demo):
    hits = search(demo, "中国内地营运利润")
    assert hits[0]["docId"] == "zh/acme_cn_2024_profit_zh.md"
    assert hits[0]["locator"].startswith("zh/acme_cn_2024_profit_zh.md#para")
    marks = demo.locator(HITS).first.locator("mark").all_inner_texts()
    assert any("营运" in m or "利润" in m for m in marks)


def test_filters_restrict_results_and_clear_again(demo):
    hits = search(demo, "ACME 2024 revenue")
    assert {h["language"] for h in hits} == {"en", "zh"}
    demo.select_option("ragspine-search select[data-field=language]", "zh")
    every_hit(demo, "h.language === 'zh'")
    demo.select_option("ragspine-search select[data-field=entity]", "ACME_HK")
    every_hit(demo, "h.entity === 'ACME_HK'")
    hits = demo.eval_on_selector_all(HITS, "els => els.map(e => ({...e.dataset}))")
    assert hits and {(h["language"], h["entity"]) for h in hits} == {("zh", "ACME_HK")}
    demo.click("ragspine-search button.clear")
    demo.wait_for_function(f"new Set(({LAST_HITS}).map((h) => h.language)).size === 2")


def test_the_js_api_returns_python_snippets_and_clear_errors(demo):
    results = demo.evaluate(
        "window.ragspineDemo.rs.search('营运利润', {topK: 3, filters: {language: 'zh'}})"
    )
    assert len(results) == 3
    assert set(results[0]) == {
        "text", "doc_id", "title", "source_locator", "chunk_id", "topic", "entity",
        "geography", "period", "language", "sensitivity", "scores", "library_id",
    }
    assert set(results[0]["scores"]) == {"bm25", "vector", "fused"}
    assert all(r["language"] == "zh" and r["library_id"] == "bundle" for r in results)
    error = demo.evaluate(
        "window.ragspineDemo.rs.search('x', {filters: {colour: 'red'}})"
        ".then(() => 'resolved', (e) => e.name + ': ' + e.message)"
    )
    assert error.startswith("ValueError: unknown filter field 'colour'")
    stats = demo.evaluate("window.ragspineDemo.rs.stats()")
    assert stats["bundle"] == {"documents": 8, "chunks": stats["bundle"]["chunks"]}
    assert stats["facets"]["language"] == ["en", "zh"]


def test_the_js_api_postprocesses_like_the_cpython_runtime(demo):
    from ragspine_lite.postprocess import make_postprocessor

    plain = demo.evaluate("window.ragspineDemo.rs.search('revenue growth', {topK: 8})")
    chained = demo.evaluate(
        "window.ragspineDemo.rs.search('revenue growth', {topK: 8, "
        "postprocess: ['mmr', 'lost_in_middle']})"
    )
    assert chained == make_postprocessor("mmr,lost_in_middle").postprocess(
        "revenue growth", plain)
    assert [r["chunk_id"] for r in chained] != [r["chunk_id"] for r in plain]
    compressed = demo.evaluate(
        "window.ragspineDemo.rs.search('hong kong revenue', {topK: 3, postprocess: 'compress'})"
    )
    assert all(r["prompt_text"] and r["prompt_text"] in r["text"] for r in compressed)
    error = demo.evaluate(
        "window.ragspineDemo.rs.search('x', {postprocess: 'bogus'})"
        ".then(() => 'resolved', (e) => e.name + ': ' + e.message)"
    )
    assert error.startswith("ValueError: unknown postprocessors 'bogus'")


def test_no_results_state_is_shown(demo):
    assert search(demo, "xylophone quasar") == []
    assert status_text(demo) == "No results for “xylophone quasar”."
    demo.select_option("ragspine-search select[data-field=language]", "zh")
    demo.wait_for_function(
        "document.querySelector('ragspine-search').shadowRoot.querySelector('.status')"
        ".textContent.includes('with these filters')"
    )


def test_restricted_content_never_reaches_the_dom(demo, needles):
    queries = ("Macau broker acquisition", CANARY, "董事会纪要 分支机构", "board memo deal team")
    for query in queries:
        hits = search(demo, query)
        assert all(not h["docId"].startswith("restricted/") for h in hits)
    search(demo, "ACME revenue")  # the box and the result list no longer echo the queries
    html = demo.evaluate(SHADOW_HTML).lower()
    for needle in needles:
        assert needle.lower() not in html, needle


def test_no_byte_the_browser_fetched_holds_restricted_content(shared, needles):
    _page, _, responses = shared
    urls = {r.url.rsplit("/", 1)[-1] for r in responses}
    assert {"manifest.json", "pyodide.asm.wasm"} <= urls
    assert any(u.startswith("header-") for u in urls) and any(u.startswith("f-") for u in urls)
    assert any(u.startswith("ragspine_lite-") and u.endswith(".whl") for u in urls)
    encoded = [n.lower().encode("utf-8") for n in needles]
    escaped = [json.dumps(n)[1:-1].lower().encode("ascii") for n in needles]
    for response in responses:
        body = response.body()
        blobs = [body]
        if response.url.endswith(".bin"):  # index shards are zlib-compressed
            blobs.append(zlib.decompress(body))
        if body[:4] == b"PK\x03\x04":
            with zipfile.ZipFile(io.BytesIO(body)) as archive:
                blobs.extend(archive.read(name) for name in archive.namelist())
        for blob in blobs:
            low = blob.lower()
            for needle in encoded + escaped:
                assert needle not in low, (response.url, needle)


def test_a_dropped_file_is_found_and_found_again_after_reload(fresh):
    drop_file(fresh, "quokka_notes.md", QUOKKA_DOC)
    fresh.wait_for_function(
        "document.querySelector('#ingest-status').textContent.includes('Indexed quokka_notes.md')"
    )
    assert "saved in this browser" in fresh.inner_text("#ingest-status")
    assert "quokka_notes.md — Quokka field notes" in fresh.inner_text("#my-docs")
    hits = search(fresh, "quokkas rottnest island")
    assert hits[0]["docId"] == "quokka_notes.md"
    assert hits[0]["library"] == "page"
    assert hits[0]["locator"].startswith("quokka_notes.md#para")
    assert "your document" in fresh.locator(HITS).first.inner_text()

    fresh.reload()
    wait_ready(fresh)
    assert "Restored 1 document(s)" in fresh.inner_text("#ingest-status")
    hits = search(fresh, "quokkas rottnest island")
    assert hits[0]["docId"] == "quokka_notes.md"
    assert hits[0]["library"] == "page"


def test_a_reload_in_the_middle_of_an_ingest_keeps_what_was_stored(fresh):
    drop_file(fresh, "quokka_notes.md", QUOKKA_DOC)
    fresh.wait_for_function("document.querySelectorAll('#my-docs li').length === 1")
    batch = [{"name": f"bulk_{i:02d}.md", "text": f"numbat census {i} " * 400} for i in range(30)]
    fresh.evaluate("(docs) => { window.ragspineDemo.rs.ingest(docs); }", batch)
    fresh.reload()
    wait_ready(fresh)
    assert fresh.inner_text("#error") == ""
    docs = fresh.evaluate("window.ragspineDemo.rs.documents()")
    names = sorted(d["name"] for d in docs)
    # The batch went into IndexedDB in one transaction: all of it or none of it.
    everything = ["quokka_notes.md", *sorted(d["name"] for d in batch)]
    assert names in (["quokka_notes.md"], sorted(everything))
    assert search(fresh, "quokkas rottnest island")[0]["docId"] == "quokka_notes.md"


def test_a_dropped_restricted_file_is_held_back(fresh):
    drop_file(fresh, "secret.md", SECRET_DOC)
    fresh.wait_for_function(
        "document.querySelector('#ingest-status').textContent.includes('Indexed secret.md')"
    )
    assert "RESTRICTED: never shown" in fresh.inner_text("#my-docs")
    assert search(fresh, "wombat") == []
    assert "held back" not in fresh.evaluate(SHADOW_HTML)  # nothing depends on the query
    assert "confidential until the board signs" not in fresh.evaluate(SHADOW_HTML)


def _detailed(page, query: str) -> dict:
    out = page.evaluate("(q) => window.ragspineDemo.rs.searchDetailed(q, {topK: 5})", query)
    return {k: v for k, v in out.items() if k not in ("tookMs", "worker")}


def test_nothing_the_page_api_answers_depends_on_a_restricted_document(fresh):
    query = "wombat merger quokkas"
    fresh.evaluate("(d) => window.ragspineDemo.rs.ingest([d])",
                   {"name": "quokka_notes.md", "text": QUOKKA_DOC})
    before = _detailed(fresh, query)
    assert before["results"] and "heldBack" not in before
    titled = "---\ntitle: Project Wombat\n" + SECRET_DOC.removeprefix("---\n")
    fresh.evaluate("(d) => window.ragspineDemo.rs.ingest([d])",
                   {"name": "secret.md", "text": titled})
    assert _detailed(fresh, query) == before  # no count, score or slot moved
    docs = fresh.evaluate("window.ragspineDemo.rs.documents()")
    secret = next(d for d in docs if d["name"] == "secret.md")
    assert secret["restricted"] and secret["title"] == ""
    assert "Project Wombat" not in json.dumps(docs)


def test_an_unsupported_dropped_file_shows_an_error(fresh):
    drop_file(fresh, "slides.pptx", "binary-ish")
    fresh.wait_for_function("document.querySelector('#error').textContent.length > 0")
    assert "unsupported file type" in fresh.inner_text("#error")
    assert fresh.evaluate("window.ragspineDemo.rs.documents()") == []


def _boot_failure(browser, site: Path, tmp_path: Path, mutate, *, instant: bool = False
                  ) -> tuple[str, list[str]]:
    """The demo page over a copy of the site changed by ``mutate``: the error it shows and the
    console's errors. ``instant``: only the full engine fails, the instant lane still answers."""
    broken = tmp_path / "broken"
    shutil.copytree(site, broken)
    mutate(broken)
    with serving(broken) as url:
        context = browser.new_context()
        page = context.new_page()
        console = Console(page)
        page.goto(url)
        page.wait_for_function(
            "document.body.dataset.state !== 'booting'", timeout=BOOT_TIMEOUT_MS
        )
        assert page.evaluate("document.body.dataset.state") == "error"
        assert page.is_disabled(BOX) != instant
        text = page.inner_text("#error")
        if instant:  # a plain search is still answered, in JavaScript
            page.fill(BOX, "operating profit")
            page.wait_for_function("Number(document.body.dataset.searches || 0) > 0")
            assert page.locator(HITS).count() > 0
        context.close()
    return text, console.messages


def test_a_bundle_format_mismatch_says_which_side_to_update(browser, site, tmp_path):
    def newer_format(root: Path) -> None:
        manifest = json.loads((root / "manifest.json").read_text("utf-8"))
        manifest["format_version"] = 99
        (root / "manifest.json").write_text(json.dumps(manifest), "utf-8")

    text, messages = _boot_failure(browser, site, tmp_path, newer_format)
    assert "bundle format version 99 is newer than this runtime reads" in text
    assert "update the web runtime" in text
    assert messages == []


def test_a_missing_file_is_named_instead_of_hanging(browser, site, tmp_path):
    def drop_wheel(root: Path) -> None:
        next((root / "wheels").glob("ragspine_lite-*.whl")).unlink()

    text, messages = _boot_failure(browser, site, tmp_path, drop_wheel, instant=True)
    assert "plain searches still work" in text
    assert "could not load the ragspine_lite wheel" in text
    assert "HTTP 404" in text
    assert all("404" in m for m in messages)  # only the browser's own note of the 404


def test_a_file_changed_after_the_build_is_refused(browser, site, tmp_path):
    header = json.loads((site / "manifest.json").read_text("utf-8"))["entry"]["index"]

    def tamper(root: Path) -> None:
        store = root / header
        store.write_bytes(store.read_bytes() + b"\0")

    text, messages = _boot_failure(browser, site, tmp_path, tamper)
    assert f"{header} does not match manifest.json" in text
    assert "rebuild" in text
    # At most the instant lane's note that it could not open, for the same file.
    assert all(f"{header} does not match manifest.json" in m for m in messages), messages


def test_a_host_that_gzips_every_file_works(browser, site):
    with serving(site, gzip_encoding=True) as url:
        context = browser.new_context()
        page = context.new_page()
        console = Console(page)
        page.goto(url + "?q=中国内地营运利润")
        wait_ready(page)
        page.wait_for_function("Number(document.body.dataset.searches || 0) > 0")
        hits = page.eval_on_selector_all(HITS, "els => els.map(e => e.dataset.docId)")
        context.close()
    assert hits and hits[0].startswith("zh/")
    assert console.messages == []


def test_a_file_dropped_outside_the_drop_zone_does_not_replace_the_page(demo):
    prevented = demo.evaluate("""() => {
        const dt = new DataTransfer();
        dt.items.add(new File(["# x"], "outside.md", {type: "text/markdown"}));
        const target = document.querySelector("h1");
        return ["dragover", "drop"].map((type) => {
            const event = new DragEvent(type, {dataTransfer: dt, cancelable: true, bubbles: true});
            target.dispatchEvent(event);
            return event.defaultPrevented;
        });
    }""")
    assert prevented == [True, True]  # the browser's default would open the file
    assert "outside.md" not in demo.inner_text("#my-docs")
    zone = demo.inner_text("#dropzone")
    accepted = demo.get_attribute("#file-input", "accept").split(",")
    assert all(ext in zone for ext in accepted), (accepted, zone)


def test_an_example_clicked_while_booting_runs_when_ready(browser, base_url):
    context = browser.new_context()
    page = context.new_page()
    console = Console(page)
    held = []  # the runtime module, held back until the example was clicked: still booting
    page.route("**/ragspine-lite.mjs", lambda route: held.append(route))
    page.goto(base_url)
    page.wait_for_function("document.querySelector('ragspine-search').dataset.state === 'booting'")
    assert page.get_attribute(BOX, "placeholder") == "Loading search…"
    page.click("ragspine-search .examples button:text-is('why did operating profit fall')")
    assert held and page.eval_on_selector("ragspine-search", "e => e.dataset.state") == "booting"
    for route in held:
        route.continue_()
    wait_ready(page)
    page.wait_for_function("Number(document.body.dataset.searches || 0) > 0")
    assert page.input_value(BOX) == "why did operating profit fall"
    assert page.is_hidden("#error")
    assert page.eval_on_selector_all(HITS, "els => els.length") > 0
    assert "q=why+did+operating+profit+fall" in page.url  # the URL follows the box
    context.close()
    assert console.messages == []


def test_an_example_under_the_pointer_or_focus_is_prefetched_before_its_click(fresh):
    """Hovering (or tabbing to) an example chip is intent: what its search reads is fetched
    then, so the click finds it in memory."""
    fetched = []  # term shards and text fragments requested
    fresh.on("request", lambda r: fetched.append(r.url)
             if "/data/terms/" in r.url or "/data/text/" in r.url else None)
    chip = "ragspine-search .examples button:text-is('Hong Kong revenue growth in 2024')"
    fresh.hover(chip)
    fresh.wait_for_timeout(1500)
    assert fresh.evaluate("document.body.dataset.searches || '0'") == "0"  # no search yet
    assert fetched, "hovering the example fetched nothing"
    fresh.click(chip)
    fresh.wait_for_function("Number(document.body.dataset.searches || 0) > 0")
    assert fresh.eval_on_selector_all(HITS, "els => els.length") > 0


def _focused(page) -> str:
    """What has the keyboard focus: an id or tag, looking into the element's shadow root."""
    return page.evaluate(
        "() => { const a = document.activeElement;"
        " const inner = a && a.shadowRoot ? a.shadowRoot.activeElement : null;"
        " const e = inner || a; return e ? (e.id || e.className || e.tagName) : ''; }"
    )


def test_the_keyboard_opens_the_cited_page_and_the_url_follows_the_box(fresh):
    page = fresh
    page.click("h1")  # the focus leaves the box
    page.keyboard.press("/")
    assert _focused(page) == "q"
    search(page, "operating profit fell", typed=True)
    assert "q=operating+profit+fell" in page.url
    search(page, "")
    assert "q=" not in page.url  # an emptied box leaves no stale query behind
    search(page, "operating profit fell")
    assert axe_violations(page) == []
    page.click("h1")
    page.keyboard.press("Control+k")
    assert _focused(page) == "q"
    page.keyboard.press("ArrowDown")
    assert _focused(page) == "hit"
    href = page.evaluate(
        "document.querySelector('ragspine-search').shadowRoot.activeElement.href"
    )
    assert "/pages/" in href and "#" in href
    page.keyboard.press("Enter")
    page.wait_for_url(href)
    anchor = href.split("#", 1)[1]
    assert page.locator(f"[id='{anchor}']").count() == 1  # the rendered page has the section
    page.go_back()
    wait_ready(page)
    assert page.input_value(BOX) == "operating profit fell"  # ?q= brings the search back
