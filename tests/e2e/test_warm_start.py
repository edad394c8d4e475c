"""End to end: a return visit to a built site starts warm, and a rebuilt site is never stale.

The second visit in the same browser context reads Pyodide's wasm and stdlib, the wheel and the
chunk store from the Cache API (no network request for them) and finds the same results; after
the site is rebuilt with another document, the changed files are fetched again and the new
document is found, while unchanged files still come from the cache.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api")
pytest.importorskip("pytest_playwright")

from _site import CHROMIUM, copy_site, load_build_wasm, serving, shared_wheels

if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)

from ragspine_lite.cli import samples_dir

pytestmark = pytest.mark.cpython_only

BOOT_TIMEOUT_MS = 120_000
QUERY = "Hong Kong new sales"
RUNTIME = ("pyodide/pyodide.asm.wasm", "pyodide/python_stdlib.zip", "data/chunks.db")
EXTRA_DOC = """---
title: Quokka field notes
language: en
sensitivity: PUBLIC
---
# Quokka field notes

Quokkas on Rottnest Island were counted by volunteers in spring.
"""


def visit(page, base: str, query: str) -> dict:
    """Open the demo page with `query`; the first result's doc ids and where files came from."""
    page.goto(f"{base}index.html?q={query.replace(' ', '+')}")
    page.wait_for_function(
        "window.ragspineDemo && (ragspineDemo.marks.firstResult || document.body.dataset.state === 'error')",
        timeout=BOOT_TIMEOUT_MS,
    )
    return page.evaluate(
        """async (q) => ({
          cache: ragspineDemo.info.cache,
          ids: (await ragspineDemo.rs.search(q, { topK: 5 })).map((s) => s.doc_id),
        })""",
        query,
    )


def fetched(requests: list[str], base: str) -> set[str]:
    return {url[len(base):] for url in requests if url.startswith(base)}


def test_a_second_visit_reads_the_runtime_from_the_cache_and_a_rebuild_is_not_stale(
    browser, tmp_path_factory, tmp_path
):
    bw = load_build_wasm()
    wheel, micropip = shared_wheels(tmp_path_factory)
    site = tmp_path / "site"
    bw.build_site([samples_dir()], site, wheel=wheel, micropip=micropip, title="warm", demo=True)
    with serving(site) as base:
        context = browser.new_context()
        requests: list[str] = []
        context.on("request", lambda request: requests.append(request.url))
        page = context.new_page()

        cold = visit(page, base, QUERY)
        assert cold["ids"], "the cold visit found nothing"
        assert set(RUNTIME) <= fetched(requests, base)
        assert cold["cache"]["enabled"] and not cold["cache"]["errors"]
        assert set(RUNTIME) <= set(cold["cache"]["fetched"])
        assert not any(p.startswith("wheels/micropip") for p in fetched(requests, base))

        requests.clear()
        warm = visit(page, base, QUERY)
        assert warm["ids"] == cold["ids"]
        again = fetched(requests, base)
        for path in (*RUNTIME, "wheels/" + wheel.name):
            assert path not in again, f"{path} was fetched again on the warm visit"
            assert path in warm["cache"]["cached"]
        assert "manifest.json" in again, "the manifest must be revalidated on every visit"

        # Rebuild the site in place with one more document: a new chunk store and manifest.
        docs = copy_site(samples_dir(), tmp_path / "docs")
        (docs / "quokka.md").write_text(EXTRA_DOC, encoding="utf-8")
        bw.build_site([docs], site, wheel=wheel, micropip=micropip, title="warm", demo=True)
        requests.clear()
        rebuilt = visit(page, base, "quokkas Rottnest")
        assert "quokka" in rebuilt["ids"][0].lower(), rebuilt["ids"]
        refetched = fetched(requests, base)
        assert "data/chunks.db" in refetched and "data/chunks.db" in rebuilt["cache"]["fetched"]
        assert "pyodide/pyodide.asm.wasm" not in refetched
        assert "pyodide/pyodide.asm.wasm" in rebuilt["cache"]["cached"]
        context.close()
