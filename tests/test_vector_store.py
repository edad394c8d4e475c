"""Conformance tests for the vector store seam and ``make_vector_store``."""

from __future__ import annotations

import importlib.metadata
import math

import pytest
from _fakes import rec

from ragspine_lite.lexical.scoring import cosine_similarity
from ragspine_lite.vector import store as store_mod
from ragspine_lite.vector.store import (
    DEFAULT_QUERY_K,
    VECTOR_STORE_ENTRY_POINT_GROUP,
    VECTOR_STORE_ENV,
    InProcessVectorStore,
    VectorHit,
    VectorRecord,
    VectorStore,
    make_vector_store,
)


def filled() -> InProcessVectorStore:
    s = InProcessVectorStore()
    s.upsert(
        [
            rec("a", 1.0, 0.0, 0.0, entity="ACME_HK", period="2024"),
            rec("b", 0.9, 0.1, 0.0, entity="ACME_CN", period="2024"),
            rec("c", 0.0, 1.0, 0.0, entity="ACME_HK", period="2023"),
            rec("d", 0.0, 0.0, 1.0, entity="ACME_HK"),
        ]
    )
    return s


# --- constants and types ----------------------------------------------------------------


def test_constants_match_the_contract():
    assert DEFAULT_QUERY_K == 50
    assert VECTOR_STORE_ENV == "RAGSPINE_VECTOR_STORE"
    assert VECTOR_STORE_ENTRY_POINT_GROUP == "ragspine.vector_stores"


def test_records_and_hits_are_frozen_with_empty_metadata_default():
    r = VectorRecord("x", (1.0,))
    assert r.metadata == {}
    with pytest.raises(AttributeError):
        r.id = "y"  # type: ignore[misc]
    h = VectorHit("x", 0.5, {})
    with pytest.raises(AttributeError):
        h.score = 1.0  # type: ignore[misc]
    assert VectorRecord("x", (1.0,)).metadata is not VectorRecord("y", (1.0,)).metadata


def test_in_process_store_satisfies_the_protocol():
    assert isinstance(InProcessVectorStore(), VectorStore)


# --- upsert -----------------------------------------------------------------------------


def test_upsert_returns_count_and_empty_batch_is_zero():
    s = InProcessVectorStore()
    assert s.upsert([]) == 0
    assert s.count() == 0
    assert s.upsert([rec("a", 1.0, 0.0), rec("b", 0.0, 1.0)]) == 2
    assert s.count() == 2


def test_upsert_replaces_by_id():
    s = InProcessVectorStore()
    s.upsert([rec("a", 1.0, 0.0, tag="old")])
    s.upsert([rec("a", 0.0, 1.0, tag="new")])
    assert s.count() == 1
    (hit,) = s.query([0.0, 1.0], k=5)
    assert hit.id == "a"
    assert hit.metadata == {"tag": "new"}
    assert hit.score == pytest.approx(1.0)


def test_first_vector_fixes_dimension_for_later_batches():
    s = InProcessVectorStore()
    s.upsert([rec("a", 1.0, 0.0, 0.0)])
    with pytest.raises(ValueError, match="dimension"):
        s.upsert([rec("b", 1.0, 0.0)])
    assert s.count() == 1


def test_dimension_mismatch_inside_a_batch_rejects_the_whole_batch():
    s = InProcessVectorStore()
    with pytest.raises(ValueError, match="dimension"):
        s.upsert([rec("a", 1.0, 0.0), rec("b", 1.0, 0.0), rec("c", 1.0, 0.0, 0.0)])
    assert s.count() == 0
    # nothing was fixed by the rejected batch: a 3-d vector is still accepted
    assert s.upsert([rec("x", 1.0, 2.0, 3.0)]) == 1


def test_rejected_batch_leaves_existing_records_untouched():
    s = InProcessVectorStore()
    s.upsert([rec("a", 1.0, 0.0, tag="keep")])
    with pytest.raises(ValueError):
        s.upsert([rec("a", 0.0, 1.0, tag="replaced"), rec("b", 1.0)])
    (hit,) = s.query([1.0, 0.0])
    assert hit.metadata == {"tag": "keep"}
    assert hit.score == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "1.0", None])
