"""make_reranker: specs, aliases, the env at the edge."""

from __future__ import annotations

import pytest
from _remote_fakes import FakeTransport, reverse_ranker

from ragspine_lite.remote.client import RemoteListwiseJudge, RemoteReranker
from ragspine_lite.rerank import factory
from ragspine_lite.rerank.factory import RERANKER_ENV, RERANKERS, make_reranker

URL = "http://127.0.0.1:9"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in (RERANKER_ENV, "RAGSPINE_REMOTE_URL", "RAGSPINE_REMOTE_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("spec", ["none", "NONE", " auto ", ""])
def test_off_specs_give_no_reranker(spec):
    assert make_reranker(spec) is None


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
    with pytest.raises(ValueError, match=r"'remote:bm42'.*valid names: auto, none, remote:colbert"):
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


def test_registry_holds_the_four_remote_names():
    assert {n for n in RERANKERS.names() if n.startswith(factory.REMOTE_PREFIX)} == {
        "remote:colbert", "remote:cross_encoder", "remote:llm", "remote:splade",
    }
