"""The endpoint's settings (pure Python): :class:`ServerConfig`, env round-trip, bind check.

The variables are read into :class:`~ragspine_lite.common.settings.Settings` at the server
edge and mapped here (``ServerConfig.from_settings``):
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
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ragspine_lite.common import validators
from ragspine_lite.common.settings import Settings, env_name
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

#: ServerConfig field → the :class:`~ragspine_lite.common.settings.Settings` field it is read
#: from (the settings module declares every variable).
_FROM_SETTINGS = (
    ("token", "remote_token"), ("cors_origins", "remote_cors_origins"),
    ("allowed_hosts", "remote_allowed_hosts"), ("max_body_bytes", "remote_max_body_bytes"),
    ("max_candidates", "remote_max_candidates"), ("request_timeout_s", "remote_timeout"),
    ("read_timeout_s", "remote_read_timeout"), ("max_concurrency", "remote_max_concurrency"),
    ("max_visual_pages", "remote_max_visual_pages"),
    ("cross_encoder_model", "cross_encoder_model"), ("colbert_model", "colbert_model"),
    ("splade_model", "splade_model"), ("embed_model", "embed_model"),
    ("visual_model", "visual_embedder"), ("llm_url", "remote_llm_url"),
    ("llm_model", "remote_llm_model"), ("llm_key", "remote_llm_key"),
    ("llm_timeout_s", "remote_llm_timeout"), ("search_db", "remote_db"),
    ("search_embedding", "remote_search_embedding"), ("vector_store", "vector_store"),
)
#: ServerConfig field → environment variable (the server edge reads these).
SERVER_ENV: Mapping[str, str] = {name: env_name(setting) for name, setting in _FROM_SETTINGS}


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


def _strings(name: str, value: Any, example: str) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{name} must be a tuple of non-blank strings (e.g. {example}), "
                         f"got {value!r}")
    return tuple(v.strip() for v in value)


@dataclass(frozen=True)
class ServerConfig:
    """What the endpoint serves and how it guards itself.

    Models: ``cross_encoder_model`` is a directory (no default: no trained cross-encoder
    ships offline); ``colbert_model`` / ``embed_model`` default to the packaged
    all-MiniLM-L6-v2 (``None``), or a directory; ``splade_model`` defaults to the
    packaged SPLADE-tiny; ``visual_model`` is ``none`` or
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
        validators.check("port", self.port, "port")
        if self.token is not None and (not isinstance(self.token, str) or not self.token.strip()):
            raise ValueError("token must be a non-blank string or None")
        for name, example in (("cors_origins", "'http://localhost:8000'"),
                              ("allowed_hosts", "'search.example.org'")):
            object.__setattr__(self, name, _strings(name, getattr(self, name), example))
        for name in _INT_FIELDS:
            validators.positive_int(getattr(self, name), name)
        for name in ("request_timeout_s", "read_timeout_s", "llm_timeout_s"):
            object.__setattr__(self, name, validators.positive_float(getattr(self, name), name))
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
    def from_settings(cls, settings: Settings, **overrides: Any) -> ServerConfig:
        """The endpoint's part of ``settings`` (:data:`SERVER_ENV`), then ``overrides`` (those
        not ``None``)."""
        values = {name: getattr(settings, setting) for name, setting in _FROM_SETTINGS}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**{k: v for k, v in values.items() if v is not None})

    @classmethod
    def from_env(cls, environ: Mapping[str, str], **overrides: Any) -> ServerConfig:
        """:meth:`from_settings` of ``environ``'s :class:`Settings`."""
        return cls.from_settings(Settings.from_env(environ), **overrides)

    def to_env(self) -> dict[str, str]:
        """The env vars that make :meth:`from_env` rebuild these settings (worker processes)."""
        out: dict[str, str] = {}
        for name, env in SERVER_ENV.items():
            value = getattr(self, name)
            if value is None or value == ():
                continue
            out[env] = ",".join(value) if name in _LIST_FIELDS else str(value)
        return out
