"""Tests for the persistent SQLite vector store: the VectorStore contract, model isolation,
the persistence policy, sharing a file with a chunk store, and the factory name."""

from __future__ import annotations

import math
import sqlite3
from array import array

import pytest
from _fakes import rec

from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.chunking.chunking import DocumentMeta
from ragspine_lite.lexical.retrieval import NarrativeIndex
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend
from ragspine_lite.vector.persistence_policy import PersistEverythingPolicy
from ragspine_lite.vector.quantize import Int8Codec, calibrate_scale
from ragspine_lite.vector.sqlite_store import (
    DEFAULT_VECTOR_MODEL_ID,
    DEFAULT_VECTOR_TABLE,
    SqliteVectorStore,
    VectorStoreError,
    embedding_model_id,
)
from ragspine_lite.vector.store import VectorRecord, VectorStore, make_vector_store


def f32(values: tuple[float, ...]) -> list[float]:
    return list(array("f", values))


def cosine(a: list[float], b: list[float]) -> float:
    na = math.sqrt(math.fsum(x * x for x in a))
    nb = math.sqrt(math.fsum(x * x for x in b))
    return math.fsum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)


@pytest.fixture
def store():
    s = SqliteVectorStore(":memory:", model_id="m")
    yield s
    s.close()


def filled(s: SqliteVectorStore) -> SqliteVectorStore:
    s.upsert(
        [
            rec("a", 1.0, 0.0, 0.0, entity="ACME_HK", period="2024"),
            rec("b", 0.9, 0.1, 0.0, entity="ACME_CN", period="2024"),
            rec("c", 0.0, 1.0, 0.0, entity="ACME_HK", period="2023"),
            rec("d", 0.0, 0.0, 1.0, entity="ACME_HK"),
        ]
    )
    return s


# --- the protocol -----------------------------------------------------------------------


def test_defaults_and_protocol(store):
    assert DEFAULT_VECTOR_TABLE == "ragspine_vector"
    assert DEFAULT_VECTOR_MODEL_ID == "default"
    assert isinstance(store, VectorStore)
    assert store.count() == 0 and store.dim is None


def test_upsert_counts_and_replaces_by_id(store):
    assert store.upsert([]) == 0
    assert store.upsert([rec("a", 1.0, 0.0, tag="old"), rec("b", 0.0, 1.0)]) == 2
    assert store.upsert([rec("a", 0.0, 1.0, tag="new")]) == 1
    assert store.count() == 2
    (hit,) = [h for h in store.query([0.0, 1.0]) if h.id == "a"]
    assert hit.metadata == {"tag": "new"}
    assert hit.score == pytest.approx(1.0)


def test_first_vector_fixes_and_records_the_dimension(store):
    store.upsert([rec("a", 1.0, 0.0, 0.0)])
    assert store.dim == 3
    with pytest.raises(ValueError, match="dimension 2 != store dimension 3"):
        store.upsert([rec("b", 1.0, 0.0)])


def test_a_bad_record_rejects_the_whole_batch(store):
    store.upsert([rec("keep", 1.0, 0.0)])
    with pytest.raises(ValueError, match="batch rejected"):
        store.upsert([rec("x", 0.0, 1.0), rec("y", 1.0, 0.0, 0.0)])
    assert [h.id for h in store.query([1.0, 0.0])] == ["keep"]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "1.0", None])
def test_non_finite_or_non_numeric_components_are_rejected(store, bad):
    with pytest.raises(ValueError, match="vector component"):
        store.upsert([VectorRecord("a", (1.0, bad))])  # type: ignore[arg-type]


def test_empty_vectors_non_str_ids_and_non_str_metadata_are_rejected(store):
    with pytest.raises(ValueError, match="empty vector"):
        store.upsert([VectorRecord("a", ())])
    with pytest.raises(ValueError, match="id must be a str"):
        store.upsert([VectorRecord(7, (1.0,))])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="str to str"):
        store.upsert([VectorRecord("a", (1.0,), {"n": 3})])  # type: ignore[dict-item]


