"""Dense-vector seams: embedding backends, vector stores and the persistence policy."""

from __future__ import annotations

from ragspine_lite.vector.embedding_backends import (
    DEFAULT_DETERMINISTIC_DIM,
    DEFAULT_EMBEDDING_BATCH_SIZE,
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
)
from ragspine_lite.vector.persistence_policy import (
    PERSISTENCE_POLICY_ENV,
    IsolationFirstPolicy,
    PersistencePolicy,
    PersistEverythingPolicy,
    make_persistence_policy,
)
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

__all__ = [
    "DEFAULT_DETERMINISTIC_DIM",
    "DEFAULT_EMBEDDING_BATCH_SIZE",
    "DEFAULT_ONNX_EMBEDDING_MODEL",
    "DEFAULT_OPENAI_EMBEDDING_MODEL",
    "DEFAULT_QUERY_K",
    "DEFAULT_ST_EMBEDDING_MODEL",
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
    "PersistEverythingPolicy",
    "PersistencePolicy",
    "VectorHit",
    "VectorRecord",
    "VectorStore",
    "make_embedding_backend",
    "make_persistence_policy",
    "make_vector_store",
]
