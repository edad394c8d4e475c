"""Dense-vector seams: embedding backends, vector stores and the persistence policy."""

from __future__ import annotations

from ragspine_lite.text.sentencepiece import SentencePieceTokenizer
from ragspine_lite.text.wordpiece import WordPieceTokenizer
from ragspine_lite.vector.chunk_vectors import (
    CONTENT_HASH_KEY,
    DEFAULT_SYNC_BATCH_SIZE,
    chunk_vector_metadata,
    sync_chunk_vectors,
)
from ragspine_lite.vector.embedding_backends import (
    DEFAULT_DETERMINISTIC_DIM,
    DEFAULT_EMBEDDING_BATCH_SIZE,
    DEFAULT_MIN_COVERAGE,
    DEFAULT_ONNX_EMBEDDING_MODEL,
    DEFAULT_OPENAI_EMBEDDING_MODEL,
    DEFAULT_ST_EMBEDDING_MODEL,
    EMBEDDING_BACKEND_ENV,
    EMBEDDING_BACKENDS,
    EMBEDDING_DEVICE_ENV,
    EMBEDDING_MODEL_ENV,
    ONNX_EMBEDDING_MODEL_ENV,
    DeterministicEmbeddingBackend,
    EmbeddingBackend,
    make_embedding_backend,
    outside_vocabulary,
)
from ragspine_lite.vector.onnx_backend import (
    OnnxEmbeddingBackend,
    OnnxModelConfig,
    pool_embeddings,
)
from ragspine_lite.vector.persistence_policy import (
    PERSISTENCE_POLICY_ENV,
    IsolationFirstPolicy,
    PersistencePolicy,
    PersistEverythingPolicy,
    make_persistence_policy,
)
from ragspine_lite.vector.sqlite_store import SqliteVectorStore, embedding_model_id
from ragspine_lite.vector.store import (
    DEFAULT_QUERY_K,
    VECTOR_STORE_ENTRY_POINT_GROUP,
    VECTOR_STORE_ENV,
    InProcessVectorStore,
    VectorHit,
    VectorRecord,
    VectorStore,
    make_vector_store,
)
from ragspine_lite.vector.use_backend import (
    UseEmbeddingBackend,
    UseOnnxEmbeddingBackend,
    export_use_onnx,
)

__all__ = [
    "CONTENT_HASH_KEY",
    "DEFAULT_DETERMINISTIC_DIM",
    "DEFAULT_EMBEDDING_BATCH_SIZE",
    "DEFAULT_MIN_COVERAGE",
    "DEFAULT_ONNX_EMBEDDING_MODEL",
    "DEFAULT_OPENAI_EMBEDDING_MODEL",
    "DEFAULT_QUERY_K",
    "DEFAULT_ST_EMBEDDING_MODEL",
    "DEFAULT_SYNC_BATCH_SIZE",
    "EMBEDDING_BACKENDS",
    "EMBEDDING_BACKEND_ENV",
    "EMBEDDING_DEVICE_ENV",
    "EMBEDDING_MODEL_ENV",
    "ONNX_EMBEDDING_MODEL_ENV",
    "PERSISTENCE_POLICY_ENV",
    "VECTOR_STORE_ENTRY_POINT_GROUP",
    "VECTOR_STORE_ENV",
    "DeterministicEmbeddingBackend",
    "EmbeddingBackend",
    "InProcessVectorStore",
    "IsolationFirstPolicy",
    "OnnxEmbeddingBackend",
    "OnnxModelConfig",
    "PersistEverythingPolicy",
    "PersistencePolicy",
    "SentencePieceTokenizer",
    "SqliteVectorStore",
    "UseEmbeddingBackend",
    "UseOnnxEmbeddingBackend",
    "VectorHit",
    "VectorRecord",
    "VectorStore",
    "WordPieceTokenizer",
    "chunk_vector_metadata",
    "embedding_model_id",
    "export_use_onnx",
    "make_embedding_backend",
    "make_persistence_policy",
    "make_vector_store",
    "outside_vocabulary",
    "pool_embeddings",
    "sync_chunk_vectors",
]
