"""Tests for ragspine_lite.routing.multi_index."""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import Any

import pytest

from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.chunking.chunking import DocumentMeta
from ragspine_lite.common.sensitivity import RESTRICTED
from ragspine_lite.lexical.retrieval import NarrativeIndex
from ragspine_lite.link.narrative_link import NarrativeIndexRetriever
from ragspine_lite.routing.multi_index import (
    LIBRARY_ID_KEY,
    LibraryIndex,
    MultiIndexRetriever,
    NarrativeRetriever,
)
from ragspine_lite.routing.router import KeywordLibraryRouter, RoutableLibrary


def _snippet(chunk_id: str, **extra: Any) -> dict[str, object]:
    base: dict[str, object] = {
        "text": f"text of {chunk_id}",
        "doc_id": chunk_id.split("#")[0],
        "chunk_id": chunk_id,
        "sensitivity": "INTERNAL",
        "scores": {"bm25": 1.0, "vector": 0.0, "fused": 0.5},
    }
    base.update(extra)
    return base


@dataclass
class FakeRetriever:
    """Returns its canned snippets (the same dict objects) and records every call."""

    snippets: list[dict[str, object]]
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def retrieve(
        self, query: str, *, filters: dict[str, str] | None = None, top_k: int = 50
    ) -> list[dict[str, object]]:
        self.calls.append((query, {"filters": filters, "top_k": top_k}))
        return self.snippets[:top_k]


@dataclass
class FixedRouter:
    ids: Any

    def route(self, query, libraries):
        return self.ids


class RaisingRouter:
    def route(self, query, libraries):
        raise RuntimeError("router down")


def _libs(**snippets: list[dict[str, object]]) -> list[LibraryIndex]:
    return [LibraryIndex(lid, f"{lid} library", FakeRetriever(s)) for lid, s in snippets.items()]


def _ids(results: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(r[LIBRARY_ID_KEY], r["chunk_id"]) for r in results]


def test_duplicate_library_ids_are_rejected():
    with pytest.raises(ValueError, match="'a'"):
        MultiIndexRetriever(_libs(a=[]) + _libs(a=[]))


def test_defaults():
    mi = MultiIndexRetriever(_libs(a=[]))
    assert mi.router is None and mi.top_k == 50 and mi.rrf_k == 60.0
    assert LIBRARY_ID_KEY == "library_id"


def test_both_rank_ones_precede_any_rank_two():
    mi = MultiIndexRetriever(
        _libs(a=[_snippet("a#c0"), _snippet("a#c1")], b=[_snippet("b#c0"), _snippet("b#c1")])
    )
    assert _ids(mi.retrieve("q")) == [("a", "a#c0"), ("b", "b#c0"), ("a", "a#c1"), ("b", "b#c1")]


def test_results_are_interleaved_by_rank_across_three_libraries():
    mi = MultiIndexRetriever(
        _libs(
            a=[_snippet("a#c0")],
            b=[_snippet("b#c0"), _snippet("b#c1"), _snippet("b#c2")],
            c=[_snippet("c#c0"), _snippet("c#c1")],
        )
    )
    assert [r["chunk_id"] for r in mi.retrieve("q")] == [
        "a#c0", "b#c0", "c#c0", "b#c1", "c#c1", "b#c2",
    ]


def test_each_library_is_called_with_query_filters_and_limit():
    libs = _libs(a=[_snippet("a#c0")], b=[_snippet("b#c0")])
    filters = {"entity": "ACME_HK"}
    MultiIndexRetriever(libs, top_k=7).retrieve("hk revenue", filters=filters)
    MultiIndexRetriever(libs, top_k=7).retrieve("again", top_k=3)
    for lib in libs:
        assert lib.retriever.calls == [
            ("hk revenue", {"filters": filters, "top_k": 7}),
            ("again", {"filters": None, "top_k": 3}),
        ]


