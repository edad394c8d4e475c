"""Tests for listwise rerank: prompt, parsing, and RESTRICTED exit #1."""

from __future__ import annotations

import logging
import random
from types import SimpleNamespace

import pytest

from ragspine_lite.common import sensitivity
from ragspine_lite.rerank.listwise_rerank import (
    DEFAULT_TOP_N,
    RESTRICTED_SENSITIVITY,
    ListwiseJudge,
    build_listwise_prompt,
    listwise_rerank,
    parse_listwise_response,
)

LOGGER_NAME = "ragspine_lite.rerank.listwise_rerank"


def item(text: str, sens: str = "INTERNAL") -> SimpleNamespace:
    return SimpleNamespace(chunk=SimpleNamespace(text=text, sensitivity=sens), fused_score=0.0)


def reverse(n: int) -> list[int]:
    return list(reversed(range(n)))


class RecordingJudge:
    """Returns a fixed or computed ranking and remembers what it was shown."""

    def __init__(self, rank=reverse) -> None:
        self.rank = rank
        self.calls: list[tuple[str, list[str]]] = []

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        self.calls.append((query, list(candidates)))
        return self.rank(len(candidates)) if callable(self.rank) else self.rank


class RaisingJudge:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
        self.calls = 0

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        self.calls += 1
        raise self.exc


def texts(results) -> list[str]:
    return [r.chunk.text for r in results]


# --- constants and protocol -------------------------------------------------------------


def test_constants():
    assert DEFAULT_TOP_N == 10
    assert RESTRICTED_SENSITIVITY == "RESTRICTED"
    assert RESTRICTED_SENSITIVITY == sensitivity.RESTRICTED


def test_judges_satisfy_the_protocol():
    assert isinstance(RecordingJudge(), ListwiseJudge)
    assert not isinstance(object(), ListwiseJudge)


# --- build_listwise_prompt --------------------------------------------------------------


def test_prompt_contains_query_candidates_and_index_markers():
    prompt = build_listwise_prompt("ACME香港营收为何下降", ["第一段", "second passage", "third"])
    assert "查询：ACME香港营收为何下降" in prompt
    assert "[0] 第一段" in prompt
    assert "[1] second passage" in prompt
    assert "[2] third" in prompt
    assert "[3]" not in prompt


def test_prompt_layout_is_fixed():
    lines = build_listwise_prompt("q", ["a", "b"]).split("\n")
    assert len(lines) == 10
    assert all(lines[:2]) and lines[2] == ""
    assert "逗号" in lines[1]
    assert lines[3:] == [
        "查询：q",
        "",
        "候选：",
        "[0] a",
        "[1] b",
        "",
        "排序结果（仅下标，逗号分隔）：",
    ]


def test_prompt_is_deterministic():
    assert build_listwise_prompt("q", ["x", "y"]) == build_listwise_prompt("q", ["x", "y"])
    assert build_listwise_prompt("q", ["x", "y"]) != build_listwise_prompt("q", ["y", "x"])


def test_prompt_with_no_candidates_still_well_formed():
    prompt = build_listwise_prompt("q", [])
    assert "候选：" in prompt
    assert "[0]" not in prompt


# --- parse_listwise_response ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "n", "expected"),
    [
        ("2,0,1", 3, [2, 0, 1]),
        ("[2] > [0] > [1]", 3, [2, 0, 1]),
        ("1, 1, 0", 3, [1, 0, 2]),
        ("7, 2, 0", 3, [2, 0, 1]),
        ("2", 4, [2, 0, 1, 3]),
        ("The most relevant is candidate 1, then candidate 0.", 3, [1, 0, 2]),
        ("排序结果：3，1，0，2", 4, [3, 1, 0, 2]),
        ("no idea, sorry", 3, [0, 1, 2]),
        ("!!??", 2, [0, 1]),
        ("", 3, [0, 1, 2]),
    ],
)
def test_parse_examples(text, n, expected):
    assert parse_listwise_response(text, n) == expected


@pytest.mark.parametrize("n", [0, -1])
def test_parse_with_no_candidates_is_empty(n):
    assert parse_listwise_response("0, 1, 2", n) == []


def test_parse_always_returns_a_permutation():
    rng = random.Random(7)
    alphabet = "0123456789,[] >abc，"
    for _ in range(300):
        n = rng.randint(1, 12)
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        assert sorted(parse_listwise_response(text, n)) == list(range(n))


