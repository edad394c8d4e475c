"""make_reranker: specs, aliases, the env at the edge."""

from __future__ import annotations

import pytest
from _remote_fakes import FakeTransport, reverse_ranker

from ragspine_lite.remote.client import RemoteListwiseJudge, RemoteReranker
from ragspine_lite.rerank import factory
from ragspine_lite.rerank.colbert import ColbertReranker
from ragspine_lite.rerank.cross_encoder import CrossEncoderReranker
from ragspine_lite.rerank.factory import RERANKER_ENV, RERANKERS, make_reranker
from ragspine_lite.rerank.splade import SpladeReranker

URL = "http://127.0.0.1:9"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in (RERANKER_ENV, "RAGSPINE_REMOTE_URL", "RAGSPINE_REMOTE_TOKEN",
                 *(env for _m, _c, env, _a in factory.LOCAL_RERANKERS.values())):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("spec", ["none", "NONE", ""])
def test_off_specs_give_no_reranker(spec):
    assert make_reranker(spec) is None


@pytest.mark.parametrize(
    ("spec", "cls"),
    [("cross_encoder", CrossEncoderReranker), ("CE", CrossEncoderReranker),
     ("ms-marco", CrossEncoderReranker), ("Cross Encoder", CrossEncoderReranker),
     ("colbert", ColbertReranker), ("colbertv2", ColbertReranker),
     ("late-interaction", ColbertReranker), ("splade", SpladeReranker),
     ("SPLADE_PP", SpladeReranker), ("learned sparse", SpladeReranker)],
)
def test_every_local_name_and_alias_builds_its_reranker(spec, cls):
    assert type(make_reranker(spec)) is cls


def test_local_kwargs_reach_the_reranker():
    judge = make_reranker("splade", batch_size=4, threads=1)
    assert (judge.batch_size, judge.threads, judge.model_name) == (4, 1, None)


@pytest.mark.parametrize(
    ("spec", "env"),
    [("ce", "RAGSPINE_CROSS_ENCODER_MODEL"), ("late_interaction", "RAGSPINE_COLBERT_MODEL"),
     ("splade_pp", "RAGSPINE_SPLADE_MODEL")],
)
def test_the_family_model_variable_fills_model_name_unless_passed(monkeypatch, spec, env):
    monkeypatch.setenv(env, "models/mine")
    assert make_reranker(spec).model_name == "models/mine"
    assert make_reranker(spec, model_name="other").model_name == "other"


def test_the_reranker_variable_selects_a_local_reranker(monkeypatch):
    monkeypatch.setenv(RERANKER_ENV, "ColBERT")
    monkeypatch.setenv("RAGSPINE_COLBERT_MODEL", "minilm")
    judge = make_reranker()
    assert type(judge) is ColbertReranker and judge.model_name == "minilm"
    assert make_reranker("none") is None  # an explicit spec beats the variable


def _available(monkeypatch, *, numpy=True, ort=True, minilm=True):
    have = {"numpy": numpy, "onnxruntime": ort}
    monkeypatch.setattr(factory, "_findable", lambda *mods: all(have[m] for m in mods))
    from ragspine_lite.vector import onnx_backend

    monkeypatch.setattr(onnx_backend, "minilm_packages_available", lambda: minilm)


def test_auto_prefers_a_configured_cross_encoder_directory(monkeypatch, tmp_path):
    _available(monkeypatch)
    monkeypatch.setenv("RAGSPINE_CROSS_ENCODER_MODEL", str(tmp_path))
    judge = make_reranker("auto")
    assert type(judge) is CrossEncoderReranker and judge.model_name == str(tmp_path)


def test_auto_without_a_cross_encoder_picks_minilm_late_interaction(monkeypatch, tmp_path):
    _available(monkeypatch)
    monkeypatch.setenv("RAGSPINE_CROSS_ENCODER_MODEL", str(tmp_path / "missing"))
    assert type(make_reranker(" AUTO ")) is ColbertReranker


def test_auto_falls_back_to_the_packaged_splade_tiny_then_to_none(monkeypatch):
    _available(monkeypatch, minilm=False)
    assert type(make_reranker("auto")) is SpladeReranker
    _available(monkeypatch, ort=False)
    assert type(make_reranker("auto")) is SpladeReranker
    _available(monkeypatch, numpy=False)
    assert make_reranker("auto") is None


def test_default_without_env_is_none():
    assert make_reranker() is None


@pytest.mark.parametrize(
    ("spec", "method"),
    [("remote:cross_encoder", "cross_encoder"), ("remote:CE", "cross_encoder"),
     ("remote:colbert", "colbert"), ("Remote:Late-Interaction", "colbert"),
     ("remote:splade", "splade"), ("remote:learned_sparse", "splade")],
)
def test_remote_specs_build_a_remote_reranker(spec, method):
    judge = make_reranker(spec, url=URL, transport=FakeTransport(reverse_ranker))
    assert type(judge) is RemoteReranker and judge.method == method


def test_remote_llm_builds_the_listwise_judge():
    judge = make_reranker("remote:llm", url=URL, transport=FakeTransport(reverse_ranker))
    assert isinstance(judge, RemoteListwiseJudge) and judge.method == "llm"


def test_unknown_specs_list_the_valid_names():
    valid = r"'remote:bm42'.*valid names: auto, ce, colbert, .*none, remote:colbert"
    with pytest.raises(ValueError, match=valid):
        make_reranker("remote:bm42", url=URL)
    with pytest.raises(ValueError, match="unknown reranker 'cohere'"):
        make_reranker("cohere")


def test_explicit_spec_needs_an_explicit_url(monkeypatch):
    monkeypatch.setenv("RAGSPINE_REMOTE_URL", URL)
    with pytest.raises(ValueError, match="needs url="):
        make_reranker("remote:colbert")


def test_env_spec_reads_url_and_token(monkeypatch):
    monkeypatch.setenv(RERANKER_ENV, "remote:splade")
    monkeypatch.setenv("RAGSPINE_REMOTE_URL", URL)
    monkeypatch.setenv("RAGSPINE_REMOTE_TOKEN", "tok")
    t = FakeTransport(reverse_ranker)
    judge = make_reranker(transport=t)
    assert judge.method == "splade" and judge.client.base_url == URL
    judge.judge("q", ["a", "b"])
    assert t.calls[0][2]["Authorization"] == "Bearer tok"


def test_env_spec_keeps_explicit_keyword_arguments(monkeypatch):
    monkeypatch.setenv(RERANKER_ENV, "remote:colbert")
    monkeypatch.setenv("RAGSPINE_REMOTE_URL", "http://elsewhere:1")
    judge = make_reranker(url=URL, transport=FakeTransport(reverse_ranker))
    assert judge.client.base_url == URL


def test_cross_encoder_module_reexports_the_factory():
    from ragspine_lite.rerank import cross_encoder

    assert cross_encoder.make_reranker is make_reranker
    assert cross_encoder.RERANKER_ENV == "RAGSPINE_RERANKER"


def test_registry_holds_the_four_remote_names():
    assert {n for n in RERANKERS.names() if n.startswith(factory.REMOTE_PREFIX)} == {
        "remote:colbert", "remote:cross_encoder", "remote:llm", "remote:splade",
    }
