"""The remote clients over a scripted transport (no sockets: both lanes)."""

from __future__ import annotations

import base64
import logging

import pytest
from _remote_fakes import FakeTransport, result, reverse_ranker

from ragspine_lite.common.errors import ProviderError
from ragspine_lite.remote.client import (
    RemoteClient,
    RemoteEmbeddingBackend,
    RemoteListwiseJudge,
    RemoteReranker,
    RemoteVisualEmbedder,
)
from ragspine_lite.remote.errors import RemoteError
from ragspine_lite.rerank.listwise_rerank import ListwiseJudge, listwise_rerank
from ragspine_lite.vector.embedding_backends import EmbeddingBackend, make_embedding_backend
from ragspine_lite.vision.colpali import VisualEmbedder, VisualPage

URL = "http://127.0.0.1:9"
LOGGER = "ragspine_lite.remote.client"


def reranker(handler=reverse_ranker, method="colbert", **kw):
    transport = FakeTransport(handler)
    return RemoteReranker(URL, method, transport=transport, **kw), transport


def texts(results):
    return [r.chunk.text for r in results]


# ---------------------------------------------------------------- protocol and wire


def test_remote_clients_satisfy_the_local_protocols():
    t = FakeTransport(reverse_ranker)
    assert isinstance(RemoteReranker(URL, transport=t), ListwiseJudge)
    assert isinstance(RemoteListwiseJudge(URL, transport=t), ListwiseJudge)
    assert isinstance(RemoteEmbeddingBackend(URL, transport=t), EmbeddingBackend)
    assert isinstance(RemoteVisualEmbedder(URL, transport=t), VisualEmbedder)


def test_rerank_posts_labelled_candidates_and_returns_the_server_ranking():
    judge, t = reranker()
    assert judge.judge("q", ["a", "b", "c"]) == [2, 1, 0]
    (method, url, headers, _body, timeout) = t.calls[0]
    assert (method, url) == ("POST", URL + "/v1/rerank")
    assert headers["Content-Type"] == "application/json" and "Authorization" not in headers
    assert timeout == judge.client.timeout
    assert t.payloads()[0] == {
        "method": "colbert",
        "query": "q",
        "candidates": [{"text": x, "sensitivity": "INTERNAL"} for x in "abc"],
    }


def test_token_is_sent_as_a_bearer_header_and_never_shown_in_repr():
    judge, t = reranker(token="s3cret")
    judge.judge("q", ["a", "b"])
    assert t.calls[0][2]["Authorization"] == "Bearer s3cret"
    assert "s3cret" not in repr(judge) and "s3cret" not in repr(judge.client)


def test_method_aliases_are_canonicalised_and_unknown_ones_refused():
    assert RemoteReranker(URL, "late-interaction", transport=FakeTransport(None)).method == (
        "colbert"
    )
    with pytest.raises(ValueError, match=r"valid names: .*cross_encoder"):
        RemoteReranker(URL, "bm42", transport=FakeTransport(None))


@pytest.mark.parametrize("bad", ["ftp://x", "127.0.0.1:8765", "", "http://"])
def test_client_refuses_urls_that_are_not_http(bad):
    with pytest.raises(ValueError, match="http"):
        RemoteClient(bad, transport=FakeTransport(None))


@pytest.mark.parametrize("bad", [0, -1, float("nan"), True, "5"])
def test_client_refuses_bad_timeouts(bad):
    with pytest.raises(ValueError, match="timeout"):
        RemoteClient(URL, timeout=bad, transport=FakeTransport(None))


# ---------------------------------------------------------------- RESTRICTED


