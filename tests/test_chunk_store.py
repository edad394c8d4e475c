"""chunking.chunk_store: schema, versioned replace, filters, read-only SQL, lifecycle."""

from __future__ import annotations

import dataclasses
import gc
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragspine_lite.chunking.chunk_store import (
    SCHEMA_VERSION,
    ChunkIndexer,
    ChunkRow,
    ChunkStore,
    ChunkStoreError,
    StoredChunk,
)
from ragspine_lite.chunking.chunking import Chunk, DocumentMeta, chunk_document
from ragspine_lite.common.errors import RagspineError


def make_chunks(doc_id: str, n: int, **meta_fields: str) -> list[Chunk]:
    meta = DocumentMeta(doc_id=doc_id, **meta_fields)
    text = "\n".join(f"{doc_id} paragraph {i} " + "x" * 40 for i in range(n))
    chunks = chunk_document(text, meta, max_chars=60, overlap_chars=0)
    assert len(chunks) == n
    return chunks


@pytest.fixture
def store() -> Iterator[ChunkStore]:
    with ChunkStore(":memory:") as s:
        s.init_schema()
        yield s


def snapshot(store: ChunkStore) -> list[tuple[object, ...]]:
    rows = store.execute_read("SELECT * FROM narrative_chunk ORDER BY doc_id, version, seq")
    return [tuple(row) for row in rows]


# -- StoredChunk ---------------------------------------------------------------------------


def test_stored_chunk_has_chunk_fields_then_ingest_fields() -> None:
    chunk_names = [f.name for f in dataclasses.fields(Chunk)]
    stored = dataclasses.fields(StoredChunk)
    assert [f.name for f in stored] == [
        *chunk_names, "valid_as_of", "ingested_at", "version", "active"
    ]
    for a, b in zip(dataclasses.fields(Chunk), stored, strict=False):
        assert a.default == b.default
    s = StoredChunk("d#c0", "d", 0, "t", "d#para1", 1, 1)
    assert (s.valid_as_of, s.ingested_at, s.version, s.active) == ("", "", 1, True)
    s.window_text = "assigned"  # mutable: callers assign fields on instances
    assert s.window_text == "assigned"


# -- schema --------------------------------------------------------------------------------


