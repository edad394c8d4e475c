"""Tests for ragspine_lite.filtering.metadata_filter."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from ragspine_lite.common.sensitivity import RESTRICTED
from ragspine_lite.filtering.metadata_filter import (
    VALID_OPS,
    FilterCondition,
    MetadataFilter,
    make_filter,
    parse_filter_expression,
)

ALL_OPS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "between")


def _row(name: str, **fields: object) -> SimpleNamespace:
    return SimpleNamespace(name=name, **fields)


@pytest.fixture
def rows() -> list[SimpleNamespace]:
    # d has period None (compares as ""), e has no period attribute at all.
    return [
        _row("a", period="2022"),
        _row("b", period="2023"),
        _row("c", period="2024"),
        _row("d", period=None),
        _row("e"),
    ]


# One condition per op on the "period" field, with the rows it must keep (input order).
OP_CASES = [
    ("eq", "2023", ["b"]),
    ("ne", "2023", ["a", "c", "d"]),
    ("in", ("2022", "2024"), ["a", "c"]),
    ("nin", ("2022", "2024"), ["b", "d"]),
    ("gt", "2022", ["b", "c"]),
    ("gte", "2023", ["b", "c"]),
    ("lt", "2023", ["a", "d"]),
    ("lte", "2023", ["a", "b", "d"]),
    ("between", ("2023", "2024"), ["b", "c"]),
]


def test_valid_ops_are_exactly_the_nine_documented_ops():
    assert set(ALL_OPS) == VALID_OPS
    assert len(VALID_OPS) == 9


def test_op_cases_cover_every_valid_op():
    assert {op for op, _, _ in OP_CASES} == VALID_OPS


@pytest.mark.parametrize(("op", "value", "expected"), OP_CASES)
def test_apply_keeps_the_matching_objects_themselves_in_input_order(rows, op, value, expected):
    flt = MetadataFilter((FilterCondition("period", op, value),))
    out = flt.apply(rows)
    assert [r.name for r in out] == expected
    by_name = {r.name: r for r in rows}
    assert all(r is by_name[r.name] for r in out)


@pytest.mark.parametrize(("op", "value", "expected"), OP_CASES)
def test_apply_preserves_order_for_reversed_input(rows, op, value, expected):
    flt = MetadataFilter((FilterCondition("period", op, value),))
    assert [r.name for r in flt.apply(list(reversed(rows)))] == list(reversed(expected))


@pytest.mark.parametrize(("op", "value", "_expected"), OP_CASES)
def test_missing_attribute_never_matches_for_any_op(op, value, _expected):
    assert FilterCondition("period", op, value).matches(SimpleNamespace()) is False


def test_apply_accepts_any_iterable_and_returns_a_list(rows):
    flt = make_filter([("period", "eq", "2024")])
    out = flt.apply(r for r in rows)
    assert isinstance(out, list)
    assert out == [rows[2]] and out[0] is rows[2]


def test_none_attribute_compares_as_empty_string():
    obj = SimpleNamespace(topic=None)
    assert FilterCondition("topic", "eq", "").matches(obj)
    assert FilterCondition("topic", "eq", None).matches(SimpleNamespace(topic=""))
    assert not FilterCondition("topic", "eq", "None").matches(obj)


def test_values_are_compared_as_strings():
    assert FilterCondition("period", "eq", 2023).matches(SimpleNamespace(period="2023"))
    assert FilterCondition("n", "eq", "7").matches(SimpleNamespace(n=7))
    assert FilterCondition("n", "in", [1, 2]).matches(SimpleNamespace(n="2"))


def test_ranges_are_lexicographic_not_numeric():
    # "10" < "9" as strings, although 10 > 9 as numbers.
    assert FilterCondition("n", "lt", "9").matches(SimpleNamespace(n="10"))
    assert not FilterCondition("n", "gt", 9).matches(SimpleNamespace(n=10))


def test_between_is_inclusive_on_both_ends():
    cond = FilterCondition("period", "between", ["2023", "2024"])
    assert cond.matches(SimpleNamespace(period="2023"))
    assert cond.matches(SimpleNamespace(period="2024"))
    assert cond.matches(SimpleNamespace(period="2023Q3"))
    assert not cond.matches(SimpleNamespace(period="2022"))
    assert not cond.matches(SimpleNamespace(period="2024Q1"))  # "2024Q1" > "2024"


def test_mapping_objects_are_filtered_by_key():
    snippet = {"entity": "ACME_HK"}
    assert FilterCondition("entity", "eq", "ACME_HK").matches(snippet)
    assert not FilterCondition("period", "ne", "x").matches(snippet)


def test_unknown_op_is_rejected_naming_it_and_listing_valid_ops():
    with pytest.raises(ValueError) as exc:
        FilterCondition("period", "like", "20%")
    message = str(exc.value)
    assert "'like'" in message
    for op in ALL_OPS:
        assert op in message


def test_op_is_case_sensitive_in_the_constructor():
    with pytest.raises(ValueError, match="'EQ'"):
        FilterCondition("period", "EQ", "2023")


@pytest.mark.parametrize("op", ["in", "nin"])
@pytest.mark.parametrize("bad", ["en", b"en", 5, None])
def test_membership_ops_reject_strings_and_non_iterables(op, bad):
    with pytest.raises(ValueError) as exc:
        FilterCondition("language", op, bad)
    assert repr(bad) in str(exc.value)
    assert repr(op) in str(exc.value)


@pytest.mark.parametrize(
    "values", [["en", "zh"], ("en", "zh"), {"en", "zh"}, frozenset({"zh", "en"})]
)
def test_membership_ops_accept_non_string_iterables(values):
    cond = FilterCondition("language", "in", values)
    assert cond.matches(SimpleNamespace(language="zh"))
    assert not cond.matches(SimpleNamespace(language="fr"))


def test_membership_with_a_one_shot_iterator_keeps_working_on_every_call():
    cond = FilterCondition("language", "in", iter(["en", "zh"]))
    objs = [SimpleNamespace(language="zh"), SimpleNamespace(language="zh")]
    assert MetadataFilter((cond,)).apply(objs) == objs
    assert cond.value == ("en", "zh")


@pytest.mark.parametrize(
    "bad", ["2023,2024", b"ab", ["2023"], ("2023", "2024", "2025"), {"2023", "2024"}, 2023, None]
)
def test_between_requires_a_two_element_non_string_sequence(bad):
    with pytest.raises(ValueError) as exc:
        FilterCondition("period", "between", bad)
    assert "between" in str(exc.value)
    assert repr(bad) in str(exc.value)


@pytest.mark.parametrize("bad_field", ["", None, 3])
def test_field_must_be_a_non_empty_string(bad_field):
    with pytest.raises(ValueError, match="field"):
        FilterCondition(bad_field, "eq", "x")


def test_conditions_and_filters_are_frozen_and_hashable():
    cond = FilterCondition("entity", "eq", "ACME_HK")
    flt = MetadataFilter((cond,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        cond.value = "ACME_CN"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        flt.combine = "or"  # type: ignore[misc]
    assert hash(cond) == hash(FilterCondition("entity", "eq", "ACME_HK"))
    assert {flt, MetadataFilter((cond,))} == {flt}


def test_metadata_filter_converts_a_list_of_conditions_to_a_tuple():
    conds = [FilterCondition("entity", "eq", "ACME_HK"), FilterCondition("topic", "eq", "ROE")]
    flt = MetadataFilter(conds)  # type: ignore[arg-type]
    assert flt.conditions == tuple(conds)
    assert isinstance(flt.conditions, tuple)


def test_metadata_filter_rejects_an_unknown_combine():
    with pytest.raises(ValueError) as exc:
        MetadataFilter((), combine="xor")
    assert "'xor'" in str(exc.value)
    assert "and" in str(exc.value) and "or" in str(exc.value)


def test_metadata_filter_rejects_non_condition_entries():
    with pytest.raises(TypeError):
        MetadataFilter((("entity", "eq", "ACME_HK"),))  # type: ignore[arg-type]


def test_empty_filter_matches_everything_including_objects_without_fields(rows):
    flt = MetadataFilter()
    assert flt.conditions == () and flt.combine == "and"
    out = flt.apply(rows)
    assert out == rows and all(a is b for a, b in zip(out, rows, strict=True))
    assert MetadataFilter((), combine="or").matches(object())


def test_and_requires_every_condition_or_requires_any():
    objs = [
        _row("hk23", entity="ACME_HK", period="2023"),
        _row("hk24", entity="ACME_HK", period="2024"),
        _row("cn23", entity="ACME_CN", period="2023"),
        _row("cn24", entity="ACME_CN", period="2024"),
    ]
    conds = [("entity", "eq", "ACME_HK"), ("period", "eq", "2023")]
    assert [o.name for o in make_filter(conds).apply(objs)] == ["hk23"]
    either = make_filter(conds, combine="or").apply(objs)
    assert [o.name for o in either] == ["hk23", "hk24", "cn23"]


def test_make_filter_builds_conditions_from_triples():
    flt = make_filter([("entity", "eq", "ACME_HK"), ("period", "between", ("2023", "2024"))])
    assert flt == MetadataFilter(
        (
            FilterCondition("entity", "eq", "ACME_HK"),
            FilterCondition("period", "between", ("2023", "2024")),
        )
    )


def test_make_filter_without_conditions_is_the_empty_filter():
    assert make_filter() == MetadataFilter()
    assert make_filter(None, combine="or") == MetadataFilter((), combine="or")


def test_make_filter_validates_each_triple():
    with pytest.raises(ValueError, match="'approx'"):
        make_filter([("period", "approx", "2023")])


def test_a_filter_selecting_restricted_does_select_it_at_index_level():
    objs = [_row("open", sensitivity="INTERNAL"), _row("secret", sensitivity=RESTRICTED)]
    out = make_filter([("sensitivity", "eq", RESTRICTED)]).apply(objs)
    assert out == [objs[1]]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("entity=eq:ACME_HK", FilterCondition("entity", "eq", "ACME_HK")),
        ("topic=ACME", FilterCondition("topic", "eq", "ACME")),
        ("entity=ne:ACME_CN", FilterCondition("entity", "ne", "ACME_CN")),
        ("language=in:en,zh", FilterCondition("language", "in", ("en", "zh"))),
        ("language=nin:fr", FilterCondition("language", "nin", ("fr",))),
        ("period=gt:2022", FilterCondition("period", "gt", "2022")),
        ("period=gte:2023", FilterCondition("period", "gte", "2023")),
        ("period=lt:2025", FilterCondition("period", "lt", "2025")),
        ("period=lte:2024", FilterCondition("period", "lte", "2024")),
        ("period=between:2023,2024", FilterCondition("period", "between", ("2023", "2024"))),
        (" period = BETWEEN: 2023 , 2024 ", FilterCondition("period", "between", ("2023", "2024"))),
        ("language=in:en, zh,", FilterCondition("language", "in", ("en", "zh"))),
        ("period=2023:Q1", FilterCondition("period", "eq", "2023:Q1")),
        ("title=a=b", FilterCondition("title", "eq", "a=b")),
        ("topic=", FilterCondition("topic", "eq", "")),
        ("topic=eq:", FilterCondition("topic", "eq", "")),
    ],
)
def test_parse_filter_expression_accepts_the_documented_forms(expr, expected):
    assert parse_filter_expression(expr) == expected


def test_parsed_expressions_cover_every_op():
    exprs = {
        "eq": "f=eq:x", "ne": "f=ne:x", "in": "f=in:x", "nin": "f=nin:x", "gt": "f=gt:x",
        "gte": "f=gte:x", "lt": "f=lt:x", "lte": "f=lte:x", "between": "f=between:a,b",
    }
    assert {parse_filter_expression(e).op for e in exprs.values()} == VALID_OPS


@pytest.mark.parametrize(
    "expr",
    [
        "entity",
        "=eq:ACME_HK",
        "my field=x",
        "entity.name=x",
        "language=in:",
        "language=in: , ",
        "period=between:2023",
        "period=between:2023,2024,2025",
        "period=between:,2024",
    ],
)
def test_parse_filter_expression_rejects_bad_syntax_quoting_it_and_the_expected_form(expr):
    with pytest.raises(ValueError) as exc:
        parse_filter_expression(expr)
    message = str(exc.value)
    assert repr(expr) in message
    assert "FIELD=OP:VALUE" in message
    assert "between" in message


def test_parse_filter_expression_rejects_non_strings():
    with pytest.raises(ValueError, match="string"):
        parse_filter_expression(None)  # type: ignore[arg-type]


def test_parsed_conditions_filter_like_hand_built_ones(rows):
    parsed = MetadataFilter((parse_filter_expression("period=between:2023,2024"),))
    assert [r.name for r in parsed.apply(rows)] == ["b", "c"]