def test_restricted_candidates_are_never_serialised_and_keep_their_slots():
    judge, t = reranker()
    cands = [
        {"text": "open zero", "sensitivity": "INTERNAL"},
        {"text": "board secret", "sensitivity": "Restricted"},
        result("open two"),
        result("merger memo", "RESTRICTED"),
        {"text": "open four", "sensitivity": "PUBLIC"},
    ]
    ranking = judge.rerank("q", cands)
    assert b"secret" not in t.sent and b"merger" not in t.sent
    assert [c["sensitivity"] for c in t.payloads()[0]["candidates"]] == [
        "INTERNAL", "INTERNAL", "PUBLIC",
    ]
    # the three open items reversed among the open slots; RESTRICTED ones stay put
    assert ranking.ranking == (4, 1, 2, 3, 0)
    assert ranking.sent == 3
    assert ranking.scores == (0.0, None, 1.0, None, 2.0)  # per input, in input order


def test_candidates_with_an_unreadable_label_are_held_back():
    class Broken:
        @property
        def text(self):
            raise RuntimeError("no")

    judge, t = reranker()
    judge.judge("q", ["a", Broken(), "b"])
    assert [c["text"] for c in t.payloads()[0]["candidates"]] == ["a", "b"]


@pytest.mark.parametrize(
    "cands",
    [[], ["only one"], [result("x", "RESTRICTED"), result("y", "restricted")],
     [result("x", "RESTRICTED"), "one open"]],
)
def test_nothing_to_order_sends_no_request(cands):
    judge, t = reranker()
    assert judge.judge("q", cands) == list(range(len(cands)))
    assert t.calls == []


def test_listwise_rerank_with_a_remote_judge_reorders_open_items_only():
    judge, t = reranker()
    items = [result("n0"), result("r1 secret", "RESTRICTED"), result("n2"), result("n3")]
    out = listwise_rerank("q", items, judge)
    assert texts(out) == ["n3", "r1 secret", "n2", "n0"]
    assert b"secret" not in t.sent


def test_default_sensitivity_labels_plain_strings():
    judge, t = reranker(default_sensitivity="PUBLIC")
    judge.judge("q", ["a", "b"])
    assert {c["sensitivity"] for c in t.payloads()[0]["candidates"]} == {"PUBLIC"}


def test_llm_judge_posts_method_llm_and_accepts_null_scores():
    def handler(method, url, payload, headers):
        return 200, {"method": "llm", "model": "m", "ranking": [1, 0, 2], "scores": None}

    t = FakeTransport(handler)
    judge = RemoteListwiseJudge(URL, transport=t)
    assert judge.judge("q", ["a", "b", "c"]) == [1, 0, 2]
    assert t.payloads()[0]["method"] == "llm"
    assert judge.rerank("q", ["a", "b", "c"]).scores == (None, None, None)


# ---------------------------------------------------------------- failures


def _raises(exc):
    def handler(*_args):
        raise exc

    return handler


def _answers(status, body):
    return lambda *_args: (status, body)