def test_hits_are_ordered_by_score_then_id_and_k_caps(store):
    filled(store)
    store.upsert([rec("a2", 1.0, 0.0, 0.0)])
    hits = store.query([1.0, 0.0, 0.0])
    assert [h.id for h in hits] == ["a", "a2", "b", "c", "d"]
    assert [h.id for h in store.query([1.0, 0.0, 0.0], k=2)] == ["a", "a2"]
    with pytest.raises(ValueError, match="k must be"):
        store.query([1.0, 0.0, 0.0], k=0)


def test_scores_are_fsum_cosines_of_the_stored_float32_values(store):
    v = (0.1, 0.2, 0.3)
    q = (0.3, -0.2, 0.7)
    store.upsert([VectorRecord("a", v)])
    (hit,) = store.query(q)
    assert hit.score == cosine(list(q), f32(v))


def test_zero_vectors_score_zero_and_are_still_returned(store):
    store.upsert([rec("z", 0.0, 0.0), rec("a", 1.0, 0.0)])
    assert [(h.id, h.score) for h in store.query([1.0, 0.0])] == [("a", 1.0), ("z", 0.0)]
    assert all(h.score == 0.0 for h in store.query([0.0, 0.0]))


def test_query_dimension_mismatch_raises_and_empty_store_returns_nothing(store):
    assert store.query([1.0, 0.0]) == []
    store.upsert([rec("a", 1.0, 0.0)])
    with pytest.raises(ValueError, match="query dimension"):
        store.query([1.0, 0.0, 0.0])


def test_where_is_an_and_of_exact_equality_before_scoring(store):
    filled(store)
    assert [h.id for h in store.query([1.0, 0.0, 0.0], where={"entity": "ACME_HK"})] == [
        "a", "c", "d",
    ]
    both = {"entity": "ACME_HK", "period": "2024"}
    assert [h.id for h in store.query([0.0, 0.0, 1.0], where=both)] == ["a"]
    # "d" has no period: it never matches a period filter.
    assert "d" not in [h.id for h in store.query([0.0, 0.0, 1.0], where={"period": "2023"})]
    assert len(store.query([1.0, 0.0, 0.0], where={})) == 4


def test_metadata_round_trips_and_is_isolated_from_callers(store):
    md = {"doc_id": "d1", "title": "年报 2024", "empty": ""}
    store.upsert([VectorRecord("a", (1.0, 0.0), md)])
    md["doc_id"] = "mutated"
    (hit,) = store.query([1.0, 0.0])
    assert hit.metadata == {"doc_id": "d1", "title": "年报 2024", "empty": ""}
    hit.metadata["title"] = "changed"  # type: ignore[index]
    assert store.query([1.0, 0.0])[0].metadata["title"] == "年报 2024"
    assert store.metadata_by_id() == {"a": {"doc_id": "d1", "title": "年报 2024", "empty": ""}}


def test_delete_by_where_and_by_ids(store):
    filled(store)
    assert store.delete(where={"entity": "ACME_HK", "period": "2024"}) == 1
    assert store.delete_ids(["b", "b", "missing"]) == 1
    assert store.count() == 2
    assert store.delete(where={}) == 2
    assert store.count() == 0
    with pytest.raises(ValueError, match="where must be a mapping"):
        store.delete(where=None)  # type: ignore[arg-type]


# --- persistence ------------------------------------------------------------------------


def test_vectors_survive_reopening_the_file(tmp_path):
    path = tmp_path / "v.db"
    with SqliteVectorStore(path, model_id="m") as s:
        filled(s)
        before = s.query([0.5, 0.5, 0.0])
    with SqliteVectorStore(path, model_id="m") as s:
        assert s.count() == 4 and s.dim == 3
        assert s.query([0.5, 0.5, 0.0]) == before


