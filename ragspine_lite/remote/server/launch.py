"""``ragspine-lite serve-remote``: its options, the settings they make, and :func:`serve`.

Pure Python up to :func:`serve`, which imports uvicorn (``[server]`` extra). Options beat
the environment (:data:`~ragspine_lite.remote.server.config.SERVER_ENV`), which beats the
defaults. A non-loopback ``--host`` needs a token.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

from ragspine_lite.common.registry import lazy_extra_import
from ragspine_lite.common.settings import Settings
from ragspine_lite.common.validators import arg_type
from ragspine_lite.remote.server.config import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    SERVER_ENV,
    SERVER_EXTRA,
    ServerConfig,
)

__all__ = ["SERVE_REMOTE_EPILOG", "add_serve_remote_arguments", "config_from_args", "serve"]

SERVE_REMOTE_EPILOG = (
    "Operations: POST /v1/rerank (cross_encoder, colbert, splade, llm), /v1/embed, /v1/chat, "
    "/v1/visual/{embed_query,embed_images,pages,search}; GET /healthz, /v1/models, "
    "/openapi.json. Items labelled RESTRICTED are refused. Settings also come from "
    + ", ".join(sorted(SERVER_ENV.values()))
    + ". Scale out with --workers N or several instances behind any HTTP load balancer "
    "(the operations are stateless except the visual page indexes, kept per process: each "
    "client's own, named by the id /v1/visual/pages returns)."
)

_LOGGER = logging.getLogger("ragspine_lite.remote.server")
_BLAS_THREAD_ENVS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

_PORT, _COUNT, _SECONDS = (arg_type(k) for k in ("port", "positive integer", "positive number"))


def add_serve_remote_arguments(p: argparse.ArgumentParser) -> None:
    """The ``serve-remote`` options."""
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST})")
    p.add_argument("--port", type=_PORT, default=DEFAULT_PORT,
                   help=f"port (default {DEFAULT_PORT}; 0 = any free port)")
    p.add_argument("--token", help=f"bearer token required from clients (${SERVER_ENV['token']})")
    p.add_argument("--cors-origin", action="append", dest="cors_origins", metavar="ORIGIN",
                   help="allow browser calls from this origin (repeatable), e.g. "
                   "http://localhost:8000")
    p.add_argument("--allowed-host", action="append", dest="allowed_hosts", metavar="NAME",
                   help="a host name clients may use in Host besides the bound address "
                   "(repeatable), e.g. search.example.org behind a proxy")
    p.add_argument("--workers", type=_COUNT, default=1,
                   help="uvicorn worker processes (default 1)")
    p.add_argument("--max-body-bytes", type=_COUNT, metavar="N")
    p.add_argument("--max-candidates", type=_COUNT, metavar="N",
                   help="candidates / inputs / images / pages per request")
    p.add_argument("--timeout", type=_SECONDS, dest="request_timeout_s", metavar="S",
                   help="per-request timeout in seconds")
    p.add_argument("--read-timeout", type=_SECONDS, dest="read_timeout_s", metavar="S",
                   help="seconds a client gets to send its request headers, then its body "
                   "(slower: 408; default 10)")
    p.add_argument("--max-concurrency", type=_COUNT, metavar="N",
                   help="model calls running at once per worker (a timed-out call holds its "
                   "slot until it ends)")
    p.add_argument("--max-visual-pages", type=_COUNT, metavar="N",
                   help="visual pages kept in memory over all visual indexes (default 1000)")
    p.add_argument("--cross-encoder-model", metavar="DIR",
                   help="directory with a BERT-family cross-encoder ONNX export")
    p.add_argument("--colbert-model", metavar="DIR|none",
                   help="late-interaction ONNX directory (default: MiniLM token embeddings)")
    p.add_argument("--splade-model", metavar="DIR|none",
                   help="SPLADE directory (default: the packaged SPLADE-tiny)")
    p.add_argument("--embed-model", metavar="DIR|none",
                   help="sentence-embedding ONNX directory, or e5 (multilingual-e5-small, "
                   "[embed-e5]); default: all-MiniLM-L6-v2")
    p.add_argument("--visual-model", metavar="SPEC",
                   help="none (default) or colpali[:MODEL] (fastembed, [vision] extra)")
    p.add_argument("--llm-url", help="OpenAI-compatible base URL for the listwise judge and "
                   "/v1/chat "
                   "(vLLM, llama.cpp server, Ollama: http://host:port/v1)")
    p.add_argument("--llm-model", help="model name sent to the LLM back end")
    p.add_argument("--no-preload", action="store_true",
                   help="load models on first use instead of at start")
    p.add_argument("--log-level", default="info",
                   choices=["critical", "error", "warning", "info", "debug"])


_FIELDS = (
    "token", "cors_origins", "allowed_hosts", "max_visual_pages", "max_body_bytes",
    "max_candidates", "request_timeout_s",
    "read_timeout_s", "max_concurrency", "cross_encoder_model", "colbert_model", "splade_model",
    "embed_model", "visual_model", "llm_url", "llm_model",
)


def config_from_args(args: argparse.Namespace, settings: Settings) -> ServerConfig:
    """Options over settings over defaults; refuses a non-loopback host without a token."""
    overrides: dict[str, Any] = {name: getattr(args, name, None) for name in _FIELDS}
    for name in ("cors_origins", "allowed_hosts"):
        if overrides[name]:
            overrides[name] = tuple(overrides[name])
    config = ServerConfig.from_settings(settings, host=args.host, port=args.port, **overrides)
    config.check_bind()
    return config


def serve(
    config: ServerConfig, *, workers: int = 1, preload: bool = True, log_level: str = "info"
) -> None:
    """Run the endpoint with uvicorn until interrupted (``workers > 1``: worker processes).

    Concurrency comes from parallel requests (``max_concurrency`` model calls at once), so
    numpy's BLAS is kept to one thread (unless its env vars are set) and each ONNX run gets
    ``cpu_count // max_concurrency`` threads.
    """
    config.check_bind()
    for var in _BLAS_THREAD_ENVS:  # numpy's BLAS: one thread per request (before numpy loads)
        os.environ.setdefault(var, "1")
    uvicorn = lazy_extra_import("uvicorn", extra=SERVER_EXTRA)
    from ragspine_lite.remote.server.app import build_models, create_app
    from ragspine_lite.remote.server.protocol import ReadDeadlineProtocol

    logging.basicConfig(level=log_level.upper(), format="%(levelname)s: %(message)s")
    ReadDeadlineProtocol.read_timeout_s = config.read_timeout_s
    if workers > 1:
        os.environ.update(config.to_env())  # the worker processes rebuild the config from it
        uvicorn.run(
            "ragspine_lite.remote.server.app:app_from_env", factory=True, host=config.host,
            port=config.port, workers=workers, log_level=log_level, http=ReadDeadlineProtocol,
        )
        return
    models = build_models(config)
    if preload:
        for name, error in models.warm().items():
            _LOGGER.info("%s: %s", name, "loaded" if error is None else f"unavailable ({error})")
    uvicorn.run(create_app(config, models=models), host=config.host, port=config.port,
                log_level=log_level, http=ReadDeadlineProtocol)
