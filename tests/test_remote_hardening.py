"""The endpoint's edges over raw sockets: Host/Origin/Content-Type, slots that outlive their
request's timeout, connections closed after early answers, per-client bounded visual indexes."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
from _remote_server import EndpointServer, StubHTTPServer, chat_reply, server_module

pytestmark = server_module()

from _remote_models import tiny_models  # noqa: E402

from ragspine_lite.remote.client import RemoteVisualEmbedder  # noqa: E402
from ragspine_lite.remote.errors import RemoteError  # noqa: E402
from ragspine_lite.remote.server import ServerConfig, create_app  # noqa: E402
from ragspine_lite.remote.server.app import build_models  # noqa: E402
from ragspine_lite.vision.colpali import VisualPage  # noqa: E402

CHAT = json.dumps({"messages": [{"role": "user", "content": "say hi",
                                  "sensitivity": "INTERNAL"}]}).encode()
ALLOWED = "http://allowed.test"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return tiny_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def llm():
    with StubHTTPServer(lambda *_: (200, chat_reply("hi"))) as stub:
        yield stub


def _serve(models, llm=None, **settings):
    if llm is not None:
        settings.update(llm_url=llm.url + "/v1", llm_model="stub-llm")
    config = ServerConfig(**settings)
    return EndpointServer(create_app(config, models=build_models(config, **models)))


@pytest.fixture(scope="module")
def endpoint(models, llm):
    with _serve(models, llm, cors_origins=(ALLOWED,), allowed_hosts=("search.example",),
                max_body_bytes=64 * 1024) as server:
        yield server


def request(port, method, path, body=b"", headers=None, *, host=None):
    """One raw HTTP/1.1 request (the server is asked to close) → (status, headers, body)."""
    head = {"Host": f"127.0.0.1:{port}" if host is None else host, "Connection": "close",
            **(headers or {})}
    if body:
        head["Content-Length"] = str(len(body))
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in head.items())]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    top, _, data = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = top.decode("latin-1").split("\r\n")
    got = dict((k.lower(), v.strip()) for k, v in (h.split(":", 1) for h in header_lines))
    return int(status_line.split()[1]), got, data


def _code(data: bytes) -> str:
    return json.loads(data)["error"]["code"]


# ---------------------------------------------------------------- item 5: Host, Origin, type


@pytest.mark.parametrize("host", ["evil.test", "evil.test:80", "127.0.0.1.evil.test", "", "a b"])
def test_a_foreign_host_is_refused_on_every_route(endpoint, llm, host):
    before = len(llm.requests)
    for method, path, body in (("POST", "/v1/chat", CHAT), ("GET", "/healthz", b""),
                               ("GET", "/v1/models", b""), ("GET", "/nope", b"")):
        status, headers, data = request(endpoint.port, method, path, body,
                                        {"Content-Type": "application/json"}, host=host)
        assert status == 421 and _code(data) == "misdirected_request", (method, path)
        assert headers["connection"] == "close"
    assert len(llm.requests) == before


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST:1", "search.example"])
def test_the_bound_address_localhost_and_configured_names_are_served(endpoint, llm, host):
    status, _h, data = request(endpoint.port, "POST", "/v1/chat", CHAT,
                               {"Content-Type": "application/json; charset=utf-8"}, host=host)
    assert status == 200 and json.loads(data)["content"] == "hi"


@pytest.mark.parametrize("ctype", [None, "text/plain", "application/x-www-form-urlencoded",
                                   "multipart/form-data; boundary=x", "application/jsonx"])
def test_bodies_must_be_json(endpoint, llm, ctype):
    before = len(llm.requests)
    headers = {} if ctype is None else {"Content-Type": ctype}
    status, _h, data = request(endpoint.port, "POST", "/v1/chat", CHAT, headers)
    assert status == 415 and _code(data) == "unsupported_media_type"
    assert len(llm.requests) == before


@pytest.mark.parametrize("method", ["GET", "POST", "OPTIONS"])
def test_foreign_origins_are_refused_on_every_method(endpoint, llm, method):
    before = len(llm.requests)
    headers = {"Content-Type": "application/json", "Origin": "http://evil.test",
               "Access-Control-Request-Method": "POST"}
    path, body = ("/v1/chat", CHAT) if method == "POST" else ("/healthz", b"")
    status, got, data = request(endpoint.port, method, path, body, headers)
    assert status == 403 and _code(data) == "forbidden_origin"
    assert "access-control-allow-origin" not in got
    status, _h, _d = request(endpoint.port, method, path, body, {**headers, "Origin": "null"})
    assert status == 403 and len(llm.requests) == before
    status, got, _d = request(endpoint.port, method, path, body, {**headers, "Origin": ALLOWED})
    assert status == 200 and got["access-control-allow-origin"] == ALLOWED


# ---------------------------------------------------------------- item 6: slots


class _SlowUpstream:
    """An OpenAI-compatible stub that answers "slow" prompts after ``delay`` seconds and
    counts how many calls overlap."""

    def __init__(self, delay: float) -> None:
        self.delay, self.running, self.peak, self.calls = delay, 0, 0, 0
        self.lock = threading.Lock()

    def __call__(self, method, path, headers, body):
        with self.lock:
            self.running += 1
            self.calls += 1
            self.peak = max(self.peak, self.running)
        try:
            if b"slow" in body:
                time.sleep(self.delay)
            return 200, chat_reply("done")
        finally:
            with self.lock:
                self.running -= 1


def _chat(port, text):
    body = json.dumps({"messages": [{"role": "user", "content": text,
                                     "sensitivity": "INTERNAL"}]}).encode()
    return request(port, "POST", "/v1/chat", body, {"Content-Type": "application/json"})[0]


def test_a_timed_out_call_keeps_its_slot_until_its_upstream_call_ends(models):
    upstream = _SlowUpstream(delay=2.5)
    with StubHTTPServer(upstream) as stub, _serve(
        models, stub, max_concurrency=1, request_timeout_s=0.5
    ) as server:
        statuses: list[int] = []
        threads = []
        for _ in range(3):  # each times out; the next comes after that, while the first runs
            thread = threading.Thread(target=lambda: statuses.append(_chat(server.port, "slow")))
            thread.start()
            threads.append(thread)
            time.sleep(0.7)
        for thread in threads:
            thread.join(timeout=10)
        assert statuses == [504, 504, 504]
        assert upstream.peak == 1 and upstream.calls == 1  # the queued calls never ran
        deadline = time.monotonic() + 5
        while upstream.running and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _chat(server.port, "fast") == 200  # the slot is free once the work ended
    assert upstream.peak == 1


# ---------------------------------------------------------------- item 7: early answers close


def _trickle(port, head: bytes, seconds: float = 4.0) -> tuple[bytes, bool]:
    """Send ``head`` and a few body bytes, then a byte every 0.2 s; → (answer, closed?)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    answer, closed = b"", False
    try:
        sock.sendall(head + b'{"messages"')
        sock.settimeout(0.2)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                try:
                    sock.sendall(b" ")
                except OSError:
                    closed = True
                    break
                continue
            except ConnectionResetError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            answer += chunk
    finally:
        sock.close()
    return answer, closed


