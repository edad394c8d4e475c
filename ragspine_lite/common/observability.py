"""Privacy-safe trace: structured log records that never carry content."""

from __future__ import annotations

import logging
from typing import Any

from ragspine_lite.common.errors import TraceError

__all__ = ["FORBIDDEN_TRACE_KEYS", "TraceError", "emit_trace"]

FORBIDDEN_TRACE_KEYS = frozenset(
    {"answer", "value", "text", "content", "prompt", "completion", "chunk", "chunk_text", "body"}
)
_TRACE_LOGGER = logging.getLogger("ragspine_lite.trace")


def emit_trace(logger: logging.Logger | None = None, **fields: Any) -> None:
    """Log one INFO record ``"trace"`` with ``fields`` as record attributes.

    Raises :class:`TraceError` if a key (case-insensitive) could carry content.
    """
    bad = sorted(k for k in fields if k.lower() in FORBIDDEN_TRACE_KEYS)
    if bad:
        raise TraceError(f"trace fields may not carry content; forbidden keys: {bad}")
    (logger or _TRACE_LOGGER).info("trace", extra={"trace": dict(fields), **fields})
