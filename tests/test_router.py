"""Tests for ragspine_lite.routing.router."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ragspine_lite.routing.router import (
    LIBRARY_ROUTER_ENV,
    KeywordLibraryRouter,
    LibraryRouter,
    RoutableLibrary,
    make_library_router,
)


@dataclass
class Lib:
    library_id: str
    description: str


LIBS = [
    Lib("hr", "HR handbook: leave policy, hiring, payroll"),
    Lib("finance", "Finance reports: revenue, profit, payroll costs"),
    Lib("hk", "香港业务 Hong Kong operations"),
    Lib("empty", ""),
]


def test_libraries_are_ranked_by_token_overlap():
    # finance shares {revenue, profit, payroll}; hr shares {payroll}.
    assert KeywordLibraryRouter().route("revenue profit payroll", LIBS) == ["finance", "hr"]


def test_equal_scores_keep_library_order():
    assert KeywordLibraryRouter().route("payroll", LIBS) == ["hr", "finance"]
    assert KeywordLibraryRouter().route("payroll", list(reversed(LIBS))) == ["finance", "hr"]


def test_no_overlap_returns_empty_list_meaning_no_restriction():
    assert KeywordLibraryRouter().route("weather forecast", LIBS) == []


@pytest.mark.parametrize("query", ["", "   ", "?!"])
def test_token_less_query_returns_empty_list(query):
    assert KeywordLibraryRouter().route(query, LIBS) == []


def test_no_libraries_returns_empty_list():
    assert KeywordLibraryRouter().route("revenue", []) == []


def test_overlap_counts_distinct_tokens_not_repetitions():
    libs = [Lib("a", "revenue revenue revenue"), Lib("b", "revenue profit")]
    # a: {revenue} → 1; b: {revenue, profit} → 2, even though the query repeats revenue.
    assert KeywordLibraryRouter().route("revenue revenue revenue profit", libs) == ["b", "a"]


def test_matching_is_case_insensitive_and_ignores_punctuation():
    assert KeywordLibraryRouter().route("LEAVE-POLICY?", LIBS) == ["hr"]


def test_cjk_queries_route_through_unigrams_and_bigrams():
    assert KeywordLibraryRouter().route("香港的营收", LIBS) == ["hk"]


def test_only_the_description_is_matched_not_the_id():
    assert KeywordLibraryRouter().route("hk", [Lib("hk", "unrelated text")]) == []


def test_keyword_router_satisfies_the_protocols():
    assert isinstance(KeywordLibraryRouter(), LibraryRouter)
    assert isinstance(LIBS[0], RoutableLibrary)


@pytest.mark.parametrize("spec", ["keyword", "description", "lexical", " Keyword ", "LEXICAL"])
def test_make_library_router_aliases_build_the_keyword_router(spec):
    assert isinstance(make_library_router(spec), KeywordLibraryRouter)


@pytest.mark.parametrize("spec", ["none", "NONE", ""])
def test_make_library_router_none_turns_the_seam_off(spec):
    assert make_library_router(spec) is None


def test_make_library_router_unknown_spec_names_it_and_lists_valid_names():
    with pytest.raises(ValueError) as exc:
        make_library_router("semantic")
    message = str(exc.value)
    assert "'semantic'" in message
    for name in ("none", "keyword", "description", "lexical"):
        assert name in message


def test_make_library_router_reads_the_env_var_when_spec_is_none(monkeypatch):
    monkeypatch.setenv(LIBRARY_ROUTER_ENV, "description")
    assert isinstance(make_library_router(), KeywordLibraryRouter)
    monkeypatch.delenv(LIBRARY_ROUTER_ENV)
    assert make_library_router() is None


def test_explicit_spec_beats_the_env_var(monkeypatch):
    monkeypatch.setenv(LIBRARY_ROUTER_ENV, "keyword")
    assert make_library_router("none") is None
    monkeypatch.setenv(LIBRARY_ROUTER_ENV, "bogus")
    assert isinstance(make_library_router("lexical"), KeywordLibraryRouter)


def test_env_var_constant_name():
    assert LIBRARY_ROUTER_ENV == "RAGSPINE_LIBRARY_ROUTER"
