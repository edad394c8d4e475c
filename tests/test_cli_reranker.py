"""``ragspine-lite search --reranker SPEC``: local and remote rerankers at the CLI edge."""

from __future__ import annotations

import json

import pytest
from _cli import clean_edge_env, run

from ragspine_lite import cli
from ragspine_lite.cli import search as cli_search
from ragspine_lite.common.sensitivity import is_restricted

QUERY = "Hong Kong revenue growth in 2024"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    clean_edge_env(monkeypatch)


@pytest.fixture
def db(tmp_path, capsys) -> str:
    path = str(tmp_path / "chunks.db")
    assert run(capsys, "ingest", str(cli.samples_dir()), "--db", path)[0] == 0
    return path


class ReverseJudge:
    """Reverses the open candidates and remembers every text it was shown."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def judge(self, query, candidates):
        self.seen.extend(candidates)
        return list(reversed(range(len(candidates))))


def test_reranker_option_reorders_and_keeps_top_k(capsys, db, monkeypatch):
    judge = ReverseJudge()
    monkeypatch.setattr(cli_search, "_make_reranker", lambda s, _: judge if s == "mine" else None)
    code, out, _ = run(capsys, "search", QUERY, "--db", db, "--json", "--top-k", "12")
    fused = json.loads(out)
    code, out, _ = run(capsys, "search", QUERY, "--db", db, "--json", "--top-k", "12",
                       "--reranker", "mine")
    reranked = json.loads(out)
    assert code == 0 and len(fused) == len(reranked) > 10  # top-k, not the judge's 10
    assert [s["chunk_id"] for s in reranked] != [s["chunk_id"] for s in fused]
    assert sorted(s["chunk_id"] for s in reranked) == sorted(s["chunk_id"] for s in fused)
    assert judge.seen and not any("Macau" in text for text in judge.seen)  # RESTRICTED held


def test_bad_reranker_spec_is_a_usage_error(capsys, db):
    code, out, err = run(capsys, "search", QUERY, "--db", db, "--reranker", "cohere")
    assert code == 2 and out == ""
    assert "argument --reranker: unknown reranker 'cohere'" in err


def test_reranker_variable_is_read_when_the_option_is_absent(capsys, db, monkeypatch):
    monkeypatch.setenv("RAGSPINE_RERANKER", "nonsense")
    code, _out, err = run(capsys, "search", QUERY, "--db", db)
    assert code == 2 and "nonsense" in err


def test_a_reranker_whose_model_is_missing_keeps_the_fused_order(capsys, db, tmp_path):
    _code, out, _ = run(capsys, "search", QUERY, "--db", db, "--json")
    fused = json.loads(out)
    code, out, err = run(capsys, "search", QUERY, "--db", db, "--json", "--reranker", "ce")
    assert code == 0 and json.loads(out) == fused
    assert "warning: reranker failed" in err and "never downloaded" in err


@pytest.mark.cpython_only
def test_splade_tiny_reranks_at_the_cli(capsys, db):
    pytest.importorskip("numpy")
    from ragspine_lite.rerank.splade import SpladeReranker

    _code, out, _ = run(capsys, "search", QUERY, "--db", db, "--json", "--top-k", "5")
    fused = json.loads(out)
    code, out, _ = run(capsys, "search", QUERY, "--db", db, "--top-k", "5",
                       "--reranker", "learned-sparse")
    assert code == 0 and "reranked by SpladeReranker" in out
    order = SpladeReranker().judge(QUERY, [s["text"] for s in fused])
    _code, out, _ = run(capsys, "search", QUERY, "--db", db, "--json", "--top-k", "5",
                        "--reranker", "splade")
    assert [s["chunk_id"] for s in json.loads(out)] == [fused[i]["chunk_id"] for i in order]
    assert not any(is_restricted(s["sensitivity"]) for s in json.loads(out))
