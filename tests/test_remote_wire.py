"""The wire format: labels, RESTRICTED refusal, limits and answer checks (pure)."""

from __future__ import annotations

import pytest
from _remote_fakes import result

from ragspine_lite.remote import wire
from ragspine_lite.remote.wire import RestrictedItemError, WireError


def test_canonical_method_accepts_aliases_and_lists_valid_names():
    assert wire.canonical_method(" Late-Interaction ") == "colbert"
    assert wire.canonical_method("ms_marco") == "cross_encoder"
    assert wire.canonical_method("learned sparse") == "splade"
    assert wire.canonical_method("judge") == "llm"
    with pytest.raises(ValueError, match=r"'bm25'.*valid names: ce, colbert"):
        wire.canonical_method("bm25")


def test_label_of_reads_strings_mappings_chunks_and_results():
    chunk = result("t", "PUBLIC").chunk
    assert wire.label_of("plain") == ("plain", "INTERNAL")
    assert wire.label_of({"text": "m"}, "PUBLIC") == ("m", "PUBLIC")
    assert wire.label_of(chunk) == ("t", "PUBLIC")
    assert wire.label_of(result("r", "RESTRICTED")) == ("r", "RESTRICTED")
    assert wire.label_of(object()) == ("", "RESTRICTED")  # unreadable → held back


def test_open_items_strips_restricted_case_insensitively():
    slots, items = wire.open_items(["a", {"text": "s", "sensitivity": "restricted"}, "b"])
    assert slots == [0, 2] and [i["text"] for i in items] == ["a", "b"]


def test_read_items_refuses_restricted_and_unlabelled_items():
    ok = {"c": [{"text": "x", "sensitivity": "INTERNAL"}]}
    assert wire.read_items(ok, "c", max_items=5) == ["x"]
    with pytest.raises(RestrictedItemError, match=r"c\[1\] is labelled RESTRICTED") as info:
        wire.read_items({"c": [ok["c"][0], {"text": "y", "sensitivity": "ReStRiCtEd"}]},
                        "c", max_items=5)
    assert info.value.code == "restricted_item"
    for bad in ([{"text": "x"}], [{"text": "x", "sensitivity": None}], ["x"],
                [{"text": 3, "sensitivity": "INTERNAL"}], "x"):
        with pytest.raises(WireError):
            wire.read_items({"c": bad}, "c", max_items=5)


def test_read_items_enforces_the_item_limit():
    many = {"c": [{"text": "x", "sensitivity": "INTERNAL"}] * 4}
    with pytest.raises(WireError, match="at most 3") as info:
        wire.read_items(many, "c", max_items=3)
    assert info.value.code == "too_many_items"


def test_read_pages_refuses_restricted_pages_and_checks_fields():
    page = {"doc_id": "d", "page_no": 2, "sensitivity": "INTERNAL",
            "image_b64": wire.encode_image(b"img")}
    (got,) = wire.read_pages({"p": [page]}, "p", max_items=2)
    assert got["image"] == b"img" and got["page_no"] == 2 and got["title"] is None
    with pytest.raises(RestrictedItemError):
        wire.read_pages({"p": [{**page, "sensitivity": "RESTRICTED"}]}, "p", max_items=2)
    with pytest.raises(WireError, match="page_no"):
        wire.read_pages({"p": [{k: v for k, v in page.items() if k != "page_no"}]}, "p",
                        max_items=2)
    with pytest.raises(WireError, match="base64"):
        wire.read_pages({"p": [{**page, "image_b64": "***"}]}, "p", max_items=2)


def test_read_str_and_read_int_name_the_field():
    with pytest.raises(WireError, match="'query' must not be blank"):
        wire.read_str({"query": "  "}, "query")
    with pytest.raises(WireError, match="'query' must be a string"):
        wire.read_str({}, "query")
    assert wire.read_int({}, "k", default=3, minimum=1, maximum=5) == 3
    with pytest.raises(WireError, match=r"\[1, 5\], got 9"):
        wire.read_int({"k": 9}, "k", default=3, minimum=1, maximum=5)


def test_check_permutation_is_strict():
    assert wire.check_permutation([2, 0, 1], 3) == [2, 0, 1]
    for bad in ([0, 1], [0, 0, 1], [0, 1, 3], [False, 1, 2], [0.0, 1, 2], None, "012"):
        with pytest.raises(WireError) as info:
            wire.check_permutation(bad, 3)
        assert info.value.code == "permutation"


def test_check_vectors_and_multivectors():
    assert wire.check_vectors([[1, 2], [3, 4]], 2) == [[1.0, 2.0], [3.0, 4.0]]
    assert wire.check_vectors([], 0) == []
    with pytest.raises(WireError):
        wire.check_vectors([[1.0], [float("inf")]], 2)
    assert wire.check_multivectors([[[1.0]], [[2.0], [3.0]]], 2)[1] == [[2.0], [3.0]]
    with pytest.raises(WireError, match="one dimension"):
        wire.check_multivectors([[[1.0]], [[2.0, 3.0]]], 2)


def test_check_scores_allows_null():
    assert wire.check_scores(None, 3) is None
    assert wire.check_scores([1, 2.5], 2) == [1.0, 2.5]
    with pytest.raises(WireError):
        wire.check_scores([True, 1], 2)
