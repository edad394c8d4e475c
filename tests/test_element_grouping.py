"""The element lists hits by page, each section once (web/ragspine-ui.mjs, run by Node)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

MODULE = Path(__file__).resolve().parent.parent / "web" / "ragspine-ui.mjs"
SCRIPT = """
import { groupByPage } from %(module)s;
let input = "";
for await (const chunk of process.stdin) input += chunk;
const groups = groupByPage(JSON.parse(input));
process.stdout.write(JSON.stringify(groups.map((g) => g.map((h) => h.snippet.chunk_id))));
"""


def hit(chunk_id, url, *, library="bundle", heading=None):
    section = {"heading": heading, "anchor": ""} if heading else None
    return {"url": url, "library_id": library, "section": section,
            "snippet": {"chunk_id": chunk_id, "doc_id": chunk_id.split("#")[0]}}


def test_pages_keep_their_best_hit_first_and_each_section_once():
    node = shutil.which("node")
    if node is None:
        pytest.skip("needs Node")
    hits = [
        hit("a#c3", "a.html#scope"), hit("b#c0", "b.html"), hit("a#c2", "a.html#scope"),
        hit("a#c0", "a.html#intro"), hit("a#c4", "a.html#scope"), hit("b#c1", "b.html#x"),
        hit("p#c0", None, library="page", heading="Notes"), hit("p#c1", None, library="page",
                                                              heading="Notes"),
        hit("p#c2", None, library="page", heading="Other"),
        hit("a#c9", "a.html#scope", library="other-site"),  # another site: its own page
    ]
    run = subprocess.run(
        [node, "--input-type=module", "-e", SCRIPT % {"module": json.dumps(MODULE.as_uri())}],
        input=json.dumps(hits), capture_output=True, text=True, check=True, timeout=60,
    )
    assert json.loads(run.stdout) == [
        ["a#c3", "a#c0"], ["b#c0", "b#c1"], ["p#c0", "p#c2"], ["a#c9"],
    ]
