"""End to end: the page fetches only what a query needs from a sharded bundle, in Chromium.

On a site of 600 reports (many term shards and text fragments): opening reads the index
header and no shard; a first query fetches only the term shards of its words and the
fragments of its results; the page ranks exactly like CPython's
``BundleSearcher.from_files(DirectoryFiles(site))``; after a prefetch (or typing in the
demo's box) the search reads nothing synchronously; a return visit reads every file from
the Cache API; a tampered shard is refused with a message naming it.
"""

from __future__ import annotations

import pytest
from _site import browser_module, copy_site, serving, wide_site

from ragspine_lite.bundle.runtime import BundleSearcher
from ragspine_lite.bundle.shards import DirectoryFiles

pytestmark = browser_module()

BOOT_TIMEOUT_MS = 120_000
TOP_K = 10
DETAILED = """async ([q, k]) => {
  const out = await ragspineDemo.rs.searchDetailed(q, { topK: k });
  return { hits: out.results.map((s) => [s.chunk_id, s.text, s.scores.bm25, s.scores.fused]),
           files: out.worker.files };
}"""


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    return wide_site(tmp_path_factory)


@pytest.fixture(scope="module")
def wide_url(wide):
    with serving(wide[0]) as url:
        yield url


def queries(vocabulary: list[str]) -> list[str]:
    """A frequent word, rare ones, several-word queries and a word no report has."""
    return [
        vocabulary[0], vocabulary[-1], f"{vocabulary[3]} {vocabulary[400]}",
        f"{vocabulary[10]} {vocabulary[2000]} {vocabulary[-5]}", "quokka", vocabulary[50].upper(),
    ]


def manifest_of(page) -> dict:
    return page.evaluate("ragspineDemo.rs.manifest")


def data_requests(requests: list[str], base: str) -> list[str]:
    return [url[len(base):] for url in requests if url.startswith(base + "data/")]


def embedding_site(site, tmp_path):
    """A copy of ``site`` with ``embed.html``: a page holding the ``<ragspine-search>`` element."""
    copy = copy_site(site, tmp_path / "site")
    (copy / "embed.html").write_text(
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Embed</title>'
        '<script type="module" src="ragspine-search.mjs"></script></head><body>'
        '<ragspine-search bundle="./"></ragspine-search></body></html>', "utf-8"
    )
    return copy


class Visit:
    """One browser context on the wide site's demo page, with its requests recorded."""

    def __init__(self, browser, base: str) -> None:
        self.base = base
        self.context = browser.new_context()
        self.requests: list[str] = []
        self.context.on("request", lambda request: self.requests.append(request.url))
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda err: self.errors.append(str(err)))

    def open(self) -> None:
        self.page.goto(self.base + "index.html")
        self.page.wait_for_function(
            "document.body.dataset.state && document.body.dataset.state !== 'booting'",
            timeout=BOOT_TIMEOUT_MS,
        )
        state = self.page.evaluate("document.body.dataset.state")
        assert state == "ready", (self.page.inner_text("#error"), self.errors)

    def search(self, query: str, top_k: int = TOP_K) -> dict:
        return self.page.evaluate(DETAILED, [query, top_k])

    def data(self) -> list[str]:
        found = data_requests(self.requests, self.base)
        self.requests.clear()
        return found

    def close(self) -> None:
        self.context.close()
        assert self.errors == []


@pytest.fixture
def visit(browser, wide_url):
    opened = Visit(browser, wide_url)
    yield opened
    opened.close()


def test_opening_reads_the_header_and_a_first_query_only_its_shards(visit, wide):
    site, vocabulary = wide
    visit.open()
    manifest = manifest_of(visit.page)
    header = manifest["entry"]["index"]
    assert visit.data() == [header]
    assert "data/chunks.db" not in manifest["files"]
    # The header lists the content-named index files; the manifest stays small without them.
    assert not [p for p in manifest["files"] if p.startswith(("data/terms/", "data/text/"))]
    sizes = {p.relative_to(site).as_posix(): p.stat().st_size
             for p in (site / "data").rglob("*") if p.is_file()}
    terms = [p for p in sizes if p.startswith("data/terms/")]
    fragments = [p for p in sizes if p.startswith("data/text/f-")]
    assert len(terms) >= 4 and len(fragments) >= 20, (len(terms), len(fragments))

    query = f"{vocabulary[3]} {vocabulary[400]}"
    out = visit.search(query)
    fetched = visit.data()
    assert out["hits"] and len(fetched) == len(set(fetched)) == len(out["files"])
    assert {f["path"] for f in out["files"]} == set(fetched)
    shards = [p for p in fetched if p.startswith("data/terms/")]
    texts = [p for p in fetched if p.startswith("data/text/f-")]
    assert set(fetched) == set(shards) | set(texts)
    assert 1 <= len(shards) <= 2 < len(terms)
    assert 1 <= len(texts) <= TOP_K < len(fragments)
    corpus_bytes = sum(sizes[p] for p in fetched)
    assert corpus_bytes == sum(f["bytes"] for f in out["files"])
    assert corpus_bytes < sum(sizes[p] for p in terms + fragments) / 3

    # The same query again: everything is in memory.
    assert visit.search(query)["files"] == [] and visit.data() == []


