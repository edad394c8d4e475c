"""Playwright fixtures: Debian's Chromium with the flags that keep it off the network."""

from __future__ import annotations

from pathlib import Path

import pytest
from _site import CHROMIUM, CHROMIUM_ARGS, demo_site, semantic_site, serving

E2E = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    """Every end-to-end test is in the slow lane (``scripts/test.sh --quick`` skips them)."""
    for item in items:
        if E2E in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright's launch arguments, pointed at the system Chromium."""
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture
def watched_page(browser):
    """A page in a context of its own; an uncaught error or a console error fails the test."""
    context = browser.new_context()
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda err: page.errors.append(f"pageerror: {err}"))
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    yield page
    context.close()
    assert page.errors == []


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The demo site built from the samples (BM25 only), built once a session."""
    return demo_site(tmp_path_factory)


@pytest.fixture(scope="module")
def base_url(site):
    with serving(site) as url:
        yield url


@pytest.fixture(scope="module")
def semantic(tmp_path_factory):
    """The samples site built with ``--embeddings minilm``, once a session."""
    return semantic_site(tmp_path_factory)


@pytest.fixture(scope="module")
def semantic_url(semantic):
    with serving(semantic) as url:
        yield url


@pytest.fixture(scope="module")
def use_site(tmp_path_factory):
    """The samples site built with ``--embeddings use-multilingual``, once a session."""
    return semantic_site(tmp_path_factory, "use-multilingual")


@pytest.fixture(scope="module")
def use_url(use_site):
    with serving(use_site) as url:
        yield url