def _head(port, method, path, length=100_000_000, extra=""):
    return (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n{extra}\r\n").encode()


@pytest.mark.parametrize(("method", "path", "status"), [
    ("POST", "/v1/nope", b"404"), ("POST", "/healthz", b"405"), ("POST", "/v1/rerank", b"413"),
    ("GET", "/healthz", b"200"), ("GET", "/v1/models", b"200"),
])
def test_a_connection_answered_before_its_body_arrives_is_closed(endpoint, method, path, status):
    answer, closed = _trickle(endpoint.port, _head(endpoint.port, method, path))
    assert answer.startswith(b"HTTP/1.1 " + status), answer[:80]
    assert closed, f"{method} {path}: the server kept reading a body nobody reads"


def test_an_unauthenticated_trickled_body_is_cut_off(models):
    with _serve(models, token="s3cret") as server:
        for path in ("/v1/chat", "/v1/models"):
            method = "POST" if path == "/v1/chat" else "GET"
            answer, closed = _trickle(server.port, _head(server.port, method, path))
            assert answer.startswith(b"HTTP/1.1 401 ") and closed, (path, answer[:80])
        wrong = _head(server.port, "POST", "/v1/chat", extra="Authorization: Bearer no\r\n")
        answer, closed = _trickle(server.port, wrong)
        assert answer.startswith(b"HTTP/1.1 403 ") and closed


# ---------------------------------------------------------------- /v1/visual/pages


def test_visual_indexes_are_per_client(endpoint):
    alice, bob = RemoteVisualEmbedder(endpoint.url), RemoteVisualEmbedder(endpoint.url)
    assert alice.register_pages([VisualPage("alice-report", 1, bytes([2, 3]), title="A")]) == 1
    assert bob.search("ab abc") == []  # nothing registered: nothing of alice's either
    assert bob.register_pages([VisualPage("bob-deck", 1, bytes([3]))]) == 1
    assert [h["doc_id"] for h in bob.search("ab abc", top_k=5)] == ["bob-deck"]
    assert [h["doc_id"] for h in alice.search("ab abc", top_k=5)] == ["alice-report"]
    assert alice.index_id != bob.index_id and len(alice.index_id) >= 24
    mallory = RemoteVisualEmbedder(endpoint.url)
    mallory.index_id = "guessed"
    with pytest.raises(RemoteError, match="unknown visual index"):
        mallory.search("ab")


def test_visual_pages_are_bounded_dropping_the_least_recently_used_index(models):
    with _serve(models, max_visual_pages=3) as server:
        first, second = RemoteVisualEmbedder(server.url), RemoteVisualEmbedder(server.url)
        first.register_pages([VisualPage("a", i, bytes([2])) for i in (1, 2)])
        second.register_pages([VisualPage("b", 1, bytes([3]))])
        second.register_pages([VisualPage("b", 2, bytes([3]))])  # room: `first` goes
        assert len(second.search("abc", top_k=5)) == 2
        with pytest.raises(RemoteError, match="unknown visual index"):
            first.search("ab")
        with pytest.raises(RemoteError, match="at most 3"):
            second.register_pages([VisualPage("b", 3, bytes([3])), VisualPage("b", 4, bytes([3]))])
        assert len(second.search("abc", top_k=5)) == 2
