"""corrective (CRAG): grading, the bounded action ladder, refusal, trace, factory, isolation."""

from __future__ import annotations

import logging

import pytest

from ragspine_lite import corrective
from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.chunking.chunking import DocumentMeta
from ragspine_lite.corrective import (
    CORRECTIVE_ENV,
    RESTRICTED_SENSITIVITY,
    CorrectiveRetriever,
    GradeAction,
    LexicalOverlapGrader,
    RelevanceGrader,
    make_corrective_retriever,
)
from ragspine_lite.lexical.retrieval import NarrativeIndex
from ragspine_lite.link.narrative_link import NarrativeIndexRetriever


class ScriptedBase:
    """Answers each call with the next scripted snippet list and records the calls."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls: list[dict] = []

    def retrieve(self, query, *, filters=None, top_k=50):
        self.calls.append({"query": query, "filters": filters, "top_k": top_k})
        return self.answers[min(len(self.calls), len(self.answers)) - 1]


OPEN = {"sensitivity": "INTERNAL"}  # an exit's snippet carries its label (none: RESTRICTED)
WEAK = [{"text": "weather report", **OPEN}]
GOOD = [{"text": "hong kong revenue grew", **OPEN}]


def actions(crag) -> list[str]:
    return [a.action for a in crag.last_actions]


def test_constants_and_exports():
    assert CORRECTIVE_ENV == "RAGSPINE_CORRECTIVE"
    assert RESTRICTED_SENSITIVITY == "RESTRICTED"
    assert "RESTRICTED_SENSITIVITY" in corrective.__all__
    assert isinstance(LexicalOverlapGrader(), RelevanceGrader)


def test_lexical_grader():
    g = LexicalOverlapGrader()
    assert g.grade("revenue drop", [{"text": "revenue grew strongly"}]) == 0.5
    assert g.grade("。", []) == 1.0  # no query tokens: nothing to miss
    assert g.grade("revenue", []) == 0.0
    assert g.grade("revenue 香港", [{"content": "香港"}, {"text": "Revenue"}]) == 1.0
    assert g.grade("a b", [{"text": "", "content": "a"}]) == 0.5


def test_a_passing_first_attempt_is_returned_with_one_call():
    base = ScriptedBase(GOOD)
    crag = CorrectiveRetriever(base, emit=False)
    assert crag.retrieve("hong kong revenue", filters={"entity": "ACME_HK"}, top_k=7) == GOOD
    assert base.calls == [{"query": "hong kong revenue", "filters": {"entity": "ACME_HK"},
                           "top_k": 7}]
    assert crag.last_actions == [GradeAction("retrieve", 1.0, 1)]
    assert not crag.refused


def test_drop_filters_then_pass_makes_two_calls():
    base = ScriptedBase(WEAK, GOOD)
    crag = CorrectiveRetriever(base, emit=False)
    assert crag.retrieve("hong kong revenue", filters={"entity": "X"}) == GOOD
    assert [c["filters"] for c in base.calls] == [{"entity": "X"}, None]
    assert actions(crag) == ["retrieve", "drop_filters"]


def test_third_attempt_uses_the_rewritten_query_graded_against_the_original():
    base = ScriptedBase(WEAK, WEAK, GOOD)
    crag = CorrectiveRetriever(base, query_rewriter=lambda q: q + " rewritten", emit=False)
    assert crag.retrieve("hong kong revenue", filters={"entity": "X"}) == GOOD
    assert len(base.calls) == 3
    assert base.calls[2] == {"query": "hong kong revenue rewritten", "filters": None, "top_k": 50}
    assert actions(crag) == ["retrieve", "drop_filters", "rewrite_query"]


def test_all_weak_refuses_with_the_best_grade():
    base = ScriptedBase(WEAK, [{"text": "hong", **OPEN}], WEAK)
    crag = CorrectiveRetriever(base, query_rewriter=str.upper, emit=False)
    assert crag.retrieve("hong kong revenue", filters={"entity": "X"}) == []
    assert actions(crag) == ["retrieve", "drop_filters", "rewrite_query", "refuse"]
    assert crag.last_actions[-1] == GradeAction("refuse", pytest.approx(1 / 3), 0)
    assert crag.refused


def test_no_filters_and_no_rewriter_refuses_after_one_call():
    base = ScriptedBase(WEAK)
    crag = CorrectiveRetriever(base, emit=False)
    assert crag.retrieve("hong kong revenue") == []
    assert len(base.calls) == 1
    assert actions(crag) == ["retrieve", "refuse"]


def test_empty_base_output_refuses():
    crag = CorrectiveRetriever(ScriptedBase([]), emit=False)
    assert crag.retrieve("revenue", filters={"entity": "X"}) == []
    assert crag.last_actions[-1] == GradeAction("refuse", 0.0, 0)


@pytest.mark.parametrize(("retries", "calls"), [(0, 1), (1, 2), (2, 3), (99, 3), (-5, 1)])
def test_max_retries_is_clamped_and_bounds_the_calls(retries, calls):
    base = ScriptedBase(WEAK)
    crag = CorrectiveRetriever(base, max_retries=retries, query_rewriter=str.upper, emit=False)
    assert crag.max_retries == max(0, min(2, retries))
    crag.retrieve("hong kong revenue", filters={"entity": "X"})
    assert len(base.calls) == calls


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="max_retries"):
        CorrectiveRetriever(ScriptedBase(), max_retries="2")
    for bad in (-0.1, 1.1, "x"):
        with pytest.raises(ValueError, match="min_grade"):
            CorrectiveRetriever(ScriptedBase(), min_grade=bad)


def test_last_actions_reset_per_call():
    crag = CorrectiveRetriever(ScriptedBase(WEAK, GOOD, GOOD), emit=False)
    crag.retrieve("hong kong revenue", filters={"entity": "X"})
    assert len(crag.last_actions) == 2
    crag.retrieve("hong kong revenue")
    assert actions(crag) == ["retrieve"]


def test_min_grade_bounds_zero_always_passes_one_needs_every_token():
    assert CorrectiveRetriever(ScriptedBase(WEAK), min_grade=0.0, emit=False).retrieve(
        "hong kong revenue") == WEAK
    strict = CorrectiveRetriever(
        ScriptedBase([{"text": "hong kong", **OPEN}]), min_grade=1.0, emit=False
    )
    assert strict.retrieve("hong kong revenue") == []


def test_a_failing_rewriter_is_skipped_and_logged(caplog):
    def boom(_q):
        raise RuntimeError("model down")

    base = ScriptedBase(WEAK)
    crag = CorrectiveRetriever(base, query_rewriter=boom, emit=False)
    with caplog.at_level(logging.WARNING, logger="ragspine_lite.corrective"):
        assert crag.retrieve("hong kong revenue", filters={"e": "x"}) == []
    assert actions(crag) == ["retrieve", "drop_filters", "refuse"]
    assert "rewriter failed" in caplog.text


def test_trace_is_emitted_once_per_call_with_exactly_two_keys(monkeypatch):
    calls = []
    monkeypatch.setattr(corrective, "emit_trace", lambda **kw: calls.append(kw))
    crag = CorrectiveRetriever(ScriptedBase(WEAK, GOOD))
    crag.retrieve("hong kong revenue", filters={"entity": "X"})
    assert calls == [{"corrective_actions": ["retrieve", "drop_filters"],
                      "corrective_grades": [0.0, 1.0]}]
    CorrectiveRetriever(ScriptedBase(WEAK), emit=False).retrieve("q")
    assert len(calls) == 1


def test_trace_grades_are_rounded_to_six_places(monkeypatch):
    calls = []
    monkeypatch.setattr(corrective, "emit_trace", lambda **kw: calls.append(kw))
    CorrectiveRetriever(ScriptedBase([{"text": "a", **OPEN}])).retrieve("a b c")
    assert calls[0]["corrective_grades"] == [0.333333, 0.333333]


def test_real_trace_record_carries_no_text(caplog):
    with caplog.at_level(logging.INFO, logger="ragspine_lite.trace"):
        CorrectiveRetriever(ScriptedBase(WEAK)).retrieve("hong kong revenue")
    (record,) = [r for r in caplog.records if r.name == "ragspine_lite.trace"]
    assert record.corrective_actions == ["retrieve", "refuse"]
    assert "weather" not in repr(record.__dict__)


def test_factory(monkeypatch):
    base = ScriptedBase(GOOD)
    monkeypatch.delenv(CORRECTIVE_ENV, raising=False)
    assert make_corrective_retriever(base) is base
    assert make_corrective_retriever(base, "none") is base
    for spec in ("crag", "Corrective", " ON "):
        assert isinstance(make_corrective_retriever(base, spec), CorrectiveRetriever)
    crag = make_corrective_retriever(base, "crag", min_grade=0.9, max_retries=1)
    assert (crag.min_grade, crag.max_retries) == (0.9, 1)
    grader = LexicalOverlapGrader()
    assert make_corrective_retriever(base, "on", grader=grader).grader is grader
    monkeypatch.setenv(CORRECTIVE_ENV, "crag")
    assert isinstance(make_corrective_retriever(base), CorrectiveRetriever)
    assert make_corrective_retriever(base, "none") is base  # explicit beats env
    with pytest.raises(ValueError, match="'bogus'"):
        make_corrective_retriever(base, "bogus")


def test_output_is_a_subset_of_the_base_output_on_a_real_index():
    store = ChunkStore(":memory:")
    store.init_schema()
    try:
        index = NarrativeIndex(store)
        index.ingest("Hong Kong revenue grew in 2024.", DocumentMeta(doc_id="hk", entity="ACME_HK"))
        index.ingest("China profit fell.", DocumentMeta(doc_id="cn", entity="ACME_CN"))
        link = NarrativeIndexRetriever(index, retry_without_filters=False)
        crag = CorrectiveRetriever(link, emit=False)
        base_all = link.retrieve("hong kong revenue")
        out = crag.retrieve("hong kong revenue", filters={"entity": "ACME_CN"})
        assert out and all(s in base_all for s in out)
        assert actions(crag) == ["retrieve", "drop_filters"]
        # reverse proof: the filtered base alone gives nothing relevant
        assert link.retrieve("hong kong revenue", filters={"entity": "ACME_CN"}) == []
    finally:
        store.close()


def test_restricted_from_a_custom_base_never_reaches_the_grader_or_the_output():
    seen = []

    class RecordingGrader:
        def grade(self, query, snippets):
            seen.extend(snippets)
            return 1.0

    leaky = ScriptedBase([{"text": "SECRET plan", "sensitivity": "Restricted"},
                          {"text": "open", "sensitivity": "INTERNAL"}])
    out = CorrectiveRetriever(leaky, grader=RecordingGrader(), emit=False).retrieve("plan")
    assert out == [{"text": "open", "sensitivity": "INTERNAL"}]
    assert "SECRET" not in repr(seen)


@pytest.mark.parametrize("label", [{"sensitivity": "SECRET"}, {"sensitivity": "RESTRICTED."}, {}])
def test_a_snippet_without_a_vocabulary_label_is_neither_graded_nor_returned(label):
    seen: list = []

    class RecordingGrader:
        def grade(self, query, snippets):
            seen.extend(snippets)
            return 1.0

    base = ScriptedBase([{"text": "zqcanary plan", **label}, {"text": "open plan", **OPEN}])
    out = CorrectiveRetriever(base, grader=RecordingGrader(), emit=False).retrieve("plan")
    assert out == [{"text": "open plan", **OPEN}]
    assert "zqcanary" not in repr(seen)


def test_synthesised_snippets_are_not_graded_as_evidence():
    theme = {"text": "hong kong revenue theme", "is_synthesis": True, **OPEN}
    weak_plus_theme = ScriptedBase([*WEAK, theme])
    crag = CorrectiveRetriever(weak_plus_theme, emit=False)
    assert crag.retrieve("hong kong revenue") == []  # the theme alone would have passed
    assert crag.last_actions[0] == GradeAction("retrieve", 0.0, 2)
    good_plus_theme = ScriptedBase([*GOOD, theme])
    assert CorrectiveRetriever(good_plus_theme, emit=False).retrieve("hong kong revenue") == [
        *GOOD, theme]