# --- listwise_rerank: basics and fallbacks ----------------------------------------------


def test_empty_results_give_empty_list_without_calling_the_judge():
    judge = RecordingJudge()
    assert listwise_rerank("q", [], judge) == []
    assert judge.calls == []


def test_no_judge_returns_input_truncated_to_top_n():
    results = [item(f"t{i}") for i in range(12)]
    assert listwise_rerank("q", results, None) == results[:DEFAULT_TOP_N]
    assert listwise_rerank("q", results, None, top_n=3) == results[:3]


def test_judge_reorders_open_items():
    results = [item("a"), item("b"), item("c")]
    judge = RecordingJudge([2, 0, 1])
    out = listwise_rerank("why", results, judge)
    assert texts(out) == ["c", "a", "b"]
    assert judge.calls == [("why", ["a", "b", "c"])]
    assert all(any(o is r for r in results) for o in out)


@pytest.mark.parametrize("returned", [None, ["b", "a"], [99, 42], [-1, 3], "10", 5])
def test_unusable_judge_output_keeps_input_order(returned):
    results = [item("a"), item("b"), item("c")]
    out = listwise_rerank("q", results, RecordingJudge(returned))
    assert out == results


def test_bools_duplicates_and_out_of_range_indices_are_ignored():
    results = [item("a"), item("b"), item("c"), item("d")]
    out = listwise_rerank("q", results, RecordingJudge([True, 3, 3, 9, False, 1.0, 2]))
    # True/False/1.0/9 ignored, 3 once, then 2, then the missing 0, 1 in input order
    assert texts(out) == ["d", "c", "a", "b"]


def test_missing_indices_are_appended_in_input_order():
    results = [item("a"), item("b"), item("c"), item("d")]
    assert texts(listwise_rerank("q", results, RecordingJudge([2]))) == ["c", "a", "b", "d"]


@pytest.mark.parametrize(
    "exc", [RuntimeError("boom"), ValueError("bad"), KeyError("k"), ZeroDivisionError()]
)
def test_raising_judge_falls_back_to_input_order(exc):
    results = [item("a"), item("b"), item("c")]
    judge = RaisingJudge(exc)
    assert listwise_rerank("q", results, judge, top_n=2) == results[:2]
    assert judge.calls == 1


def test_judge_without_judge_method_falls_back():
    results = [item("a"), item("b")]
    assert listwise_rerank("q", results, object()) == results  # type: ignore[arg-type]


def test_judge_output_raising_while_iterated_falls_back():
    def gen(n):
        yield 1
        raise RuntimeError("mid-stream")

    results = [item("a"), item("b"), item("c")]
    assert listwise_rerank("q", results, RecordingJudge(lambda n: gen(n))) == results


def test_failure_logs_one_warning_with_exception_type_but_no_text(caplog):
    secret = "confidential candidate sentence"

    class LeakyJudge:
        def judge(self, query, candidates):
            raise ValueError(f"cannot rank {candidates[0]}")

    with caplog.at_level(logging.DEBUG, logger=LOGGER_NAME):
        out = listwise_rerank("q", [item(secret), item("other")], LeakyJudge())
    assert texts(out) == [secret, "other"]
    records = [r for r in caplog.records if r.name == LOGGER_NAME]
    assert len(records) == 1
    assert records[0].levelno == logging.WARNING
    message = records[0].getMessage()
    assert "ValueError" in message
    assert secret not in message
    assert "cannot rank" not in message


def test_successful_rerank_logs_nothing(caplog):
    with caplog.at_level(logging.DEBUG, logger=LOGGER_NAME):
        listwise_rerank("q", [item("a"), item("b")], RecordingJudge())
    assert [r for r in caplog.records if r.name == LOGGER_NAME] == []


def test_truncation_happens_after_merging_and_judge_sees_all_open_items():
    results = [item(f"t{i}") for i in range(6)]
    judge = RecordingJudge()  # reverses
    out = listwise_rerank("q", results, judge, top_n=2)
    assert judge.calls[0][1] == [f"t{i}" for i in range(6)]
    assert texts(out) == ["t5", "t4"]