def test_each_model_sees_only_its_own_rows(tmp_path):
    path = tmp_path / "v.db"
    a = SqliteVectorStore(path, model_id="small")
    b = SqliteVectorStore(path, model_id="large")
    a.upsert([rec("x", 1.0, 0.0)])
    b.upsert([rec("x", 1.0, 0.0, 0.0), rec("y", 0.0, 1.0, 0.0)])
    assert (a.count(), a.dim, b.count(), b.dim) == (1, 2, 2, 3)
    assert a.models() == {"large": 3, "small": 2}
    assert a.delete(where={}) == 1
    assert b.count() == 2
    a.close()
    b.close()


def test_writes_through_another_connection_are_seen(tmp_path):
    path = tmp_path / "v.db"
    reader = SqliteVectorStore(path, model_id="m")
    reader.upsert([rec("a", 1.0, 0.0)])
    assert [h.id for h in reader.query([1.0, 0.0])] == ["a"]
    with SqliteVectorStore(path, model_id="m") as writer:
        writer.upsert([rec("b", 1.0, 0.1)])
        writer.delete_ids(["a"])
    assert [h.id for h in reader.query([1.0, 0.0])] == ["b"]
    reader.close()


def test_restricted_records_are_not_written_by_default(store):
    store.upsert([rec("s", 1.0, 0.0, sensitivity="INTERNAL")])
    assert store.upsert([rec("s", 1.0, 0.0, sensitivity=" restricted ")]) == 0
    assert store.count() == 0  # the older INTERNAL vector of that id is gone too
    assert store.upsert([rec("open", 0.0, 1.0, sensitivity="PUBLIC"), rec("plain", 1.0, 1.0)]) == 2


def test_persist_everything_policy_writes_restricted_records():
    s = SqliteVectorStore(":memory:", persistence_policy=PersistEverythingPolicy())
    assert s.upsert([rec("s", 1.0, 0.0, sensitivity="RESTRICTED")]) == 1
    assert [h.id for h in s.query([1.0, 0.0])] == ["s"]
    s.close()


def test_shares_a_file_with_a_chunk_store_without_touching_its_tables(tmp_path):
    path = tmp_path / "chunks.db"
    chunks = ChunkStore(path)
    chunks.init_schema()
    index = NarrativeIndex(chunks)
    index.ingest("Revenue grew in Hong Kong.\n\nProfit fell.", DocumentMeta(doc_id="d1"))
    before = chunks.iter_chunks()
    with SqliteVectorStore(path, model_id="m") as s:
        s.upsert([rec("d1#c0", 1.0, 0.0)])
    assert chunks.iter_chunks() == before
    assert chunks.schema_version() >= 1
    chunks.close()
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert {"narrative_chunk", "ragspine_vector", "ragspine_vector_model"} <= tables


def test_a_narrative_index_reopened_on_the_file_searches_without_re_embedding(tmp_path):
    calls: list[list[str]] = []

    class Counting(DeterministicEmbeddingBackend):
        def embed_texts(self, texts):
            calls.append(list(texts))
            return super().embed_texts(texts)

    path = tmp_path / "chunks.db"
    backend = Counting(dim=32)
    chunks = ChunkStore(path)
    chunks.init_schema()
    with SqliteVectorStore(path, model_id=embedding_model_id(backend)) as vs:
        index = NarrativeIndex(chunks, embedding_backend=backend, vector_store=vs)
        index.ingest("Hong Kong revenue grew.", DocumentMeta(doc_id="open"))
        index.ingest("Secret memo on revenue.", DocumentMeta(doc_id="s", sensitivity="RESTRICTED"))
        assert vs.count() == 1  # RESTRICTED not persisted (the index's policy)
    chunks.close()
    calls.clear()
    chunks = ChunkStore(path)
    with SqliteVectorStore(path, model_id=embedding_model_id(backend)) as vs:
        index = NarrativeIndex(chunks, embedding_backend=backend, vector_store=vs)
        results = index.retrieve("hong kong revenue")
    chunks.close()
    assert calls == [["hong kong revenue"]]
    by_doc = {r.chunk.doc_id: r for r in results}
    assert by_doc["open"].vector_score > 0
    assert by_doc["s"].vector_score == 0.0 and by_doc["s"].bm25_score > 0


