"""The local rerankers (cross-encoder, late interaction, SPLADE): lazy loading, scoring equal
to the endpoint's (one implementation), the ListwiseJudge contract, the real offline models."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from ragspine_lite.rerank.colbert import ColbertReranker
from ragspine_lite.rerank.cross_encoder import CrossEncoderReranker
from ragspine_lite.rerank.listwise_rerank import listwise_rerank
from ragspine_lite.rerank.splade import SpladeReranker

QUERY = "hong kong revenue growth"
DOCS = [  # words of the tiny models' vocabulary (tests/_remote_models.py)
    "the apple pie recipe with apple",
    "hong kong revenue grew strongly in 2024.",
    "profit fell in china",
    "bank sales rose in the city",
]
CANARY = "secret merger board minutes deal"
CLASSES = (CrossEncoderReranker, ColbertReranker, SpladeReranker)


def item(text: str, sens: str = "INTERNAL") -> SimpleNamespace:
    return SimpleNamespace(chunk=SimpleNamespace(text=text, sensitivity=sens))


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"batch_size": True}, {"threads": 0}])
def test_constructor_validates_batch_size_and_threads(cls, kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        cls(**kwargs)


@pytest.mark.parametrize("cls", CLASSES)
def test_nothing_is_imported_until_the_first_real_judge(cls, monkeypatch):
    monkeypatch.setitem(sys.modules, "numpy", None)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    reranker = cls("no-such-model-dir") if cls is CrossEncoderReranker else cls()
    assert reranker.judge("q", []) == []
    with pytest.raises((ImportError, FileNotFoundError)) as info:
        reranker.judge("q", ["a", "b"])
    if isinstance(info.value, ImportError):
        assert "ragspine-lite[rerank]" in str(info.value)


def test_a_model_that_is_not_a_directory_says_nothing_is_downloaded(tmp_path):
    reranker = CrossEncoderReranker()  # the default names a hub checkpoint: not on disk
    with pytest.raises(FileNotFoundError, match="never downloaded"):
        reranker.judge("q", ["a"])
    assert "Xenova/ms-marco-MiniLM-L-6-v2" in reranker.last_error
    with pytest.raises(FileNotFoundError):  # the failure is kept: no second load attempt
        reranker.judge("q", ["a"])
    out = listwise_rerank("q", [item("a"), item("b")], reranker)  # degrades, never raises
    assert [r.chunk.text for r in out] == ["a", "b"]


# ---------------------------------------------------------------- tiny models (numpy + onnx)

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("numpy")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from _remote_models import tiny_models

    folder = tmp_path_factory.mktemp("tiny-rerank")
    return folder, tiny_models(folder)


def _local(folder, family: str, **kwargs):
    if family == "cross_encoder":
        return CrossEncoderReranker(folder / "ce", **kwargs)
    if family == "colbert":
        return ColbertReranker(folder / "li", **kwargs)
    return SpladeReranker(folder / "splade", **kwargs)


@pytest.mark.cpython_only
@pytest.mark.parametrize("family", ["cross_encoder", "colbert", "splade"])
def test_local_ranking_is_the_endpoint_models_score_order(tiny, family):
    folder, models = tiny
    scores = models[family].score(QUERY, DOCS)
    want = sorted(range(len(DOCS)), key=lambda i: (-scores[i], i))
    assert _local(folder, family, batch_size=3).judge(QUERY, DOCS) == want
    assert len(set(want)) == len(DOCS)


@pytest.mark.cpython_only
@pytest.mark.parametrize("family", ["cross_encoder", "colbert", "splade"])
def test_local_and_remote_rerankers_agree(tiny, family):
    pytest.importorskip("starlette")
    from _remote_server import EndpointServer

    from ragspine_lite.remote.client import RemoteReranker
    from ragspine_lite.remote.server.app import build_models, create_app
    from ragspine_lite.remote.server.config import ServerConfig

    folder, models = tiny
    config = ServerConfig(port=0)
    with EndpointServer(create_app(config, models=build_models(config, **models))) as server:
        remote = RemoteReranker(server.url, family).judge(QUERY, DOCS)
    assert _local(folder, family).judge(QUERY, DOCS) == remote


@pytest.mark.cpython_only
def test_cache_dir_resolves_a_relative_model_name(tiny):
    folder, _models = tiny
    reranker = CrossEncoderReranker("ce", cache_dir=folder)
    assert sorted(reranker.judge(QUERY, DOCS)) == [0, 1, 2, 3]


class _Spy:
    def __init__(self, model):
        self.model = model
        self.seen: list[str] = []

    def score(self, query, docs):
        self.seen.extend([query, *docs])
        return self.model.score(query, docs)


@pytest.mark.cpython_only
@pytest.mark.parametrize("family", ["cross_encoder", "colbert", "splade"])
@pytest.mark.parametrize("label", ["RESTRICTED", "restricted", "Restricted"])
def test_restricted_is_never_scored_and_keeps_its_rrf_position(tiny, family, label):
    folder, _models = tiny
    reranker = _local(folder, family)
    spy = _Spy(reranker.model)
    reranker._model = spy
    results = [item(DOCS[0]), item(CANARY, label), item(DOCS[1]), item(DOCS[2])]
    out = listwise_rerank(QUERY, results, reranker, top_n=4)
    assert out[1] is results[1]
    assert sorted(map(id, out)) == sorted(map(id, results))  # a permutation
    assert spy.seen and not any(word in text for text in spy.seen for word in CANARY.split())


# ---------------------------------------------------------------- the real offline models


@pytest.mark.cpython_only
def test_real_minilm_late_interaction_reranks_the_answer_first():
    pytest.importorskip("onnxruntime")
    from ragspine_lite.vector.onnx_backend import minilm_packages_available

    if not minilm_packages_available():
        pytest.skip("the MiniLM model packages are not installed")
    docs = ["Apple pie needs apples and butter.", "Hong Kong revenue grew 12% in 2024.",
            "The board met on Tuesday."]
    assert ColbertReranker().judge("how much did hong kong revenue grow", docs)[0] == 1


@pytest.mark.cpython_only
def test_real_splade_tiny_reranks_the_answer_first():
    pytest.importorskip("numpy")
    docs = ["Apple pie needs apples and butter.", "Hong Kong revenue grew 12% in 2024.",
            "The board met on Tuesday."]
    assert SpladeReranker().judge("hong kong revenue growth", docs)[0] == 1