def test_non_finite_or_non_numeric_components_are_rejected(bad):
    s = InProcessVectorStore()
    with pytest.raises(ValueError):
        s.upsert([VectorRecord("a", (1.0, bad))])  # type: ignore[arg-type]
    assert s.count() == 0


def test_empty_vector_and_non_str_id_are_rejected():
    s = InProcessVectorStore()
    with pytest.raises(ValueError, match="empty"):
        s.upsert([VectorRecord("a", ())])
    with pytest.raises(ValueError, match="id"):
        s.upsert([VectorRecord(7, (1.0,))])  # type: ignore[arg-type]


def test_list_vectors_are_accepted_like_tuples():
    s = InProcessVectorStore()
    s.upsert([VectorRecord("a", [1, 0])])  # type: ignore[arg-type]
    assert s.query((1.0, 0.0))[0].score == pytest.approx(1.0)


# --- query ------------------------------------------------------------------------------


def test_query_on_empty_store_returns_nothing():
    assert InProcessVectorStore().query([1.0, 2.0]) == []


def test_query_dimension_mismatch_raises():
    with pytest.raises(ValueError, match="dimension"):
        filled().query([1.0, 0.0])


def test_hits_are_ordered_by_score_then_id():
    s = InProcessVectorStore()
    s.upsert(
        [
            rec("z", 1.0, 0.0),
            rec("m", 1.0, 0.0),
            rec("a", 0.0, 1.0),
            rec("q", 2.0, 0.0),
            rec("b", 1.0, 1.0),
        ]
    )
    hits = s.query([1.0, 0.0])
    assert [h.id for h in hits] == ["m", "q", "z", "b", "a"]
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_score_is_the_fsum_cosine():
    s = InProcessVectorStore()
    vectors = {
        "a": (0.1, 0.2, 0.3, 1e-9),
        "b": (1e16, 1.0, -1e16, 3.0),
        "c": (-0.5, 0.25, 0.125, 7.0),
    }
    s.upsert([VectorRecord(i, v) for i, v in vectors.items()])
    query = (0.3, -1e16, 0.7, 1e16)
    for hit in s.query(query, k=10):
        assert hit.score == cosine_similarity(query, vectors[hit.id])


def test_fsum_keeps_what_a_plain_sum_would_cancel_away():
    s = InProcessVectorStore()
    s.upsert([rec("x", 1e16, 1.0, -1e16)])
    (hit,) = s.query([1.0, 1.0, 1.0])
    # plain left-to-right sum of the products is 0.0; the exact dot product is 1.0
    assert hit.score == 1.0 / (math.sqrt(2e32) * math.sqrt(3.0))


def test_zero_vectors_score_zero_and_are_still_returned():
    s = InProcessVectorStore()
    s.upsert([rec("zero", 0.0, 0.0), rec("one", 1.0, 0.0)])
    hits = s.query([1.0, 0.0])
    assert [(h.id, h.score) for h in hits] == [("one", 1.0), ("zero", 0.0)]
    assert [h.score for h in s.query([0.0, 0.0])] == [0.0, 0.0]


def test_k_caps_the_number_of_hits():
    s = filled()
    assert [h.id for h in s.query([1.0, 0.1, 0.0], k=2)] == ["b", "a"]
    assert len(s.query([1.0, 0.0, 0.0], k=1)) == 1
    assert len(s.query([1.0, 0.0, 0.0], k=100)) == 4


def test_default_k_is_fifty():
    s = InProcessVectorStore()
    s.upsert([rec(f"r{i:03d}", 1.0, float(i)) for i in range(60)])
    assert len(s.query([1.0, 0.0])) == 50


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "3", None])
def test_invalid_k_is_rejected(k):
    with pytest.raises(ValueError, match="k must be"):
        filled().query([1.0, 0.0, 0.0], k=k)


def test_where_is_and_of_exact_equality():
    s = filled()
    hk = s.query([1.0, 0.0, 0.0], where={"entity": "ACME_HK"})
    assert sorted(h.id for h in hk) == ["a", "c", "d"]
    both = s.query([1.0, 0.0, 0.0], where={"entity": "ACME_HK", "period": "2024"})
    assert [h.id for h in both] == ["a"]
    assert s.query([1.0, 0.0, 0.0], where={"entity": "acme_hk"}) == []


def test_where_excludes_records_missing_the_key():
    s = filled()
    hits = s.query([0.0, 0.0, 1.0], where={"period": "2024"})
    assert "d" not in {h.id for h in hits}
    assert sorted(h.id for h in hits) == ["a", "b"]


