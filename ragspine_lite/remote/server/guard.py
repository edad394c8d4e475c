"""The endpoint's request guard (pure ASGI): ``Host``, ``Origin`` and ``Content-Type``.

A tokenless endpoint on loopback trusts whoever reaches it, and a web page in the operator's
browser reaches it too. So every request, on every route and method, must:

- name this server in ``Host`` (421): the address the connection came in on, the bound host,
  ``localhost`` when that is loopback, or one of ``allowed_hosts``. A page of
  ``evil.example`` whose name is re-pointed at 127.0.0.1 (DNS rebinding) still sends
  ``Host: evil.example``;
- carry no ``Origin`` but one of ``cors_origins`` (403; ``"*"`` allows any). Browsers send
  the page's origin with every cross-site POST, simple ones (``text/plain``, form-encoded)
  included, and with every CORS request;
- send a body only as ``application/json`` (415), which no simple cross-site request can.

A refusal is the endpoint's JSON error and closes the connection.

>>> host_name("[::1]:8765"), host_name("LocalHost."), host_name("127.0.0.1:x")
('::1', 'localhost', None)
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from ragspine_lite.remote.server.config import is_loopback_host

__all__ = ["RequestGuard", "error_response_parts", "host_name"]

_WILDCARDS = ("0.0.0.0", "::", "")
_BODYLESS = ("GET", "HEAD", "OPTIONS")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def _canonical(name: str) -> str:
    """A host name lower-cased without brackets or trailing dot; IP literals normalised."""
    name = name.strip().strip("[]").lower().rstrip(".")
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


def host_name(header: str) -> str | None:
    """The name in a ``Host`` header without its port; ``None`` if it is malformed."""
    value = header.strip()
    if value.startswith("["):
        end = value.find("]")
        name, port = (value[1:end], value[end + 1 :]) if end > 0 else ("", "")
        if port and not port.startswith(":"):
            return None
        port = port[1:]
    else:
        name, _, port = value.partition(":")
    if not name or (port and not port.isdigit()) or any(c in name for c in "/@ \t"):
        return None
    return _canonical(name)


def error_response_parts(status: int, code: str, message: str) -> tuple[dict[str, Any], bytes]:
    """The ASGI ``http.response.start`` message and body of a JSON error that closes."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"connection", b"close")]
    return {"type": "http.response.start", "status": status, "headers": headers}, body


class RequestGuard:
    """ASGI middleware refusing requests with a foreign ``Host``, ``Origin`` or body type."""

    def __init__(
        self,
        app: Callable[[Scope, Receive, Send], Awaitable[None]],
        *,
        bound_host: str,
        allowed_hosts: Iterable[str] = (),
        cors_origins: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.names = {_canonical(h) for h in allowed_hosts}
        if _canonical(bound_host) not in _WILDCARDS:
            self.names.add(_canonical(bound_host))
        self.origins = set(cors_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = self.refusal(scope) if scope.get("type") == "http" else None
        if refusal is None:
            await self.app(scope, receive, send)
            return
        start, body = error_response_parts(*refusal)
        await send(start)
        await send({"type": "http.response.body", "body": body})

    def _host_allowed(self, name: str, scope: Scope) -> bool:
        names = set(self.names)
        server = scope.get("server")
        if server:
            names.add(_canonical(str(server[0])))
        if any(is_loopback_host(n) for n in names):
            names.add("localhost")
        return name in names

    def refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        """``(status, code, message)`` when the request must be refused, else ``None``."""
        headers: dict[str, list[str]] = {}
        for key, value in scope.get("headers") or ():
            headers.setdefault(key.decode("latin-1").lower(), []).append(value.decode("latin-1"))
        hosts = headers.get("host", [])
        name = host_name(hosts[0]) if len(hosts) == 1 else None
        if name is None or not self._host_allowed(name, scope):
            shown = hosts[0][:60] if len(hosts) == 1 else f"{len(hosts)} Host headers"
            return (421, "misdirected_request",
                    f"Host {shown!r} is not this server (allow a name with --allowed-host)")
        foreign = [o for o in headers.get("origin", []) if o not in self.origins]
        if foreign and "*" not in self.origins:
            return (403, "forbidden_origin",
                    f"requests from origin {foreign[0][:80]!r} are refused (allow one with "
                    "--cors-origin)")
        has_body = "transfer-encoding" in headers or any(
            v.strip() not in ("", "0") for v in headers.get("content-length", []))
        if has_body or scope.get("method", "GET") not in _BODYLESS:
            types = headers.get("content-type", [])
            media = types[0].split(";", 1)[0].strip().lower() if len(types) == 1 else ""
            if media != "application/json":
                return (415, "unsupported_media_type",
                        "request bodies must be sent as Content-Type: application/json")
        return None
