"""Clients of the remote endpoint, implementing the local Protocols (pure Python).

- :class:`RemoteReranker` — a ``ListwiseJudge`` backed by ``/v1/rerank`` (cross-encoder,
  late interaction, SPLADE or the LLM judge); :class:`RemoteListwiseJudge` is the LLM one.
- :class:`RemoteEmbeddingBackend` — an ``EmbeddingBackend`` backed by ``/v1/embed``.
- :class:`RemoteChatProvider` — an ``LLMProvider`` backed by ``/v1/chat`` (the endpoint's LLM;
  what the browser's query transforms call).
- :class:`RemoteVisualEmbedder` — a ``VisualEmbedder`` backed by ``/v1/visual/*``, plus the
  endpoint's page registry (``register_pages`` / ``search``).

The same code runs on CPython and in Pyodide; only the transport differs
(:func:`ragspine_lite.remote.transport.default_transport`). RESTRICTED items are never
serialised: they are stripped before the request is built and keep their positions.
Every failure (timeout, connection, 4xx/5xx, malformed answer, wrong permutation) raises
:class:`~ragspine_lite.remote.errors.RemoteError`, logged once per cause and client;
``listwise_rerank`` catches it and keeps the RRF order.

    >>> judge = RemoteReranker("http://127.0.0.1:8765", "colbert")  # doctest: +SKIP
    >>> listwise_rerank(query, results, judge)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import math
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ragspine_lite.common.llm import ChatCompletion, Choice, ResponseMessage
from ragspine_lite.common.sensitivity import effective_sensitivity, is_restricted
from ragspine_lite.remote.errors import RemoteError
from ragspine_lite.remote.transport import Transport, default_transport, request_json
from ragspine_lite.remote.wire import (
    CHAT_PATH,
    DEFAULT_SENSITIVITY,
    EMBED_PATH,
    HEALTH_PATH,
    MODELS_PATH,
    RERANK_PATH,
    VISUAL_IMAGES_PATH,
    VISUAL_PAGES_PATH,
    VISUAL_QUERY_PATH,
    VISUAL_SEARCH_PATH,
    WireError,
    canonical_method,
    check_multivectors,
    check_permutation,
    check_scores,
    check_vectors,
    encode_image,
    label_of,
    open_items,
)

__all__ = [
    "DEFAULT_EMBED_BATCH_SIZE",
    "DEFAULT_REMOTE_TIMEOUT_S",
    "REMOTE_TOKEN_ENV",
    "REMOTE_URL_ENV",
    "RemoteChatProvider",
    "RemoteClient",
    "RemoteEmbeddingBackend",
    "RemoteListwiseJudge",
    "RemoteRanking",
    "RemoteReranker",
    "RemoteVisualEmbedder",
    "make_remote_embedding_backend",
]

REMOTE_URL_ENV = "RAGSPINE_REMOTE_URL"
REMOTE_TOKEN_ENV = "RAGSPINE_REMOTE_TOKEN"
DEFAULT_REMOTE_TIMEOUT_S = 10.0
DEFAULT_EMBED_BATCH_SIZE = 64

_LOGGER = logging.getLogger(__name__)


class RemoteClient:
    """JSON over HTTP to one endpoint: base URL, optional bearer token, timeout, transport.

    ``failures`` counts failed calls and ``last_error`` keeps the latest; the first failure
    of each cause (kind + status) is logged as a warning, repeats at debug level.
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_REMOTE_TIMEOUT_S,
        transport: Transport | None = None,
    ) -> None:
        parts = urllib.parse.urlsplit(str(base_url))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"remote endpoint URL must be http(s)://host[:port][/prefix], got {base_url!r}"
            )
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (
            math.isfinite(timeout) and timeout > 0
        ):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if token is not None and (not isinstance(token, str) or not token.strip()):
            raise ValueError("token must be a non-blank string or None")
        self.base_url = str(base_url).rstrip("/")
        self.timeout = float(timeout)
        self.transport = transport if transport is not None else default_transport()
        self._token = token
        self.failures = 0
        self.last_error: RemoteError | None = None
        self._logged: set[tuple[str, int | None]] = set()
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never shows the token
        auth = "token" if self._token else "no token"
        return f"RemoteClient({self.base_url!r}, {auth}, timeout={self.timeout:g})"

    def url(self, path: str) -> str:
        return self.base_url + path

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}"} if self._token else {}

    def call(
        self,
        method: str,
        path: str,
        payload: Any = None,
        check: Callable[[dict[str, Any]], Any] | None = None,
    ) -> Any:
        """One request; the JSON object answer goes through ``check`` → its result.

        ``check`` raises ``WireError`` (code ``permutation`` → kind ``"permutation"``, else
        ``"malformed"``); all failures are counted, logged once per cause and re-raised as
        ``RemoteError``.
        """
        url = self.url(path)
        try:
            data = request_json(
                self.transport, method, url, payload, headers=self._headers(),
                timeout=self.timeout,
            )
            if not isinstance(data, dict):
                raise RemoteError(
                    f"{method} {url} answered {type(data).__name__}, expected a JSON object",
                    kind="malformed",
                    url=url,
                )
            try:
                return check(data) if check is not None else data
            except (WireError, KeyError, TypeError, ValueError) as exc:
                kind = "permutation" if getattr(exc, "code", "") == "permutation" else "malformed"
                raise RemoteError(
                    f"{method} {url} answered an unusable body: {exc}", kind=kind, url=url
                ) from exc
        except RemoteError as exc:
            self._record(exc)
            raise

    def _record(self, exc: RemoteError) -> None:
        key = (exc.kind, exc.status)
        with self._lock:
            self.failures += 1
            self.last_error = exc
            first = key not in self._logged
            self._logged.add(key)
        if first:
            _LOGGER.warning("remote endpoint failed (%s): %s; falling back", exc.kind, exc)
        else:
            _LOGGER.debug("remote endpoint failed again (%s): %s", exc.kind, exc)

    def health(self) -> dict[str, Any]:
        """``GET /healthz``."""
        return self.call("GET", HEALTH_PATH)

    def models(self) -> dict[str, Any]:
        """``GET /v1/models``: what the endpoint has loaded."""
        return self.call("GET", MODELS_PATH)


