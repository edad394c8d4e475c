"""The optional ``embed_queries`` seam: retrievers embed queries with it, documents with
``embed_texts``; a backend without it is used exactly as before."""

from __future__ import annotations

from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.chunking.chunking import DocumentMeta, chunk_document
from ragspine_lite.lexical.retrieval import HybridRetriever, NarrativeIndex
from ragspine_lite.raptor import build_raptor_tree
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend

DOCS = [
    ("hk", "Hong Kong revenue grew eleven percent in 2024 on bancassurance."),
    ("cn", "Operating profit in China fell on lower investment returns."),
    ("roe", "Group return on equity reached eleven percent."),
]


class RoleBackend:
    """Deterministic vectors; records which texts went through which role."""

    def __init__(self) -> None:
        self.inner = DeterministicEmbeddingBackend(dim=16)
        self.documents: list[str] = []
        self.queries: list[str] = []

    def embed_texts(self, texts):
        self.documents.extend(texts)
        return self.inner.embed_texts(texts)

    def embed_queries(self, texts):
        self.queries.extend(texts)
        return self.inner.embed_texts(texts)


def chunks():
    return [c for doc_id, text in DOCS for c in chunk_document(text, DocumentMeta(doc_id=doc_id))]


def test_hybrid_retriever_embeds_queries_in_the_query_role():
    backend = RoleBackend()
    results = HybridRetriever(chunks(), embedding_backend=backend).search("hong kong revenue")
    assert results and backend.queries == ["hong kong revenue"]
    assert "hong kong revenue" not in backend.documents and len(backend.documents) == 3


def test_narrative_index_ingests_documents_and_searches_with_the_query_role(tmp_path):
    backend = RoleBackend()
    store = ChunkStore(tmp_path / "c.db")
    store.init_schema()
    index = NarrativeIndex(store, embedding_backend=backend)
    for doc_id, text in DOCS:
        index.ingest(text, DocumentMeta(doc_id=doc_id))
    index.retrieve("operating profit")
    store.close()
    assert backend.queries == ["operating profit"] and len(backend.documents) == 3


def test_a_backend_without_the_role_gives_the_same_results_as_before():
    plain = DeterministicEmbeddingBackend(dim=16)
    role = RoleBackend()
    a = HybridRetriever(chunks(), embedding_backend=plain).search("eleven percent")
    b = HybridRetriever(chunks(), embedding_backend=role).search("eleven percent")
    assert [(r.chunk.chunk_id, r.fused_score, r.vector_score) for r in a] == [
        (r.chunk.chunk_id, r.fused_score, r.vector_score) for r in b
    ]


def test_raptor_retrieve_embeds_the_query_in_the_query_role():
    backend = RoleBackend()
    tree = build_raptor_tree(chunks(), embedder=backend)
    backend.queries.clear()
    assert tree.retrieve("revenue", backend)
    assert backend.queries == ["revenue"]
