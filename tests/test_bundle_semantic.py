"""A bundle exported with chunk vectors, searched hybrid by the browser-side searcher.

The model here is a stand-in (pure Python, so this runs in the Pyodide lane too); the real
MiniLM on onnxruntime-web is checked in Chromium by tests/e2e/test_demo_embeddings.py.
"""

from __future__ import annotations

import json
import re

import pytest
from test_browser_backend import CONFIG, FakeFFI, runner, toy_hidden

from ragspine_lite.bundle.export import export_store, load_corpus
from ragspine_lite.bundle.manifest import BundleFormatError
from ragspine_lite.bundle.runtime import BundleSearcher
from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.cli import samples_dir
from ragspine_lite.lexical.retrieval import GlossaryQueryRewriter, NarrativeIndex
from ragspine_lite.link.narrative_link import NarrativeIndexRetriever
from ragspine_lite.vector.browser_backend import BrowserOnnxEmbeddingBackend
from ragspine_lite.vector.calibration import DenseCalibration
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend
from ragspine_lite.vector.sqlite_store import SqliteVectorStore
from ragspine_lite.vector.wordpiece import WordPieceTokenizer

QUERIES = ["why did operating profit fall", "Hong Kong revenue growth in 2024", "hk revenue"]
# A vocabulary that knows the English sample words and no Chinese at all.
WORDS = sorted({
    w for text in [*(d.body for d in load_corpus([samples_dir()])), *QUERIES]
    for w in re.findall(r"[a-z0-9]+", text.lower())
})
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]


def toy_backend(jspi: bool) -> BrowserOnnxEmbeddingBackend:
    return BrowserOnnxEmbeddingBackend(
        WordPieceTokenizer(VOCAB), CONFIG, runner=runner, ffi=FakeFFI(jspi)
    )


@pytest.fixture(scope="module")
def toy_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("semantic") / "chunks.db"
    report = export_store(load_corpus([samples_dir()]), db, embedding_backend=toy_backend(True))
    assert report.vectors == report.chunks > 0
    return db


@pytest.fixture(scope="module")
def hashed_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("semantic") / "chunks.db"
    export_store(load_corpus([samples_dir()]), db,
                 embedding_backend=DeterministicEmbeddingBackend(dim=64))
    return db


def strip(outcome) -> list[dict]:
    return [{k: v for k, v in s.items() if k != "library_id"} for s in outcome.snippets]


def test_hybrid_is_the_default_and_equals_the_python_hybrid_link(hashed_db):
    backend = DeterministicEmbeddingBackend(dim=64)
    with BundleSearcher(hashed_db, embedding_backend=backend) as searcher:
        store = ChunkStore(hashed_db)
        vectors = SqliteVectorStore(hashed_db, model_id="DeterministicEmbeddingBackend/64")
        try:
            link = NarrativeIndexRetriever(NarrativeIndex(
                store, query_rewriter=GlossaryQueryRewriter(), embedding_backend=backend,
                vector_store=vectors,
            ), retry_without_filters=False)
            for query in QUERIES:
                outcome = searcher.search(query, top_k=8)
                assert outcome.semantic == {"mode": "hybrid", "channel": "hybrid", "error": None}
                assert strip(outcome) == link.retrieve(query, top_k=8)
                assert any(s["scores"]["vector"] > 0 for s in outcome.snippets)
            # The export keeps int8 codes: scores are integer dots on the cosine scale.
            codec, codes = vectors.int8_codes()
            assert vectors.quantization == "int8" and len(codes) == searcher.vector_count
            assert {len(c) for c in codes.values()} == {64}
            for s in searcher.search(QUERIES[0], top_k=8).snippets:
                dot = round(s["scores"]["vector"] * codec.scale * codec.scale)
                assert s["scores"]["vector"] == codec.cosine(dot)
        finally:
            vectors.close()
            store.close()
        assert json.loads(searcher.dispatch("stats"))["embeddings"] == {
            "vectors": searcher.vector_count, "model_id": "DeterministicEmbeddingBackend/64",
            "loaded": True,
        }


