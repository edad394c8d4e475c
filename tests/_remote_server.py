"""Loopback servers for the cpython_only remote tests: the endpoint on uvicorn in a thread, a
byte-recording TCP relay in front of it, a stub OpenAI-compatible chat server, and a raw stub
that answers whatever a test scripts. Everything binds 127.0.0.1 on a free port and stops.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest


def server_module() -> pytest.MarkDecorator:
    """The header of a module testing the endpoint: skip it without the ``[server]`` stack
    (numpy, onnxruntime, onnx, starlette, uvicorn); returns the ``cpython_only`` mark."""
    for name in ("numpy", "onnxruntime", "onnx", "starlette", "uvicorn"):
        pytest.importorskip(name)
    return pytest.mark.cpython_only


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago (for a server in a child process)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, *, path: str = "/healthz",
                 timeout: float = 90.0) -> bool:
    """Poll ``url + path`` until it answers 200 (True), ``proc`` exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url + path, timeout=2) as response:
                if response.status == 200:
                    return True
        except OSError:
            time.sleep(0.2)
    return False


@contextlib.contextmanager
def serve_remote_process(*args: str, log: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """``ragspine-lite serve-remote --port P ARGS`` in a child process (no token from the
    environment), its output in ``log`` → ``(url, process)`` once ``/healthz`` answers. A
    start-up that fails fails the test with the log's tail; the process is stopped after."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ragspine_lite", "serve-remote", "--port", str(port), *args],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "RAGSPINE_REMOTE_TOKEN": ""},
        )
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_healthy(url, proc):
            raise RuntimeError(f"serve-remote did not become healthy (exit {proc.poll()})")
        yield url, proc
    except RuntimeError as exc:
        pytest.fail(f"{exc}: {log.read_text(errors='replace')[-2000:]}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


class EndpointServer:
    """``create_app(config, models=...)`` served by uvicorn in a daemon thread, with the
    endpoint's HTTP protocol (its header deadline and its close after unread bodies)."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self._sock = _free_socket()
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        from ragspine_lite.remote.server.protocol import ReadDeadlineProtocol

        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False,
                                http=ReadDeadlineProtocol)  # as serve() runs it
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def __enter__(self) -> EndpointServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("endpoint did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self._sock.close()


class RecordingRelay:
    """A TCP relay to ``target_port`` that keeps every byte clients send (``received``)."""

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self._sock = _free_socket()
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._chunks: list[bytes] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def received(self) -> bytes:
        with self._lock:
            return b"".join(self._chunks)

    def _pump(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if record:
                    with self._lock:
                        self._chunks.append(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _accept(self) -> None:
        self._sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                client, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            upstream = socket.create_connection(self.target, timeout=10)
            for a, b, rec in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(target=self._pump, args=(a, b, rec), daemon=True).start()

    def __enter__(self) -> RecordingRelay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()


class StubHTTPServer:
    """A ThreadingHTTPServer whose answers come from ``handler(method, path, headers, body)``
    → ``(status, body bytes)`` (or it sleeps/raises as a test wishes); requests are kept."""

    def __init__(self, handler: Callable[[str, str, dict, bytes], tuple[int, bytes]]) -> None:
        stub = self
        self.requests: list[tuple[str, str, dict, bytes]] = []

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                stub.requests.append((self.command, self.path, headers, body))
                status, answer = handler(self.command, self.path, headers, body)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST = _serve

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> StubHTTPServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def chat_reply(text: str) -> bytes:
    """An OpenAI-shaped chat completion answering ``text``."""
    return json.dumps({
        "id": "stub", "object": "chat.completion", "model": "stub-llm",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
    }).encode("utf-8")


def reverse_llm(method: str, path: str, headers: dict, body: bytes) -> tuple[int, bytes]:
    """A stub LLM that ranks the listwise prompt's candidates in reverse order."""
    prompt = json.loads(body)["messages"][-1]["content"]
    n = sum(1 for line in prompt.splitlines() if line.startswith("[") and "] " in line)
    return 200, chat_reply(", ".join(str(i) for i in reversed(range(n))))


def closed_port() -> int:
    """A loopback port with nothing listening."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port
