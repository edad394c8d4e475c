"""The bundle searcher's opt-in reranker: off by default, applied after fusion, RESTRICTED
texts never sent, and a failing reranker keeps the fused order instead of failing."""

from __future__ import annotations

import json

import pytest
from _restricted import matches_restricted

from ragspine_lite.bundle.runtime import RerankSetting

QUERY = "operating profit revenue"
SECRET = """---
sensitivity: RESTRICTED
---
Operating profit revenue figures for the ZEPHYRCANARY deal are confidential.
"""


class ReverseJudge:
    """Ranks candidates in reverse and keeps every text it was shown."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        self.seen.extend(candidates)
        return list(reversed(range(len(candidates))))


class BrokenJudge:
    def judge(self, query: str, candidates: list[str]) -> list[int]:
        raise RuntimeError("model fell over")


def ids(outcome) -> list[str]:
    return [s["chunk_id"] for s in outcome.snippets]


def test_without_a_reranker_search_output_has_no_rerank_key(searcher):
    def searched() -> dict:
        out = json.loads(searcher.dispatch("search", json.dumps({"query": QUERY})))
        out.pop("took_ms")
        return out

    before = searched()
    assert "rerank" not in before and before["hits"]
    assert searcher.configure_reranker("none") == {"spec": "none", "url": None, "enabled": False}
    assert searched() == before


def test_a_reranker_reorders_the_fused_hits(searcher):
    fused = ids(searcher.search(QUERY, top_k=5))
    assert len(fused) >= 3
    searcher.reranker = RerankSetting("test:reverse", ReverseJudge())
    outcome = searcher.search(QUERY, top_k=5)
    assert ids(outcome) == list(reversed(fused))
    assert outcome.rerank["applied"] is True and outcome.rerank["error"] is None
    assert outcome.as_dict()["rerank"]["spec"] == "test:reverse"
    # Highlights and sections follow their snippets.
    for hit in outcome.hits:
        assert hit["highlights"] or QUERY.split()[0] not in hit["snippet"]["text"].lower()
    assert ids(searcher.search(QUERY, top_k=5, rerank=False)) == fused


def test_a_failing_reranker_keeps_the_fused_order(searcher):
    fused = ids(searcher.search(QUERY, top_k=5))
    searcher.reranker = RerankSetting("test:broken", BrokenJudge())
    assert ids(searcher.search(QUERY, top_k=5)) == fused


def test_restricted_page_documents_never_reach_the_reranker(searcher):
    searcher.ingest("secret.md", SECRET)
    judge = ReverseJudge()
    searcher.reranker = RerankSetting("test:reverse", judge)
    searcher.search(QUERY, top_k=10)
    assert matches_restricted(searcher, QUERY)
    assert judge.seen and not any("ZEPHYRCANARY" in t for t in judge.seen)


def test_bad_reranker_specs_are_refused_and_the_old_setting_stays(searcher):
    judge = ReverseJudge()
    searcher.reranker = RerankSetting("test:reverse", judge)
    with pytest.raises(ValueError, match="nonsense"):
        searcher.configure_reranker("nonsense")
    with pytest.raises(ValueError, match="url"):
        searcher.configure_reranker("remote:colbert")
    with pytest.raises(ValueError, match="ftp://x"):
        searcher.configure_reranker("remote:colbert", url="ftp://x")
    assert searcher.reranker.judge is judge


def test_stats_report_the_reranker_without_its_token(searcher):
    info = searcher.configure_reranker(
        "remote:splade", url="http://127.0.0.1:9", token="s3cret-token", check=False
    )
    assert info == {"spec": "remote:splade", "url": "http://127.0.0.1:9", "enabled": True}
    stats = searcher.dispatch("stats")
    assert json.loads(stats)["reranker"]["spec"] == "remote:splade"
    assert "s3cret-token" not in stats


@pytest.mark.cpython_only
def test_a_remote_reranker_over_http_reorders_and_degrades(searcher):
    from _remote_server import StubHTTPServer, closed_port

    def answer(method, path, headers, body):
        if path == "/v1/models":
            return 200, b'{"models": {"splade": {"model": "stub"}}}'
        n = len(json.loads(body)["candidates"])
        ranking = list(reversed(range(n)))
        return 200, json.dumps({"ranking": ranking, "scores": [0.0] * n, "model": "stub"}).encode()

    fused = ids(searcher.search(QUERY, top_k=5))
    searcher.ingest("secret.md", SECRET)
    with StubHTTPServer(answer) as stub:
        info = searcher.configure_reranker("remote:splade", url=stub.url, token="tok")
        assert info["models"] == {"models": {"splade": {"model": "stub"}}}
        outcome = searcher.search(QUERY, top_k=5)
    assert ids(outcome) == list(reversed(fused))
    sent = b"".join(body for _m, _p, _h, body in stub.requests)
    assert b"ZEPHYRCANARY" not in sent
    assert all(h.get("authorization") == "Bearer tok" for _m, _p, h, _b in stub.requests)

    searcher.configure_reranker("remote:splade", url=f"http://127.0.0.1:{closed_port()}",
                                timeout=2, check=False)
    outcome = searcher.search(QUERY, top_k=5)
    assert ids(outcome) == fused
    assert outcome.rerank["applied"] is False and outcome.rerank["error"]
