"""The worker's runtime cache is written once the worker is idle, not while searches run.

A Cache API write competes with the fetches of the request under way (a cold hybrid question
at 100k chunks spent about 24 ms more with writes as files arrived, docs/hybrid.md). Runs
``web/ragspine-files.mjs``'s ``BundleFiles`` under Node with a counting cache
(``tests/_files_node.mjs``); the return visit served from the real Cache API is
``tests/e2e/test_lazy_bundle.py``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpython_only

REPO = Path(__file__).resolve().parents[1]
DRIVER = REPO / "tests" / "_files_node.mjs"
NODE = shutil.which("node")


def _fetch_in_a_row(gap_ms: int, count: int, report_every: int) -> dict:
    if NODE is None:
        pytest.fail("node is not installed: .ci/run installs it (see README)")
    args = [NODE, str(DRIVER), str(gap_ms), str(count), str(report_every)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def test_requests_in_a_row_are_not_slowed_by_cache_writes_which_follow_them() -> None:
    """Three fetches a request, requests 60 ms apart (a caller searching on, a visitor typing):
    nothing is written until they stop, then everything is."""
    found = _fetch_in_a_row(gap_ms=20, count=12, report_every=3)
    assert found["during"] == 0, found
    assert found["after"] == found["expected"] and found["files"] == 12


def test_files_fetched_outside_a_request_are_cached_once_fetching_pauses() -> None:
    found = _fetch_in_a_row(gap_ms=20, count=6, report_every=0)
    assert found["during"] == 0, found
    assert found["after"] == found["expected"] and found["files"] == 6