def _client(
    endpoint: str | RemoteClient,
    token: str | None,
    timeout: float,
    transport: Transport | None,
) -> RemoteClient:
    if isinstance(endpoint, RemoteClient):
        return endpoint
    return RemoteClient(endpoint, token=token, timeout=timeout, transport=transport)


class _LabelledRemote:
    """The endpoint client and default label that the chat, visual and embedding seams share."""

    sends_text_off_host = True

    def __init__(
        self,
        endpoint: str | RemoteClient,
        *,
        token: str | None = None,
        timeout: float = 60.0,
        transport: Transport | None = None,
        default_sensitivity: str = DEFAULT_SENSITIVITY,
    ) -> None:
        self.client = _client(endpoint, token, timeout, transport)
        self.default_sensitivity = default_sensitivity

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client!r})"


@dataclass(frozen=True)
class RemoteRanking:
    """One rerank answer mapped back onto the caller's candidates.

    ``ranking`` is a permutation of every input index (RESTRICTED ones kept in place);
    ``scores[i]`` is candidate ``i``'s score (``None`` when unsent or the method has none);
    ``sent`` is how many candidates were serialised.
    """

    ranking: tuple[int, ...]
    scores: tuple[float | None, ...]
    model: str
    sent: int


class RemoteReranker:
    """A ``ListwiseJudge`` that reranks on the endpoint (``method`` one of the rerank methods).

    Candidates may be strings (labelled ``default_sensitivity``: ``listwise_rerank`` only
    passes items it let through), labelled mappings, chunks or retrieval results; RESTRICTED
    ones are never serialised and keep their positions. Failures raise ``RemoteError``.
    """

    sends_text_off_host = True

    def __init__(
        self,
        endpoint: str | RemoteClient,
        method: str = "cross_encoder",
        *,
        token: str | None = None,
        timeout: float = DEFAULT_REMOTE_TIMEOUT_S,
        transport: Transport | None = None,
        default_sensitivity: str = DEFAULT_SENSITIVITY,
    ) -> None:
        self.method = canonical_method(method)
        self.client = _client(endpoint, token, timeout, transport)
        self.default_sensitivity = default_sensitivity

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client!r}, method={self.method!r})"

    def rerank(self, query: str, candidates: Sequence[Any]) -> RemoteRanking:
        """Rank ``candidates`` for ``query``; see :class:`RemoteRanking`."""
        items = list(candidates)
        slots, wire_items = open_items(items, self.default_sensitivity)
        identity = tuple(range(len(items)))
        if len(slots) <= 1:  # nothing to order: no request at all
            return RemoteRanking(identity, (None,) * len(items), "", 0)
        payload = {"method": self.method, "query": str(query), "candidates": wire_items}
        n = len(slots)

        def check(data: dict[str, Any]) -> tuple[list[int], list[float] | None, str]:
            return (
                check_permutation(data.get("ranking"), n),
                check_scores(data.get("scores"), n),
                str(data.get("model", "")),
            )

        ranking, scores, model = self.client.call("POST", RERANK_PATH, payload, check)
        merged = list(identity)
        for slot, j in zip(slots, ranking, strict=True):
            merged[slot] = slots[j]
        by_input: list[float | None] = [None] * len(items)
        if scores is not None:
            for slot, score in zip(slots, scores, strict=True):
                by_input[slot] = score
        return RemoteRanking(tuple(merged), tuple(by_input), model, n)

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        """0-based candidate indices, best first (the ``ListwiseJudge`` seam)."""
        return list(self.rerank(query, candidates).ranking)


