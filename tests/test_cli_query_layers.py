"""``ragspine-lite search`` with the LLM query layers, run as a subprocess against an
OpenAI-compatible chat server on loopback that records every request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from ragspine_lite import cli
from ragspine_lite.common.sensitivity import is_restricted
from ragspine_lite.link.narrative_link import build_narrative_retriever
from tests._remote_server import StubHTTPServer, chat_reply

pytestmark = pytest.mark.cpython_only

CANARY = b"ZEPHYRCANARY"
QUERY = "ACME Hong Kong broker acquisition revenue"
ANSWERS = {  # instruction prefix → the stub model's answer
    "Write one short passage": "ACME Hong Kong new sales grew strongly in 2023.",
    "Write ": '["Hong Kong new sales 2023", "AIA Hong Kong revenue"]',
    "Rewrite the question": "How did ACME Hong Kong perform?",
    "Split the question": '["What were ACME Hong Kong new sales?", "What is the group strategy?"]',
    "Classify the question": "multi",
}
LAYERS = [
    ("hyde", ["--query-transform", "hyde"]),
    ("rag_fusion", ["--query-transform", "RAG-Fusion"]),
    ("step_back", ["--query-transform", "step-back"]),
    ("decompose", ["--decompose", "llm"]),
    ("decompose", ["--adaptive", "llm"]),
]


def stub_llm(mode: str):
    def handle(method: str, path: str, headers: dict, body: bytes) -> tuple[int, bytes]:
        if mode == "500":
            return 500, b'{"error": "boom"}'
        if mode == "timeout":
            time.sleep(1.5)
        if mode == "garbage":
            return 200, b"<html>not json"
        if mode == "empty":
            return 200, chat_reply("")
        prompt = json.loads(body)["messages"][-1]["content"]
        return 200, chat_reply(next(a for p, a in ANSWERS.items() if prompt.startswith(p)))

    return handle


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli-layers") / "chunks.db"
    assert cli.main(["ingest", str(cli.samples_dir()), "--db", str(path), "--mode", "bm25"]) == 0
    return str(path)


def search(db: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAGSPINE_")}
    clean.update({"RAGSPINE_EMBEDDING_BACKEND": "none", "RAGSPINE_LLM_TIMEOUT": "0.5"})
    clean.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "ragspine_lite", "search", QUERY, "--db", db, *args],
        capture_output=True, text=True, env=clean, timeout=120,
    )


@pytest.fixture(scope="module")
def plain(db):
    out = search(db)
    assert out.returncode == 0 and CANARY.decode() not in out.stdout
    retriever, store = build_narrative_retriever(db, read_only=True)
    try:  # below the exit the RESTRICTED memo does match the query
        assert any(is_restricted(r.chunk.sensitivity) for r in retriever.index.retrieve(QUERY))
    finally:
        store.close()
    return out.stdout


@pytest.mark.parametrize(("name", "flags"), LAYERS)
def test_each_layer_calls_the_server_and_no_restricted_byte_reaches_it(db, plain, name, flags):
    with StubHTTPServer(stub_llm("ok")) as server:
        env = {"RAGSPINE_LLM_URL": server.url + "/v1", "RAGSPINE_LLM_MODEL": "stub-llm",
               "RAGSPINE_LLM_API_KEY": "sekrit"}
        out = search(db, *flags, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].endswith(f"(bm25 + {name})")
    assert "RESTRICTED" not in out.stdout and CANARY.decode() not in out.stdout
    assert server.requests
    for method, path, headers, body in server.requests:
        assert (method, path) == ("POST", "/v1/chat/completions")
        assert headers["authorization"] == "Bearer sekrit"
        assert json.loads(body)["model"] == "stub-llm"
        assert CANARY not in body and b"RESTRICTED" not in body
        assert b"Macau" not in body  # nor any other word of the RESTRICTED memo
    assert "sekrit" not in out.stdout + out.stderr


@pytest.mark.parametrize("mode", ["500", "timeout", "garbage", "empty"])
@pytest.mark.parametrize(("name", "flags"), LAYERS[:4])
def test_a_failing_server_gives_exactly_the_plain_output(db, plain, mode, name, flags):
    with StubHTTPServer(stub_llm(mode)) as server:
        out = search(db, *flags, "--llm-url", server.url, "--llm-model", "stub-llm")
    assert out.returncode == 0, out.stderr
    assert out.stdout == plain
    assert server.requests  # it was asked, and the search said it fell back
    assert "keeping the question whole" in out.stderr or "plain retrieval" in out.stderr


def test_a_layer_without_a_provider_is_plain_and_says_so(db, plain):
    out = search(db, "--query-transform", "hyde")
    assert out.returncode == 0 and out.stdout == plain
    assert "needs an LLM provider" in out.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--query-transform", "multiquery"], "unknown query transform 'multiquery'"),
        (["--decompose", "agent"], "unknown query decomposition 'agent'"),
        (["--adaptive", "always"], "unknown adaptive mode 'always'"),
        (["--llm-url", "http://127.0.0.1:9/v1"], "needs a model name"),
        (["--llm-url", "ftp://x", "--llm-model", "m"], "must start with http(s)://"),
    ],
)
def test_bad_layer_options_are_usage_errors(db, capsys, monkeypatch, args, message):
    for name in list(os.environ):
        if name.startswith("RAGSPINE_"):
            monkeypatch.delenv(name)
    code = cli.main(["search", QUERY, "--db", db, "--mode", "bm25", *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err
