"""Tests for ragspine_lite.filtering.automatic."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from ragspine_lite.common.glossary import Glossary
from ragspine_lite.filtering.automatic import (
    FILTER_EXTRACTOR_ENV,
    ControlledVocabFilterExtractor,
    FilterExtractor,
    extract_filter,
    make_filter_extractor,
)
from ragspine_lite.filtering.metadata_filter import FilterCondition, MetadataFilter


def _conds(flt: MetadataFilter | None) -> list[tuple[str, str, object]]:
    assert flt is not None
    return [(c.field, c.op, c.value) for c in flt.conditions]


@pytest.fixture
def candidates() -> list[SimpleNamespace]:
    combos = [
        ("REVENUE", "ACME_HK"),
        ("REVENUE", "ACME_CN"),
        ("PROFIT", "ACME_HK"),
        ("ROE", "ACME_GROUP"),
        ("", ""),
    ]
    return [SimpleNamespace(chunk_id=f"c{i}", topic=t, entity=e) for i, (t, e) in enumerate(combos)]


def test_metric_term_becomes_a_topic_condition():
    assert _conds(ControlledVocabFilterExtractor().extract("revenue trend")) == [
        ("topic", "eq", "REVENUE")
    ]


def test_entity_term_becomes_an_entity_condition():
    assert _conds(ControlledVocabFilterExtractor().extract("outlook for hong kong")) == [
        ("entity", "eq", "ACME_HK")
    ]


def test_metric_conditions_come_before_entity_conditions():
    flt = ControlledVocabFilterExtractor().extract("HK results: Return on Equity")
    assert _conds(flt) == [("topic", "eq", "ROE"), ("entity", "eq", "ACME_HK")]
    assert flt is not None and flt.combine == "and"


def test_query_without_glossary_terms_gives_none():
    assert ControlledVocabFilterExtractor().extract("what happened to the weather") is None


@pytest.mark.parametrize("query", ["", "   ", "!!!"])
def test_blank_or_punctuation_query_gives_none(query):
    assert ControlledVocabFilterExtractor().extract(query) is None


def test_ascii_terms_need_word_boundaries():
    # "cn" inside "concern" and "hk" inside "hkd" are not entity mentions.
    assert ControlledVocabFilterExtractor().extract("a concern about hkd pricing") is None


def test_cjk_terms_match_as_substrings():
    flt = ControlledVocabFilterExtractor().extract("香港营收增长")
    assert _conds(flt) == [("topic", "eq", "REVENUE"), ("entity", "eq", "ACME_HK")]


def test_matching_is_case_insensitive_on_the_query():
    assert _conds(ControlledVocabFilterExtractor().extract("REVENUE")) == [
        ("topic", "eq", "REVENUE")
    ]


def test_conditions_are_deduplicated_by_field_and_code():
    flt = ControlledVocabFilterExtractor().extract("revenue 营收 revenue in HK and 香港")
    assert _conds(flt) == [("topic", "eq", "REVENUE"), ("entity", "eq", "ACME_HK")]


def test_same_code_on_different_fields_is_kept_for_each_field():
    glossary = Glossary(metric_synonyms={"alpha": "X"}, entity_synonyms={"beta": "X"})
    flt = ControlledVocabFilterExtractor(glossary=glossary).extract("alpha beta")
    assert _conds(flt) == [("topic", "eq", "X"), ("entity", "eq", "X")]


def test_combine_is_passed_to_the_filter():
    flt = ControlledVocabFilterExtractor(combine="or").extract("hk revenue")
    assert flt is not None and flt.combine == "or"


def test_unknown_combine_is_rejected_at_construction():
    with pytest.raises(ValueError, match="'xor'"):
        ControlledVocabFilterExtractor(combine="xor")


def test_custom_glossary_replaces_the_defaults():
    glossary = Glossary(metric_synonyms={"churn": "CHURN"}, entity_synonyms={"emea": "EU"})
    extractor = ControlledVocabFilterExtractor(glossary=glossary)
    assert _conds(extractor.extract("EMEA churn")) == [
        ("topic", "eq", "CHURN"),
        ("entity", "eq", "EU"),
    ]
    assert extractor.extract("revenue in hong kong") is None


def test_extracted_filter_selects_the_matching_candidates(candidates):
    flt = ControlledVocabFilterExtractor().extract("HK revenue")
    assert flt is not None
    assert [c.chunk_id for c in flt.apply(candidates)] == ["c0"]


def test_controlled_vocab_extractor_satisfies_the_protocol():
    assert isinstance(ControlledVocabFilterExtractor(), FilterExtractor)


class _RaisingExtractor:
    def extract(self, query: str) -> MetadataFilter | None:
        raise RuntimeError("extractor exploded")


class _NoneExtractor:
    def extract(self, query: str) -> MetadataFilter | None:
        return None


class _GarbageExtractor:
    def extract(self, query: str) -> object:
        return {"entity": "ACME_HK"}


def _candidate_set(extractor, query, candidates):
    """What a caller keeps: the extracted filter applied, or everything without one."""
    flt = extract_filter(extractor, query)
    return candidates if flt is None else flt.apply(candidates)


@pytest.mark.parametrize(
    "extractor",
    [None, _RaisingExtractor(), _NoneExtractor(), _GarbageExtractor()],
    ids=["absent", "raises", "returns-none", "returns-garbage"],
)
def test_failed_or_absent_extraction_leaves_the_unfiltered_candidate_set(extractor, candidates):
    kept = _candidate_set(extractor, "HK revenue", candidates)
    assert kept == candidates
    assert all(a is b for a, b in zip(kept, candidates, strict=True))


@pytest.mark.parametrize(
    "query", ["HK revenue", "ROE", "acme hong kong", "weather", "中国 营运利润", ""]
)
def test_extraction_never_widens_the_candidate_set(query, candidates):
    kept = _candidate_set(ControlledVocabFilterExtractor(), query, candidates)
    assert len(kept) <= len(candidates)
    assert all(any(k is c for c in candidates) for k in kept)


def test_raising_extractor_is_logged_not_raised(caplog):
    with caplog.at_level(logging.WARNING, logger="ragspine_lite.filtering.automatic"):
        assert extract_filter(_RaisingExtractor(), "q") is None
    assert any("filter extraction failed" in r.getMessage() for r in caplog.records)


def test_extract_filter_passes_a_real_filter_through():
    flt = MetadataFilter((FilterCondition("entity", "eq", "ACME_HK"),))

    class Fixed:
        def extract(self, query: str) -> MetadataFilter | None:
            return flt

    assert extract_filter(Fixed(), "anything") is flt


@pytest.mark.parametrize(
    "spec", ["keyword", "vocab", "controlled_vocab", "glossary", "Controlled-Vocab", " GLOSSARY "]
)
def test_make_filter_extractor_aliases_build_the_controlled_vocab_extractor(spec):
    assert isinstance(make_filter_extractor(spec), ControlledVocabFilterExtractor)


@pytest.mark.parametrize("spec", ["none", " None ", ""])
def test_make_filter_extractor_none_turns_the_seam_off(spec):
    assert make_filter_extractor(spec) is None


def test_make_filter_extractor_passes_kwargs():
    extractor = make_filter_extractor("keyword", combine="or")
    assert isinstance(extractor, ControlledVocabFilterExtractor) and extractor.combine == "or"


def test_make_filter_extractor_unknown_spec_names_it_and_lists_valid_names():
    with pytest.raises(ValueError) as exc:
        make_filter_extractor("llm")
    message = str(exc.value)
    assert "'llm'" in message
    for name in ("none", "keyword", "vocab", "controlled_vocab", "glossary"):
        assert name in message


def test_make_filter_extractor_reads_the_env_var_when_spec_is_none(monkeypatch):
    monkeypatch.setenv(FILTER_EXTRACTOR_ENV, "glossary")
    assert isinstance(make_filter_extractor(), ControlledVocabFilterExtractor)


def test_make_filter_extractor_is_off_when_env_var_is_unset(monkeypatch):
    monkeypatch.delenv(FILTER_EXTRACTOR_ENV, raising=False)
    assert make_filter_extractor() is None


def test_explicit_spec_beats_the_env_var(monkeypatch):
    monkeypatch.setenv(FILTER_EXTRACTOR_ENV, "keyword")
    assert make_filter_extractor("none") is None
    monkeypatch.setenv(FILTER_EXTRACTOR_ENV, "bogus")
    assert isinstance(make_filter_extractor("vocab"), ControlledVocabFilterExtractor)


def test_env_var_constant_name():
    assert FILTER_EXTRACTOR_ENV == "RAGSPINE_FILTER_EXTRACTOR"