def test_bm25_mode_equals_a_searcher_without_a_model(hashed_db):
    with BundleSearcher(hashed_db, embedding_backend=DeterministicEmbeddingBackend(dim=64)) as a, \
            BundleSearcher(hashed_db) as b:
        for query in QUERIES:
            got = a.search(query, top_k=8, mode="bm25")
            assert got.semantic == {"mode": "bm25", "channel": "bm25", "error": None}
            plain = b.search(query, top_k=8)
            assert plain.semantic is None and "semantic" not in plain.as_dict()
            assert got.snippets == plain.snippets
        with pytest.raises(ValueError, match="needs a bundle built with vectors"):
            b.search("x", mode="hybrid")
        with pytest.raises(ValueError, match="'dense'"):
            a.search("x", mode="dense")


def test_a_backend_for_another_model_is_refused(hashed_db):
    with pytest.raises(BundleFormatError, match="DeterministicEmbeddingBackend/32"):
        BundleSearcher(hashed_db, embedding_backend=DeterministicEmbeddingBackend(dim=32))


def test_a_backend_without_vectors_to_search_is_simply_not_used(tmp_path):
    db = tmp_path / "plain.db"
    export_store(load_corpus([samples_dir()]), db)
    with BundleSearcher(db, embedding_backend=DeterministicEmbeddingBackend(dim=64)) as s:
        assert s.vector_count == 0 and s.search("profit").semantic is None


class Failing(DeterministicEmbeddingBackend):
    model_id = "DeterministicEmbeddingBackend/64"

    def embed_texts(self, texts):
        raise RuntimeError("the model is not loaded")


def test_a_failing_model_degrades_to_bm25_results(hashed_db):
    with BundleSearcher(hashed_db, embedding_backend=Failing(dim=64)) as a, \
            BundleSearcher(hashed_db) as b:
        got = a.search(QUERIES[0], top_k=8)
        assert got.semantic["channel"] == "bm25:embedding-failed"
        assert "the model is not loaded" in got.semantic["error"]
        assert got.snippets == b.search(QUERIES[0], top_k=8).snippets


def test_without_jspi_plan_and_prime_give_the_jspi_results(toy_db):
    with BundleSearcher(toy_db, embedding_backend=toy_backend(True)) as jspi, \
            BundleSearcher(toy_db, embedding_backend=toy_backend(False)) as worker:
        for query in QUERIES:
            plan = json.loads(worker.dispatch("embed_plan", json.dumps({"query": query})))
            assert plan["texts"][0] == query
            assert len(plan["texts"]) == len(set(GlossaryQueryRewriter().rewrite(query)))
            output = toy_hidden(plan["ids"], plan["batch"], plan["seq"])
            assert worker.prime_embeddings(json.dumps(plan["texts"]), output) == plan["batch"]
            got = worker.search(query, top_k=8)
            assert got.semantic["channel"] == "hybrid"
            assert got.snippets == jspi.search(query, top_k=8).snippets
        # An unprimed query without JSPI: BM25, said so, never an exception.
        unprimed = worker.search("operating profit", top_k=8)
        assert unprimed.semantic["channel"] == "bm25:embedding-failed"
        assert "no JSPI" in unprimed.semantic["error"]


def test_chinese_queries_skip_the_dense_lane_of_an_english_model(toy_db):
    with BundleSearcher(toy_db, embedding_backend=toy_backend(False)) as s, \
            BundleSearcher(toy_db) as plain:
        query = "中国内地营运利润"
        assert s.embedding_plan(query)["texts"] == []
        got = s.search(query, top_k=5)
        assert got.semantic["channel"] == "bm25:outside-vocabulary"
        assert got.snippets == plain.search(query, top_k=5).snippets
        assert s.embedding_plan("operating profit", mode="bm25")["texts"] == []


def test_embed_gives_the_backend_vectors(toy_db):
    with BundleSearcher(toy_db, embedding_backend=toy_backend(True)) as s:
        out = json.loads(s.dispatch("embed", json.dumps({"texts": ["operating profit"]})))
        assert out["vectors"] == toy_backend(True).embed_texts(["operating profit"])
        with pytest.raises(ValueError, match="list of strings"):
            s.embed("operating profit")
    with BundleSearcher(toy_db) as plain, pytest.raises(ValueError, match="no embedding model"):
        plain.embed(["x"])


