"""uvicorn's HTTP/1.1 protocol with a deadline for request headers (``[server]`` extra).

uvicorn bounds the idle time between requests, not the time a client takes to send one: a
client that trickles its headers a byte at a time holds a connection forever. Here a
connection that has not sent complete request headers ``read_timeout_s`` after it opened (or
after its previous response) gets ``408 Request Timeout`` and is closed. The body has its own
deadline in the app (:func:`ragspine_lite.remote.server.app.create_app`), which reads only
bodies it means to use: a connection whose response is complete while its request body is
still coming (an early error, a GET with a body) is closed, so nobody can trickle a body
that is never read.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ragspine_lite.remote.server.config import DEFAULT_READ_TIMEOUT_S

try:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"the remote endpoint needs uvicorn ({exc.name!r} is missing): install it with "
        "`pip install ragspine-lite[server]` and retry"
    ) from exc

__all__ = ["ReadDeadlineProtocol", "timeout_response"]


def timeout_response(message: str) -> bytes:
    """A complete ``408`` response with the endpoint's JSON error body; closes the connection."""
    body = json.dumps({"error": {"code": "request_timeout", "message": message}}).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class ReadDeadlineProtocol(H11Protocol):
    """:class:`H11Protocol` that answers 408 and closes when request headers come too slowly.

    ``read_timeout_s`` is a class attribute: :func:`~ragspine_lite.remote.server.launch.serve`
    (and each worker process, via ``app_from_env``) sets it from the server settings.
    """

    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(self.read_timeout_s, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        self.transport.write(timeout_response(
            f"request headers not received within {self.read_timeout_s:g} s"
        ))
        self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the request line and headers are in
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self.conn.their_state is h11.SEND_BODY:  # answered before the body came: no reader
            self.transport.close()
        elif self.conn.their_state is h11.IDLE:
            self._arm()  # the next request on this connection gets the same deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)
