"""The OpenAI-compatible provider: URL handling, request shape, parsing, and a real local server."""

from __future__ import annotations

import json

import pytest
from _remote_fakes import FakeTransport

from ragspine_lite.common.llm import LLMProvider, completion_text
from ragspine_lite.link.narrative_link import JUDGE_SYSTEM_PROMPT, ProviderListwiseJudge
from ragspine_lite.remote.errors import RemoteError
from ragspine_lite.remote.openai_chat import OpenAICompatibleProvider, parse_chat_completion
from ragspine_lite.rerank.listwise_rerank import build_listwise_prompt


def completion(content, **extra):
    return {"id": "c1", "object": "chat.completion", "model": "m", "created": 5,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}, **extra}


@pytest.mark.parametrize(
    ("url", "expected"),
    [("http://h:8000/v1", "http://h:8000/v1/chat/completions"),
     ("http://h:8000/v1/", "http://h:8000/v1/chat/completions"),
     ("http://h:11434/v1/chat/completions", "http://h:11434/v1/chat/completions")],
)
def test_base_or_full_urls_reach_chat_completions(url, expected):
    assert OpenAICompatibleProvider(url, "m", transport=FakeTransport(None)).url == expected


def test_chat_posts_model_messages_and_key_and_parses_the_answer():
    t = FakeTransport(lambda *a: (200, completion("2, 0, 1")))
    provider = OpenAICompatibleProvider("http://h/v1", "qwen", api_key="k3y", transport=t,
                                        max_tokens=16)
    assert isinstance(provider, LLMProvider)
    resp = provider.chat([{"role": "user", "content": "hi"}])
    assert completion_text(resp) == "2, 0, 1" and resp.model == "m"
    assert resp.usage.total_tokens == 5
    payload = t.payloads()[0]
    assert payload == {"model": "qwen", "messages": [{"role": "user", "content": "hi"}],
                       "temperature": 0.0, "stream": False, "max_tokens": 16}
    assert t.calls[0][2]["Authorization"] == "Bearer k3y"
    assert "k3y" not in repr(provider)


def test_provider_listwise_judge_over_the_provider_uses_the_local_prompt():
    t = FakeTransport(lambda *a: (200, completion("[1] > [0]")))
    judge = ProviderListwiseJudge(OpenAICompatibleProvider("http://h/v1", "m", transport=t))
    assert judge.judge("query", ["doc a", "doc b", "doc c"]) == [1, 0, 2]
    messages = t.payloads()[0]["messages"]
    assert messages[0] == {"role": "system", "content": JUDGE_SYSTEM_PROMPT}
    assert messages[1]["content"] == build_listwise_prompt("query", ["doc a", "doc b", "doc c"])


@pytest.mark.parametrize(
    "body",
    [{"choices": []}, {"nope": 1}, {"choices": [{"message": {"content": 5}}]},
     {"choices": ["x"]}, [1]],
)
def test_unusable_completions_raise_remote_error(body):
    provider = OpenAICompatibleProvider("http://h/v1", "m",
                                        transport=FakeTransport(lambda *a: (200, body)))
    with pytest.raises(RemoteError) as info:
        provider.chat([])
    assert info.value.kind == "malformed"


def test_null_content_parses_as_empty_text():
    assert completion_text(parse_chat_completion(completion(None))) == ""


@pytest.mark.parametrize("kw", [{"url": "h:1"}, {"model": " "}, {"timeout": 0},
                                {"max_tokens": 0}])
def test_bad_settings_are_refused(kw):
    args = {"url": "http://h/v1", "model": "m", **kw}
    with pytest.raises(ValueError):
        OpenAICompatibleProvider(args.pop("url"), args.pop("model"),
                                 transport=FakeTransport(None), **args)


@pytest.mark.cpython_only
def test_against_a_small_local_openai_compatible_server():
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, self.headers.get("Authorization"), body))
            data = json.dumps(completion("1,0")).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        judge = ProviderListwiseJudge(OpenAICompatibleProvider(url, "tiny", api_key="sk"))
        assert judge.judge("q", ["a", "b"]) == [1, 0]
    finally:
        server.shutdown()
        server.server_close()
    path, auth, body = seen[0]
    assert path == "/v1/chat/completions" and auth == "Bearer sk" and body["model"] == "tiny"
