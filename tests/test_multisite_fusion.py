"""The element's multisite search fuses sites exactly as Python's MultiIndexRetriever.

``fuseSites`` (web/ragspine-lite.mjs, run by Node) and ``MultiIndexRetriever`` get the same
per-site rankings (repeated chunks, ties across sites, sites of different lengths, empty
sites, chunks without an id) and must give the same hits in the same order with the same
``library_id``, the fused score bit for bit.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from ragspine_lite.routing.multi_index import LibraryIndex, MultiIndexRetriever

MODULE = Path(__file__).resolve().parent.parent / "web" / "ragspine-lite.mjs"
NODE_SCRIPT = """
import { fuseSites } from %(module)s;
let input = "";
for await (const chunk of process.stdin) input += chunk;
const out = JSON.parse(input).map(({ sites, topK }) =>
  fuseSites(sites, { topK }).map((hit) => [hit.library_id, hit.snippet.library_id,
    hit.snippet.chunk_id ?? null, hit.snippet.text, hit.fused]));
process.stdout.write(JSON.stringify(out));
"""


class Fixed:
    """A site's retriever: the ranking it was given (what a site's search returned)."""

    def __init__(self, snippets):
        self.snippets = snippets

    def retrieve(self, query, *, filters=None, top_k=50):
        return [dict(s) for s in self.snippets[:top_k]]


def case(rng: random.Random, n_sites: int) -> dict:
    sites = []
    for s in range(n_sites):
        pool = [f"doc{rng.randrange(6)}.md#c{rng.randrange(5)}" for _ in range(rng.randrange(0, 9))]
        hits = []
        for i, chunk_id in enumerate(pool):
            snippet = {"text": f"site {s} hit {i}", "library_id": "bundle"}
            if rng.random() > 0.1:  # a few snippets have no chunk id
                snippet["chunk_id"] = chunk_id
            hits.append({"snippet": snippet, "url": f"p{i}.html"})
        sites.append({"libraryId": f"https://site{s}.example/_search/", "hits": hits})
    return {"sites": sites, "topK": rng.choice([1, 3, 5, 10, 40])}


def python_fusion(c: dict) -> list[list]:
    libraries = [
        LibraryIndex(site["libraryId"], site["libraryId"],
                     Fixed([h["snippet"] for h in site["hits"]]))
        for site in c["sites"]
    ]
    fused = MultiIndexRetriever(libraries).retrieve("q", top_k=c["topK"])
    return [[s["library_id"], s["library_id"], s.get("chunk_id"), s["text"]] for s in fused]


def test_the_js_fusion_is_pythons_router_fusion():
    node = shutil.which("node")
    if node is None:
        pytest.skip("needs Node")
    rng = random.Random(23)
    cases = [case(rng, n) for n in (1, 2, 2, 3, 3, 4, 5) for _ in range(6)]
    run = subprocess.run(
        [node, "--input-type=module", "-e", NODE_SCRIPT % {"module": json.dumps(MODULE.as_uri())}],
        input=json.dumps(cases), capture_output=True, text=True, check=True, timeout=60,
    )
    got = json.loads(run.stdout)
    compared = 0
    for c, js in zip(cases, got, strict=True):
        want = python_fusion(c)
        assert [row[:4] for row in js] == want
        ranks = {}
        for site in c["sites"]:  # the fused score is 1 / (60 + rank in the site's deduped list)
            seen = []
            for h in site["hits"]:
                key = h["snippet"].get("chunk_id") or f"idx{site['hits'].index(h)}"
                if key not in seen:
                    seen.append(key)
                    ranks[(site["libraryId"], h["snippet"]["text"])] = len(seen)
        for row in js:
            assert row[4] == 1.0 / (60 + ranks[(row[0], row[3])])
        compared += len(js)
    assert compared > 100
    assert any(len({row[0] for row in js}) > 1 for js in got)  # results mix the sites
