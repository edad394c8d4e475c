"""Exception types shared across the package."""

from __future__ import annotations


class RagspineError(Exception):
    """Base class of ragspine_lite's own errors."""


class ProviderError(RagspineError):
    """An LLM / model provider failed (network, SDK, bad response)."""


class TraceError(ValueError):
    """A trace record would have carried content (text, prompt, answer …)."""
