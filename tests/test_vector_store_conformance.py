"""One conformance suite over every vector store: in-process, stdlib SQLite, sqlite-vec,
Qdrant (local mode) and pgvector (a real Postgres started by the ``pg_url`` fixture)."""

from __future__ import annotations

import math

import pytest
from _fakes import rec
from _vector_stores import KINDS, as_tuples, corpus, opener_for, queries

from ragspine_lite.vector.store import InProcessVectorStore, VectorRecord, VectorStore


def _param(kind: str):
    marks = [pytest.mark.cpython_only] if KINDS[kind][1] else []
    return pytest.param(kind, marks=marks, id=kind)


@pytest.fixture(params=[_param(k) for k in KINDS])
def opener(request, tmp_path):
    op = opener_for(request, request.param, tmp_path)
    yield op
    op.close_all()


@pytest.fixture
def store(opener):
    return opener.open()


def fill(store) -> None:
    store.upsert([
        rec("a", 1.0, 0.0, 0.0, entity="ACME_HK", period="2024"),
        rec("b", 0.875, 0.125, 0.0, entity="ACME_CN", period="2024"),
        rec("c", 0.0, 1.0, 0.0, entity="ACME_HK", period="2023"),
        rec("d", 0.0, 0.0, 1.0, entity="ACME_HK"),
    ])


# --- contract ---------------------------------------------------------------------------


def test_an_empty_store_satisfies_the_protocol_and_finds_nothing(store):
    assert isinstance(store, VectorStore)
    assert store.count() == 0
    assert store.query([1.0, 0.0]) == []
    assert store.upsert([]) == 0


def test_upsert_counts_and_replaces_by_id(store):
    assert store.upsert([rec("a", 1.0, 0.0), rec("b", 0.0, 1.0)]) == 2
    assert store.upsert([rec("a", 0.0, 1.0, tag="new")]) == 1
    assert store.count() == 2
    hit = next(h for h in store.query([0.0, 1.0]) if h.id == "a")
    assert (hit.score, dict(hit.metadata)) == (1.0, {"tag": "new"})


def test_the_last_of_a_repeated_id_in_one_batch_wins(store):
    assert store.upsert([rec("a", 1.0, 0.0, v="1"), rec("a", 0.0, 1.0, v="2")]) == 2
    assert store.count() == 1
    assert dict(store.query([0.0, 1.0])[0].metadata) == {"v": "2"}


def test_the_first_batch_fixes_the_dimension_and_a_bad_batch_changes_nothing(store):
    store.upsert([rec("a", 1.0, 0.0, 0.0)])
    with pytest.raises(ValueError, match="dimension"):
        store.upsert([rec("b", 1.0, 0.0, 0.0), rec("c", 1.0, 0.0)])
    with pytest.raises(ValueError, match="dimension"):
        store.query([1.0, 0.0])
    assert [h.id for h in store.query([1.0, 0.0, 0.0])] == ["a"]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "1.0", None])
def test_non_finite_or_non_numeric_components_are_rejected(store, bad):
    with pytest.raises(ValueError, match="record 'x'"):
        store.upsert([VectorRecord("x", (1.0, bad))])  # type: ignore[arg-type]
    assert store.count() == 0


def test_empty_vectors_and_non_str_ids_are_rejected(store):
    with pytest.raises(ValueError, match="empty vector"):
        store.upsert([VectorRecord("x", ())])
    with pytest.raises(ValueError, match="id must be a str"):
        store.upsert([VectorRecord(7, (1.0,))])  # type: ignore[arg-type]


def test_hits_are_ordered_by_score_then_id_and_k_caps(store):
    store.upsert([rec(rid, 1.0, 1.0) for rid in ("c", "a", "b")] + [rec("z", 1.0, 0.0)])
    assert [h.id for h in store.query([1.0, 1.0])] == ["a", "b", "c", "z"]
    assert [h.id for h in store.query([1.0, 1.0], k=2)] == ["a", "b"]
    for k in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="k must be"):
            store.query([1.0, 1.0], k=k)


def test_scores_are_fsum_cosines(store):
    store.upsert([rec("a", 3.0, 4.0), rec("b", 1.0, 0.0)])
    scores = {h.id: h.score for h in store.query([0.5, 0.25])}
    q = (0.5, 0.25)
    assert scores["b"] == 0.5 / math.sqrt(math.fsum(x * x for x in q))
    assert scores["a"] == math.fsum((1.5, 1.0)) / (5.0 * math.sqrt(0.3125))


def test_zero_vectors_score_zero_and_are_still_returned(store):
    store.upsert([rec("zero", 0.0, 0.0), rec("x", 1.0, 0.0)])
    assert [(h.id, h.score) for h in store.query([1.0, 0.0])] == [("x", 1.0), ("zero", 0.0)]
    assert {h.score for h in store.query([0.0, 0.0])} == {0.0}


