"""Tests for the embedding seam: the deterministic backend and ``make_embedding_backend``."""

from __future__ import annotations

import hashlib
import importlib.util
import math

import pytest

from ragspine_lite.lexical.tokenizer import tokenize
from ragspine_lite.vector import embedding_backends as eb
from ragspine_lite.vector.embedding_backends import (
    DEFAULT_DETERMINISTIC_DIM,
    DEFAULT_EMBEDDING_BATCH_SIZE,
    DEFAULT_ONNX_EMBEDDING_MODEL,
    DEFAULT_OPENAI_EMBEDDING_MODEL,
    DEFAULT_ST_EMBEDDING_MODEL,
    EMBEDDING_BACKEND_ENV,
    EMBEDDING_BACKENDS,
    DeterministicEmbeddingBackend,
    EmbeddingBackend,
    make_embedding_backend,
)

TEXTS = [
    "ACME Hong Kong revenue grew 12% in 2024.",
    "香港业务新签金额增长",
    "MPFA新规 affects ACME集团",
    "",
    "   \n\t ",
    "revenue revenue revenue",
]


def dot(a: list[float], b: list[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def reference_bucket(token: str, dim: int) -> int:
    """The pinned formula, written out independently of the module."""
    h = hashlib.blake2b(token.encode("utf-8"), digest_size=8)
    return int.from_bytes(h.digest(), byteorder="big") % dim


# --- constants --------------------------------------------------------------------------


def test_constants_match_the_contract():
    assert DEFAULT_OPENAI_EMBEDDING_MODEL == "text-embedding-3-large"
    assert DEFAULT_ST_EMBEDDING_MODEL == "Qwen/Qwen3-Embedding-0.6B"
    assert DEFAULT_ONNX_EMBEDDING_MODEL == (
        "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2"
    )
    assert DEFAULT_EMBEDDING_BATCH_SIZE == 64
    assert DEFAULT_DETERMINISTIC_DIM == 256
    assert EMBEDDING_BACKEND_ENV == "RAGSPINE_EMBEDDING_BACKEND"
    assert eb.EMBEDDING_MODEL_ENV == "RAGSPINE_EMBEDDING_MODEL"
    assert eb.ONNX_EMBEDDING_MODEL_ENV == "RAGSPINE_ONNX_EMBEDDING_MODEL"
    assert eb.EMBEDDING_DEVICE_ENV == "RAGSPINE_EMBEDDING_DEVICE"


# --- DeterministicEmbeddingBackend ------------------------------------------------------


def test_default_dim_is_256():
    backend = DeterministicEmbeddingBackend()
    assert backend.dim == 256
    assert all(len(v) == 256 for v in backend.embed_texts(TEXTS))


def test_is_an_embedding_backend():
    assert isinstance(DeterministicEmbeddingBackend(), EmbeddingBackend)


def test_stable_across_instances():
    a = DeterministicEmbeddingBackend().embed_texts(TEXTS)
    b = DeterministicEmbeddingBackend().embed_texts(TEXTS)
    assert a == b


def test_vectors_have_unit_norm():
    for v in DeterministicEmbeddingBackend().embed_texts([t for t in TEXTS if t.strip()]):
        assert math.sqrt(sum(x * x for x in v)) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("text", ["", "   ", "\n\t", "!!! ，。 ---"])
def test_blank_or_token_less_text_is_the_zero_vector(text):
    (v,) = DeterministicEmbeddingBackend(dim=32).embed_texts([text])
    assert v == [0.0] * 32


def test_empty_batch_gives_empty_list():
    assert DeterministicEmbeddingBackend().embed_texts([]) == []


def test_batch_equals_one_by_one():
    backend = DeterministicEmbeddingBackend(dim=64)
    batch = backend.embed_texts(TEXTS)
    assert batch == [backend.embed_texts([t])[0] for t in TEXTS]


def test_identical_texts_have_cosine_one():
    a, b = DeterministicEmbeddingBackend().embed_texts(["营收 revenue ACME", "营收 revenue ACME"])
    assert dot(a, b) == pytest.approx(1.0)


def test_unrelated_texts_are_less_similar_than_identical_ones():
    a, b = DeterministicEmbeddingBackend().embed_texts(["revenue growth", "earthquake risk"])
    assert dot(a, b) < 0.5


@pytest.mark.parametrize("dim", [0, -3, 2.5, True, "8"])
def test_invalid_dim_is_rejected(dim):
    with pytest.raises(ValueError, match="dim"):
        DeterministicEmbeddingBackend(dim=dim)  # type: ignore[arg-type]


def test_bucket_follows_the_pinned_blake2b_formula():
    dim = 256
    (v,) = DeterministicEmbeddingBackend(dim=dim).embed_texts(["revenue"])
    assert v.index(1.0) == reference_bucket("revenue", dim)
    assert sum(1 for x in v if x) == 1


def test_whole_vector_matches_independent_reference():
    text = "ACME香港 revenue, revenue; 新签金额 2024"
    dim = 97
    counts = [0.0] * dim
    for token in tokenize(text):
        counts[reference_bucket(token, dim)] += 1.0
    norm = math.sqrt(sum(c * c for c in counts))
    expected = [c / norm for c in counts]
    (v,) = DeterministicEmbeddingBackend(dim=dim).embed_texts([text])
    assert v == expected


def test_repeated_tokens_add_one_per_occurrence():
    (v,) = DeterministicEmbeddingBackend(dim=1).embed_texts(["a b c"])
    assert v == [1.0]  # 3 occurrences in the single bucket, then normalised
    dim = 1024
    a, b = reference_bucket("alpha", dim), reference_bucket("beta", dim)
    assert a != b
    (w,) = DeterministicEmbeddingBackend(dim=dim).embed_texts(["alpha alpha beta"])
    assert w[a] == pytest.approx(2 / math.sqrt(5))
    assert w[b] == pytest.approx(1 / math.sqrt(5))


# --- make_embedding_backend -------------------------------------------------------------


@pytest.mark.parametrize("spec", ["deterministic", " Deterministic ", "DETERMINISTIC"])
def test_deterministic_spec(spec):
    assert isinstance(make_embedding_backend(spec), DeterministicEmbeddingBackend)


def test_kwargs_reach_the_backend():
    backend = make_embedding_backend("deterministic", dim=16)
    assert isinstance(backend, DeterministicEmbeddingBackend)
    assert backend.dim == 16


@pytest.mark.parametrize("spec", ["none", " NONE ", "None"])
def test_none_spec_turns_the_seam_off(spec):
    assert make_embedding_backend(spec) is None


def test_default_without_env_is_none(monkeypatch):
    monkeypatch.delenv(EMBEDDING_BACKEND_ENV, raising=False)
    assert make_embedding_backend() is None


def test_env_is_read_when_spec_is_none_and_explicit_spec_wins(monkeypatch):
    monkeypatch.setenv(EMBEDDING_BACKEND_ENV, "deterministic")
    assert isinstance(make_embedding_backend(), DeterministicEmbeddingBackend)
    assert make_embedding_backend("none") is None
    monkeypatch.setenv(EMBEDDING_BACKEND_ENV, "none")
    assert isinstance(make_embedding_backend("deterministic"), DeterministicEmbeddingBackend)


def test_unknown_spec_names_it_and_lists_valid_names():
    with pytest.raises(ValueError) as info:
        make_embedding_backend("qwen9000")
    msg = str(info.value)
    assert "'qwen9000'" in msg
    for name in ("deterministic", "auto", "none"):
        assert name in msg


def test_registry_knows_deterministic():
    assert "deterministic" in EMBEDDING_BACKENDS.names()


class FakeOnnxBackend:
    def __init__(self, **kwargs: object) -> None:
        self.kwargs = kwargs

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        return [[1.0] for _ in texts]


def test_auto_is_none_when_onnxruntime_is_missing(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    monkeypatch.setitem(EMBEDDING_BACKENDS._factories, "onnx", FakeOnnxBackend)
    assert eb._onnx_available() is False
    assert make_embedding_backend("auto") is None


def test_auto_is_none_when_no_onnx_backend_is_registered(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    monkeypatch.delitem(EMBEDDING_BACKENDS._factories, "onnx", raising=False)
    monkeypatch.setattr(EMBEDDING_BACKENDS, "_entry_points", lambda: {})
    assert eb._onnx_available() is False
    assert make_embedding_backend(" AUTO ") is None


def test_auto_builds_the_onnx_backend_when_available(monkeypatch):
    seen: list[str] = []

    def fake_find_spec(name: str, *args: object) -> object:
        seen.append(name)
        return object()

    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec)
    monkeypatch.setitem(EMBEDDING_BACKENDS._factories, "onnx", FakeOnnxBackend)
    backend = make_embedding_backend("auto", threads=2)
    assert isinstance(backend, FakeOnnxBackend)
    assert backend.kwargs == {"threads": 2}
    assert "onnxruntime" in seen


def test_auto_today_is_none_without_an_onnx_backend():
    if "onnx" in EMBEDDING_BACKENDS.names():
        pytest.skip("an onnx backend is registered")
    assert make_embedding_backend("auto") is None
