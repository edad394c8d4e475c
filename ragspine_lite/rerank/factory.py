"""``make_reranker``: rerankers by spec, ``remote:<method>`` for the remote endpoint.

    make_reranker("remote:colbert", url="http://127.0.0.1:8765")  # a RemoteReranker
    make_reranker()  # from RAGSPINE_RERANKER / RAGSPINE_REMOTE_URL / RAGSPINE_REMOTE_TOKEN

The lite ships no in-process model reranker (the heavy models run on the endpoint), so
``auto`` means ``none``. Entry points in the group ``ragspine_lite.rerankers`` add more.
"""

from __future__ import annotations

import os
from typing import Any

from ragspine_lite.common.registry import Registry, normalize_spec

__all__ = ["REMOTE_PREFIX", "RERANKERS", "RERANKER_ENV", "make_reranker"]

RERANKER_ENV = "RAGSPINE_RERANKER"
REMOTE_PREFIX = "remote:"
_REMOTE_URL_ENV = "RAGSPINE_REMOTE_URL"  # mirrors ragspine_lite.remote.client (no import here)
_REMOTE_TOKEN_ENV = "RAGSPINE_REMOTE_TOKEN"
_OFF = ("none", "auto")

RERANKERS = Registry("rerankers")


def _remote(method: str) -> Any:
    def make(url: str | None = None, **kwargs: Any) -> Any:
        if not url:
            raise ValueError(
                f"reranker {REMOTE_PREFIX}{method} needs url='http://host:port' "
                f"(or {_REMOTE_URL_ENV} when the spec itself comes from the environment)"
            )
        from ragspine_lite.remote.client import RemoteListwiseJudge, RemoteReranker

        if method == "llm":
            return RemoteListwiseJudge(url, **kwargs)
        return RemoteReranker(url, method, **kwargs)

    return make


def _register_remote() -> None:
    from ragspine_lite.remote.wire import RERANK_METHODS

    for method in RERANK_METHODS:
        RERANKERS.register(REMOTE_PREFIX + method, _remote(method))


_register_remote()


def _valid_names() -> str:
    return ", ".join(sorted({*RERANKERS.names(), *_OFF}))


def make_reranker(spec: str | None = None, **kwargs: Any) -> Any:
    """A ``ListwiseJudge`` for ``spec`` or ``None``.

    ``spec=None`` reads ``RAGSPINE_RERANKER`` (default ``none``) and then fills ``url`` /
    ``token`` from ``RAGSPINE_REMOTE_URL`` / ``RAGSPINE_REMOTE_TOKEN`` unless passed. Specs
    are Registry-normalised; ``none``/``auto`` → ``None``; ``remote:<method>`` with
    method ``cross_encoder``/``colbert``/``splade``/``llm`` (or an alias such as
    ``remote:late-interaction``) → a ``RemoteReranker`` (``llm``: ``RemoteListwiseJudge``)
    built with ``**kwargs``; unknown → ``ValueError`` listing the valid names.
    """
    from_env = spec is None
    if spec is None:
        spec = os.environ.get(RERANKER_ENV, "none")
    key = normalize_spec(spec)
    if key in _OFF or not key:
        return None
    if key.startswith(REMOTE_PREFIX):
        from ragspine_lite.remote.wire import canonical_method

        try:
            key = REMOTE_PREFIX + canonical_method(key[len(REMOTE_PREFIX) :])
        except ValueError:
            raise ValueError(
                f"unknown reranker {spec!r}; valid names: {_valid_names()}"
            ) from None
        if from_env:
            for name, env in (("url", _REMOTE_URL_ENV), ("token", _REMOTE_TOKEN_ENV)):
                if os.environ.get(env) and name not in kwargs:
                    kwargs[name] = os.environ[env]
    if key not in RERANKERS.names():
        raise ValueError(f"unknown reranker {spec!r}; valid names: {_valid_names()}")
    return RERANKERS.make(key, **kwargs)
