"""The security gate: longest external name first, immune to case and whitespace, ASCII names
on word edges; and the query transforms' gate, which now matches through it."""

from __future__ import annotations

import doctest

import pytest

import ragspine_lite.common.security_gate as gate_mod
from ragspine_lite.common.company_profile import default_security_gate, load_company_profile
from ragspine_lite.common.security_gate import (
    SECURITY_ALLOW,
    SECURITY_REFUSE_OUT_OF_SCOPE,
    SecurityGate,
    SecurityScreen,
    SecurityVerdict,
)
from ragspine_lite.query.gate import ExternalEntityGate, default_query_gate

PEERS = {"平安": "Ping An", "中国平安": "Ping An Group", "ping an": "Ping An", "aia": "AIA",
         "友邦": "AIA", "jinghua life": "Jinghua Life"}


@pytest.fixture
def gate() -> SecurityGate:
    return SecurityGate(PEERS, "ACME Group")


def test_doctest():
    assert doctest.testmod(gate_mod).failed == 0


@pytest.mark.parametrize("text, entity", [
    ("平安营收", "Ping An"),
    ("平 安 营收", "Ping An"),
    ("平\u3000安营收", "Ping An"),          # ideographic space
    ("平\u200b安营收", "Ping An"),          # zero-width space (a format character)
    ("AIA revenue", "AIA"),
    ("a i a revenue", "AIA"),
    ("A  I\tA revenue", "AIA"),
    ("ＡＩＡ revenue", "AIA"),               # full-width letters (NFKC)
    ("pingan roe", "Ping An"),
    ("P I N G A N roe", "Ping An"),
    ("JingHua   Life new sales", "Jinghua Life"),
    ("友 邦香港", "AIA"),
    ("revenue of AIA", "AIA"),
    ("AIA集团营收", "AIA"),                  # a CJK neighbour is a word edge for an ASCII name
])
def test_case_and_whitespace_never_hide_a_name(gate, text, entity):
    assert gate.detect(text).external_entity == entity
    verdict = gate.screen(raw_question=text, metric="REVENUE")
    assert verdict.decision == SECURITY_REFUSE_OUT_OF_SCOPE and verdict.external_entity == entity


@pytest.mark.parametrize("text", [
    "shopping and dining revenue in Asia",  # "ping an" spans two words' insides
    "naiad revenue",                        # "aia" inside a word
    "ACME Hong Kong revenue 2024",
    "",
])
def test_ascii_names_need_word_edges(gate, text):
    screen = gate.detect(text)
    assert screen.external_entity is None
    assert screen.masked_text == " ".join(text.lower().split())
    assert gate.screen(raw_question=text, metric="REVENUE") == SecurityVerdict(SECURITY_ALLOW)


def test_the_longest_name_wins_and_its_span_is_blanked(gate):
    screen = gate.detect("  中国平安 的营收 ")
    assert screen == SecurityScreen("Ping An Group", "     的营收")
    screen = gate.detect("Compare  a i a with ACME")
    assert screen.external_entity == "AIA"
    assert screen.masked_text == "compare       with acme"


def test_ties_keep_the_mapping_order():
    gate = SecurityGate({"abc": "First", "xyz": "Second"}, "Home")
    assert gate.detect("xyz and abc").external_entity == "First"


def test_detect_all_lists_every_name_once(gate):
    assert gate.detect_all("AIA, a i a and 中国平安 vs 平安") == ["Ping An Group", "AIA", "Ping An"]
    assert gate.detect_all("acme") == []


def test_the_refusal_names_the_entity_and_suggests_the_home_metric(gate):
    verdict = gate.screen(raw_question="a i a 营收", metric="REVENUE")
    assert verdict.decision == SECURITY_REFUSE_OUT_OF_SCOPE
    assert "AIA" in verdict.message and "ACME Group REVENUE" in verdict.message
    assert verdict.narrowing_options == ["ACME Group REVENUE"]


def test_neither_call_raises_on_odd_input(gate):
    assert gate.detect(None).external_entity is None
    assert gate.detect(12345).masked_text == "12345"
    assert gate.screen(raw_question="\x00\u202e", metric="").decision == SECURITY_ALLOW
    blank = SecurityGate({"": "Blank", "  ": "Spaces"}, "H")
    assert blank.detect("anything").external_entity is None


def test_the_default_profile_gate_refuses_the_glossary_peers():
    gate = default_security_gate(load_company_profile())
    for text in ("平 安 营收", "a i a revenue", "Prudential ROE", "宏 利"):
        assert gate.detect(text).external_entity is not None, text
    assert gate.detect("ACME China operating profit").external_entity is None


# ---------------------------------------------------------------- the query transforms' gate


@pytest.mark.parametrize("query", ["平 安 营收", "a i a revenue", "P r u d e n t i a l roe",
                                   "友\u200b邦香港"])
def test_the_query_gate_no_longer_lets_spaced_names_through(query):
    assert not default_query_gate().allows(query)


def test_the_query_gate_keeps_its_word_edges_and_list_order():
    gate = ExternalEntityGate(["globex", "环球", "ping an"])
    assert gate.allows("shopping and dining") and gate.allows("globexample")
    assert gate.refused_terms("环 球 and G L O B E X, ping an") == ["globex", "环球", "ping an"]
