"""The Pyodide transport: browser HTTP from synchronous Python code.

Two ways, picked per request:

- ``fetch`` through ``pyodide.ffi.run_sync`` when ``can_run_sync()`` is true (JSPI:
  Chromium ≥ 137, or a runtime started with JSPI enabled);
- synchronous ``XMLHttpRequest`` otherwise — allowed inside a Web Worker, where the Python
  runtime lives (on a page's main thread browsers refuse sync XHR timeouts and warn).

Only this module imports ``js`` / ``pyodide``, and only when a request is made, so it
imports anywhere. The bodies are text (the endpoint speaks JSON). Network failures raise
``TimeoutError`` / ``ConnectionError`` as the transport seam requires.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

__all__ = ["PyodideTransport", "parse_header_block"]

_MODES = ("auto", "fetch", "xhr")


def parse_header_block(block: str) -> dict[str, str]:
    """``getAllResponseHeaders()`` text → ``{lower-case name: value}`` (repeats joined)."""
    out: dict[str, str] = {}
    for line in str(block or "").replace("\r\n", "\n").split("\n"):
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            continue
        key = name.strip().lower()
        value = value.strip()
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


def _js_error_name(exc: BaseException) -> str:
    name = getattr(exc, "name", None)
    return str(name) if name else type(exc).__name__


def _raise_network(exc: BaseException, timeout: float) -> NoReturn:
    text = f"{_js_error_name(exc)} {exc}".lower()
    if "timeout" in text or "timed out" in text or "abort" in text:
        raise TimeoutError(f"timed out after {timeout:g} s") from exc
    raise ConnectionError(f"browser request failed ({_js_error_name(exc)}: {exc})") from exc


class PyodideTransport:
    """Transport for Pyodide (see the module docstring).

    ``mode``: ``"auto"`` (fetch + run_sync when possible, else sync XHR), ``"fetch"`` or
    ``"xhr"``. ``js_globals`` / ``ffi`` default to the ``js`` and ``pyodide.ffi`` modules;
    tests pass stand-ins.
    """

    def __init__(self, *, mode: str = "auto", js_globals: Any = None, ffi: Any = None) -> None:
        if mode not in _MODES:
            raise ValueError(f"unknown mode {mode!r}; valid modes: {', '.join(_MODES)}")
        self.mode = mode
        self._js = js_globals
        self._ffi = ffi

    def _modules(self) -> tuple[Any, Any]:
        if self._js is None:
            import js

            self._js = js
        if self._ffi is None:
            import pyodide.ffi

            self._ffi = pyodide.ffi
        return self._js, self._ffi

    def _use_fetch(self, ffi: Any) -> bool:
        if self.mode == "xhr":
            return False
        can = getattr(ffi, "can_run_sync", None)
        able = bool(can()) if callable(can) else False
        if self.mode == "fetch" and not able:
            raise ConnectionError(
                "fetch mode needs pyodide.ffi.run_sync (JSPI), which this runtime lacks; "
                "use mode='xhr' inside a Web Worker"
            )
        return able

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes,
        timeout: float,
    ) -> tuple[int, dict[str, str], bytes]:
        js, ffi = self._modules()
        text = bytes(body).decode("utf-8") if body else None
        if self._use_fetch(ffi):
            return self._fetch(js, ffi, method, url, headers, text, timeout)
        return self._xhr(js, method, url, headers, text, timeout)

    @staticmethod
    def _xhr(
        js: Any, method: str, url: str, headers: Mapping[str, str], text: str | None,
        timeout: float,
    ) -> tuple[int, dict[str, str], bytes]:
        xhr = js.XMLHttpRequest.new()
        xhr.open(method, url, False)
        try:
            xhr.timeout = max(1, int(timeout * 1000))
        except Exception:  # a window context refuses timeouts on sync XHR: no deadline then
            pass
        for name, value in headers.items():
            xhr.setRequestHeader(name, value)
        try:
            xhr.send(text)
        except Exception as exc:
            _raise_network(exc, timeout)
        status = int(xhr.status)
        if status == 0:  # network error, CORS refusal or abort: no HTTP answer at all
            raise ConnectionError(f"no answer from {url} (network error or CORS refusal)")
        answer = xhr.responseText
        return (
            status,
            parse_header_block(str(xhr.getAllResponseHeaders() or "")),
            str(answer if answer is not None else "").encode("utf-8"),
        )

    @staticmethod
    def _fetch(
        js: Any, ffi: Any, method: str, url: str, headers: Mapping[str, str], text: str | None,
        timeout: float,
    ) -> tuple[int, dict[str, str], bytes]:
        options: dict[str, Any] = {
            "method": method,
            "headers": dict(headers),
            "signal": js.AbortSignal.timeout(max(1, int(timeout * 1000))),
        }
        if text is not None:
            options["body"] = text
        try:
            init = ffi.to_js(options, dict_converter=js.Object.fromEntries)
            response = ffi.run_sync(js.fetch(url, init))
            answer = ffi.run_sync(response.text())
        except Exception as exc:
            _raise_network(exc, timeout)
        found: dict[str, str] = {}
        for pair in response.headers.entries():
            found[str(pair[0]).lower()] = str(pair[1])
        return int(response.status), found, str(answer).encode("utf-8")
