"""The transport seam of the remote clients: one ``request`` method, two implementations.

A transport sends one HTTP request and returns ``(status, headers, body)`` for *any* status
(4xx/5xx included). Network failures raise stdlib exceptions: ``TimeoutError`` when the
deadline passed, another ``OSError`` (e.g. ``ConnectionError``) when no answer came. The
clients turn both, and bad statuses or bodies, into :class:`RemoteError`.

- :class:`UrllibTransport` — CPython, stdlib ``urllib`` (no dependency).
- ``ragspine_lite._compat.pyodide_http.PyodideTransport`` — inside Pyodide: synchronous
  ``XMLHttpRequest`` (allowed in a Web Worker) or ``fetch`` through ``pyodide.ffi.run_sync``.

:func:`default_transport` picks one from ``ragspine_lite._compat.IN_PYODIDE``.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ragspine_lite.remote.errors import RemoteError

__all__ = [
    "HttpResponse",
    "Transport",
    "UrllibTransport",
    "default_transport",
    "request_json",
]

_ERROR_DETAIL_CHARS = 300


class HttpResponse(NamedTuple):
    """What a transport returns: status, headers (lower-case names) and the raw body."""

    status: int
    headers: Mapping[str, str]
    body: bytes


@runtime_checkable
class Transport(Protocol):
    """Sends one HTTP request; network failures raise ``TimeoutError`` / ``OSError``."""

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes,
        timeout: float,
    ) -> tuple[int, Mapping[str, str], bytes]: ...


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, (TimeoutError, socket.timeout)) or "timed out" in str(exc).lower()


class UrllibTransport:
    """CPython transport over ``urllib.request`` (proxies from the environment, as urllib does)."""

    def __init__(self, opener: urllib.request.OpenerDirector | None = None) -> None:
        self._opener = opener or urllib.request.build_opener()

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes,
        timeout: float,
    ) -> HttpResponse:
        req = urllib.request.Request(url, data=body or None, method=method, headers=dict(headers))
        try:
            with self._opener.open(req, timeout=timeout) as resp:
                return HttpResponse(resp.status, _lower(resp.headers.items()), resp.read())
        except urllib.error.HTTPError as exc:  # an answer with a 4xx/5xx status
            try:
                data = exc.read()
            finally:
                exc.close()
            return HttpResponse(exc.code, _lower(exc.headers.items()), data)
        except urllib.error.URLError as exc:
            reason = exc.reason
            if _is_timeout(reason if isinstance(reason, BaseException) else exc):
                raise TimeoutError(f"timed out after {timeout:g} s") from exc
            raise ConnectionError(f"cannot reach the endpoint ({reason})") from exc
        except TimeoutError as exc:  # timeout while reading the body (socket.timeout too)
            raise TimeoutError(f"timed out after {timeout:g} s") from exc
        except OSError:
            raise
        except Exception as exc:  # http.client errors (e.g. RemoteDisconnected's cousins)
            raise ConnectionError(f"connection failed ({type(exc).__name__}: {exc})") from exc


def _lower(items: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in items}


def default_transport() -> Transport:
    """The transport for this runtime: Pyodide's inside Pyodide, urllib's elsewhere."""
    from ragspine_lite._compat import IN_PYODIDE

    if IN_PYODIDE:
        from ragspine_lite._compat.pyodide_http import PyodideTransport

        return PyodideTransport()
    return UrllibTransport()


def _error_detail(body: bytes) -> str:
    """The server's error message (``{"error": {"message": ...}}`` or text), shortened."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            text = err["message"]
        elif isinstance(err, str):
            text = err
        elif isinstance(data.get("detail"), str):
            text = data["detail"]
    text = " ".join(text.split())
    if len(text) > _ERROR_DETAIL_CHARS:
        text = text[: _ERROR_DETAIL_CHARS - 1] + "…"
    return text or "no message"


def request_json(
    transport: Transport,
    method: str,
    url: str,
    payload: Any = None,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float,
) -> Any:
    """Send ``payload`` as JSON, return the decoded JSON answer; every failure → RemoteError.

    Non-2xx → ``kind="http"`` with the server's message; a body that is not JSON →
    ``"malformed"``; ``TimeoutError`` → ``"timeout"``; other transport failures →
    ``"connection"``.
    """
    sent = {"Accept": "application/json"}
    body = b""
    if payload is not None:
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        sent["Content-Type"] = "application/json"
    sent.update(headers or {})
    try:
        status, _headers, data = transport.request(
            method, url, headers=sent, body=body, timeout=timeout
        )
    except TimeoutError as exc:
        raise RemoteError(
            f"{method} {url} timed out after {timeout:g} s", kind="timeout", url=url
        ) from exc
    except Exception as exc:
        raise RemoteError(
            f"{method} {url} failed: {type(exc).__name__}: {exc}", kind="connection", url=url
        ) from exc
    status = int(status)
    if not 200 <= status < 300:
        raise RemoteError(
            f"{method} {url} answered HTTP {status}: {_error_detail(bytes(data))}",
            kind="http",
            status=status,
            url=url,
        )
    try:
        return json.loads(bytes(data).decode("utf-8"))
    except ValueError as exc:
        raise RemoteError(
            f"{method} {url} answered HTTP {status} with a body that is not JSON",
            kind="malformed",
            status=status,
            url=url,
        ) from exc