# --- construction, errors, factory ------------------------------------------------------


@pytest.mark.parametrize("table", ["", "1abc", "drop table", "a;b", 5])
def test_bad_table_names_are_rejected(table):
    with pytest.raises(ValueError, match="table"):
        SqliteVectorStore(":memory:", table=table)  # type: ignore[arg-type]


@pytest.mark.parametrize("model_id", ["", "  ", None])
def test_blank_model_ids_are_rejected(model_id):
    with pytest.raises(ValueError, match="model_id"):
        SqliteVectorStore(":memory:", model_id=model_id)  # type: ignore[arg-type]


def test_a_custom_table_name_is_used(tmp_path):
    path = tmp_path / "v.db"
    with SqliteVectorStore(path, table="my_vectors") as s:
        s.upsert([rec("a", 1.0)])
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM my_vectors").fetchone()[0] == 1
    conn.close()


def test_a_closed_store_raises_a_vector_store_error():
    s = SqliteVectorStore(":memory:")
    s.close()
    s.close()  # idempotent
    assert s.closed
    with pytest.raises(VectorStoreError, match="closed"):
        s.count()


def test_an_unreadable_file_is_a_vector_store_error(tmp_path):
    path = tmp_path / "not.db"
    path.write_bytes(b"this is not a database, just text" * 40)
    with pytest.raises(VectorStoreError):
        SqliteVectorStore(path)


@pytest.mark.parametrize("spec", ["sqlite", " SQLite "])
def test_make_vector_store_builds_it_with_kwargs(tmp_path, spec):
    s = make_vector_store(spec, db_path=tmp_path / "v.db", model_id="m")
    assert isinstance(s, SqliteVectorStore)
    assert s.model_id == "m"
    s.close()


def test_embedding_model_id_prefers_the_backends_own_id():
    class WithId:
        model_id = "org/model@int8"

    class Plain:
        pass

    assert embedding_model_id(WithId()) == "org/model@int8"
    assert embedding_model_id(DeterministicEmbeddingBackend(dim=64)) == (
        "DeterministicEmbeddingBackend/64"
    )
    assert embedding_model_id(Plain()) == "Plain"


def test_a_read_only_vector_store_queries_and_refuses_writes(tmp_path):
    path = tmp_path / "v.db"
    with SqliteVectorStore(path, model_id="m") as s:
        s.upsert([VectorRecord("a", (1.0, 0.0), {}), VectorRecord("b", (0.0, 1.0), {})])
    before = path.read_bytes()
    with SqliteVectorStore(path, model_id="m", read_only=True) as ro:
        assert [h.id for h in ro.query((1.0, 0.1), k=2)] == ["a", "b"]
        with pytest.raises(VectorStoreError, match="read-only"):
            ro.upsert([VectorRecord("c", (1.0, 1.0), {})])
        with pytest.raises(VectorStoreError, match="read-only"):
            ro.delete_ids(["a"])
    assert path.read_bytes() == before
    with pytest.raises(FileNotFoundError):
        SqliteVectorStore(tmp_path / "missing.db", read_only=True)


