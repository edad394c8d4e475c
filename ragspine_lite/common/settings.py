"""Every environment variable the package reads, in one place: the frozen :class:`Settings`.

The edges (the command line, the site build, the remote endpoint) read the environment once,
with :meth:`Settings.from_env`, and pass the value on; the library never reads it for them.
A library factory called without a spec (``make_reranker()``) falls back to its variable
through :func:`env_value`, the package's one reader of ``os.environ``, which refuses a name
that is not declared here. Bad values raise ``ValueError`` naming the variable and the value
(a secret's only by its length).

>>> Settings.from_env({"RAGSPINE_REMOTE_MAX_BODY_BYTES": "1024"}).remote_max_body_bytes
1024
>>> Settings.from_env({"RAGSPINE_REMOTE_TIMEOUT": "soon"})
Traceback (most recent call last):
ValueError: RAGSPINE_REMOTE_TIMEOUT: expected a positive number, got 'soon'
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, overload

from ragspine_lite.common import validators

__all__ = ["ENV_NAMES", "SECRET_NAMES", "Settings", "env_name", "env_value"]

_Reader = Callable[[str, str, str], Any]  # (text, variable, shown) → value


def _text(raw: str, name: str, shown: str) -> str:
    return raw


def _kind(kind: str) -> _Reader:
    def read(raw: str, name: str, shown: str) -> Any:
        return validators.parse(kind, raw, name, shown=shown)

    return read


def _url(raw: str, name: str, shown: str) -> str:
    return validators.url(raw, name)


def _names(raw: str, name: str, shown: str) -> tuple[str, ...]:
    return tuple(part for part in (p.strip() for p in raw.split(",")) if part)


#: How a variable's text is read, by kind (numbers through :mod:`validators`).
_READERS: dict[str, _Reader] = {
    "text": _text, "url": _url, "names": _names,
    "positive integer": _kind("positive integer"), "positive number": _kind("positive number"),
}


def _var(env: str, kind: str = "text", *, secret: bool = False) -> Any:
    return field(default=None, metadata={"env": env, "kind": kind, "secret": secret})


_POSITIVE, _NUMBER = "positive integer", "positive number"


@dataclass(frozen=True)
class Settings:
    """The environment as the package reads it (``None``: the variable is unset or blank).

    Spec variables (``reranker``, ``chunker`` …) stay text: the factory that takes the spec
    checks it. Numbers and URLs are checked here.
    """

    # specs, model names and paths (the factory or the loader that takes one checks it)
    retrieval_mode: str | None = _var("RAGSPINE_RETRIEVAL_MODE")
    embedding_backend: str | None = _var("RAGSPINE_EMBEDDING_BACKEND")
    embedding: str | None = _var("RAGSPINE_EMBEDDING")
    embedding_model: str | None = _var("RAGSPINE_EMBEDDING_MODEL")
    onnx_embedding_model: str | None = _var("RAGSPINE_ONNX_EMBEDDING_MODEL")
    embedding_device: str | None = _var("RAGSPINE_EMBEDDING_DEVICE")
    chunker: str | None = _var("RAGSPINE_CHUNKER")
    contextual: str | None = _var("RAGSPINE_CONTEXTUAL")
    persistence_policy: str | None = _var("RAGSPINE_PERSISTENCE_POLICY")
    company_config: str | None = _var("RAGSPINE_COMPANY_CONFIG")
    filter_extractor: str | None = _var("RAGSPINE_FILTER_EXTRACTOR")
    library_router: str | None = _var("RAGSPINE_LIBRARY_ROUTER")
    vector_store: str | None = _var("RAGSPINE_VECTOR_STORE")
    reranker: str | None = _var("RAGSPINE_RERANKER")
    cross_encoder_model: str | None = _var("RAGSPINE_CROSS_ENCODER_MODEL")
    colbert_model: str | None = _var("RAGSPINE_COLBERT_MODEL")
    splade_model: str | None = _var("RAGSPINE_SPLADE_MODEL")
    postprocessor: str | None = _var("RAGSPINE_POSTPROCESSOR")
    corrective: str | None = _var("RAGSPINE_CORRECTIVE")
    raptor: str | None = _var("RAGSPINE_RAPTOR")
    raptor_summarizer: str | None = _var("RAGSPINE_RAPTOR_SUMMARIZER")
    query_transform: str | None = _var("RAGSPINE_QUERY_TRANSFORM")
    query_decompose: str | None = _var("RAGSPINE_QUERY_DECOMPOSE")
    adaptive: str | None = _var("RAGSPINE_ADAPTIVE")
    visual_embedder: str | None = _var("RAGSPINE_VISUAL_EMBEDDER")
    colpali_model: str | None = _var("RAGSPINE_COLPALI_MODEL")
    relation_extractor: str | None = _var("RAGSPINE_RELATION_EXTRACTOR")
    graph_store: str | None = _var("RAGSPINE_GRAPH_STORE")
    fact_store: str | None = _var("RAGSPINE_FACT_STORE")
    narrative_graph: str | None = _var("RAGSPINE_NARRATIVE_GRAPH")
    llm_model: str | None = _var("RAGSPINE_LLM_MODEL")
    embed_model: str | None = _var("RAGSPINE_EMBED_MODEL")
    remote_llm_model: str | None = _var("RAGSPINE_REMOTE_LLM_MODEL")
    remote_db: str | None = _var("RAGSPINE_REMOTE_DB")
    remote_search_embedding: str | None = _var("RAGSPINE_REMOTE_SEARCH_EMBEDDING")
    cache_home: str | None = _var("XDG_CACHE_HOME")  # the site build caches wheels below it
    # secrets: shown by their length only, never by value
    openai_api_key: str | None = _var("RAGSPINE_OPENAI_API_KEY", secret=True)
    openai_api_key_fallback: str | None = _var("OPENAI_API_KEY", secret=True)
    pg_url: str | None = _var("RAGSPINE_PG_URL", secret=True)
    llm_api_key: str | None = _var("RAGSPINE_LLM_API_KEY", secret=True)
    remote_token: str | None = _var("RAGSPINE_REMOTE_TOKEN", secret=True)
    remote_llm_key: str | None = _var("RAGSPINE_REMOTE_LLM_KEY", secret=True)
    # URLs of servers this process calls (the LLM of the query layers, a remote endpoint)
    openai_base_url: str | None = _var("RAGSPINE_OPENAI_BASE_URL", "url")
    openai_base_url_fallback: str | None = _var("OPENAI_BASE_URL", "url")
    llm_url: str | None = _var("RAGSPINE_LLM_URL", "url")
    remote_url: str | None = _var("RAGSPINE_REMOTE_URL", "url")
    remote_llm_url: str | None = _var("RAGSPINE_REMOTE_LLM_URL", "url")
    # timeouts in seconds
    llm_timeout: float | None = _var("RAGSPINE_LLM_TIMEOUT", _NUMBER)
    remote_timeout: float | None = _var("RAGSPINE_REMOTE_TIMEOUT", _NUMBER)
    remote_read_timeout: float | None = _var("RAGSPINE_REMOTE_READ_TIMEOUT", _NUMBER)
    remote_llm_timeout: float | None = _var("RAGSPINE_REMOTE_LLM_TIMEOUT", _NUMBER)
    # limits of the endpoint this process serves
    remote_max_body_bytes: int | None = _var("RAGSPINE_REMOTE_MAX_BODY_BYTES", _POSITIVE)
    remote_max_candidates: int | None = _var("RAGSPINE_REMOTE_MAX_CANDIDATES", _POSITIVE)
    remote_max_concurrency: int | None = _var("RAGSPINE_REMOTE_MAX_CONCURRENCY", _POSITIVE)
    remote_max_visual_pages: int | None = _var("RAGSPINE_REMOTE_MAX_VISUAL_PAGES", _POSITIVE)
    # comma-separated lists of the endpoint this process serves
    remote_cors_origins: tuple[str, ...] | None = _var("RAGSPINE_REMOTE_CORS_ORIGINS", "names")
    remote_allowed_hosts: tuple[str, ...] | None = _var("RAGSPINE_REMOTE_ALLOWED_HOSTS", "names")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings of ``environ`` (default ``os.environ``), every value checked."""
        env = os.environ if environ is None else environ
        values = {}
        for f in fields(cls):
            raw = env.get(f.metadata["env"], "")
            if raw.strip():
                values[f.name] = _read(f, raw)
        return cls(**values)

    def as_env(self) -> dict[str, str]:
        """The variables that make :meth:`from_env` rebuild these settings."""
        out: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[f.metadata["env"]] = ",".join(value) if isinstance(value, tuple) else str(value)
        return out

    def __repr__(self) -> str:  # secrets never printed, unset variables not listed
        shown = [
            f"{f.name}={'***' if f.metadata['secret'] else repr(getattr(self, f.name))}"
            for f in fields(self) if getattr(self, f.name) is not None
        ]
        return f"Settings({', '.join(shown)})"


def _read(f: Any, raw: str) -> Any:
    name = f.metadata["env"]
    shown = f"a {len(raw)}-character value" if f.metadata["secret"] else repr(raw)
    return _READERS[f.metadata["kind"]](raw.strip(), name, shown)


#: Settings field → its environment variable, and the variables that hold secrets.
ENV_NAMES: Mapping[str, str] = {f.name: f.metadata["env"] for f in fields(Settings)}
SECRET_NAMES = frozenset(f.metadata["env"] for f in fields(Settings) if f.metadata["secret"])
_DECLARED = frozenset(ENV_NAMES.values())


def env_name(setting: str) -> str:
    """The environment variable of a :class:`Settings` field."""
    return ENV_NAMES[setting]


@overload
def env_value(name: str) -> str | None: ...
@overload
def env_value(name: str, default: str) -> str: ...
def env_value(name: str, default: str | None = None) -> str | None:
    """The raw value of the declared variable ``name`` (``default`` when unset): what a library
    factory called without a spec falls back to. An undeclared name is a ``KeyError``."""
    if name not in _DECLARED:
        raise KeyError(f"{name} is not a variable of ragspine_lite.common.settings.Settings")
    return os.environ.get(name, default)
