"""The remote endpoint (``[server]`` extra: starlette, uvicorn, numpy, onnxruntime).

Importing this package needs no extra; :func:`create_app` and :func:`serve` import the
heavy parts when called and name ``ragspine-lite[server]`` when they are missing.

    ragspine-lite serve-remote --host 127.0.0.1 --port 8765
"""

from __future__ import annotations

from typing import Any

from ragspine_lite.remote.server.config import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    DEFAULT_REQUEST_TIMEOUT_S,
    SERVER_ENV,
    SERVER_EXTRA,
    ServerConfig,
    check_bind,
    is_loopback_host,
)
from ragspine_lite.remote.server.launch import (
    add_serve_remote_arguments,
    config_from_args,
    serve,
)
from ragspine_lite.remote.server.openapi import openapi_schema

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_REQUEST_TIMEOUT_S",
    "SERVER_ENV",
    "SERVER_EXTRA",
    "ServerConfig",
    "add_serve_remote_arguments",
    "check_bind",
    "config_from_args",
    "create_app",
    "is_loopback_host",
    "openapi_schema",
    "serve",
]


def create_app(config: ServerConfig | None = None, **kwargs: Any) -> Any:
    """The Starlette app (see :func:`ragspine_lite.remote.server.app.create_app`)."""
    from ragspine_lite.remote.server.app import create_app as _create_app

    return _create_app(config, **kwargs)