def test_the_page_ranks_like_cpython_from_the_same_files(visit, wide):
    site, vocabulary = wide
    visit.open()
    with BundleSearcher.from_files(DirectoryFiles(site)) as cpython:
        for query in queries(vocabulary):
            expected = cpython.search(query, top_k=TOP_K).snippets
            got = visit.search(query)["hits"]
            assert [h[:2] for h in got] == [[s["chunk_id"], s["text"]] for s in expected], query
            for (_, _, bm25, fused), s in zip(got, expected, strict=True):
                assert bm25 == pytest.approx(s["scores"]["bm25"], rel=1e-12)
                assert fused == pytest.approx(s["scores"]["fused"], rel=1e-12)
    assert visit.search("quokka")["hits"] == []


def test_after_a_prefetch_the_search_reads_nothing_synchronously(visit, wide):
    _, vocabulary = wide
    visit.open()
    visit.data()
    query = f"{vocabulary[7]} {vocabulary[900]}"
    ahead = visit.page.evaluate(
        "([q, k]) => ragspineDemo.rs.prefetch(q, { topK: k })", [query, TOP_K]
    )
    assert ahead["paths"] and {f["from"] for f in ahead["files"]} == {"network"}
    assert sorted(visit.data()) == sorted(ahead["paths"])
    out = visit.search(query)
    assert out["hits"] and out["files"] == [] and visit.data() == []

    # Typing in the demo's box prefetches (debounced) before the search runs.
    before = visit.page.evaluate("ragspineDemo.rs.stats()")["files"]
    typed = f"{vocabulary[12]} {vocabulary[1500]}"
    searches = int(visit.page.evaluate("document.body.dataset.searches || '0'"))
    visit.page.type("ragspine-search #q", typed, delay=60)
    visit.page.wait_for_function(
        "([n, q]) => Number(document.body.dataset.searches || 0) > n"
        " && ragspineDemo.lastQuery === q",
        arg=[searches, typed],
    )
    after = visit.page.evaluate("ragspineDemo.rs.stats()")["files"]
    # The files the typed query's first answer needed were loaded by a prefetch, the rest (the
    # complete answer's) by the search's own batch: none synchronously.
    assert after["network"] > before["network"] and after["sync"] == before["sync"]
    assert after["prefetched"] > before["prefetched"], (before, after)
    assert visit.page.locator("ragspine-search .hit").count() > 0


def test_typing_in_the_search_element_prefetches_too(browser, wide, tmp_path):
    site, vocabulary = wide
    copy = embedding_site(site, tmp_path)
    with serving(copy) as base:
        visit = Visit(browser, base)
        try:
            page = visit.page
            page.goto(base + "embed.html")
            page.locator("ragspine-search input[type=search]").focus()  # intent: boot now
            page.wait_for_function(
                "document.querySelector('ragspine-search').dataset.state === 'ready'",
                timeout=BOOT_TIMEOUT_MS,
            )
            typed = f"{vocabulary[30]} {vocabulary[2500]}"
            page.locator("ragspine-search input[type=search]").press_sequentially(typed, delay=60)
            page.wait_for_function(
                "(q) => document.querySelector('ragspine-search').dataset.query === q",
                arg=typed,
            )
            files = page.evaluate(
                "document.querySelector('ragspine-search').runtime.stats()"
            )["files"]
        finally:
            visit.close()
    assert files["network"] > 0 and files["prefetched"] > 0 and files["sync"] == 0, files


