"""The one error type of the remote clients."""

from __future__ import annotations

from ragspine_lite.common.errors import ProviderError

__all__ = ["REMOTE_ERROR_KINDS", "RemoteError"]

#: Why a remote call failed; ``RemoteError.kind`` is always one of these.
REMOTE_ERROR_KINDS = ("timeout", "connection", "http", "malformed", "permutation")


class RemoteError(ProviderError):
    """A remote call failed: timed out, unreachable, refused (4xx/5xx) or answered nonsense.

    ``kind`` is one of :data:`REMOTE_ERROR_KINDS`; ``status`` is the HTTP status when the
    server answered. Messages name the URL and the cause, never the texts that were sent.
    ``listwise_rerank`` catches it and keeps the RRF order.
    """

    def __init__(
        self, message: str, *, kind: str, status: int | None = None, url: str = ""
    ) -> None:
        if kind not in REMOTE_ERROR_KINDS:
            raise ValueError(
                f"unknown remote error kind {kind!r}; valid kinds: {', '.join(REMOTE_ERROR_KINDS)}"
            )
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.url = url
