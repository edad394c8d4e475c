"""The endpoint's ``/v1/chat`` (the LLM operation the browser's query transforms use) and
:class:`RemoteChatProvider`, over real HTTP on 127.0.0.1, with a byte-level canary."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.cpython_only

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from _remote_server import EndpointServer, RecordingRelay, StubHTTPServer, chat_reply  # noqa: E402
from _restricted import matches_restricted  # noqa: E402

from ragspine_lite.bundle.export import load_corpus  # noqa: E402
from ragspine_lite.cli import samples_dir  # noqa: E402
from ragspine_lite.common.sensitivity import is_restricted  # noqa: E402
from ragspine_lite.link.narrative_link import build_narrative_retriever  # noqa: E402
from ragspine_lite.query import apply_query_layers  # noqa: E402
from ragspine_lite.remote.client import RemoteChatProvider, RemoteClient  # noqa: E402
from ragspine_lite.remote.errors import RemoteError  # noqa: E402
from ragspine_lite.remote.server import ServerConfig, create_app  # noqa: E402
from ragspine_lite.remote.transport import UrllibTransport, request_json  # noqa: E402

ANSWERS = {
    "Write one short passage": "Revenue grew in Hong Kong thanks to bancassurance.",
    "Write ": '["Hong Kong revenue growth", "bancassurance sales"]',
    "Rewrite the question": "What drives insurance revenue?",
    "Split the question": '["Hong Kong revenue?", "China profit?"]',
    "Classify the question": "multi",
}
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


def scripted(method, path, headers, body):
    prompt = json.loads(body)["messages"][-1]["content"]
    return 200, chat_reply(next((a for p, a in ANSWERS.items() if prompt.startswith(p)), "ok"))


@pytest.fixture(scope="module")
def llm():
    with StubHTTPServer(scripted) as stub:
        yield stub


@pytest.fixture(scope="module")
def endpoint(llm):
    config = ServerConfig(llm_url=llm.url + "/v1", llm_model="stub-llm")
    with EndpointServer(create_app(config)) as server, RecordingRelay(server.port) as relay:
        yield relay


def raw(url, payload):
    try:
        return 200, request_json(UrllibTransport(), "POST", url + "/v1/chat", payload, timeout=10)
    except RemoteError as exc:
        return exc.status, str(exc)


def test_chat_round_trip(endpoint, llm):
    before = len(llm.requests)
    resp = RemoteChatProvider(endpoint.url).chat(MESSAGES)
    assert resp.choices[0].message.content == "ok" and resp.model == "stub-llm"
    sent = json.loads(llm.requests[before][3])
    assert sent["messages"] == MESSAGES and sent["model"] == "stub-llm"
    assert "/v1/chat" in RemoteClient(endpoint.url).call("GET", "/openapi.json")["paths"]


def test_restricted_messages_are_refused_on_both_sides(endpoint, llm):
    before, sent_before = len(llm.requests), len(endpoint.received)
    secret = [{"role": "user", "content": "the deal memo", "sensitivity": "restricted"}]
    with pytest.raises(ValueError, match="RESTRICTED"):
        RemoteChatProvider(endpoint.url).chat(secret)
    assert len(endpoint.received) == sent_before  # not a byte left the client
    status, message = raw(endpoint.url, {"messages": [{**secret[0], "sensitivity": "RESTRICTED"}]})
    assert status == 422 and "messages[0] is labelled RESTRICTED" in message
    assert len(llm.requests) == before


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        ([{"role": "user", "content": "x"}], "sensitivity must be a string label"),
        ([{"role": "tool", "content": "x", "sensitivity": "PUBLIC"}], "role must be one of"),
        ([{"role": "user", "content": 3, "sensitivity": "PUBLIC"}], "content must be a string"),
        ([{"role": "user", "content": "x", "sensitivity": "PUBLIC"}] * 17, "at most 16"),
        ([], "at least one message"),
    ],
)
def test_bad_chat_requests_are_422(endpoint, messages, needle):
    status, message = raw(endpoint.url, {"messages": messages})
    assert status == 422 and needle in message


def test_back_end_failure_is_502_and_the_transforms_fall_back(tmp_path):
    link = _link(tmp_path)
    with StubHTTPServer(lambda *a: (500, b'{"error": "boom"}')) as bad:
        config = ServerConfig(llm_url=bad.url + "/v1", llm_model="m")
        with EndpointServer(create_app(config)) as server:
            provider = RemoteChatProvider(server.url)
            with pytest.raises(RemoteError) as info:
                provider.chat(MESSAGES)
            assert info.value.status == 502
            for transform in ("hyde", "rag_fusion", "step_back"):
                wrapped = apply_query_layers(link, transform=transform, provider=provider)
                assert wrapped.retrieve("Hong Kong revenue") == link.retrieve("Hong Kong revenue")
                assert wrapped.last_outcome.status == "provider_error"


def test_no_llm_configured_is_503():
    with EndpointServer(create_app(ServerConfig())) as server:
        status, message = raw(server.url, {"messages": [{**MESSAGES[1], "sensitivity": "public"}]})
    assert status == 503 and "RAGSPINE_REMOTE_LLM_URL" in message


def _link(tmp_path):
    retriever, _store = build_narrative_retriever(tmp_path / "chunks.db")
    for doc in load_corpus([samples_dir()]):
        retriever.index.ingest(doc.body, doc.meta)
    return retriever


def test_no_restricted_byte_reaches_the_endpoint_or_the_llm(endpoint, llm, tmp_path):
    restricted = [d.body for d in load_corpus([samples_dir()]) if is_restricted(d.meta.sensitivity)]
    markers = {b"ZEPHYRCANARY"}
    for body in restricted:
        for line in body.splitlines():
            if len(line.strip()) >= 24 and not line.startswith(("---", "#", "title", "topic")):
                markers.add(line.strip()[:24].encode("utf-8"))
                markers.add(json.dumps(line.strip()[:24])[1:-1].encode("ascii"))
    assert len(markers) > 4
    link, provider = _link(tmp_path), RemoteChatProvider(endpoint.url)
    before_llm, before_wire = len(llm.requests), len(endpoint.received)
    for query in ("Macau broker acquisition", "deal team board memo price", "董事会 关闭 分支机构"):
        for transform in ("hyde", "rag_fusion", "step_back"):
            wrapped = apply_query_layers(link, transform=transform, adaptive="llm",
                                         provider=provider)
            hits = wrapped.retrieve(query)
            assert wrapped.last_outcome.status == "applied"
            assert not any(is_restricted(h["sensitivity"]) for h in hits)
    wire = endpoint.received[before_wire:]
    upstream = b"".join(body for *_x, body in llm.requests[before_llm:])
    assert len(llm.requests) - before_llm == 3 * 3 * 5  # classify, decompose, 3 transforms
    for data in (wire, upstream):
        assert not [m for m in markers if m in data]


def test_the_browser_searcher_runs_the_layers_through_the_endpoint(endpoint, llm, searcher):
    searcher.ingest("secret.md", "---\nsensitivity: RESTRICTED\n---\nZEPHYRCANARY broker memo.\n")
    before = len(endpoint.received)
    info = searcher.configure_llm(endpoint.url, transform="hyde", adaptive="heuristic")
    assert info["enabled"] and info["url"] == endpoint.url and "models" in info
    outcome = searcher.search("Compare Hong Kong and China broker revenue", top_k=5)
    assert outcome.query_layers["applied"] == ["hyde", "decompose"]
    assert outcome.snippets and matches_restricted(searcher, "ZEPHYRCANARY broker memo")
    assert b"/v1/chat" in endpoint.received[before:]
    assert b"ZEPHYRCANARY" not in endpoint.received[before:]
    dead = searcher.configure_llm("http://127.0.0.1:9", transform="hyde", timeout=2)
    assert dead["enabled"] and "error" in dead
    plain = searcher.search("Hong Kong revenue", top_k=5, query_layers=False).snippets
    assert searcher.search("Hong Kong revenue", top_k=5).snippets == plain