def test_top_n_zero_returns_nothing_and_negative_is_clamped_to_zero():
    results = [item("a")]
    assert listwise_rerank("q", results, RecordingJudge(), top_n=0) == []
    assert listwise_rerank("q", results, RecordingJudge(), top_n=-1) == []


@pytest.mark.parametrize("bad", [None, "3", 2.5, True])
def test_a_top_n_that_is_not_an_int_never_raises_and_means_the_default(bad, caplog):
    results = [item(f"t{i}") for i in range(DEFAULT_TOP_N + 2)]
    with caplog.at_level(logging.WARNING, logger="ragspine_lite.rerank.listwise_rerank"):
        out = listwise_rerank("q", results, RecordingJudge(), top_n=bad)
    assert texts(out) == [f"t{i}" for i in range(DEFAULT_TOP_N + 1, 1, -1)]
    assert "top_n" in caplog.text


def test_input_sequence_is_not_mutated():
    results = [item("a"), item("b"), item("c")]
    before = list(results)
    listwise_rerank("q", results, RecordingJudge())
    assert results == before


def test_tuple_input_gives_a_list():
    results = (item("a"), item("b"))
    out = listwise_rerank("q", results, RecordingJudge())
    assert isinstance(out, list)
    assert texts(out) == ["b", "a"]


# --- RESTRICTED exit #1 -----------------------------------------------------------------


def test_pinned_restricted_keeps_its_position_under_a_reversing_judge():
    n0, r1, n2, n3 = item("n0"), item("r1", "RESTRICTED"), item("n2"), item("n3")
    judge = RecordingJudge()
    out = listwise_rerank("q", [n0, r1, n2, n3], judge)
    assert out == [n3, r1, n2, n0]
    assert out[1] is r1
    assert judge.calls == [("q", ["n0", "n2", "n3"])]


@pytest.mark.parametrize("label", ["RESTRICTED", "restricted", "Restricted", "rEsTrIcTeD"])
def test_restricted_is_never_sent_case_insensitively(label):
    judge = RecordingJudge()
    results = [item("open a"), item("secret", label), item("open b")]
    out = listwise_rerank("q", results, judge)
    assert judge.calls == [("q", ["open a", "open b"])]
    assert out[1] is results[1]
    assert texts(out) == ["open b", "secret", "open a"]


def test_all_restricted_means_the_judge_is_not_called():
    judge = RecordingJudge()
    results = [item("s1", "RESTRICTED"), item("s2", "restricted")]
    assert listwise_rerank("q", results, judge, top_n=1) == results[:1]
    assert judge.calls == []


def test_unreadable_sensitivity_fails_closed():
    odd = SimpleNamespace(text="no chunk attribute")
    judge = RecordingJudge()
    results = [item("a"), odd, item("b")]
    out = listwise_rerank("q", results, judge)
    assert judge.calls == [("q", ["a", "b"])]
    assert out[1] is odd


def test_recording_judge_never_receives_restricted_text_over_many_mixes():
    rng = random.Random(20240601)
    labels = ["INTERNAL", "PUBLIC", "CONFIDENTIAL", "RESTRICTED", "restricted", "Restricted"]
    for trial in range(400):
        n = rng.randint(0, 9)
        results = []
        for i in range(n):
            label = rng.choice(labels)
            tag = "SECRET" if label.upper() == "RESTRICTED" else "open"
            results.append(item(f"{tag}-{trial}-{i}", label))
        restricted_texts = {r.chunk.text for r in results if r.chunk.text.startswith("SECRET")}

        def rank(m, rng=rng):
            order = list(range(m))
            rng.shuffle(order)
            return order

        judge = RecordingJudge(rank)
        top_n = rng.randint(0, 12)
        out = listwise_rerank("q", results, judge, top_n=top_n)

        for _, shown in judge.calls:
            assert not restricted_texts.intersection(shown)
            assert shown == [r.chunk.text for r in results if r.chunk.text.startswith("open")]
        open_count = n - len(restricted_texts)
        assert len(judge.calls) == (1 if open_count else 0)
        assert len(out) == min(top_n, n)
        full = listwise_rerank("q", results, RecordingJudge(judge.rank), top_n=n)
        assert sorted(id(r) for r in full) == sorted(id(r) for r in results)
        for pos, r in enumerate(results):
            if r.chunk.text in restricted_texts:
                assert full[pos] is r
                if pos < top_n:
                    assert out[pos] is r
