"""Test doubles for the remote clients: a scripted transport and retrieval-result stand-ins.

No sockets: usable in both lanes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any


class FakeTransport:
    """Answers with ``handler(method, url, payload, headers)`` → ``(status, body)``.

    ``body`` may be bytes (sent as is) or any JSON value; the handler may raise (a
    network failure). Every request is recorded in ``calls`` as
    ``(method, url, headers, body bytes, timeout)``.
    """

    def __init__(self, handler: Callable[..., Any]) -> None:
        self.handler = handler
        self.calls: list[tuple[str, str, dict[str, str], bytes, float]] = []

    def request(self, method, url, *, headers, body, timeout):
        self.calls.append((method, url, dict(headers), bytes(body), timeout))
        payload = json.loads(body.decode("utf-8")) if body else None
        status, answer = self.handler(method, url, payload, dict(headers))
        if not isinstance(answer, bytes):
            answer = json.dumps(answer).encode("utf-8")
        return status, {"content-type": "application/json"}, answer

    @property
    def sent(self) -> bytes:
        """Every byte sent (URLs, headers and bodies), for canary checks."""
        out = bytearray()
        for method, url, headers, body, _timeout in self.calls:
            out += f"{method} {url}\n".encode()
            for k, v in headers.items():
                out += f"{k}: {v}\n".encode()
            out += body + b"\n"
        return bytes(out)

    def payloads(self) -> list[Any]:
        return [json.loads(c[3]) if c[3] else None for c in self.calls]


def reverse_ranker(method, url, payload, headers):
    """A server stand-in: ranks candidates in reverse order, scores descending."""
    n = len(payload["candidates"])
    return 200, {
        "method": payload["method"],
        "model": "fake",
        "ranking": list(reversed(range(n))),
        "scores": [float(i) for i in range(n)],
    }


def result(text: str, sens: str = "INTERNAL", chunk_id: str = "") -> SimpleNamespace:
    """A retrieval-result stand-in: ``.chunk.text`` / ``.chunk.sensitivity``."""
    return SimpleNamespace(
        chunk=SimpleNamespace(text=text, sensitivity=sens, chunk_id=chunk_id or text),
        fused_score=0.0,
    )


class TinyVisualEmbedder:
    """A tiny visual model: each image byte is a patch, each query word a token (one-hot, 4-d)."""

    model_id = "tiny-visual"
    description = "tiny visual test model"

    def __init__(self):
        self.images_seen: list[bytes] = []

    @staticmethod
    def _vec(code: int) -> list[float]:
        v = [0.0] * 4
        v[code % 4] = 1.0
        return v

    def embed_query(self, query):
        return [self._vec(len(w)) for w in query.split()]

    def embed_images(self, images):
        self.images_seen.extend(images)
        return [[self._vec(b) for b in img] for img in images]