def test_filtering_precedes_scoring_so_filtered_neighbours_never_appear():
    s = filled()
    # "a" and "b" are the nearest neighbours, but only ACME_CN passes and k=1
    hits = s.query([1.0, 0.0, 0.0], k=1, where={"entity": "ACME_CN"})
    assert [h.id for h in hits] == ["b"]
    # "c" is the global nearest but is from 2023: top-1 among the filtered records is "b"
    hits = s.query([0.0, 1.0, 0.0], k=1, where={"period": "2024"})
    assert [h.id for h in hits] == ["b"]


def test_empty_where_matches_everything():
    assert len(filled().query([1.0, 0.0, 0.0], where={})) == 4


def test_restricted_records_are_not_self_stripped():
    s = InProcessVectorStore()
    s.upsert([rec("secret", 1.0, 0.0, sensitivity="RESTRICTED"), rec("open", 0.0, 1.0)])
    assert [h.id for h in s.query([1.0, 0.0])] == ["secret", "open"]
    assert s.query([1.0, 0.0])[0].metadata == {"sensitivity": "RESTRICTED"}


def test_metadata_round_trips_unchanged_and_is_isolated_from_callers():
    md = {"doc_id": "d1", "title": "年报 2024", "empty": ""}
    s = InProcessVectorStore()
    s.upsert([VectorRecord("a", (1.0, 0.0), md)])
    md["doc_id"] = "mutated"
    (hit,) = s.query([1.0, 0.0])
    assert hit.metadata == {"doc_id": "d1", "title": "年报 2024", "empty": ""}
    hit.metadata["title"] = "changed"  # type: ignore[index]
    assert s.query([1.0, 0.0])[0].metadata["title"] == "年报 2024"


def test_repeated_queries_and_independent_instances_are_bit_identical():
    records = [
        VectorRecord(f"id{i}", tuple(math.sin(i * 7 + j) for j in range(8)), {"n": str(i % 3)})
        for i in range(40)
    ]
    q = tuple(math.cos(j * 1.3) for j in range(8))
    s1, s2 = InProcessVectorStore(), InProcessVectorStore()
    s1.upsert(records)
    s2.upsert(list(reversed(records)))
    first = s1.query(q, k=25)
    assert s1.query(q, k=25) == first
    assert s2.query(q, k=25) == first
    assert [h.score.hex() for h in s2.query(q, k=25)] == [h.score.hex() for h in first]


# --- delete / count ---------------------------------------------------------------------


def test_delete_removes_matches_and_returns_their_number():
    s = filled()
    assert s.delete(where={"entity": "ACME_HK", "period": "2024"}) == 1
    assert s.count() == 3
    assert s.delete(where={"entity": "ACME_HK"}) == 2
    assert [h.id for h in s.query([1.0, 0.0, 0.0])] == ["b"]
    assert s.delete(where={"entity": "nobody"}) == 0


def test_delete_with_empty_where_removes_everything():
    s = filled()
    assert s.delete(where={}) == 4
    assert s.count() == 0
    assert s.query([1.0, 0.0, 0.0]) == []


def test_delete_requires_a_mapping():
    with pytest.raises(ValueError, match="where"):
        filled().delete(where=None)  # type: ignore[arg-type]


# --- factory ----------------------------------------------------------------------------


class FakeEntryPoint:
    def __init__(self, name: str, target: object) -> None:
        self.name = name
        self.group = VECTOR_STORE_ENTRY_POINT_GROUP
        self._target = target
        self.loaded = 0

    def load(self) -> object:
        self.loaded += 1
        return self._target


class PluginStore(InProcessVectorStore):
    def __init__(self, **kwargs: object) -> None:
        super().__init__()
        self.kwargs = kwargs


def patch_entry_points(monkeypatch, *eps: FakeEntryPoint) -> list[str]:
    groups: list[str] = []

    def fake_entry_points(*, group: str):
        groups.append(group)
        return [ep for ep in eps if ep.group == group]

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    return groups


@pytest.mark.parametrize("spec", ["in_process", "in-process", "inprocess", "memory", " MEMORY "])
def test_builtin_specs_give_a_fresh_in_process_store(spec):
    a, b = make_vector_store(spec), make_vector_store(spec)
    assert isinstance(a, InProcessVectorStore)
    assert a is not b


