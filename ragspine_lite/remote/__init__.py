"""Clients of the remote endpoint (pure Python) and, in ``remote.server``, the endpoint itself.

The clients implement the local Protocols (``ListwiseJudge``, ``EmbeddingBackend``,
``VisualEmbedder``, ``LLMProvider``) over one transport seam; the server needs the
``[server]`` extra.
"""

from __future__ import annotations

from ragspine_lite.remote.client import (
    DEFAULT_EMBED_BATCH_SIZE,
    DEFAULT_REMOTE_TIMEOUT_S,
    REMOTE_TOKEN_ENV,
    REMOTE_URL_ENV,
    RemoteChatProvider,
    RemoteClient,
    RemoteEmbeddingBackend,
    RemoteListwiseJudge,
    RemoteRanking,
    RemoteReranker,
    RemoteVisualEmbedder,
    make_remote_embedding_backend,
)
from ragspine_lite.remote.errors import REMOTE_ERROR_KINDS, RemoteError
from ragspine_lite.remote.openai_chat import OpenAICompatibleProvider, parse_chat_completion
from ragspine_lite.remote.transport import (
    HttpResponse,
    Transport,
    UrllibTransport,
    default_transport,
    request_json,
)
from ragspine_lite.remote.wire import RERANK_METHODS, RestrictedItemError, WireError

__all__ = [
    "DEFAULT_EMBED_BATCH_SIZE",
    "DEFAULT_REMOTE_TIMEOUT_S",
    "REMOTE_ERROR_KINDS",
    "REMOTE_TOKEN_ENV",
    "REMOTE_URL_ENV",
    "RERANK_METHODS",
    "HttpResponse",
    "OpenAICompatibleProvider",
    "RemoteChatProvider",
    "RemoteClient",
    "RemoteEmbeddingBackend",
    "RemoteError",
    "RemoteListwiseJudge",
    "RemoteRanking",
    "RemoteReranker",
    "RemoteVisualEmbedder",
    "RestrictedItemError",
    "Transport",
    "UrllibTransport",
    "WireError",
    "default_transport",
    "make_remote_embedding_backend",
    "parse_chat_completion",
    "request_json",
]