def test_a_return_visit_reads_every_file_from_the_cache(browser, wide_url, wide):
    _, vocabulary = wide
    query = f"{vocabulary[20]} {vocabulary[3000]}"
    first = Visit(browser, wide_url)
    try:
        first.open()
        cold = first.search(query)
        assert cold["files"] and {f["from"] for f in cold["files"]} <= {"network", "sync"}
        cache_name = f"ragspine-lite:{wide_url}"
        paths = [f["path"] for f in cold["files"]]
        # The files go to the cache once the worker is idle: wait until all are there
        # (an async predicate would not do: wait_for_function takes its promise as true).
        first.page.evaluate(
            """async ([name, base, paths]) => {
              const cache = await caches.open(name);
              for (let tries = 0; tries < 100; tries++) {
                const found = await Promise.all(paths.map((p) => cache.match(base + p)));
                if (found.every(Boolean)) return;
                await new Promise((done) => setTimeout(done, 100));
              }
              throw new Error("the search's files never reached the cache");
            }""",
            [cache_name, wide_url, paths],
        )
        first.page.reload()
        first.requests.clear()
        first.page.wait_for_function(
            "document.body.dataset.state && document.body.dataset.state !== 'booting'",
            timeout=BOOT_TIMEOUT_MS,
        )
        warm = first.search(query)
        assert warm["hits"] == cold["hits"]
        assert first.data() == [], "a return visit fetched index files again"
        assert {f["from"] for f in warm["files"]} == {"cache"}
        assert sorted(f["path"] for f in warm["files"]) == sorted(paths)
    finally:
        first.close()


def test_a_tampered_shard_is_refused_naming_it(browser, wide, tmp_path):
    site, vocabulary = wide
    copy = copy_site(site, tmp_path / "site")
    with serving(copy) as base:
        probe = Visit(browser, base)
        try:
            probe.open()
            query = vocabulary[0]
            shard = next(
                p for p in probe.page.evaluate("(q) => ragspineDemo.rs.prefetch(q, {topK: 1})",
                                               query)["paths"]
                if p.startswith("data/terms/")
            )
        finally:
            probe.close()
        target = copy / shard
        target.write_bytes(target.read_bytes()[:-1] + b"\0")
        visit = Visit(browser, base)
        try:
            visit.open()
            message = visit.page.evaluate(
                "(q) => ragspineDemo.rs.search(q).then(() => 'found', (e) => e.message)", query
            )
        finally:
            visit.close()
    assert shard in message and "manifest.json" in message and "rebuild" in message, message


def test_the_elements_first_answer_needs_only_its_best_hits_fragments(browser, wide, tmp_path):
    """A new query in the element is answered in two steps: its best hits (the text fragments
    of ten chunks) are shown while the fragments of the rest (sections, more pages) are still
    on their way; then the complete answer replaces them."""
    site, vocabulary = wide
    copy = embedding_site(site, tmp_path)
    passed: list[str] = []
    held: list = []

    def fragments(route) -> None:  # the first TOP_K fragments pass, the others wait
        if len(passed) < TOP_K:
            passed.append(route.request.url)
            route.continue_()
        else:
            held.append(route)

    element = "document.querySelector('ragspine-search')"
    with serving(copy) as base:
        visit = Visit(browser, base)
        try:
            page = visit.page
            visit.context.route("**/data/text/f-*", fragments)
            page.goto(base + "embed.html")
            box = page.locator("ragspine-search input[type=search]")
            box.focus()
            page.wait_for_function(f"{element}.dataset.state === 'ready'", timeout=BOOT_TIMEOUT_MS)
            query = f"{vocabulary[0]} {vocabulary[1]}"
            box.fill(query)  # one input event: no prefetch of partial words
            page.wait_for_function(
                f"{element}.shadowRoot.querySelectorAll('.hit').length > 0", timeout=60_000
            )
            first = int(page.evaluate(f"{element}.dataset.results"))
            for _ in range(100):  # the complete answer's request may leave just after
                if held:
                    break
                page.wait_for_timeout(50)
            assert held, "the complete answer needs more fragments than the first one"
            assert page.evaluate(f"{element}.dataset.query") != query  # not complete yet
            for route in held:
                route.continue_()
            visit.context.unroute("**/data/text/f-*")
            page.wait_for_function(f"(q) => {element}.dataset.query === q", arg=query)
            results = int(page.evaluate(f"{element}.dataset.results"))
        finally:
            visit.close()
    assert first == TOP_K < results, (first, results)
