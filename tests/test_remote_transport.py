"""The transport seam: request_json, the runtime pick, and the Pyodide transport on stand-ins."""

from __future__ import annotations

import json

import pytest
from _remote_fakes import FakeTransport

from ragspine_lite._compat import IN_PYODIDE
from ragspine_lite._compat.pyodide_http import PyodideTransport, parse_header_block
from ragspine_lite.remote.errors import REMOTE_ERROR_KINDS, RemoteError
from ragspine_lite.remote.transport import (
    Transport,
    UrllibTransport,
    default_transport,
    request_json,
)


def test_default_transport_matches_the_runtime():
    expected = PyodideTransport if IN_PYODIDE else UrllibTransport
    assert isinstance(default_transport(), expected)
    assert isinstance(UrllibTransport(), Transport) and isinstance(PyodideTransport(), Transport)


def test_request_json_sends_compact_utf8_json_and_decodes_the_answer():
    t = FakeTransport(lambda *a: (200, {"ok": "好"}))
    assert request_json(t, "POST", "http://h/x", {"q": "香港"}, timeout=2.5) == {"ok": "好"}
    method, url, headers, body, timeout = t.calls[0]
    assert (method, url) == ("POST", "http://h/x")
    assert body == '{"q":"香港"}'.encode()
    assert headers["Accept"] == "application/json" and timeout == 2.5


def test_request_json_without_payload_sends_no_body_or_content_type():
    t = FakeTransport(lambda *a: (200, {}))
    request_json(t, "GET", "http://h/x", timeout=1)
    assert t.calls[0][3] == b"" and "Content-Type" not in t.calls[0][2]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"error": {"code": "x", "message": "first"}}', "first"),
        (b'{"error": "second"}', "second"),
        (b'{"detail": "third"}', "third"),
        (b"plain text  reason", "plain text reason"),
        (b"", "no message"),
    ],
)
def test_error_statuses_carry_the_servers_message(body, message):
    t = FakeTransport(lambda *a: (503, body))
    with pytest.raises(RemoteError, match=message) as info:
        request_json(t, "GET", "http://h/x", timeout=1)
    assert info.value.status == 503 and info.value.kind == "http"


def test_long_error_messages_are_shortened():
    t = FakeTransport(lambda *a: (500, b"x" * 5000))
    with pytest.raises(RemoteError) as info:
        request_json(t, "GET", "http://h/x", timeout=1)
    assert len(str(info.value)) < 400


def test_remote_error_kinds_are_validated():
    with pytest.raises(ValueError, match="valid kinds"):
        RemoteError("x", kind="weird")
    assert set(REMOTE_ERROR_KINDS) >= {"timeout", "connection", "http", "malformed"}


# ---------------------------------------------------------------- Pyodide stand-ins


class FakeXHR:
    """Records what the transport does to a synchronous XMLHttpRequest."""

    def __init__(self, status=200, text='{"a": 1}', send_error=None, refuse_timeout=False):
        self.status, self.responseText = status, text
        self.send_error, self.refuse_timeout = send_error, refuse_timeout
        self.opened = None
        self.headers: dict[str, str] = {}
        self.sent = "unset"
        self._timeout = 0

    @property
    def timeout(self):
        return self._timeout

    @timeout.setter
    def timeout(self, value):
        if self.refuse_timeout:
            raise RuntimeError("InvalidAccessError")
        self._timeout = value

    def open(self, method, url, is_async):
        self.opened = (method, url, is_async)

    def setRequestHeader(self, name, value):
        self.headers[name] = value

    def send(self, body):
        if self.send_error is not None:
            raise self.send_error
        self.sent = body

    def getAllResponseHeaders(self):
        return "Content-Type: application/json\r\nX-Many: a\r\nx-many: b\r\n"


class FakeJS:
    def __init__(self, xhr=None, fetch=None):
        outer = self
        self.xhr = xhr
        self.fetch = fetch
        self.timeouts: list[int] = []

        class XMLHttpRequest:
            @staticmethod
            def new():
                return outer.xhr

        class AbortSignal:
            @staticmethod
            def timeout(ms):
                outer.timeouts.append(ms)
                return f"signal-{ms}"

        class Object:
            fromEntries = dict

        self.XMLHttpRequest, self.AbortSignal, self.Object = XMLHttpRequest, AbortSignal, Object


class FakeFFI:
    def __init__(self, can=False):
        self.can = can
        self.converted = []

    def can_run_sync(self):
        return self.can

    def run_sync(self, value):
        if isinstance(value, BaseException):
            raise value
        return value

    def to_js(self, value, dict_converter=None):
        self.converted.append(value)
        return value


class FakeResponse:
    def __init__(self, status, text):
        self.status = status
        self._text = text
        self.headers = type("H", (), {"entries": lambda _s: [("Content-Type", "x/json")]})()

    def text(self):
        return self._text


class JsError(Exception):
    def __init__(self, name, message):
        super().__init__(message)
        self.name = name


