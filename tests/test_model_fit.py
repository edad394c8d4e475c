"""Honest hybrid builds: a model that does not cover the site's language is reported, with
its cost to visitors and what to build instead (CPython: the real MiniLM backend)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _site import load_build_wasm, require_toolchain, shared_wheels

from ragspine_lite import cli
from ragspine_lite.bundle.export import load_corpus
from ragspine_lite.bundle.model_fit import model_fit_warning, visitor_megabytes

pytestmark = pytest.mark.cpython_only

ZH = {
    "a.md": "# 营运利润\n\n中国内地业务的营运利润在二零二四年下降，主要由于投资回报减少。",
    "b.md": "# 新造业务\n\n香港的新造业务价值增长强劲，来自内地访客的需求持续上升。",
    "c.md": "# 资本回报\n\n集团的股本回报率维持稳定，董事会建议派发末期股息。",
}
EN = {"a.md": "# Profit\n\nOperating profit fell in 2024 because investment returns dropped."}


def _docs(folder: Path, files: dict[str, str], language: str) -> Path:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(f"---\nlanguage: {language}\n---\n{text}\n", "utf-8")
    return folder


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("onnxruntime")
    from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend, minilm_packages_available

    if not minilm_packages_available():
        pytest.skip("the MiniLM model package is not installed")
    return OnnxEmbeddingBackend()


def test_minilm_on_chinese_documents_is_flagged_with_its_cost(minilm, tmp_path):
    corpus = load_corpus([_docs(tmp_path / "zh", ZH, "zh")])
    cost = [minilm.files.model_path, minilm.files.vocab_path]
    warning = model_fit_warning("minilm", minilm, corpus, cost)
    assert warning is not None
    assert "3 of 3 document(s) (zh: 3)" in warning
    assert f"{visitor_megabytes(cost):.1f} MB" in warning and visitor_megabytes(cost) > 20
    assert "without --embeddings (BM25" in warning and "use-multilingual" in warning
    english = load_corpus([_docs(tmp_path / "en", EN, "en")])
    assert model_fit_warning("minilm", minilm, english, cost) is None
    # One Chinese page among six English ones (< 20 %) is not worth a warning.
    six = {f"e{i}.md": EN["a.md"] for i in range(6)}
    mixed = load_corpus([tmp_path / "zh" / "a.md", _docs(tmp_path / "six", six, "en")])
    assert model_fit_warning("minilm", minilm, mixed, cost) is None


@pytest.mark.slow  # the slow lane: scripts/test.sh --quick skips it
def test_a_hybrid_build_of_a_chinese_site_warns_before_embedding(minilm, tmp_path_factory,
                                                                 capsys):
    bw = load_build_wasm()
    require_toolchain(bw)
    if not (bw.ORT_DIR / bw.ORT_MODULE).is_file():
        pytest.skip("onnxruntime-web is missing (run npm ci)")
    wheel, micropip = shared_wheels(tmp_path_factory)
    docs = _docs(tmp_path_factory.mktemp("fit") / "docs", ZH, "zh")
    out = docs.parent / "site"
    code = cli.main(["build-site", str(docs), "--out", str(out), "--embeddings", "minilm",
                     "--quiet", "--wheel", str(wheel), "--micropip", str(micropip)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert err.startswith("build: warning: --embeddings minilm does not cover this site's "
                          "language: 3 of 3 document(s) (zh: 3)"), err
    events: list[str] = []
    manifest = bw.build_site(
        [docs], out, embeddings="minilm", wheel=wheel, micropip=micropip,
        warn=lambda m: events.append("warn"),
        progress=lambda done, total, item: events.append(item.split(" ")[0]),
    )
    assert events.index("warn") < events.index("embedding")  # said before the cost is paid
    assert manifest["warnings"] and "MB to every cold visit" in manifest["warnings"][0]