def test_query_scores_are_the_query_hits_without_metadata():
    s = SqliteVectorStore(":memory:", model_id="m")
    s.upsert([
        VectorRecord("b", (1.0, 0.5, 0.0), {"t": "x"}),
        VectorRecord("a", (1.0, 0.5, 0.0), {"t": "y"}),  # a tie: id order
        VectorRecord("c", (0.0, 0.0, 0.0), {"t": "x"}),  # zero vector: 0.0
        VectorRecord("d", (-1.0, 0.2, 0.3), {"t": "x"}),
        VectorRecord("e", (0.1, 0.9, 0.4), {"t": "y"}),
    ])
    for query in [(1.0, 0.4, 0.1), (0.0, 0.0, 0.0), (-0.3, 0.1, 0.0)]:
        for k in (1, 2, 5, 10):
            for where in (None, {"t": "x"}, {"t": "nope"}):
                hits = s.query(query, k=k, where=where)
                pairs = s.query_scores(query, k=k, where=where)
                assert pairs == [(h.id, h.score) for h in hits]
                assert [repr(sc) for _, sc in pairs] == [repr(h.score) for h in hits]
    assert [h.id for h in s.query((1.0, 0.5, 0.0), k=2)] == ["a", "b"]
    assert SqliteVectorStore(":memory:").query_scores((1.0,)) == []


@pytest.mark.parametrize(
    ("quantization", "blob", "says"),
    [
        (None, "0000803f00", "holds 5 bytes, not a whole number of 4-byte floats"),
        ("int8", "7f0000", "holds 3 bytes, not 2 int8 codes"),
    ],
)
def test_a_tampered_vector_names_the_database_and_the_row(tmp_path, quantization, blob, says):
    path = tmp_path / "v.db"
    with SqliteVectorStore(path, model_id="m", quantization=quantization) as store:
        store.upsert([rec("a", 1.0, 0.0), rec("b", 0.0, 1.0)])
    conn = sqlite3.connect(path)
    conn.execute(f"UPDATE ragspine_vector SET vector = x'{blob}' WHERE id = 'b'")
    conn.commit()
    conn.close()
    with SqliteVectorStore(path, model_id="m") as store, pytest.raises(VectorStoreError) as info:
        store.query([1.0, 0.0], k=2)
    message = str(info.value)
    assert repr(str(path)) in message and f"the vector of 'b' {says}" in message
    assert "rebuild" in message


# --- int8 mode ---------------------------------------------------------------------------


def gauss_records(n: int, dim: int, seed: int, **metadata: str) -> list[VectorRecord]:
    import random

    rnd = random.Random(seed)
    return [
        VectorRecord(f"r{i:03d}", tuple(rnd.gauss(0.0, 1.0) for _ in range(dim)), dict(metadata))
        for i in range(n)
    ]


def int8_dot(a: bytes, b: bytes) -> int:
    return sum(x * y for x, y in zip(array("b", a), array("b", b), strict=True))


def test_int8_mode_stores_one_byte_per_dimension_and_scores_exact_integer_dots(tmp_path):
    path = tmp_path / "v.db"
    records = gauss_records(50, 32, seed=1)
    with SqliteVectorStore(path, model_id="m", quantization="int8") as s:
        assert s.upsert(records) == 50
        assert s.quantization == "int8" and "quantization='int8'" in repr(s)
    conn = sqlite3.connect(path)
    blobs = dict(conn.execute("SELECT id, vector FROM ragspine_vector"))
    (scale,) = conn.execute("SELECT scale FROM ragspine_vector_int8 WHERE model_id='m'").fetchone()
    conn.close()
    assert {len(b) for b in blobs.values()} == {32}
    codec = Int8Codec(scale)
    assert scale == calibrate_scale(r.vector for r in records)
    assert all(blobs[r.id] == codec.encode(r.vector) for r in records)
    with SqliteVectorStore(path, model_id="m") as s:  # the mode is found on reopen
        assert s.quantization == "int8"
        query = records[4].vector
        q = codec.encode(query)
        want = sorted((-codec.cosine(int8_dot(q, b)), rid) for rid, b in blobs.items())[:10]
        assert s.query_scores(query, k=10) == [(rid, -neg) for neg, rid in want]
        assert s.query_scores(query, k=1)[0][0] == "r004"
        assert abs(s.query_scores(query, k=1)[0][1] - 1.0) < 0.02  # the cosine scale


