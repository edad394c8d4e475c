"""Every way the endpoint can fail degrades listwise_rerank to RRF order, over real HTTP."""

from __future__ import annotations

import json
import logging
import time

import pytest

pytestmark = pytest.mark.cpython_only

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from _remote_fakes import result  # noqa: E402
from _remote_server import EndpointServer, StubHTTPServer, closed_port  # noqa: E402

from ragspine_lite.remote.client import RemoteReranker  # noqa: E402
from ragspine_lite.remote.server import ServerConfig, create_app  # noqa: E402
from ragspine_lite.remote.server.app import build_models  # noqa: E402
from ragspine_lite.remote.server.models import ModelSet  # noqa: E402
from ragspine_lite.rerank.listwise_rerank import listwise_rerank  # noqa: E402

RESULTS = [result("alpha"), result("beta"), result("gamma")]


class Reverse:
    model_id = "reverse"
    description = "scores later candidates higher"

    def __init__(self, delay: float = 0.0, fail: bool = False) -> None:
        self.delay, self.fail = delay, fail

    def score(self, query, docs):
        time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("model failure")
        return [float(i) for i in range(len(docs))]


def endpoint(**config):
    cfg = ServerConfig(**config)
    models = ModelSet({"colbert": Reverse(), "splade": Reverse(delay=2.0),
                       "cross_encoder": Reverse(fail=True)})
    return EndpointServer(create_app(cfg, models=models))


def degrade(judge, caplog):
    """listwise_rerank with ``judge`` → (output, the client's last error); checks the log."""
    caplog.set_level(logging.WARNING)
    out = listwise_rerank("q", RESULTS, judge)
    assert out == RESULTS  # RRF (input) order, nothing raised
    err = judge.client.last_error
    assert err is not None and judge.client.failures == 1
    logged = [r for r in caplog.records if r.name == "ragspine_lite.remote.client"]
    assert len(logged) == 1 and err.kind in logged[0].getMessage()
    return err


def test_a_healthy_endpoint_does_reorder():
    with endpoint() as server:
        out = listwise_rerank("q", RESULTS, RemoteReranker(server.url, "colbert"))
    assert [r.chunk.text for r in out] == ["gamma", "beta", "alpha"]


def test_server_down(caplog):
    judge = RemoteReranker(f"http://127.0.0.1:{closed_port()}", "colbert", timeout=2)
    assert degrade(judge, caplog).kind == "connection"


def test_slow_server_hits_the_client_timeout(caplog):
    with endpoint() as server:
        judge = RemoteReranker(server.url, "splade", timeout=0.3)
        started = time.monotonic()
        err = degrade(judge, caplog)
        assert time.monotonic() - started < 1.5
    assert err.kind == "timeout"


def test_slow_model_hits_the_servers_timeout(caplog):
    with endpoint(request_timeout_s=0.3) as server:
        err = degrade(RemoteReranker(server.url, "splade", timeout=5), caplog)
    assert (err.kind, err.status) == ("http", 504)


def test_model_crash_is_a_500(caplog):
    with endpoint() as server:
        err = degrade(RemoteReranker(server.url, "cross_encoder"), caplog)
    assert (err.kind, err.status) == ("http", 500)


@pytest.mark.parametrize(
    ("answer", "kind"),
    [(b"<html>502 Bad Gateway</html>", "malformed"),
     (b'{"ranking": [0, 0, 1]}', "permutation"),
     (b'{"ranking": [2, 1]}', "permutation"),
     (b'{"ranking": [2, 1, 0], "scores": "high"}', "malformed"),
     (b'["not", "an", "object"]', "malformed")],
)
def test_garbage_and_wrong_permutations(caplog, answer, kind):
    with StubHTTPServer(lambda *a: (200, answer)) as stub:
        err = degrade(RemoteReranker(stub.url, "colbert"), caplog)
    assert err.kind == kind


def test_stub_500_with_a_json_error(caplog):
    body = json.dumps({"error": {"code": "x", "message": "overloaded"}}).encode()
    with StubHTTPServer(lambda *a: (500, body)) as stub:
        err = degrade(RemoteReranker(stub.url, "colbert"), caplog)
    assert err.status == 500 and "overloaded" in str(err)


@pytest.mark.parametrize(("token", "status"), [(None, 401), ("wrong", 403)])
def test_auth_missing_or_wrong(caplog, token, status):
    with endpoint(token="right") as server:
        err = degrade(RemoteReranker(server.url, "colbert", token=token), caplog)
    assert (err.kind, err.status) == ("http", status)


def test_oversized_body(caplog):
    with endpoint(max_body_bytes=200) as server:
        big = [result("x" * 300), result("y"), result("z")]
        judge = RemoteReranker(server.url, "colbert")
        assert listwise_rerank("q", big, judge) == big
    assert (judge.client.last_error.kind, judge.client.last_error.status) == ("http", 413)


def test_too_many_candidates(caplog):
    with endpoint(max_candidates=2) as server:
        err = degrade(RemoteReranker(server.url, "colbert"), caplog)
    assert err.status == 422 and "at most 2" in str(err)


def test_default_models_are_built_for_the_config():
    assert set(build_models(ServerConfig()).names()) == {
        "cross_encoder", "colbert", "splade", "llm", "embed", "e5", "visual",
    }
