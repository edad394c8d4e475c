"""The design note's wiring examples, as README shows them, run as written."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from ragspine_lite import cli
from ragspine_lite.common.sensitivity import is_restricted

pytestmark = pytest.mark.cpython_only  # the Pyodide lane mounts the tests, not README.md

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "### Wiring, as the design note writes it"


def wiring_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_section_holds_the_design_notes_three_examples():
    blocks = wiring_blocks()
    assert len(blocks) == 3
    assert 'build_narrative_retriever("data/chunks.db")' in blocks[0]
    assert 'reranker=make_reranker("cross_encoder")' in blocks[1]
    assert 'make_embedding_backend("onnx")' in blocks[2]


@pytest.fixture
def data_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGSPINE_EMBEDDING_BACKEND", "none")
    (tmp_path / "data").mkdir()
    assert cli.main(["ingest", str(cli.samples_dir()), "--db", "data/chunks.db"]) == 0
    capsys.readouterr()
    return tmp_path


def test_default_wiring_runs_and_returns_restricted_free_snippets(data_dir):
    scope: dict = {}
    exec(wiring_blocks()[0], scope)
    snippets = scope["snippets"]
    assert snippets and all(s["entity"] == "ACME_CN" for s in snippets)
    assert not any(is_restricted(s["sensitivity"]) for s in snippets)
    assert {"text", "doc_id", "source_locator", "scores"} <= set(snippets[0])


def test_reranker_and_postprocessor_wiring_runs(data_dir):
    scope: dict = {}
    exec(wiring_blocks()[1], scope)
    retriever, store = scope["retriever"], scope["store"]
    try:
        assert type(retriever.index.judge).__name__ == "CrossEncoderReranker"
        snippets = retriever.retrieve("operating profit", top_k=5)  # no model: RRF order
        assert snippets and not any(is_restricted(s["sensitivity"]) for s in snippets)
    finally:
        store.close()


@pytest.mark.cpython_only
def test_onnx_backend_wiring_runs():
    if importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("the [embed-onnx] extra is not installed")
    scope: dict = {}
    exec(wiring_blocks()[2], scope)
    assert len(scope["backend"].embed_texts(["revenue grew"])[0]) == 384