FAILURES = {
    "timeout": (_raises(TimeoutError("slow")), "timeout"),
    "refused": (_raises(ConnectionRefusedError("refused")), "connection"),
    "odd transport error": (_raises(RuntimeError("boom")), "connection"),
    "500": (_answers(500, {"error": {"code": "x", "message": "model exploded"}}), "http"),
    "401": (_answers(401, {"error": {"code": "unauthorized", "message": "missing"}}), "http"),
    "413": (_answers(413, b"too large"), "http"),
    "garbage": (_answers(200, b"<html>not json"), "malformed"),
    "json list": (_answers(200, [1, 0]), "malformed"),
    "no ranking": (_answers(200, {"model": "x"}), "permutation"),
    "duplicate": (_answers(200, {"ranking": [0, 0, 1]}), "permutation"),
    "short": (_answers(200, {"ranking": [1, 0]}), "permutation"),
    "out of range": (_answers(200, {"ranking": [0, 1, 7]}), "permutation"),
    "bools": (_answers(200, {"ranking": [True, False, 2]}), "permutation"),
    "floats": (_answers(200, {"ranking": [0.0, 1, 2]}), "permutation"),
    "bad scores": (_answers(200, {"ranking": [2, 1, 0], "scores": [1, 2]}), "malformed"),
    "nan score": (_answers(200, {"ranking": [2, 1, 0], "scores": [1, 2, "x"]}), "malformed"),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_every_failure_raises_remote_error_with_its_kind(name):
    handler, kind = FAILURES[name]
    judge, _t = reranker(handler)
    with pytest.raises(RemoteError) as info:
        judge.judge("q", ["a", "b", "c"])
    assert info.value.kind == kind
    assert isinstance(info.value, ProviderError)
    assert judge.client.failures == 1 and judge.client.last_error is info.value


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_every_failure_degrades_listwise_rerank_to_rrf_order(name):
    handler, _kind = FAILURES[name]
    judge, _t = reranker(handler)
    items = [result("a"), result("b"), result("c")]
    assert listwise_rerank("q", items, judge) == items


def test_http_errors_carry_the_status_and_the_servers_message():
    judge, _t = reranker(FAILURES["500"][0])
    with pytest.raises(RemoteError, match="HTTP 500: model exploded") as info:
        judge.judge("q", ["a", "b"])
    assert info.value.status == 500 and info.value.url == URL + "/v1/rerank"


def test_a_cause_is_logged_once_then_quietly(caplog):
    judge, _t = reranker(FAILURES["timeout"][0])
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    for _ in range(3):
        listwise_rerank("q", [result("a"), result("b")], judge)
    warnings = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "timeout" in warnings[0].getMessage()
    assert judge.client.failures == 3
    judge.client.transport.handler = FAILURES["500"][0]  # a new cause: one more warning
    listwise_rerank("q", [result("a"), result("b")], judge)
    warnings = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert len(warnings) == 2 and "HTTP 500" in warnings[1].getMessage()


def test_logged_causes_never_contain_candidate_text(caplog):
    judge, _t = reranker(FAILURES["garbage"][0])
    caplog.set_level(logging.DEBUG)
    listwise_rerank("q", [result("distinctive-alpha"), result("distinctive-beta")], judge)
    assert caplog.records and "distinctive" not in caplog.text


# ---------------------------------------------------------------- embeddings


def _embedder_handler(dim=3):
    def handler(method, url, payload, headers):
        vecs = [[float(len(i["text"]))] + [0.5] * (dim - 1) for i in payload["inputs"]]
        return 200, {"model": "fake-embed", "dim": dim, "vectors": vecs}

    return handler


def test_embedding_backend_batches_and_keeps_order():
    t = FakeTransport(_embedder_handler())
    backend = RemoteEmbeddingBackend(URL, transport=t, batch_size=2)
    out = backend.embed_texts(["a", "bbb", "cc"])
    assert [v[0] for v in out] == [1.0, 3.0, 2.0]
    assert len(t.calls) == 2 and t.calls[0][1] == URL + "/v1/embed"
    assert backend.dim == 3 and backend.model == "fake-embed"
    assert backend.embed_texts([]) == [] and len(t.calls) == 2


def test_embedding_backend_refuses_labelled_restricted_inputs_before_sending():
    t = FakeTransport(_embedder_handler())
    backend = RemoteEmbeddingBackend(URL, transport=t)
    with pytest.raises(ValueError, match=r"texts\[1\] is RESTRICTED"):
        backend.embed_texts(["ok", {"text": "secret", "sensitivity": "RESTRICTED"}])
    assert t.calls == []


@pytest.mark.parametrize(
    "answer",
    [
        {"vectors": [[1.0]]},  # one vector for two texts
        {"vectors": [[1.0], [1.0, 2.0]]},  # ragged
        {"vectors": [[1.0], ["x"]]},
        {"vectors": [[], []]},
        {"nothing": True},
    ],
)
def test_embedding_backend_rejects_unusable_vectors(answer):
    backend = RemoteEmbeddingBackend(URL, transport=FakeTransport(_answers(200, answer)))
    with pytest.raises(RemoteError) as info:
        backend.embed_texts(["a", "b"])
    assert info.value.kind == "malformed"


def test_embedding_dimension_must_not_change_between_calls():
    t = FakeTransport(_embedder_handler(3))
    backend = RemoteEmbeddingBackend(URL, transport=t)
    backend.embed_texts(["a"])
    t.handler = _embedder_handler(4)
    with pytest.raises(RemoteError, match="dimension changed"):
        backend.embed_texts(["a"])


def test_make_embedding_backend_remote_needs_a_url_unless_the_env_gives_one(monkeypatch):
    t = FakeTransport(_embedder_handler())
    backend = make_embedding_backend("remote", url=URL, transport=t)
    assert isinstance(backend, RemoteEmbeddingBackend)
    monkeypatch.setenv("RAGSPINE_REMOTE_URL", URL)
    with pytest.raises(ValueError, match="url="):  # explicit spec: the env URL is not read
        make_embedding_backend("remote")
    monkeypatch.setenv("RAGSPINE_EMBEDDING_BACKEND", "remote")
    monkeypatch.setenv("RAGSPINE_REMOTE_TOKEN", "tok")
    from_env = make_embedding_backend(transport=t)
    assert from_env.client.base_url == URL
    from_env.embed_texts(["a"])
    assert t.calls[-1][2]["Authorization"] == "Bearer tok"


# ---------------------------------------------------------------- visual


def _visual_handler(method, url, payload, headers):
    if url.endswith("/embed_query"):
        return 200, {"model": "v", "vectors": [[1.0, 0.0], [0.0, 1.0]]}
    if url.endswith("/embed_images"):
        return 200, {"model": "v", "embeddings": [[[1.0, 0.0]] for _ in payload["images"]]}
    if url.endswith("/pages"):
        return 200, {"registered": len(payload["pages"]), "total": len(payload["pages"]),
                     "index": payload.get("index", "idx-1")}
    return 200, {"model": "v", "hits": [{"doc_id": "d", "page_no": 1, "locator": "d#page1",
                                          "title": None, "score": 1.5}]}


def test_visual_embedder_round_trips_queries_and_images():
    t = FakeTransport(_visual_handler)
    vis = RemoteVisualEmbedder(URL, transport=t)
    assert vis.embed_query("chart") == [[1.0, 0.0], [0.0, 1.0]]
    assert vis.embed_images([b"\x89PNG1", b"\x89PNG2"]) == [[[1.0, 0.0]], [[1.0, 0.0]]]
    images = t.payloads()[1]["images"]
    assert base64.b64decode(images[1]["image_b64"]) == b"\x89PNG2"
    assert images[0]["sensitivity"] == "INTERNAL"
    assert vis.embed_images([]) == [] and len(t.calls) == 2


def test_register_pages_never_uploads_restricted_pages():
    t = FakeTransport(_visual_handler)
    vis = RemoteVisualEmbedder(URL, transport=t)
    pages = [
        VisualPage("annual", 1, b"open-page-bytes"),
        VisualPage("memo", 1, b"SECRET-PAGE-BYTES", sensitivity="restricted"),
    ]
    assert vis.register_pages(pages) == 1
    sent = t.payloads()[0]["pages"]
    assert [p["doc_id"] for p in sent] == ["annual"]
    assert base64.b64encode(b"SECRET-PAGE-BYTES") not in t.sent and b"memo" not in t.sent
    assert vis.register_pages([pages[1]]) == 0 and len(t.calls) == 1


def test_visual_search_returns_validated_hits():
    t = FakeTransport(_visual_handler)
    vis = RemoteVisualEmbedder(URL, transport=t)
    assert vis.search("q") == [] and not t.calls  # no pages registered: nothing to ask
    vis.register_pages([VisualPage("annual", 1, b"open-page-bytes")])
    vis.register_pages([VisualPage("annual", 2, b"more-bytes")])
    assert vis.search("q", top_k=3)[0]["locator"] == "d#page1"
    assert [p.get("index") for p in t.payloads()] == [None, "idx-1", "idx-1"]
    bad = RemoteVisualEmbedder(URL, transport=FakeTransport(_answers(200, {"hits": [{}]})))
    bad.index_id = "idx-1"
    with pytest.raises(RemoteError, match="doc_id"):
        bad.search("q")