@pytest.mark.parametrize("spec", ["none", " None ", "NONE"])
def test_none_spec_turns_the_seam_off(spec):
    assert make_vector_store(spec) is None


def test_env_is_read_only_when_spec_is_none(monkeypatch):
    monkeypatch.delenv(VECTOR_STORE_ENV, raising=False)
    assert make_vector_store() is None
    monkeypatch.setenv(VECTOR_STORE_ENV, "memory")
    assert isinstance(make_vector_store(), InProcessVectorStore)
    assert make_vector_store("none") is None


def test_entry_points_are_looked_up_at_call_time_by_normalised_name(monkeypatch):
    ep = FakeEntryPoint(" My-Store ", PluginStore)
    groups = patch_entry_points(monkeypatch, ep)
    assert isinstance(make_vector_store("MY_STORE"), PluginStore)
    assert set(groups) == {VECTOR_STORE_ENTRY_POINT_GROUP}
    assert ep.loaded == 1


def test_entry_point_target_is_called_with_kwargs(monkeypatch):
    patch_entry_points(monkeypatch, FakeEntryPoint("plugin", PluginStore))
    s = make_vector_store(" Plugin ", path="x.db", dim=3)
    assert isinstance(s, PluginStore)
    assert s.kwargs == {"path": "x.db", "dim": 3}


def test_builtins_win_over_entry_points(monkeypatch):
    ep = FakeEntryPoint("memory", PluginStore)
    patch_entry_points(monkeypatch, ep)
    s = make_vector_store("memory")
    assert type(s) is InProcessVectorStore
    assert ep.loaded == 0


def test_unknown_spec_lists_builtins_and_discovered_names(monkeypatch):
    patch_entry_points(monkeypatch, FakeEntryPoint("faiss_plugin", PluginStore))
    with pytest.raises(ValueError) as info:
        make_vector_store("chroma")
    msg = str(info.value)
    assert "vector store" in msg
    assert "'chroma'" in msg
    for name in ("in_process", "inprocess", "memory", "faiss_plugin"):
        assert name in msg


@pytest.mark.parametrize(
    ("spec", "module"),
    [
        ("sqlite_vec", "sqlite_vec_store"), ("sqlite-vec", "sqlite_vec_store"),
        ("sqlitevec", "sqlite_vec_store"), ("pgvector", "pgvector_store"),
        ("pg_vector", "pgvector_store"), ("qdrant", "qdrant_store"),
    ],
)
def test_adapter_names_resolve_to_their_module_without_the_sdk(monkeypatch, spec, module):
    import sys

    for sdk in ("sqlite_vec", "pg8000", "pg8000.dbapi", "qdrant_client", "qdrant_client.models"):
        monkeypatch.setitem(sys.modules, sdk, None)  # importing it now raises ImportError
    monkeypatch.delitem(sys.modules, f"ragspine_lite.vector.adapters.{module}", raising=False)
    with pytest.raises(ImportError, match=r"not installed: pip install 'ragspine-lite\[vector\]'"):
        make_vector_store(spec)
    assert f"ragspine_lite.vector.adapters.{module}" in sys.modules  # imported, SDK missing


def test_broken_entry_point_discovery_degrades_to_none_found(monkeypatch):
    def boom(**_: object):
        raise RuntimeError("broken distribution")

    monkeypatch.setattr(importlib.metadata, "entry_points", boom)
    assert "memory" in store_mod.STORES.names()  # the builtins, no crash
    with pytest.raises(ValueError, match="unknown vector store 'plugin'"):
        make_vector_store("plugin")
    assert isinstance(make_vector_store("memory"), InProcessVectorStore)


@pytest.mark.cpython_only
def test_the_core_never_imports_the_adapters_or_their_sdks():
    import subprocess
    import sys

    code = (
        "import sys, ragspine_lite, ragspine_lite.vector, ragspine_lite.link, ragspine_lite.cli\n"
        "from ragspine_lite.vector.store import make_vector_store\n"
        "make_vector_store('memory')\n"
        "bad = [m for m in sys.modules if m.startswith(('ragspine_lite.vector.adapters',\n"
        "       'sqlite_vec', 'pg8000', 'qdrant_client', 'sqlean'))]\n"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
