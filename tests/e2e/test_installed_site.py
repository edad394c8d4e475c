"""A site from the installed package: the built wheel in a fresh virtualenv (no extra, no
checkout, no npm, installed offline: the core has no dependencies), ``ragspine-lite
build-site`` run from a folder outside the repository, the site searched in Chromium."""

from __future__ import annotations

import json
import subprocess
import zipfile

import pytest
from _site import browser_module, clean_env, fresh_venv, installable_wheel, serving
from test_demo_page import Console

from ragspine_lite.bundle.site_files import PYODIDE_VERSION

pytestmark = [browser_module(), pytest.mark.slow]

SEARCH_JS = """async (q) => {
  const { RagSpineLite } = await import('./ragspine-lite.mjs');
  const rs = await RagSpineLite.open({ bundle: './' });
  try {
    const found = await rs.searchDetailed(q);
    return found.hits.map((h) => new URL(h.url, location.href).href);
  } finally {
    rs.close();
  }
}"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    wheel = installable_wheel(tmp_path_factory)
    home = tmp_path_factory.mktemp("installed")
    return fresh_venv(home / "venv", str(wheel), offline=True), home


def _run(bin_dir, home, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(bin_dir / "ragspine-lite"), *args], capture_output=True,
                          text=True, cwd=home, env=clean_env(), check=False, timeout=600)


def test_build_site_runs_from_the_installed_wheel_and_the_site_answers(installed, browser):
    bin_dir, home = installed
    helped = _run(bin_dir, home, "build-site", "--help")
    assert helped.returncode == 0 and "--embeddings" in helped.stdout, helped.stderr
    public = home / "public"
    public.mkdir()
    (public / "quokka.md").write_text(
        "# Quokkas\n\nQuokkas live on Rottnest Island and are famous for smiling.\n", "utf-8")
    (public / "tides.md").write_text("# Tides\n\nThe tide tables list high water.\n", "utf-8")
    built = _run(bin_dir, home, "build-site", "public", "--quiet")
    assert built.returncode == 0, built.stderr
    site = public / "_search"
    manifest = json.loads((site / "manifest.json").read_text("utf-8"))
    assert manifest["runtimes"]["pyodide"] == PYODIDE_VERSION
    assert manifest["counts"]["documents"] == 2
    with zipfile.ZipFile(site / manifest["entry"]["wheels"]["ragspine_lite"]) as archive:
        names = archive.namelist()
    assert "ragspine_lite/bundle/runtime.py" in names
    assert not [n for n in names if "site_runtime" in n or "/samples/" in n]

    with serving(public) as url:
        page = browser.new_page()
        console = Console(page)
        page.route("**/favicon.ico", lambda route: route.fulfill(status=204, body=""))
        page.goto(url + "_search/manifest.json")
        links = page.evaluate(SEARCH_JS, "smiling quokka")
        assert links and links[0].startswith(url + "_search/pages/quokka.html")
        assert page.request.get(links[0]).status == 200
        page.close()
    assert console.messages == []