def test_init_schema_is_idempotent(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", make_chunks("a", 2))
    store.init_schema()
    store.init_schema()
    assert store.count() == 2


def test_schema_has_reference_columns_and_indexes(store: ChunkStore) -> None:
    info = store.execute_read("PRAGMA table_info(narrative_chunk)")
    columns = [(row["name"], row["type"], row["notnull"], row["dflt_value"]) for row in info]
    assert columns == [
        ("chunk_id", "TEXT", 1, None),
        ("doc_id", "TEXT", 1, None),
        ("seq", "INTEGER", 1, None),
        ("text", "TEXT", 1, None),
        ("source_locator", "TEXT", 1, None),
        ("para_start", "INTEGER", 1, None),
        ("para_end", "INTEGER", 1, None),
        ("title", "TEXT", 1, "''"),
        ("topic", "TEXT", 1, "''"),
        ("entity", "TEXT", 1, "''"),
        ("geography", "TEXT", 1, "''"),
        ("period", "TEXT", 1, "''"),
        ("language", "TEXT", 1, "''"),
        ("sensitivity", "TEXT", 1, "'INTERNAL'"),
        ("parent_id", "TEXT", 1, "''"),
        ("heading", "TEXT", 1, "''"),
        ("window_text", "TEXT", 1, "''"),
        ("parent_locator", "TEXT", 1, "''"),
        ("valid_as_of", "TEXT", 1, "''"),
        ("ingested_at", "TEXT", 1, None),
        ("version", "INTEGER", 1, None),
        ("active", "INTEGER", 1, None),
    ]
    indexes = {row["name"]: row["unique"] for row in
               store.execute_read("PRAGMA index_list(narrative_chunk)")}
    assert indexes["ux_narrative_chunk"] == 1
    assert indexes["ix_narrative_chunk_active"] == 0
    ux = [r["name"] for r in store.execute_read("PRAGMA index_info(ux_narrative_chunk)")]
    ix = [r["name"] for r in store.execute_read("PRAGMA index_info(ix_narrative_chunk_active)")]
    assert ux == ["doc_id", "version", "seq"]
    assert ix == ["active", "doc_id", "seq"]


def test_init_schema_records_schema_version(store: ChunkStore) -> None:
    rows = store.execute_read("SELECT value FROM ragspine_meta WHERE key = 'schema_version'")
    assert [r["value"] for r in rows] == [str(SCHEMA_VERSION)]
    assert store.schema_version() == SCHEMA_VERSION


def test_schema_version_is_zero_before_init() -> None:
    with ChunkStore(":memory:") as s:
        assert s.schema_version() == 0


def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    with ChunkStore(path) as s:
        s.init_schema()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE ragspine_meta SET value = ? WHERE key = 'schema_version'",
                 (str(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    with ChunkStore(path) as s, pytest.raises(ChunkStoreError, match="upgrade ragspine_lite"):
        s.init_schema()


_OLD_TABLE = """
CREATE TABLE narrative_chunk (
    chunk_id TEXT NOT NULL, doc_id TEXT NOT NULL, seq INTEGER NOT NULL, text TEXT NOT NULL,
    source_locator TEXT NOT NULL, para_start INTEGER NOT NULL, para_end INTEGER NOT NULL,
    title TEXT NOT NULL DEFAULT '', topic TEXT NOT NULL DEFAULT '',
    entity TEXT NOT NULL DEFAULT '', geography TEXT NOT NULL DEFAULT '',
    period TEXT NOT NULL DEFAULT '', language TEXT NOT NULL DEFAULT '',
    sensitivity TEXT NOT NULL DEFAULT 'INTERNAL', valid_as_of TEXT NOT NULL DEFAULT '',
    ingested_at TEXT NOT NULL, version INTEGER NOT NULL, active INTEGER NOT NULL
)
"""


def test_old_table_gets_parent_window_columns_additively(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute(_OLD_TABLE)
    conn.execute(
        "INSERT INTO narrative_chunk (chunk_id, doc_id, seq, text, source_locator, para_start,"
        " para_end, topic, ingested_at, version, active)"
        " VALUES ('old#c0', 'old', 0, 'legacy text', 'old#para1', 1, 1, 'finance',"
        " '2023-01-01T00:00:00+00:00', 1, 1)"
    )
    conn.commit()
    conn.close()

    with ChunkStore(path) as s:
        s.init_schema()
        names = [r["name"] for r in s.execute_read("PRAGMA table_info(narrative_chunk)")]
        for column in ("parent_id", "heading", "window_text", "parent_locator"):
            assert column in names
        (old,) = s.iter_chunks()
        assert (old.chunk_id, old.text, old.topic) == ("old#c0", "legacy text", "finance")
        assert (old.parent_id, old.heading, old.window_text, old.parent_locator) == ("",) * 4
        assert (old.version, old.active) == (1, True)

        child = dataclasses.replace(
            make_chunks("new", 1)[0], parent_id="new#s0", heading="# H",
            window_text="whole section", parent_locator="new#para1",
        )
        s.replace_doc_chunks("new", [child])
        (stored,) = s.iter_chunks(doc_id="new")
        assert (stored.parent_id, stored.heading) == ("new#s0", "# H")
        assert (stored.window_text, stored.parent_locator) == ("whole section", "new#para1")
        s.init_schema()  # migration is idempotent too
        assert s.schema_version() == SCHEMA_VERSION


def test_old_table_missing_a_required_column_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE narrative_chunk (chunk_id TEXT NOT NULL)")
    conn.commit()
    conn.close()
    with ChunkStore(path) as s, pytest.raises(ChunkStoreError, match="doc_id"):
        s.init_schema()


# -- replace_doc_chunks ---------------------------------------------------------------------


def test_first_ingest_is_version_one_and_active(store: ChunkStore) -> None:
    chunks = make_chunks("a", 3, topic="t")
    assert store.replace_doc_chunks("a", chunks, valid_as_of="2024-06-30") == 3
    stored = store.iter_chunks()
    assert [s.chunk_id for s in stored] == ["a#c0", "a#c1", "a#c2"]
    for original, s in zip(chunks, stored, strict=True):
        assert s.version == 1
        assert s.active is True
        assert s.valid_as_of == "2024-06-30"
        assert "T" in s.ingested_at
        for name in (f.name for f in dataclasses.fields(Chunk)):
            assert getattr(s, name) == getattr(original, name)


def test_reingest_keeps_old_versions_inactive(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", make_chunks("a", 3))
    assert store.replace_doc_chunks("a", make_chunks("a", 2)) == 2
    active = store.iter_chunks()
    assert [(c.seq, c.version, c.active) for c in active] == [(0, 2, True), (1, 2, True)]
    assert store.count() == 2
    assert store.count(include_inactive=True) == 5
    everything = store.iter_chunks(include_inactive=True)
    old = [c for c in everything if c.version == 1]
    assert len(old) == 3
    assert all(c.active is False for c in old)


def test_reingest_of_same_batch_is_idempotent_on_active_set(store: ChunkStore) -> None:
    chunks = make_chunks("a", 2)
    store.replace_doc_chunks("a", chunks)
    first = [(c.chunk_id, c.text) for c in store.iter_chunks()]
    store.replace_doc_chunks("a", chunks)
    assert [(c.chunk_id, c.text) for c in store.iter_chunks()] == first
    assert [c.version for c in store.iter_chunks()] == [2, 2]


def test_empty_list_retires_the_document(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", make_chunks("a", 2))
    store.replace_doc_chunks("b", make_chunks("b", 1))
    assert store.replace_doc_chunks("a", []) == 0
    assert [c.doc_id for c in store.iter_chunks()] == ["b"]
    assert store.count(include_inactive=True) == 3
    # A retirement writes no rows, so the next version is MAX(version) + 1 over stored rows.
    store.replace_doc_chunks("a", make_chunks("a", 1))
    assert [c.version for c in store.iter_chunks(doc_id="a")] == [2]
    assert store.count(include_inactive=True) == 4


def test_other_documents_are_untouched(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", make_chunks("a", 2))
    store.replace_doc_chunks("b", make_chunks("b", 2))
    before_b = store.iter_chunks(doc_id="b")
    store.replace_doc_chunks("a", make_chunks("a", 1))
    assert store.iter_chunks(doc_id="b") == before_b
    assert all(c.version == 1 for c in before_b)


def test_version_is_max_over_all_rows_plus_one(store: ChunkStore) -> None:
    for _ in range(4):
        store.replace_doc_chunks("a", make_chunks("a", 1))
    assert [c.version for c in store.iter_chunks(doc_id="a", include_inactive=True)] == [
        1, 2, 3, 4
    ]


def test_row_doc_id_comes_from_the_chunk(store: ChunkStore) -> None:
    chunk = make_chunks("x", 1)[0]
    store.replace_doc_chunks("batch", [chunk])
    assert [c.doc_id for c in store.iter_chunks()] == ["x"]


def test_accepts_stored_chunks_and_iterables(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", iter(make_chunks("a", 2)))
    copied = store.iter_chunks()
    with ChunkStore(":memory:") as other:
        other.init_schema()
        assert other.replace_doc_chunks("a", copied) == 2
        assert [c.text for c in other.iter_chunks()] == [c.text for c in copied]


@pytest.mark.parametrize("doc_id", ["", "   ", None, 3, b"a"])
def test_bad_doc_id_is_a_value_error_naming_it(store: ChunkStore, doc_id: object) -> None:
    with pytest.raises(ValueError, match="doc_id") as info:
        store.replace_doc_chunks(doc_id, make_chunks("a", 1))  # type: ignore[arg-type]
    assert repr(doc_id) in str(info.value)


def test_non_chunk_item_is_rejected_naming_its_index(store: ChunkStore) -> None:
    good = make_chunks("a", 2)
    with pytest.raises(TypeError, match=r"chunks\[1\]"):
        store.replace_doc_chunks("a", [good[0], {"text": "dict"}, good[1]])  # type: ignore[list-item]
    assert store.count(include_inactive=True) == 0


def test_bad_field_type_leaves_previous_version_intact(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", make_chunks("a", 2))
    before = snapshot(store)
    bad = make_chunks("a", 3)
    bad[2].text = ["not", "a", "string"]  # type: ignore[assignment]
    with pytest.raises(TypeError, match=r"chunks\[2\]\.text"):
        store.replace_doc_chunks("a", bad)
    bad[2].text = "fine"
    bad[1].seq = True  # a bool is not an int here
    with pytest.raises(TypeError, match=r"chunks\[1\]\.seq"):
        store.replace_doc_chunks("a", bad)
    assert snapshot(store) == before


def test_failure_mid_insert_rolls_back_everything(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", make_chunks("a", 2))
    before = snapshot(store)
    duplicate = make_chunks("a", 3)
    duplicate[2].seq = 0  # violates UNIQUE (doc_id, version, seq) on the third insert
    with pytest.raises(ChunkStoreError) as info:
        store.replace_doc_chunks("a", duplicate)
    assert isinstance(info.value.__cause__, sqlite3.IntegrityError)
    assert snapshot(store) == before
    assert [c.version for c in store.iter_chunks()] == [1, 1]


def test_injected_failure_rolls_back_everything(
    store: ChunkStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.replace_doc_chunks("a", make_chunks("a", 2))
    store.replace_doc_chunks("b", make_chunks("b", 1))
    before = snapshot(store)
    original_row = ChunkStore._row
    calls = []

    def failing_row(*args: object) -> tuple[object, ...]:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        return original_row(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(ChunkStore, "_row", staticmethod(failing_row))
    with pytest.raises(RuntimeError, match="disk on fire"):
        store.replace_doc_chunks("a", make_chunks("a", 3))
    assert len(calls) == 2  # the first new row was written before the failure
    assert snapshot(store) == before
    monkeypatch.undo()
    # The store is still usable and versioning resumes as if nothing happened.
    store.replace_doc_chunks("a", make_chunks("a", 1))
    assert [c.version for c in store.iter_chunks(doc_id="a")] == [2]


def test_write_before_init_schema_is_a_ragspine_error() -> None:
    with ChunkStore(":memory:") as s:
        with pytest.raises(ChunkStoreError) as info:
            s.replace_doc_chunks("a", make_chunks("a", 1))
        assert isinstance(info.value, RagspineError)
        assert isinstance(info.value.__cause__, sqlite3.Error)
        with pytest.raises(ChunkStoreError, match="init_schema"):
            s.iter_chunks()


# -- iter_chunks / count --------------------------------------------------------------------


@pytest.fixture
def filled(store: ChunkStore) -> ChunkStore:
    store.replace_doc_chunks("b", make_chunks("b", 2, topic="risk", entity="ACME_HK",
                                              geography="HK", period="2024", language="en"))
    store.replace_doc_chunks("a", make_chunks("a", 2, topic="finance", entity="ACME_CN",
                                              geography="CN", period="2024", language="zh"))
    store.replace_doc_chunks("c", make_chunks("c", 1, topic="finance", entity="ACME_HK",
                                              geography="HK", period="2023", language="en"))
    store.replace_doc_chunks("e", make_chunks("e", 1))  # every filter field empty
    return store


def test_iter_chunks_orders_by_doc_seq_version(filled: ChunkStore) -> None:
    filled.replace_doc_chunks("a", make_chunks("a", 2, topic="finance"))
    everything = filled.iter_chunks(include_inactive=True)
    keys = [(c.doc_id, c.seq, c.version) for c in everything]
    assert keys == sorted(keys)
    assert keys[:4] == [("a", 0, 1), ("a", 0, 2), ("a", 1, 1), ("a", 1, 2)]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, ["a#c0", "a#c1", "b#c0", "b#c1", "c#c0", "e#c0"]),
        ({"doc_id": "b"}, ["b#c0", "b#c1"]),
        ({"topic": "finance"}, ["a#c0", "a#c1", "c#c0"]),
        ({"entity": "ACME_HK"}, ["b#c0", "b#c1", "c#c0"]),
        ({"entity": "ACME_HK", "period": "2024"}, ["b#c0", "b#c1"]),
        ({"geography": "HK", "language": "en", "topic": "finance"}, ["c#c0"]),
        ({"period": "1999"}, []),
        ({"topic": ""}, ["e#c0"]),  # "" is a real filter, not "no filter"
        ({"entity": "acme_hk"}, []),  # exact equality, case-sensitive
    ],
)
def test_iter_chunks_filters_are_an_and_of_equalities(
    filled: ChunkStore, filters: dict[str, str], expected: list[str]
) -> None:
    assert [c.chunk_id for c in filled.iter_chunks(**filters)] == expected


def test_iter_chunks_is_active_only_by_default(filled: ChunkStore) -> None:
    filled.replace_doc_chunks("b", make_chunks("b", 1, topic="risk"))
    assert [c.version for c in filled.iter_chunks(doc_id="b")] == [2]
    assert len(filled.iter_chunks(doc_id="b", include_inactive=True)) == 3
    assert [c.active for c in filled.iter_chunks(topic="risk", include_inactive=True)] == [
        False, True, False
    ]


def test_count_active_and_all(filled: ChunkStore) -> None:
    assert filled.count() == 6
    filled.replace_doc_chunks("a", [])
    assert filled.count() == 4
    assert filled.count(include_inactive=True) == 6


def test_text_round_trips_unicode_exactly(store: ChunkStore) -> None:
    text = "营收增长 12%\n“引号” 与 emoji 🚀\n\u3000全角空格"
    chunks = chunk_document(text, DocumentMeta("u", title="年报"), max_chars=480)
    store.replace_doc_chunks("u", chunks)
    assert [c.text for c in store.iter_chunks()] == [c.text for c in chunks]
    assert store.iter_chunks()[0].title == "年报"


# -- execute_read ---------------------------------------------------------------------------


def test_execute_read_rows_are_addressable_by_name(filled: ChunkStore) -> None:
    rows = filled.execute_read(
        "SELECT doc_id, COUNT(*) AS n FROM narrative_chunk WHERE active = ? "
        "GROUP BY doc_id ORDER BY doc_id",
        (1,),
    )
    assert all(isinstance(r, sqlite3.Row) for r in rows)
    assert [(r["doc_id"], r["n"]) for r in rows] == [("a", 2), ("b", 2), ("c", 1), ("e", 1)]


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO narrative_chunk (chunk_id, doc_id, seq, text, source_locator, para_start,"
        " para_end, ingested_at, version, active) VALUES ('z', 'z', 0, 't', 'z', 1, 1, 'x', 1, 1)",
        "DELETE FROM narrative_chunk",
        "UPDATE narrative_chunk SET text = 'tampered'",
        "DROP TABLE narrative_chunk",
        "DROP INDEX ux_narrative_chunk",
        "CREATE TABLE evil (x)",
        "CREATE TEMP TABLE scratch (x)",
        "ALTER TABLE narrative_chunk ADD COLUMN extra TEXT",
        "PRAGMA user_version = 7",
        "ATTACH DATABASE ':memory:' AS other",
        "BEGIN",
        "REPLACE INTO ragspine_meta (key, value) VALUES ('schema_version', '99')",
    ],
)
def test_execute_read_refuses_writes_and_changes_nothing(filled: ChunkStore, sql: str) -> None:
    before = snapshot(filled)
    meta_before = [tuple(r) for r in filled.execute_read("SELECT * FROM ragspine_meta")]
    with pytest.raises(ChunkStoreError, match="read-only") as info:
        filled.execute_read(sql)
    assert sql in str(info.value)
    assert snapshot(filled) == before
    assert [tuple(r) for r in filled.execute_read("SELECT * FROM ragspine_meta")] == meta_before
    assert filled.execute_read("PRAGMA user_version")[0][0] == 0
    # The store keeps working normally afterwards: the guard is only for execute_read.
    assert filled.replace_doc_chunks("e", make_chunks("e", 1)) == 1


def test_execute_read_refuses_a_statement_this_store_prepared_before(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", make_chunks("a", 1))
    store.replace_doc_chunks("a", make_chunks("a", 1))  # the deactivation UPDATE is now cached
    with pytest.raises(ChunkStoreError, match="read-only"):
        store.execute_read(
            "UPDATE narrative_chunk SET active = 0 WHERE doc_id = ? AND active = 1", ("a",)
        )
    assert store.count() == 1


def test_execute_read_allows_introspection_and_ctes(filled: ChunkStore) -> None:
    assert filled.execute_read("PRAGMA user_version")[0][0] == 0
    rows = filled.execute_read(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3) "
        "SELECT i FROM n"
    )
    assert [r["i"] for r in rows] == [1, 2, 3]


def test_execute_read_wraps_sql_errors(filled: ChunkStore) -> None:
    with pytest.raises(ChunkStoreError, match="no_such_table") as info:
        filled.execute_read("SELECT * FROM no_such_table")
    assert isinstance(info.value.__cause__, sqlite3.Error)
    with pytest.raises(ChunkStoreError):
        filled.execute_read("SELECT 1; SELECT 2")


# -- lifecycle ------------------------------------------------------------------------------


def test_persists_across_instances_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "chunks.db"
    with ChunkStore(path) as s:
        s.init_schema()
        s.replace_doc_chunks("a", make_chunks("a", 2))
    with ChunkStore(str(path)) as s:
        s.init_schema()
        assert [c.chunk_id for c in s.iter_chunks()] == ["a#c0", "a#c1"]


def test_close_is_idempotent_and_closed_store_raises(tmp_path: Path) -> None:
    s = ChunkStore(tmp_path / "c.db")
    s.init_schema()
    assert not s.closed
    s.close()
    s.close()
    assert s.closed
    with pytest.raises(ChunkStoreError, match="closed"):
        s.count()
    with pytest.raises(ChunkStoreError, match="closed"):
        s.execute_read("SELECT 1")


def test_context_manager_closes_on_exit() -> None:
    with ChunkStore(":memory:") as s:
        s.init_schema()
    assert s.closed


def test_garbage_collection_closes_the_connection(tmp_path: Path) -> None:
    s = ChunkStore(tmp_path / "gc.db")
    conn = s._conn
    del s
    gc.collect()
    with pytest.raises(sqlite3.ProgrammingError):
        conn.execute("SELECT 1")


def test_unopenable_path_is_a_chunk_store_error(tmp_path: Path) -> None:
    with pytest.raises(ChunkStoreError, match="cannot open"):
        ChunkStore(tmp_path / "missing-dir" / "c.db")


# -- schema version 2: generation counter, side-index hooks, rowid reads ----------------------


class RecordingIndexer:
    """A side index that records what the store tells it."""

    name = "recording"

    def __init__(self, current: bool = True) -> None:
        self.current = current
        self.ensured: list[int] = []
        self.writes: list[tuple[list[ChunkRow], list[ChunkRow], int]] = []

    def is_current(self, conn, generation):
        return self.current

    def ensure(self, conn, generation):
        self.ensured.append(generation)
        self.current = True

    def on_replace(self, conn, retired, added, generation):
        self.writes.append((list(retired), list(added), generation))


def test_schema_version_is_2_with_generation_and_active_chunk_id_index(store: ChunkStore) -> None:
    assert SCHEMA_VERSION == 2
    assert store.schema_version() == 2
    assert store.generation() == 0
    ix = store.execute_read(
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'ix_narrative_chunk_id'"
    )
    assert "WHERE active = 1" in ix[0]["sql"]


def test_v1_store_migrates_to_v2_additively(tmp_path: Path, caplog) -> None:
    path = tmp_path / "v1.db"
    with ChunkStore(path) as s:
        s.init_schema()
        s.replace_doc_chunks("a", make_chunks("a", 2))
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX ix_narrative_chunk_id")
    conn.execute("DELETE FROM ragspine_meta")
    conn.execute("INSERT INTO ragspine_meta VALUES ('schema_version', '1')")
    conn.commit()
    conn.close()
    with ChunkStore(path) as s:
        assert (s.schema_version(), s.generation()) == (1, 0)
        before = snapshot(s)
        with caplog.at_level(logging.INFO, logger="ragspine_lite.chunking.chunk_store"):
            s.init_schema()
        assert any("migrating schema version 1 -> 2" in r.getMessage() for r in caplog.records)
        assert s.schema_version() == 2
        assert snapshot(s) == before  # chunks untouched
        s.replace_doc_chunks("a", make_chunks("a", 1))
        assert s.generation() == 1


def test_every_write_bumps_the_generation(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", make_chunks("a", 2))
    store.replace_doc_chunks("a", [])
    store.replace_docs([("b", make_chunks("b", 1)), ("c", make_chunks("c", 1))])
    assert store.generation() == 3


def test_replace_docs_equals_replace_doc_chunks_one_by_one(tmp_path: Path) -> None:
    plan = [("a", make_chunks("a", 3)), ("b", make_chunks("b", 1)), ("a", make_chunks("a", 2)),
            ("b", [])]
    with ChunkStore(":memory:") as one, ChunkStore(":memory:") as many:
        one.init_schema()
        many.init_schema()
        for doc_id, chunks in plan:
            one.replace_doc_chunks(doc_id, chunks)
        assert many.replace_docs(plan) == 6
        strip = [(c.chunk_id, c.doc_id, c.version, c.active, c.text)
                 for c in one.iter_chunks(include_inactive=True)]
        assert strip == [(c.chunk_id, c.doc_id, c.version, c.active, c.text)
                         for c in many.iter_chunks(include_inactive=True)]
        assert many.replace_docs([]) == 0


def test_replace_docs_is_all_or_nothing(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", make_chunks("a", 2))
    before = snapshot(store)
    clash = make_chunks("c", 2)
    clash[1] = dataclasses.replace(clash[1], seq=0)  # same (doc_id, version, seq) twice
    with pytest.raises(ChunkStoreError):
        store.replace_docs([("b", make_chunks("b", 1)), ("c", clash)])
    assert snapshot(store) == before
    assert store.generation() == 1
    with pytest.raises(ValueError, match="doc_id"):
        store.replace_docs([("", [])])


def test_indexer_sees_the_net_retired_and_added_rows(store: ChunkStore) -> None:
    indexer = RecordingIndexer()
    assert isinstance(indexer, ChunkIndexer)
    store.attach_indexer(indexer)
    store.replace_doc_chunks("a", make_chunks("a", 2))
    (retired, added, generation), = indexer.writes
    assert retired == [] and generation == 1
    assert [r.chunk_id for r in added] == ["a#c0", "a#c1"]
    rows = dict(store.iter_chunk_rows())
    assert [rows[r.rowid].text for r in added] == [r.text for r in added]
    # The same document twice in one write: its first new version never reaches the index.
    store.replace_docs([("a", make_chunks("a", 3)), ("a", make_chunks("a", 1))])
    retired, added, generation = indexer.writes[-1]
    assert [r.rowid for r in retired] == [r.rowid for r in indexer.writes[0][1]]
    assert [r.chunk_id for r in added] == ["a#c0"]
    assert added[0].rowid == max(dict(store.iter_chunk_rows()))
    assert generation == 2


def test_a_failing_indexer_rolls_the_write_back(store: ChunkStore) -> None:
    class Failing(RecordingIndexer):
        def on_replace(self, conn, retired, added, generation):
            raise RuntimeError("boom")

    store.replace_doc_chunks("a", make_chunks("a", 1))
    before = snapshot(store)
    store.attach_indexer(Failing())
    with pytest.raises(RuntimeError, match="boom"):
        store.replace_doc_chunks("a", make_chunks("a", 2))
    assert snapshot(store) == before
    assert store.generation() == 1


def test_attach_indexer_keeps_one_per_name(store: ChunkStore) -> None:
    first = RecordingIndexer()
    assert store.attach_indexer(first) is first
    assert store.attach_indexer(RecordingIndexer()) is first
    assert store.indexer("recording") is first and store.indexer("other") is None
    with pytest.raises(TypeError, match="ChunkIndexer"):
        store.attach_indexer(object())  # type: ignore[arg-type]


def test_sync_indexers_writes_only_when_an_index_is_behind(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with ChunkStore(path) as s:
        s.init_schema()
        s.replace_doc_chunks("a", make_chunks("a", 1))
    with ChunkStore(path) as s:
        s._connection().execute("PRAGMA query_only = ON")
        current = s.attach_indexer(RecordingIndexer(current=True))
        s.sync_indexers()  # nothing to do: no write, so query_only is no obstacle
        assert current.ensured == []
    with ChunkStore(path) as s:
        behind = s.attach_indexer(RecordingIndexer(current=False))
        s.sync_indexers()
        assert behind.ensured == [1]
    with ChunkStore(path) as s:
        s._connection().execute("PRAGMA query_only = ON")
        s.attach_indexer(RecordingIndexer(current=False))
        with pytest.raises(ChunkStoreError, match="sync_indexers"):
            s.sync_indexers()


def test_init_schema_ensures_attached_indexers(store: ChunkStore) -> None:
    indexer = store.attach_indexer(RecordingIndexer(current=False))
    store.init_schema()
    assert indexer.ensured == [0]


def test_rowid_reads_match_iter_chunks(store: ChunkStore) -> None:
    store.replace_doc_chunks("b", make_chunks("b", 2, topic="T"))
    store.replace_doc_chunks("a", make_chunks("a", 2))
    store.replace_doc_chunks("a", make_chunks("a", 1))
    rows = store.iter_chunk_rows()
    assert [c for _, c in rows] == store.iter_chunks()
    assert [c for _, c in store.iter_chunk_rows(topic="T")] == store.iter_chunks(topic="T")
    assert store.active_rowids() == sorted(r for r, _ in rows)
    assert store.active_rowids(topic="T") == sorted(r for r, _ in store.iter_chunk_rows(topic="T"))
    by_rowid = store.chunks_by_rowid([r for r, _ in rows] + [10_000])
    assert by_rowid == dict(rows)
    retired = store.chunks_by_rowid([1])  # the first row ever written is still readable
    assert retired[1].chunk_id == "b#c0"


def test_snapshot_reads_one_state_and_nests(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", make_chunks("a", 1))
    with store.snapshot() as conn:
        assert conn.in_transaction
        with store.snapshot() as inner:
            assert inner is conn
        assert store.count() == 1
    assert not conn.in_transaction
    with pytest.raises(ChunkStoreError, match="no such table"), store.snapshot() as conn:
        conn.execute("SELECT * FROM no_such_table")


def test_a_read_only_store_reads_and_refuses_every_write(tmp_path):
    path = tmp_path / "ro.db"
    with ChunkStore(path) as s:
        s.init_schema()
        s.replace_doc_chunks("d", [Chunk("d#c0", "d", 0, "hello", "d#para1", 1, 1)])
    before = path.read_bytes()
    with ChunkStore(path, read_only=True) as ro:
        assert ro.read_only and "read-only" in repr(ro)
        assert [c.chunk_id for c in ro.iter_chunks()] == ["d#c0"]
        with pytest.raises(ChunkStoreError, match="read-only"):
            ro.replace_doc_chunks("d", [])
        with pytest.raises(ChunkStoreError, match="read-only"):
            ro.init_schema()
        with pytest.raises(sqlite3.OperationalError, match="readonly"):  # SQLite refuses too
            ro._connection().execute("DELETE FROM narrative_chunk")
    assert path.read_bytes() == before


def test_a_read_only_store_must_exist(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.db"):
        ChunkStore(tmp_path / "nope.db", read_only=True)
    assert not (tmp_path / "nope.db").exists()
    with pytest.raises(FileNotFoundError):
        ChunkStore(":memory:", read_only=True)
