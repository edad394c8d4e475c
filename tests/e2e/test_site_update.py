"""End to end: a tab opened before the site is rebuilt keeps searching, in Chromium.

The rebuild renames the content-named index files the new document reaches (its term shards,
its fragment, the header), so the tab's first search needing one of them meets a 404: the
worker re-reads the manifest, takes the new index in place (the visitor's own documents stay)
and runs the search again. When the new site needs another runtime, the page says the site was
updated and asks for a reload instead of failing with a 404.
"""

from __future__ import annotations

import json
import shutil

import pytest
from _site import browser_module, load_build_wasm, serving, shared_wheels
from test_demo_page import drop_file, search, wait_ready

from ragspine_lite.cli import samples_dir

pytestmark = browser_module()

NUMBAT = "---\ntitle: Numbat survey\nsensitivity: PUBLIC\n---\nNumbats eat termites at dawn.\n"
MINE = "---\ntitle: My platypus notes\nsensitivity: PUBLIC\n---\nPlatypus burrows by the creek.\n"


@pytest.fixture
def live(tmp_path_factory, tmp_path):
    """(rebuild(), site folder): the samples site, and a rebuild adding a numbat document."""
    bw = load_build_wasm()
    wheel, micropip = shared_wheels(tmp_path_factory)
    docs = shutil.copytree(samples_dir(), tmp_path / "docs")
    site = tmp_path / "site"

    def build() -> None:
        bw.build_site([docs], site, wheel=wheel, micropip=micropip, title="update", demo=True)

    def rebuild() -> None:
        (docs / "numbat.md").write_text(NUMBAT, encoding="utf-8")
        build()

    build()
    return rebuild, site


def _open(browser, url):
    context = browser.new_context()
    page = context.new_page()
    page.goto(url)
    wait_ready(page)
    return context, page


def test_a_tab_opened_before_a_rebuild_searches_the_rebuilt_site(browser, live):
    rebuild, site = live
    with serving(site) as url:
        context, page = _open(browser, url)
        drop_file(page, "mine.md", MINE)
        page.wait_for_function("document.querySelectorAll('#my-docs li').length === 1")
        before = json.loads((site / "manifest.json").read_text("utf-8"))["entry"]["index"]
        rebuild()
        assert json.loads((site / "manifest.json").read_text("utf-8"))["entry"]["index"] != before
        hits = search(page, "numbats termites")
        assert page.inner_text("#error") == ""
        assert hits and hits[0]["docId"] == "numbat.md"
        assert search(page, "platypus creek")[0]["docId"] == "mine.md"  # the visitor's kept
        assert search(page, "Hong Kong revenue")  # and the rest of the new index answers
        context.close()


def test_a_rebuild_needing_another_runtime_asks_for_a_reload(browser, live):
    rebuild, site = live
    with serving(site) as url:
        context, page = _open(browser, url)
        rebuild()
        manifest = json.loads((site / "manifest.json").read_text("utf-8"))
        wheel = manifest["entry"]["wheels"]["ragspine_lite"]
        manifest["files"][wheel]["sha256"] = "0" * 64  # as if the new site shipped a new wheel
        (site / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        page.fill("#q", "numbats termites")
        page.wait_for_function("document.querySelector('#error').textContent.length > 0")
        error = page.inner_text("#error")
        assert "the site was updated — reload the page" in error and "HTTP 404" not in error
        context.close()