class RemoteListwiseJudge(RemoteReranker):
    """The endpoint's listwise LLM judge (an OpenAI-compatible chat model behind it).

    Same prompt and parsing as the local ``ProviderListwiseJudge``; the endpoint always
    answers a full permutation.
    """

    def __init__(
        self,
        endpoint: str | RemoteClient,
        *,
        token: str | None = None,
        timeout: float = 60.0,
        transport: Transport | None = None,
        default_sensitivity: str = DEFAULT_SENSITIVITY,
    ) -> None:
        super().__init__(
            endpoint, "llm", token=token, timeout=timeout, transport=transport,
            default_sensitivity=default_sensitivity,
        )


class RemoteChatProvider(_LabelledRemote):
    """An ``LLMProvider`` whose completions come from the endpoint's ``/v1/chat``.

    Each message travels labelled (its own ``sensitivity`` key, else ``default_sensitivity``);
    a RESTRICTED one is refused with ``ValueError`` before anything is sent, and the server
    refuses it too. No tools. Failures raise ``RemoteError`` (a ``ProviderError``).
    """

    def chat(
        self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None
    ) -> ChatCompletion:
        if tools:
            raise ValueError("the endpoint's chat operation takes no tools")
        wire = []
        for i, message in enumerate(messages):
            sens = effective_sensitivity(message.get("sensitivity", self.default_sensitivity))
            if is_restricted(sens):
                raise ValueError(
                    f"messages[{i}] is RESTRICTED: it is never sent to the remote endpoint"
                )
            wire.append({"role": message.get("role"), "content": message.get("content"),
                         "sensitivity": sens})

        def check(data: dict[str, Any]) -> ChatCompletion:
            content = data.get("content")
            if not isinstance(content, str):
                raise WireError("content must be a string")
            choice = Choice(index=0, message=ResponseMessage(content=content))
            return ChatCompletion(choices=(choice,), model=str(data.get("model", "")))

        return self.client.call("POST", CHAT_PATH, {"messages": wire}, check)


def _labelled_texts(values: Sequence[Any], default_sensitivity: str, what: str) -> list[dict]:
    items = []
    for i, value in enumerate(values):
        text, sens = label_of(value, default_sensitivity)
        if is_restricted(sens):
            raise ValueError(
                f"{what}[{i}] is RESTRICTED: it is never sent to the remote endpoint"
            )
        items.append({"text": text, "sensitivity": sens})
    return items


