"""End to end: a return visit to a built site starts warm, and a rebuilt site is never stale.

The second visit in the same browser context reads Pyodide's wasm and stdlib, the wheel and the
index header from the Cache API (no network request for them), restores Python from the memory
snapshot the first visit took, and finds the same results. After the site is rebuilt with
another document, the changed files are fetched again and the new document is found while
unchanged files still come from the cache; a rebuilt wheel invalidates the snapshot. Where the
Cache API is missing (an insecure http origin) search works from the network and says why.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

from _site import (
    CHROMIUM,
    CHROMIUM_ARGS,
    browser_module,
    copy_site,
    load_build_wasm,
    serving,
    shared_wheels,
)

from ragspine_lite.cli import samples_dir

pytestmark = browser_module()

BOOT_TIMEOUT_MS = 120_000
QUERY = "Hong Kong new sales"
PYODIDE = ("pyodide/pyodide.asm.wasm", "pyodide/python_stdlib.zip")
EXTRA_DOC = """---
title: Quokka field notes
language: en
sensitivity: PUBLIC
---
# Quokka field notes

Quokkas on Rottnest Island were counted by volunteers in spring.
"""


def visit(page, base: str, query: str) -> dict:
    """Open the demo page with `query`; the first result's doc ids and where files came from
    (once the engine is up: the first result comes from the instant lane before it)."""
    page.goto(f"{base}index.html?q={query.replace(' ', '+')}")
    page.wait_for_function(
        "window.ragspineDemo && ((ragspineDemo.marks.firstResult && ragspineDemo.info)"
        " || document.body.dataset.state === 'error')",
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


def runtime_files(site: Path) -> tuple[str, ...]:
    """What every visit needs: Pyodide's wasm and stdlib and the index header."""
    manifest = json.loads((site / "manifest.json").read_text("utf-8"))
    return (*PYODIDE, manifest["entry"]["index"])


def test_a_second_visit_reads_the_runtime_from_the_cache_and_a_rebuild_is_not_stale(
    browser, tmp_path_factory, tmp_path
):
    bw = load_build_wasm()
    wheel, micropip = shared_wheels(tmp_path_factory)
    site = tmp_path / "site"
    bw.build_site([samples_dir()], site, wheel=wheel, micropip=micropip, title="warm", demo=True)
    runtime = runtime_files(site)
    with serving(site) as base:
        context = browser.new_context()
        requests: list[str] = []
        context.on("request", lambda request: requests.append(request.url))
        page = context.new_page()

        cold = visit(page, base, QUERY)
        assert cold["ids"], "the cold visit found nothing"
        assert set(runtime) <= fetched(requests, base)
        assert cold["cache"]["enabled"] and not cold["cache"]["errors"]
        assert set(runtime) <= set(cold["cache"]["fetched"])
        assert cold["cache"]["snapshot"] == "taken"
        assert not any(p.startswith("wheels/micropip") for p in fetched(requests, base))

        requests.clear()
        warm = visit(page, base, QUERY)
        assert warm["ids"] == cold["ids"]
        again = fetched(requests, base)
        for path in (*runtime, "wheels/" + wheel.name):
            assert path not in again, f"{path} was fetched again on the warm visit"
            assert path in warm["cache"]["cached"]
        assert "manifest.json" in again, "the manifest must be revalidated on every visit"
        assert warm["cache"]["snapshot"] == "restored"

        # Rebuild the site in place with one more document: a new index and manifest.
        docs = copy_site(samples_dir(), tmp_path / "docs")
        (docs / "quokka.md").write_text(EXTRA_DOC, encoding="utf-8")
        bw.build_site([docs], site, wheel=wheel, micropip=micropip, title="warm", demo=True)
        requests.clear()
        rebuilt = visit(page, base, "quokkas Rottnest")
        assert "quokka" in rebuilt["ids"][0].lower(), rebuilt["ids"]
        refetched = fetched(requests, base)
        header = runtime_files(site)[-1]
        assert header != runtime[-1], "the new document did not change the index header"
        assert header in refetched and header in rebuilt["cache"]["fetched"]
        assert "pyodide/pyodide.asm.wasm" not in refetched
        assert "pyodide/pyodide.asm.wasm" in rebuilt["cache"]["cached"]
        # Same Pyodide and wheel: the snapshot (imports only, no index) is still valid.
        assert rebuilt["cache"]["snapshot"] == "restored"

        # A different wheel (one more member): the old snapshot must not be restored.
        other = tmp_path / "other" / wheel.name
        other.parent.mkdir()
        shutil.copy2(wheel, other)
        with zipfile.ZipFile(other, "a") as archive:
            archive.writestr("ragspine_lite/_rebuilt.py", "REBUILT = True\n")
        bw.build_site([docs], site, wheel=other, micropip=micropip, title="warm", demo=True)
        requests.clear()
        rewheeled = visit(page, base, QUERY)
        assert rewheeled["ids"] == cold["ids"]
        assert "wheels/" + wheel.name in fetched(requests, base)
        assert rewheeled["cache"]["snapshot"] == "taken"
        context.close()


def test_without_the_cache_api_search_comes_from_the_network_and_says_why(
    browser_type, site, tmp_path
):
    """An http origin that is not localhost is no secure context: no Cache API, no snapshot."""
    with serving(site) as base:
        port = base.rsplit(":", 1)[1].strip("/")
        browser = browser_type.launch(
            executable_path=CHROMIUM,
            args=[*CHROMIUM_ARGS, "--host-resolver-rules=MAP ragspine.test 127.0.0.1"],
        )
        try:
            page = browser.new_page()
            logs: list[str] = []
            page.on("console", lambda message: logs.append(message.text))
            insecure = f"http://ragspine.test:{port}/"
            first = visit(page, insecure, QUERY)
            second = visit(page, insecure, QUERY)
        finally:
            browser.close()
    assert first["ids"] and second["ids"] == first["ids"]
    for run in (first, second):
        assert not run["cache"]["enabled"] and not run["cache"]["cached"]
        assert run["cache"]["snapshot"] == "none"
        assert set(runtime_files(site)) <= set(run["cache"]["fetched"])
    assert any("no Cache API" in line for line in logs), logs


def test_a_hybrid_site_restored_from_the_snapshot_searches_like_the_cold_visit(
    browser, semantic_url
):
    """The snapshot holds the browser embedding backend's imports; the model still runs."""
    context = browser.new_context()
    page = context.new_page()
    cold = visit(page, semantic_url, QUERY)
    warm = visit(page, semantic_url, QUERY)
    semantic = page.evaluate(
        "async (q) => (await ragspineDemo.rs.searchDetailed(q, { topK: 5 })).semantic", QUERY
    )
    context.close()
    assert cold["cache"]["snapshot"] == "taken" and warm["cache"]["snapshot"] == "restored"
    assert warm["ids"] == cold["ids"]
    assert semantic["channel"] == "hybrid" and semantic["error"] is None, semantic
