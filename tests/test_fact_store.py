"""The fact store the graph's roll-up reads: the Fact type, SQLite storage, the factory."""

from __future__ import annotations

import doctest
import sqlite3

import pytest

import ragspine_lite.storage.fact_store as fact_mod
from ragspine_lite.storage import Fact, FactStore, SqliteFactStore, make_fact_store
from ragspine_lite.storage.fact_store import FACT_STORE_ENV, FactStoreError


def fact(entity="ACME_HK", value=18.6, period="2024", **kw) -> Fact:
    return Fact("REVENUE", entity, "HK", kw.pop("channel", "TOTAL"), "FY", period, value,
                "HKD_B", kw.pop("doc", "hk_review"), kw.pop("loc", "hk_review#para1"), **kw)


@pytest.fixture
def store(tmp_path):
    with SqliteFactStore(tmp_path / "facts.db") as s:
        s.init_schema()
        yield s


def test_doctest():
    assert doctest.testmod(fact_mod).failed == 0


def test_fact_fields_and_derived_dimensions():
    f = fact()
    assert (f.review_status, f.tags, f.confidence, f.corrected_audit_seq) == (
        "auto_approved", {}, None, None)
    assert f.dimensions == {"metric": "REVENUE", "entity": "ACME_HK", "channel": "TOTAL",
                            "period_type": "FY", "period": "2024"}
    assert fact(dimensions={"metric": "REVENUE", "product": "savings"}).dimensions["product"]
    with pytest.raises(ValueError, match="reserved names \\['value'\\]"):
        fact(dimensions={"value": "1"})


def test_schema_has_the_table_and_its_unique_indexes(store):
    store.init_schema()  # idempotent
    conn = sqlite3.connect(store.db_path)
    indexes = {row[1]: row[2] for row in conn.execute("PRAGMA index_list(fact_metric)")}
    conn.close()
    assert indexes == {"ux_fact_metric_dims": 1, "ux_fact_metric_dim_key": 1}


def test_query_is_an_exact_match_and_upsert_replaces(store):
    assert isinstance(store, FactStore)
    assert store.upsert_facts([fact(), fact("ACME_CN", 12.5), fact(period="2023", value=16.7)]) == 3
    assert [f.value for f in store.query("REVENUE", "ACME_HK", "FY", "2024")] == [18.6]
    assert store.query("REVENUE", "ACME_HK", "FY", "2024", channel="AGENCY") == []
    assert store.query("REVENUE", "acme_hk", "FY", "2024") == []
    assert store.upsert_facts([fact(value=19.0, tags={"note": "restated"})]) == 1
    [got] = store.query("REVENUE", "ACME_HK", "FY", "2024")
    assert (got.value, got.tags, got.source_locator) == (19.0, {"note": "restated"},
                                                         "hk_review#para1")
    assert got == fact(value=19.0, tags={"note": "restated"})


def test_review_status_gates_what_is_read(store):
    store.upsert_facts([fact(review_status="pending"), fact("ACME_CN", review_status="approved")])
    assert store.query("REVENUE", "ACME_HK", "FY", "2024") == []
    assert len(store.query("REVENUE", "ACME_HK", "FY", "2024", review_statuses=["pending"])) == 1
    assert len(store.query("REVENUE", "ACME_CN", "FY", "2024")) == 1
    assert store.query("REVENUE", "ACME_CN", "FY", "2024", review_statuses=()) == []


def test_facts_survive_a_reopen(tmp_path):
    path = tmp_path / "facts.db"
    with SqliteFactStore(path) as s:
        s.init_schema()
        s.upsert_facts([fact()])
    with SqliteFactStore(path) as s:
        assert [f.entity for f in s.query("REVENUE", "ACME_HK", "FY", "2024")] == ["ACME_HK"]


@pytest.mark.parametrize("bad, message", [
    (fact(value=float("nan")), "facts\\[1\\].value must be a finite number"),
    (fact(value="18.6"), "facts\\[1\\].value"),
    (fact(doc=" "), "facts\\[1\\].source_doc_id must be a non-blank string"),
    (fact(loc=""), "facts\\[1\\].source_locator"),
    ({"metric_code": "REVENUE"}, "facts\\[1\\] is a dict, not a Fact"),
])
def test_a_bad_fact_writes_nothing(store, bad, message):
    with pytest.raises(ValueError, match=message):
        store.upsert_facts([fact("ACME_CN"), bad])
    assert store.query("REVENUE", "ACME_CN", "FY", "2024") == []


def test_a_failed_batch_rolls_back(store):
    # Same five dimensions, different dim_key (an extra dimension): the unique index refuses.
    clash = fact(dimensions={"metric": "REVENUE", "entity": "ACME_HK", "product": "x"})
    with pytest.raises(FactStoreError, match="upsert_facts failed"):
        store.upsert_facts([fact("ACME_CN"), fact(), clash])
    assert store.query("REVENUE", "ACME_CN", "FY", "2024") == []


def test_make_fact_store(monkeypatch, tmp_path):
    monkeypatch.delenv(FACT_STORE_ENV, raising=False)
    default = make_fact_store(db_path=":memory:")
    assert isinstance(default, SqliteFactStore)
    monkeypatch.setenv(FACT_STORE_ENV, "none")
    assert make_fact_store() is None
    assert isinstance(make_fact_store(" SQLite ", db_path=tmp_path / "f.db"), SqliteFactStore)
    with pytest.raises(ValueError, match=r"'mongo'.*sqlite"):
        make_fact_store("mongo")