def test_output_is_cut_to_the_limit():
    mi = MultiIndexRetriever(
        _libs(a=[_snippet(f"a#c{i}") for i in range(5)], b=[_snippet(f"b#c{i}") for i in range(5)]),
        top_k=3,
    )
    assert _ids(mi.retrieve("q")) == [("a", "a#c0"), ("b", "b#c0"), ("a", "a#c1")]
    assert len(mi.retrieve("q", top_k=8)) == 8


def test_snippets_are_tagged_copies_and_inputs_are_not_mutated():
    originals = [_snippet("a#c0"), _snippet("a#c1")]
    before = copy.deepcopy(originals)
    out = MultiIndexRetriever(_libs(a=originals)).retrieve("q")
    assert originals == before
    assert all(LIBRARY_ID_KEY not in s for s in originals)
    assert all(not any(o is s for s in originals) for o in out)
    for o, s in zip(out, originals, strict=True):
        assert o == {**s, LIBRARY_ID_KEY: "a"}


def test_without_router_every_library_is_searched_in_declared_order():
    libs = _libs(a=[_snippet("a#c0")], b=[_snippet("b#c0")])
    assert _ids(MultiIndexRetriever(libs).retrieve("q")) == [("a", "a#c0"), ("b", "b#c0")]


def test_router_order_decides_library_order_and_ties():
    libs = _libs(a=[_snippet("a#c0")], b=[_snippet("b#c0")], c=[_snippet("c#c0")])
    mi = MultiIndexRetriever(libs, router=FixedRouter(["c", "a"]))
    assert _ids(mi.retrieve("q")) == [("c", "c#c0"), ("a", "a#c0")]
    assert libs[1].retriever.calls == []  # b was routed away, never queried


def test_unknown_and_repeated_router_ids_are_ignored():
    libs = _libs(a=[_snippet("a#c0")], b=[_snippet("b#c0")])
    mi = MultiIndexRetriever(libs, router=FixedRouter(["zzz", "b", "b", 3, None]))
    assert _ids(mi.retrieve("q")) == [("b", "b#c0")]
    assert len(libs[1].retriever.calls) == 1
    assert libs[0].retriever.calls == []


@pytest.mark.parametrize(
    "routed", [[], None, ["nope"], [["a"]]], ids=["empty", "none", "unknown", "unhashable"]
)
def test_router_with_nothing_usable_falls_back_to_all_libraries(routed):
    libs = _libs(a=[_snippet("a#c0")], b=[_snippet("b#c0")])
    mi = MultiIndexRetriever(libs, router=FixedRouter(routed))
    assert _ids(mi.retrieve("q")) == [("a", "a#c0"), ("b", "b#c0")]


def test_router_failure_is_logged_and_falls_back_to_all_libraries(caplog):
    libs = _libs(a=[_snippet("a#c0")], b=[_snippet("b#c0")])
    mi = MultiIndexRetriever(libs, router=RaisingRouter())
    with caplog.at_level(logging.WARNING, logger="ragspine_lite.routing.multi_index"):
        out = mi.retrieve("q")
    assert _ids(out) == [("a", "a#c0"), ("b", "b#c0")]
    assert any("routing failed" in r.getMessage() for r in caplog.records)


def test_keyword_router_restricts_search_to_matching_libraries():
    libs = [
        LibraryIndex("hr", "leave policy and hiring", FakeRetriever([_snippet("hr#c0")])),
        LibraryIndex("fin", "revenue and profit reports", FakeRetriever([_snippet("fin#c0")])),
    ]
    mi = MultiIndexRetriever(libs, router=KeywordLibraryRouter())
    assert _ids(mi.retrieve("quarterly revenue")) == [("fin", "fin#c0")]
    # No overlap → no restriction.
    assert _ids(mi.retrieve("weather")) == [("hr", "hr#c0"), ("fin", "fin#c0")]


def test_same_chunk_id_in_two_libraries_stays_two_results():
    mi = MultiIndexRetriever(_libs(a=[_snippet("shared#c0")], b=[_snippet("shared#c0")]))
    assert _ids(mi.retrieve("q")) == [("a", "shared#c0"), ("b", "shared#c0")]