def test_where_is_an_and_of_exact_equality_and_a_missing_key_excludes(store):
    fill(store)
    assert [h.id for h in store.query([1.0, 0.0, 0.0], k=1, where={"entity": "ACME_CN"})] == ["b"]
    assert [h.id for h in store.query([0.0, 1.0, 0.0], k=1, where={"period": "2024"})] == ["b"]
    both = {"entity": "ACME_HK", "period": "2024"}
    assert [h.id for h in store.query([0.0, 0.0, 1.0], where=both)] == ["a"]
    assert "d" not in {h.id for h in store.query([0.0, 0.0, 1.0], where={"period": "2024"})}
    assert len(store.query([1.0, 0.0, 0.0], where={})) == 4
    assert store.query([1.0, 0.0, 0.0], where={"entity": "nobody"}) == []


def test_restricted_records_are_not_self_stripped(store):
    store.upsert([rec("secret", 1.0, 0.0, sensitivity="RESTRICTED"), rec("open", 0.0, 1.0)])
    hits = store.query([1.0, 0.0])
    assert [h.id for h in hits] == ["secret", "open"]
    assert dict(hits[0].metadata) == {"sensitivity": "RESTRICTED"}


def test_metadata_round_trips_and_is_isolated_from_callers(store):
    md = {"doc_id": "d1", "title": "年报 2024 \"quoted\"", "empty": ""}
    store.upsert([VectorRecord("a", (1.0, 0.0), md)])
    md["doc_id"] = "mutated"
    (hit,) = store.query([1.0, 0.0])
    assert dict(hit.metadata) == {"doc_id": "d1", "title": "年报 2024 \"quoted\"", "empty": ""}
    hit.metadata["title"] = "changed"  # type: ignore[index]
    assert store.query([1.0, 0.0])[0].metadata["title"] == "年报 2024 \"quoted\""


def test_delete_by_where_and_everything(store):
    fill(store)
    with pytest.raises(ValueError, match="where"):
        store.delete(where=None)  # type: ignore[arg-type]
    assert store.delete(where={"entity": "ACME_HK", "period": "2024"}) == 1
    assert store.delete(where={"entity": "nobody"}) == 0
    assert store.count() == 3
    assert store.delete(where={}) == 3
    assert (store.count(), store.query([1.0, 0.0, 0.0])) == (0, [])


def test_ids_and_metadata_for_an_incremental_sync(store):
    if not hasattr(store, "metadata_by_id"):
        pytest.skip("the in-process store has no metadata_by_id: a sync embeds everything")
    fill(store)
    assert store.metadata_by_id()["b"] == {"entity": "ACME_CN", "period": "2024"}
    assert store.delete_ids(["a", "b", "a", "missing"]) == 2
    assert sorted(store.metadata_by_id()) == ["c", "d"]


# --- invariants across instances ----------------------------------------------------------


def test_a_reopen_restores_the_contents_and_the_dimension(opener):
    first = opener.open()
    fill(first)
    expected = as_tuples(first.query([0.25, 0.5, 1.0]))
    if hasattr(first, "close"):
        first.close()
        first.close()  # idempotent
    again = opener.reopen()
    if again is None:
        pytest.skip("the in-process store lives in one process")
    assert again.count() == 4
    assert as_tuples(again.query([0.25, 0.5, 1.0])) == expected
    with pytest.raises(ValueError, match="dimension"):
        again.upsert([rec("e", 1.0, 0.0)])


def test_search_is_byte_identical_to_the_in_process_store(opener):
    if not opener.exact:
        pytest.skip("an approximate store is held to a recall floor instead")
    records = corpus(300, 24)
    reference = InProcessVectorStore()
    reference.upsert(records)
    store = opener.open()
    store.upsert(reversed(records))
    for i, q in enumerate(queries(12, 24)):
        where = [None, {"group": "g1"}, {"group": "g2", "parity": "odd"}][i % 3]
        for k in (1, 10, 300):
            got = as_tuples(store.query(q, k=k, where=where))
            assert got == as_tuples(reference.query(q, k=k, where=where)), (q, k, where)


def test_a_narrowed_pool_keeps_exact_scores_and_a_recall_floor(opener):
    """Past ``pool_ceiling`` the engine's own search narrows the pool: every hit still has
    its exact score in ``(-score, id)`` order; recall@10 stays over the floor."""
    records = corpus(400, 16, seed=3)
    reference = InProcessVectorStore()
    reference.upsert(records)
    options = {} if opener.kind in ("in_process", "sqlite") else {"pool_ceiling": 40}
    if opener.kind == "pgvector":
        options["ef_search"] = 0
    store = opener.open(**options)
    store.upsert(records)
    found = wanted = 0
    for q in queries(20, 16, seed=5):
        exact = {h.id: h.score for h in reference.query(q, k=400)}
        hits = store.query(q, k=10)
        assert [(-h.score, h.id) for h in hits] == sorted((-h.score, h.id) for h in hits)
        assert all(exact[h.id].hex() == h.score.hex() for h in hits)
        best = {h.id for h in reference.query(q, k=10)}
        found, wanted = found + len(best & {h.id for h in hits}), wanted + 10
    floor = 0.9 if opener.exact else 0.6
    assert found / wanted >= floor, found / wanted