class RemoteEmbeddingBackend(_LabelledRemote):
    """An ``EmbeddingBackend`` whose vectors come from the endpoint's ``/v1/embed``.

    Texts go in batches of ``batch_size``. A labelled RESTRICTED input is refused with
    ``ValueError`` before anything is sent. ``dim`` is known after the first call.
    """

    def __init__(
        self,
        endpoint: str | RemoteClient,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        transport: Transport | None = None,
        batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
        default_sensitivity: str = DEFAULT_SENSITIVITY,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        super().__init__(
            endpoint, token=token, timeout=timeout, transport=transport,
            default_sensitivity=default_sensitivity,
        )
        self.batch_size = batch_size
        self.dim: int | None = None
        self.model = ""

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        return self._embed(texts, {})

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Query vectors: sent with ``input_type: query`` (the model's query role, e.g. e5)."""
        return self._embed(texts, {"input_type": "query"})

    def _embed(self, texts: list[str], extra: dict[str, str]) -> list[list[float]]:
        items = _labelled_texts(list(texts), self.default_sensitivity, "texts")
        out: list[list[float]] = []
        for start in range(0, len(items), self.batch_size):
            batch = items[start : start + self.batch_size]

            def check(data: dict[str, Any], n: int = len(batch)) -> list[list[float]]:
                vectors = check_vectors(data.get("vectors"), n)
                dim = len(vectors[0])
                if self.dim is not None and dim != self.dim:
                    raise WireError(f"vector dimension changed from {self.dim} to {dim}")
                self.dim = dim
                self.model = str(data.get("model", ""))
                return vectors

            out.extend(self.client.call("POST", EMBED_PATH, {"inputs": batch, **extra}, check))
        return out


class RemoteVisualEmbedder(_LabelledRemote):
    """A ``VisualEmbedder`` on the endpoint (ColPali-style multi-vectors) and its page index.

    ``embed_query`` → one vector per query token; ``embed_images`` → patch vectors per
    image. ``register_pages`` uploads pages to this client's own index on the endpoint
    (RESTRICTED pages are dropped here and refused there; the first upload makes the index,
    ``index_id`` names it); ``search`` queries it (no pages registered: no hits).
    """

    index_id: str | None = None

    def embed_query(self, query: str) -> list[list[float]]:
        def check(data: dict[str, Any]) -> list[list[float]]:
            raw = data.get("vectors")
            return check_vectors(raw, len(raw) if isinstance(raw, list) else -1)

        return self.client.call("POST", VISUAL_QUERY_PATH, {"query": str(query)}, check)

    def embed_images(self, images: list[bytes]) -> list[list[list[float]]]:
        if not images:
            return []
        payload = {
            "images": [
                {"image_b64": encode_image(img),
                 "sensitivity": effective_sensitivity(self.default_sensitivity)}
                for img in images
            ]
        }
        n = len(images)
        return self.client.call(
            "POST", VISUAL_IMAGES_PATH, payload,
            lambda d: check_multivectors(d.get("embeddings"), n),
        )

    def register_pages(self, pages: Sequence[Any]) -> int:
        """Upload non-RESTRICTED pages (``doc_id``, ``page_no``, ``image``, ``sensitivity`` …).

        Returns how many the endpoint registered; RESTRICTED pages are never serialised.
        """
        wire = []
        for page in pages:
            sens = effective_sensitivity(getattr(page, "sensitivity", self.default_sensitivity))
            if is_restricted(sens):
                continue
            wire.append(
                {
                    "doc_id": str(page.doc_id),
                    "page_no": int(page.page_no),
                    "sensitivity": sens,
                    "title": getattr(page, "title", None),
                    "source_locator": getattr(page, "source_locator", None),
                    "image_b64": encode_image(page.image),
                }
            )
        if not wire:
            return 0

        def check(data: dict[str, Any]) -> int:
            count = data.get("registered")
            if isinstance(count, bool) or not isinstance(count, int) or count != len(wire):
                raise WireError(f"registered must be {len(wire)}, got {count!r}")
            index = data.get("index")
            if not isinstance(index, str) or not index:
                raise WireError(f"index must be a non-empty string, got {index!r}")
            self.index_id = index
            return count

        payload: dict[str, Any] = {"pages": wire}
        if self.index_id is not None:
            payload["index"] = self.index_id
        return self.client.call("POST", VISUAL_PAGES_PATH, payload, check)

    def search(self, query: str, *, top_k: int = 10) -> list[dict[str, Any]]:
        """Hits of the endpoint's page index: ``{doc_id, page_no, locator, title, score}``."""

        def check(data: dict[str, Any]) -> list[dict[str, Any]]:
            hits = data.get("hits")
            if not isinstance(hits, list) or len(hits) > top_k:
                raise WireError(f"hits must be a list of at most {top_k} entries")
            out = []
            for hit in hits:
                if not isinstance(hit, dict) or not isinstance(hit.get("doc_id"), str):
                    raise WireError("each hit must be an object with a string doc_id")
                score = hit.get("score")
                if isinstance(score, bool) or not isinstance(score, (int, float)):
                    raise WireError("each hit must carry a numeric score")
                out.append(dict(hit))
            return out

        if self.index_id is None:
            return []
        payload = {"query": str(query), "top_k": int(top_k), "index": self.index_id}
        return self.client.call("POST", VISUAL_SEARCH_PATH, payload, check)


def make_remote_embedding_backend(
    url: str | None = None, *, token: str | None = None, **kwargs: Any
) -> RemoteEmbeddingBackend:
    """Factory behind ``make_embedding_backend("remote", url=...)``; ``url`` is required."""
    if not url:
        raise ValueError(
            "the remote embedding backend needs url='http://host:port' "
            f"(or {REMOTE_URL_ENV} when the spec itself comes from the environment)"
        )
    return RemoteEmbeddingBackend(url, token=token, **kwargs)