class Counting(DeterministicEmbeddingBackend):
    """The hashed model with a calibration, counting the texts it embeds."""

    model_id = "DeterministicEmbeddingBackend/64"
    calibration = DenseCalibration(floor=0.3, ceiling=0.8)

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim=dim)
        object.__setattr__(self, "embedded", [])

    def embed_texts(self, texts):
        self.embedded.extend(texts)
        return super().embed_texts(texts)


NOTE = ("quokka-notes.md", "# Quokka notes\n\nThe quokka population on Rottnest Island grew.\n\n"
        "Small marsupials thrive without foxes.")


def test_page_documents_are_embedded_and_searched_hybrid(hashed_db):
    backend = Counting()
    with BundleSearcher(hashed_db, embedding_backend=backend) as s:
        info = s.ingest(*NOTE)
        assert info["embedded"] == info["chunks"] > 0 and "embedding_error" not in info
        assert len(backend.embedded) == info["chunks"]
        hits = s.search("quokka population", top_k=5).snippets
        assert hits[0]["library_id"] == "page" and hits[0]["scores"]["vector"] > 0
        bm25 = s.search("quokka population", top_k=5, mode="bm25").snippets
        assert all(h["scores"]["vector"] == 0 for h in bm25 if h["library_id"] == "page")
        stored = json.loads(s.dispatch("page_vectors", json.dumps({"docId": info["doc_id"]})))
    assert stored["model_id"] == "DeterministicEmbeddingBackend/64"
    assert len(stored["items"]) == info["chunks"]
    assert stored["items"][0][1] == backend.embed_texts([stored["items"][0][0]])[0]

    again = Counting()  # a reload: the stored vectors come back with the document
    with BundleSearcher(hashed_db, embedding_backend=again) as s:
        payload = {"name": NOTE[0], "text": NOTE[1], "vectors": stored}
        assert json.loads(s.dispatch("ingest", json.dumps(payload)))["embedded"] == info["chunks"]
        assert again.embedded == []
        assert s.search("quokka population", top_k=5).snippets == hits
        foreign = {**stored, "model_id": "another-model"}  # never mixed in: re-embedded
        s.ingest(NOTE[0], NOTE[1], foreign)
        assert s.search("quokka population", top_k=5).snippets == hits
        assert s.forget([info["doc_id"]]) == 1
        assert s._page_backend.known == {}
        assert all(h["library_id"] == "bundle" for h in s.search("quokka", top_k=5).snippets)


def test_without_jspi_a_document_is_planned_primed_then_ingested(toy_db):
    with BundleSearcher(toy_db, embedding_backend=toy_backend(False)) as worker:
        doc = {"name": "profit.md", "text": "Operating profit fell in Hong Kong."}
        plan = json.loads(worker.dispatch("embed_plan", json.dumps({"document": doc})))
        assert plan["texts"] == ["Operating profit fell in Hong Kong."]
        worker.prime_embeddings(json.dumps(plan["texts"]),
                                toy_hidden(plan["ids"], plan["batch"], plan["seq"]))
        info = worker.ingest(doc["name"], doc["text"])
        assert info["embedded"] == 1
        again = json.loads(worker.dispatch("embed_plan", json.dumps({"document": doc})))
        assert again["texts"] == []  # its vector is kept with the document
        unprimed = worker.ingest("other.md", "Revenue grew strongly in 2024.")
        assert unprimed["embedded"] == 0 and "no JSPI" in unprimed["embedding_error"]
        hits = worker.search("revenue grew", top_k=5, mode="bm25").snippets
        assert any(h["doc_id"] == "other.md" for h in hits)  # BM25 still finds it


def test_a_searcher_without_a_model_keeps_page_documents_bm25_only(hashed_db):
    with BundleSearcher(hashed_db) as s:
        info = s.ingest(*NOTE)
        assert "embedded" not in info
        assert s.page_vectors(info["doc_id"]) == {"model_id": None, "items": []}
        plan = json.loads(s.dispatch("embed_plan", json.dumps({"document": {
            "name": NOTE[0], "text": NOTE[1]}})))
        assert plan["texts"] == []
