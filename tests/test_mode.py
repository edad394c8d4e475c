"""Tests for ragspine_lite.mode."""

from __future__ import annotations

import dataclasses
import sys
import types

import pytest

from ragspine_lite.mode import (
    ECONOMY,
    HYBRID,
    RETRIEVAL_MODE_ENV,
    RetrievalMode,
    make_retrieval_mode,
    resolve_embedding_backend,
)

BACKENDS_MODULE = "ragspine_lite.vector.embedding_backends"


def test_singletons_have_the_documented_values():
    assert ECONOMY == RetrievalMode("economy", False)
    assert HYBRID == RetrievalMode("hybrid", True)
    assert RETRIEVAL_MODE_ENV == "RAGSPINE_RETRIEVAL_MODE"


def test_retrieval_mode_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ECONOMY.uses_embedding = True  # type: ignore[misc]


@pytest.mark.parametrize("spec", ["economy", "bm25", "lexical", "keyword", " BM25 ", "Economy"])
def test_economy_aliases_return_the_economy_singleton(spec):
    assert make_retrieval_mode(spec) is ECONOMY


@pytest.mark.parametrize("spec", ["none", "auto", "hybrid", "vector", "dense", "HYBRID", " Auto"])
def test_hybrid_aliases_return_the_hybrid_singleton(spec):
    assert make_retrieval_mode(spec) is HYBRID


def test_default_is_auto_which_is_hybrid(monkeypatch):
    monkeypatch.delenv(RETRIEVAL_MODE_ENV, raising=False)
    assert make_retrieval_mode() is HYBRID


def test_env_var_is_read_when_spec_is_none(monkeypatch):
    monkeypatch.setenv(RETRIEVAL_MODE_ENV, "bm25")
    assert make_retrieval_mode() is ECONOMY


def test_explicit_spec_beats_the_env_var(monkeypatch):
    monkeypatch.setenv(RETRIEVAL_MODE_ENV, "economy")
    assert make_retrieval_mode("hybrid") is HYBRID
    monkeypatch.setenv(RETRIEVAL_MODE_ENV, "bogus")
    assert make_retrieval_mode("lexical") is ECONOMY


def test_unknown_mode_names_it_and_lists_valid_names():
    with pytest.raises(ValueError) as exc:
        make_retrieval_mode("turbo")
    message = str(exc.value)
    assert "'turbo'" in message
    aliases = ("economy", "bm25", "lexical", "keyword", "none", "auto", "hybrid", "vector", "dense")
    for name in aliases:
        assert name in message


def test_unknown_mode_from_env_is_rejected(monkeypatch):
    monkeypatch.setenv(RETRIEVAL_MODE_ENV, "semantic-only")
    with pytest.raises(ValueError, match="'semantic-only'"):
        make_retrieval_mode()


def _recording_backends_module(monkeypatch) -> list[str | None]:
    """Replace the embedding-backends module with one whose factory records its calls."""
    calls: list[str | None] = []
    fake = types.ModuleType(BACKENDS_MODULE)

    def make_embedding_backend(spec=None, **kwargs):
        calls.append(spec)
        return ("backend-for", spec)

    fake.make_embedding_backend = make_embedding_backend  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, BACKENDS_MODULE, fake)
    return calls


@pytest.mark.parametrize("spec", [None, "deterministic", "auto", "openai"])
def test_economy_never_calls_make_embedding_backend(monkeypatch, spec):
    calls = _recording_backends_module(monkeypatch)
    assert resolve_embedding_backend(ECONOMY, spec) is None
    assert calls == []


def test_economy_does_not_even_import_the_embedding_module(monkeypatch):
    # A None entry in sys.modules makes any import of the module raise ImportError.
    monkeypatch.setitem(sys.modules, BACKENDS_MODULE, None)
    assert resolve_embedding_backend(ECONOMY) is None
    with pytest.raises(ImportError):
        resolve_embedding_backend(HYBRID)


@pytest.mark.parametrize("spec", [None, "deterministic", "none"])
def test_hybrid_delegates_to_make_embedding_backend_with_the_spec(monkeypatch, spec):
    calls = _recording_backends_module(monkeypatch)
    assert resolve_embedding_backend(HYBRID, spec) == ("backend-for", spec)
    assert calls == [spec]


def test_any_mode_that_uses_embeddings_resolves_a_backend(monkeypatch):
    calls = _recording_backends_module(monkeypatch)
    custom = RetrievalMode("custom", True)
    assert resolve_embedding_backend(custom, "x") == ("backend-for", "x")
    assert calls == ["x"]


def test_economy_never_calls_the_real_factory(monkeypatch):
    import ragspine_lite.vector.embedding_backends as backends

    def boom(spec=None, **kwargs):
        raise AssertionError("make_embedding_backend must not be called in economy mode")

    monkeypatch.setattr(backends, "make_embedding_backend", boom)
    assert resolve_embedding_backend(ECONOMY, "deterministic") is None


def test_hybrid_resolves_a_real_deterministic_backend():
    from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend

    backend = resolve_embedding_backend(HYBRID, "deterministic")
    assert isinstance(backend, DeterministicEmbeddingBackend)
    assert len(backend.embed_texts(["revenue"])[0]) == 256


def test_hybrid_with_backend_spec_none_is_off():
    assert resolve_embedding_backend(HYBRID, "none") is None
