"""``make_reranker``: rerankers by spec — local models, ``remote:<method>``, entry points.

    make_reranker("colbert")                                   # a ColbertReranker, in process
    make_reranker("remote:colbert", url="http://127.0.0.1:8765")  # a RemoteReranker
    make_reranker()  # from RAGSPINE_RERANKER (+ RAGSPINE_REMOTE_URL / RAGSPINE_REMOTE_TOKEN)

Local names (the seed's, with aliases): ``cross_encoder``/``ce``/``ms_marco``,
``colbert``/``colbertv2``/``late_interaction``, ``splade``/``splade_pp``/``learned_sparse``;
``auto`` is the best local reranker that can run here (see :func:`best_local_reranker`).
Entry points in the group ``ragspine_lite.rerankers`` add more. The family modules are
imported only when a reranker is built.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

from ragspine_lite.common.registry import Registry, normalize_spec
from ragspine_lite.common.settings import env_value

__all__ = [
    "LOCAL_RERANKERS",
    "REMOTE_PREFIX",
    "RERANKERS",
    "RERANKER_ENV",
    "best_local_reranker",
    "make_reranker",
]

RERANKER_ENV = "RAGSPINE_RERANKER"
REMOTE_PREFIX = "remote:"
_REMOTE_URL_ENV = "RAGSPINE_REMOTE_URL"  # mirrors ragspine_lite.remote.client (no import here)
_REMOTE_TOKEN_ENV = "RAGSPINE_REMOTE_TOKEN"

#: family → (module, class, model env, aliases). The env fills ``model_name`` when not passed.
LOCAL_RERANKERS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "cross_encoder": ("cross_encoder", "CrossEncoderReranker", "RAGSPINE_CROSS_ENCODER_MODEL",
                      ("ce", "ms_marco")),
    "colbert": ("colbert", "ColbertReranker", "RAGSPINE_COLBERT_MODEL",
                ("colbertv2", "late_interaction")),
    "splade": ("splade", "SpladeReranker", "RAGSPINE_SPLADE_MODEL",
               ("splade_pp", "learned_sparse")),
}
_ALIASES = {
    alias: family
    for family, (_m, _c, _e, aliases) in LOCAL_RERANKERS.items()
    for alias in (family, *aliases)
}

RERANKERS = Registry("rerankers")


def _local(family: str) -> Any:
    module, cls, _env, _aliases = LOCAL_RERANKERS[family]

    def make(**kwargs: Any) -> Any:
        return getattr(importlib.import_module(f"ragspine_lite.rerank.{module}"), cls)(**kwargs)

    return make


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


def _register() -> None:
    from ragspine_lite.remote.wire import RERANK_METHODS

    for alias, family in _ALIASES.items():
        RERANKERS.register(alias, _local(family))
    for method in RERANK_METHODS:
        RERANKERS.register(REMOTE_PREFIX + method, _remote(method))


_register()


def _findable(*modules: str) -> bool:
    try:
        return all(importlib.util.find_spec(m) is not None for m in modules)
    except (ImportError, ValueError):
        return False


def best_local_reranker(model_name: Any = None) -> str | None:
    """The family ``auto`` picks, checked without importing anything, or ``None``.

    ``cross_encoder`` when ``model_name`` (else ``RAGSPINE_CROSS_ENCODER_MODEL``) is a
    directory (a trained cross-encoder is the strongest); else ``colbert`` when the packaged
    MiniLM and onnxruntime are installed; else ``splade`` (SPLADE-tiny ships in the package)
    when numpy is; else ``None``.
    """
    if not _findable("numpy"):
        return None
    ce = model_name or env_value(LOCAL_RERANKERS["cross_encoder"][2], "").strip()
    if ce and Path(str(ce)).is_dir() and _findable("onnxruntime"):
        return "cross_encoder"
    from ragspine_lite.vector.onnx_backend import minilm_packages_available

    if _findable("onnxruntime") and minilm_packages_available():
        return "colbert"
    return "splade"


def _valid_names() -> str:
    return ", ".join(sorted({*RERANKERS.names(), "auto", "none"}))


def make_reranker(spec: str | None = None, **kwargs: Any) -> Any:
    """A ``ListwiseJudge`` for ``spec``, or ``None``.

    ``spec=None`` reads ``RAGSPINE_RERANKER`` (default ``none``) and then fills ``url`` /
    ``token`` of a remote spec from ``RAGSPINE_REMOTE_URL`` / ``RAGSPINE_REMOTE_TOKEN`` unless
    passed. Specs are Registry-normalised (strip, lower, ``-``/space → ``_``). ``none`` →
    ``None``; ``auto`` → the best local reranker (:func:`best_local_reranker`) or ``None``; a
    local name → its reranker with ``**kwargs``, ``model_name`` from the family's
    ``RAGSPINE_*_MODEL`` variable when not passed; ``remote:<method>`` (an alias such as
    ``remote:late-interaction`` too) → a ``RemoteReranker`` (``llm``: ``RemoteListwiseJudge``);
    unknown → ``ValueError`` listing the valid names.
    """
    from_env = spec is None
    if spec is None:
        spec = env_value(RERANKER_ENV, "none")
    key = normalize_spec(spec)
    if key in ("none", ""):
        return None
    if key == "auto":
        key = best_local_reranker(kwargs.get("model_name")) or "none"
        if key == "none":
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
                if env_value(env) and name not in kwargs:
                    kwargs[name] = env_value(env)
    elif key in _ALIASES and "model_name" not in kwargs:
        model = env_value(LOCAL_RERANKERS[_ALIASES[key]][2], "").strip()
        if model:
            kwargs["model_name"] = model
    if key not in RERANKERS.names():
        raise ValueError(f"unknown reranker {spec!r}; valid names: {_valid_names()}")
    return RERANKERS.make(key, **kwargs)