def test_int8_ties_rank_by_id_and_where_filters_before_scoring():
    s = SqliteVectorStore(":memory:", model_id="m", quantization="int8")
    s.upsert([
        rec("b", 1.0, 0.5, 0.0, t="x"),
        rec("a", 2.0, 1.0, 0.0, t="y"),  # same direction: the same codes
        rec("c", 0.0, 0.0, 0.0, t="x"),  # zero vector: 0.0, still returned
        rec("d", -1.0, 0.2, 0.3, t="x"),
    ])
    assert [h.id for h in s.query((1.0, 0.5, 0.0), k=2)] == ["a", "b"]
    hits = s.query((1.0, 0.5, 0.0), k=4, where={"t": "x"})
    assert [h.id for h in hits] == ["b", "c", "d"]
    assert hits[1].score == 0.0 and hits[0].metadata == {"t": "x"}
    assert s.delete(where={"t": "y"}) == 1
    assert [h.id for h in s.query((1.0, 0.5, 0.0), k=1)] == ["b"]
    assert [sc for _, sc in s.query_scores((0.0, 0.0, 0.0), k=3)] == [0.0, 0.0, 0.0]


def test_int8_scores_are_the_same_with_and_without_numpy(monkeypatch):
    from ragspine_lite.vector import quantize

    s = SqliteVectorStore(":memory:", model_id="m", quantization="int8")
    records = gauss_records(200, 24, seed=2)
    s.upsert(records)
    queries = [r.vector for r in records[:5]]
    auto = [s.query_scores(q, k=15) for q in queries]
    monkeypatch.setattr(quantize, "numpy_or_none", lambda: None)
    s._drop_row_cache()  # rebuild the matrix without numpy
    assert [s.query_scores(q, k=15) for q in queries] == auto


def test_a_quantization_mismatch_on_reopen_is_a_clear_error(tmp_path):
    f_path, q_path = tmp_path / "f.db", tmp_path / "q.db"
    with SqliteVectorStore(f_path, model_id="m") as s:
        s.upsert([rec("a", 1.0, 0.0)])
    with SqliteVectorStore(q_path, model_id="m", quantization="int8") as s:
        s.upsert([rec("a", 1.0, 0.0)])
    with pytest.raises(VectorStoreError, match=r"float32 vectors for model 'm'; quantization='i"):
        SqliteVectorStore(f_path, model_id="m", quantization="int8")
    with pytest.raises(VectorStoreError, match=r"int8 vectors for model 'm'; quantization='flo"):
        SqliteVectorStore(q_path, model_id="m", quantization="float32")
    with SqliteVectorStore(q_path, model_id="other") as other:  # modes are per model
        assert other.quantization == "float32"
    with SqliteVectorStore(q_path, model_id="m", read_only=True) as ro:
        assert ro.quantization == "int8" and ro.query_scores((1.0, 0.0))[0][0] == "a"
    with pytest.raises(ValueError, match="quantization must be one of"):
        SqliteVectorStore(":memory:", quantization="int4")


def test_the_default_float_path_writes_no_int8_table(tmp_path):
    path = tmp_path / "v.db"
    with SqliteVectorStore(path, model_id="m") as s:
        s.upsert([rec("a", 1.0, 0.0)])
        assert s.quantization == "float32"
    conn = sqlite3.connect(path)
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert "ragspine_vector_int8" not in tables


def test_int8_calibration_ignores_records_the_policy_holds_back():
    s = SqliteVectorStore(":memory:", model_id="m", quantization="int8")
    written = s.upsert([
        rec("pub", 1.0, 1.0, sensitivity="PUBLIC"),
        rec("sec", 1.0, 0.0, sensitivity="RESTRICTED"),  # would set the scale to 127
    ])
    assert written == 1 and s.metadata_by_id() == {"pub": {"sensitivity": "PUBLIC"}}
    assert s._codec is not None and s._codec.scale == calibrate_scale([(1.0, 1.0)])

