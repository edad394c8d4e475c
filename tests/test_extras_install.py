"""One pip per capability: the built wheel, each extra installed by ONE ``pip install
'ragspine-lite[X]'`` into a fresh virtualenv, outside the checkout, then really used.

Slow (each venv installs its extra's dependencies, from pip's cache when it has them).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _remote_server import free_port, wait_healthy
from _site import clean_env, fresh_venv, installable_wheel

pytestmark = [pytest.mark.cpython_only, pytest.mark.slow]

EMBED = """
from ragspine_lite.vector.embedding_backends import make_embedding_backend
backend = make_embedding_backend("auto")
assert backend is not None, "auto is not hybrid"
(vector,) = backend.embed_texts(["Operating profit fell in 2024."])
print(json.dumps({"model": backend.model_id, "dim": len(vector),
                  "norm": round(sum(x * x for x in vector), 4)}))
"""
RERANK = """
from ragspine_lite.rerank.factory import make_reranker
judge = make_reranker("colbert")
order = judge.judge("Hong Kong revenue growth", [
    "The cat sleeps on the warm windowsill all afternoon.",
    "Revenue in Hong Kong grew 12 percent, driven by new sales.",
])
sparse = make_reranker("splade").judge("Hong Kong revenue growth", [
    "The cat sleeps on the warm windowsill all afternoon.",
    "Revenue in Hong Kong grew 12 percent, driven by new sales.",
])
print(json.dumps({"order": order, "splade": sparse,
                  "auto": type(make_reranker("auto")).__name__}))
"""
NAMED_EMBED = """
from ragspine_lite.vector.embedding_backends import make_embedding_backend
backend = make_embedding_backend(sys.argv[1])
texts = ["Operating profit fell in 2024.", "营业利润在2024年下降。", "The cat sleeps."]
a, b, c = backend.embed_texts(texts)
dot = lambda u, v: sum(x * y for x, y in zip(u, v))
print(json.dumps({"dim": len(a), "norm": round(dot(a, a), 3),
                  "cross_lingual_closer": dot(a, b) > dot(a, c)}))
"""
VECTOR = """
from ragspine_lite.vector import VectorRecord, make_vector_store
out = {}
for name in ("sqlite_vec", "qdrant"):
    store = make_vector_store(name)
    store.upsert([VectorRecord("a", (1.0, 0.0), {"doc_id": "d1"}),
                  VectorRecord("b", (0.6, 0.8), {"doc_id": "d2"})])
    out[name] = [h.id for h in store.query([1.0, 0.2], k=2)]
    store.close()
print(json.dumps(out))
"""
GRAPH = """
from ragspine_lite.graph.reads import GraphEdge, GraphNode
from ragspine_lite.graph.store import make_graph_store
store = make_graph_store("networkx")
store.upsert_nodes([GraphNode("acme", "company"), GraphNode("hk", "unit")])
store.upsert_edges([GraphEdge("acme", "hk", "owns")])
print(json.dumps({"store": type(store).__name__,
                  "owns": [n.id for n in store.neighbors("acme", edge_type="owns")]}))
"""
REMOTE = """
from ragspine_lite.vector.embedding_backends import make_embedding_backend
from ragspine_lite.rerank.factory import make_reranker
url, token = sys.argv[1], sys.argv[2]
(vector,) = make_embedding_backend("remote", url=url, token=token).embed_texts(["revenue"])
judge = make_reranker("remote:colbert", url=url, token=token)
order = judge.judge("Hong Kong revenue growth", [
    "The cat sleeps on the warm windowsill all afternoon.",
    "Revenue in Hong Kong grew 12 percent, driven by new sales.",
])
print(json.dumps({"dim": len(vector), "order": order}))
"""


def _python(bin_dir: Path, script: str, *args: str, cwd: Path) -> dict:
    proc = subprocess.run(
        [str(bin_dir / "python"), "-I", "-c", f"import json, sys\n{script}", *args],
        capture_output=True, text=True, cwd=cwd, env=clean_env(), check=False, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _venv(tmp_path_factory, extra: str) -> tuple[Path, Path]:
    wheel = installable_wheel(tmp_path_factory)
    home = tmp_path_factory.mktemp(f"venv-{extra}")
    return fresh_venv(home / "venv", f"{wheel}[{extra}]"), home


def test_embed_onnx_makes_auto_hybrid_and_builds_a_minilm_site(tmp_path_factory):
    bin_dir, home = _venv(tmp_path_factory, "embed-onnx")
    got = _python(bin_dir, EMBED, cwd=home)
    assert got == {"model": got["model"], "dim": 384, "norm": 1.0}
    assert got["model"].startswith("sentence-transformers/all-MiniLM-L6-v2")
    docs = home / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Profit\n\nOperating profit fell in 2024.\n", "utf-8")
    proc = subprocess.run([str(bin_dir / "ragspine-lite"), "build-site", "docs", "--quiet",
                           "--embeddings", "minilm"], capture_output=True, text=True,
                          cwd=home, env=clean_env(), check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    manifest = json.loads((docs / "_search" / "manifest.json").read_text("utf-8"))
    assert manifest["entry"]["embeddings"]["dim"] == 384 and manifest["counts"]["vectors"] == 1
    assert (docs / "_search" / "ort" / "ort-wasm-simd-threaded.wasm").is_file()
    assert (docs / "_search" / "models" / "minilm" / "NOTICE").is_file()


def test_rerank_makes_colbert_work(tmp_path_factory):
    bin_dir, home = _venv(tmp_path_factory, "rerank")
    assert _python(bin_dir, RERANK, cwd=home) == {
        "order": [1, 0], "splade": [1, 0], "auto": "ColbertReranker"}


@pytest.mark.parametrize(("extra", "backend", "dim"),
                         [("embed-use", "use-multilingual", 512), ("embed-e5", "e5", 384)])
def test_a_multilingual_embedding_extra_embeds_across_languages(tmp_path_factory, extra,
                                                                 backend, dim):
    bin_dir, home = _venv(tmp_path_factory, extra)
    got = _python(bin_dir, NAMED_EMBED, backend, cwd=home)
    assert got == {"dim": dim, "norm": 1.0, "cross_lingual_closer": True}


def test_vector_makes_sqlite_vec_and_qdrant_work(tmp_path_factory):
    bin_dir, home = _venv(tmp_path_factory, "vector")
    assert _python(bin_dir, VECTOR, cwd=home) == {"sqlite_vec": ["a", "b"], "qdrant": ["a", "b"]}


def test_graph_makes_the_networkx_store_work(tmp_path_factory):
    bin_dir, home = _venv(tmp_path_factory, "graph")
    assert _python(bin_dir, GRAPH, cwd=home) == {"store": "NetworkxGraphStore", "owns": ["hk"]}


def test_server_serves_embeddings_and_colbert(tmp_path_factory):
    bin_dir, home = _venv(tmp_path_factory, "server")
    port, token = free_port(), "extras-test-token"
    url = f"http://127.0.0.1:{port}"
    log = home / "serve-remote.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(bin_dir / "ragspine-lite"), "serve-remote", "--port", str(port), "--token",
             token, "--log-level", "warning"],
            stdout=out, stderr=subprocess.STDOUT, cwd=home, env=clean_env(),
        )
    try:
        assert wait_healthy(url, proc, timeout=120), f"serve-remote exit {proc.poll()}"
        assert _python(bin_dir, REMOTE, url, token, cwd=home) == {"dim": 384, "order": [1, 0]}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "Traceback" not in log.read_text("utf-8", "replace")