def test_xhr_mode_sends_a_synchronous_request_with_headers_and_timeout():
    xhr = FakeXHR()
    t = PyodideTransport(mode="xhr", js_globals=FakeJS(xhr), ffi=FakeFFI())
    status, headers, body = t.request("POST", "http://h/x", headers={"A": "1"},
                                      body='{"q":"é"}'.encode(), timeout=2.5)
    assert xhr.opened == ("POST", "http://h/x", False)
    assert xhr.headers == {"A": "1"} and xhr.sent == '{"q":"é"}' and xhr.timeout == 2500
    assert status == 200 and json.loads(body) == {"a": 1}
    assert headers == {"content-type": "application/json", "x-many": "a, b"}


def test_xhr_without_body_sends_null_and_works_where_timeouts_are_refused():
    xhr = FakeXHR(refuse_timeout=True)
    t = PyodideTransport(mode="xhr", js_globals=FakeJS(xhr), ffi=FakeFFI())
    assert t.request("GET", "http://h/x", headers={}, body=b"", timeout=1)[0] == 200
    assert xhr.sent is None


def test_xhr_status_zero_is_a_connection_error():
    t = PyodideTransport(mode="xhr", js_globals=FakeJS(FakeXHR(status=0)), ffi=FakeFFI())
    with pytest.raises(ConnectionError, match="CORS"):
        t.request("GET", "http://h/x", headers={}, body=b"", timeout=1)


@pytest.mark.parametrize(
    ("error", "expected"),
    [(JsError("TimeoutError", "took too long"), TimeoutError),
     (JsError("NetworkError", "failed"), ConnectionError)],
)
def test_xhr_send_failures_map_to_timeout_or_connection(error, expected):
    t = PyodideTransport(mode="xhr", js_globals=FakeJS(FakeXHR(send_error=error)), ffi=FakeFFI())
    with pytest.raises(expected):
        t.request("GET", "http://h/x", headers={}, body=b"", timeout=1)


def test_auto_mode_uses_fetch_when_run_sync_is_possible():
    calls = []

    def fetch(url, init):
        calls.append((url, init))
        return FakeResponse(201, '{"b": 2}')

    js = FakeJS(xhr=None, fetch=fetch)
    t = PyodideTransport(js_globals=js, ffi=FakeFFI(can=True))
    status, headers, body = t.request("POST", "http://h/y", headers={"H": "v"},
                                      body=b'{"x":1}', timeout=3)
    assert status == 201 and json.loads(body) == {"b": 2}
    assert headers == {"content-type": "x/json"}
    url, init = calls[0]
    assert url == "http://h/y" and init["method"] == "POST" and init["body"] == '{"x":1}'
    assert init["headers"] == {"H": "v"} and js.timeouts == [3000]


def test_auto_mode_falls_back_to_xhr_without_run_sync():
    xhr = FakeXHR()
    t = PyodideTransport(js_globals=FakeJS(xhr), ffi=FakeFFI(can=False))
    t.request("GET", "http://h/x", headers={}, body=b"", timeout=1)
    assert xhr.opened is not None


def test_fetch_failures_map_to_timeout_or_connection():
    def timing_out(url, init):
        raise JsError("TimeoutError", "signal timed out")

    def failing(url, init):
        raise JsError("TypeError", "Failed to fetch")

    for fetch, expected in ((timing_out, TimeoutError), (failing, ConnectionError)):
        t = PyodideTransport(mode="fetch", js_globals=FakeJS(fetch=fetch), ffi=FakeFFI(can=True))
        with pytest.raises(expected):
            t.request("GET", "http://h/x", headers={}, body=b"", timeout=1)


def test_fetch_mode_without_run_sync_says_what_to_use():
    t = PyodideTransport(mode="fetch", js_globals=FakeJS(), ffi=FakeFFI(can=False))
    with pytest.raises(ConnectionError, match="mode='xhr'"):
        t.request("GET", "http://h/x", headers={}, body=b"", timeout=1)


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="valid modes: auto, fetch, xhr"):
        PyodideTransport(mode="sockets")


def test_header_block_parsing_skips_junk_lines():
    assert parse_header_block("A: 1\r\n\r\nno colon\r\n: empty\r\nB:  2 \r\n") == {
        "a": "1", "b": "2",
    }


def test_remote_clients_work_over_the_pyodide_transport():
    from ragspine_lite.remote.client import RemoteReranker

    xhr = FakeXHR(text='{"ranking": [1, 0], "scores": [0.1, 0.9], "model": "m"}')
    t = PyodideTransport(mode="xhr", js_globals=FakeJS(xhr), ffi=FakeFFI())
    judge = RemoteReranker("http://h", "splade", transport=t, token="tok")
    assert judge.judge("q", ["a", "b"]) == [1, 0]
    assert xhr.headers["Authorization"] == "Bearer tok"
    assert json.loads(xhr.sent)["method"] == "splade"