def test_repeated_chunk_within_one_library_appears_once_at_its_first_rank():
    mi = MultiIndexRetriever(
        _libs(a=[_snippet("a#c0"), _snippet("a#c1"), _snippet("a#c0", text="dup")])
    )
    out = mi.retrieve("q")
    assert [r["chunk_id"] for r in out] == ["a#c0", "a#c1"]
    assert out[0]["text"] == "text of a#c0"


def test_snippets_without_chunk_id_are_kept_by_position():
    anon = [{"text": "first"}, {"text": "second"}, {"text": "third", "chunk_id": ""}]
    out = MultiIndexRetriever(_libs(a=anon)).retrieve("q")
    assert [r["text"] for r in out] == ["first", "second", "third"]


def test_no_libraries_gives_no_results():
    assert MultiIndexRetriever([]).retrieve("q") == []


def test_library_returning_nothing_does_not_disturb_the_others():
    mi = MultiIndexRetriever(_libs(a=[], b=[_snippet("b#c0"), _snippet("b#c1")]))
    assert _ids(mi.retrieve("q")) == [("b", "b#c0"), ("b", "b#c1")]


def test_a_leaky_base_restricted_snippet_does_pass_through():
    # Reverse proof: this layer does not strip RESTRICTED; the base retriever's exit must.
    leaky = [_snippet("s#c0", sensitivity=RESTRICTED), _snippet("s#c1")]
    out = MultiIndexRetriever(_libs(leaky=leaky)).retrieve("q")
    assert [r["sensitivity"] for r in out] == [RESTRICTED, "INTERNAL"]


def test_multi_index_retriever_is_itself_a_narrative_retriever():
    mi = MultiIndexRetriever(_libs(a=[]))
    assert isinstance(mi, NarrativeRetriever)
    assert isinstance(FakeRetriever([]), NarrativeRetriever)
    assert isinstance(LibraryIndex("a", "d", FakeRetriever([])), RoutableLibrary)


def test_two_calls_give_identical_results():
    mi = MultiIndexRetriever(
        _libs(a=[_snippet("a#c0"), _snippet("a#c1")], b=[_snippet("b#c0")]),
        router=KeywordLibraryRouter(),
    )
    assert mi.retrieve("a library") == mi.retrieve("a library")


def _real_library(library_id: str, docs: list[tuple[str, str, str]]):
    store = ChunkStore(":memory:")
    store.init_schema()
    index = NarrativeIndex(store)
    for doc_id, sensitivity, text in docs:
        index.ingest(text, DocumentMeta(doc_id, sensitivity=sensitivity))
    library = LibraryIndex(library_id, f"{library_id} docs", NarrativeIndexRetriever(index))
    return store, index, library


def test_restricted_never_surfaces_with_real_bases():
    store_a, index_a, lib_a = _real_library(
        "a",
        [
            ("a-open", "INTERNAL", "Revenue grew in Hong Kong."),
            ("a-secret", RESTRICTED, "Revenue secret acquisition plan."),
        ],
    )
    store_b, index_b, lib_b = _real_library(
        "b",
        [
            ("b-secret", "Restricted", "Revenue forecast, board only."),
            ("b-open", "INTERNAL", "Revenue fell in China."),
        ],
    )
    try:
        # The indexes themselves do hold the RESTRICTED chunks for this query ...
        raw = index_a.retrieve("revenue") + index_b.retrieve("revenue")
        assert {r.chunk.doc_id for r in raw} >= {"a-secret", "b-secret"}
        # ... but through the link exit and this layer, none of them surfaces.
        out = MultiIndexRetriever([lib_a, lib_b]).retrieve("revenue")
        assert {r["doc_id"] for r in out} == {"a-open", "b-open"}
        assert all(str(r["sensitivity"]).upper() != RESTRICTED for r in out)
    finally:
        store_a.close()
        store_b.close()
