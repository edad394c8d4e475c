"""lexical.inverted_index: exact BM25 (in memory and persisted) against the bm25_scores reference.

Every comparison is exact (``==`` on floats): the index computes each score with the
reference's own expression, summed in the reference's order.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragspine_lite.chunking.chunk_store import ChunkStore, ChunkStoreError
from ragspine_lite.chunking.chunking import Chunk
from ragspine_lite.lexical import inverted_index as ii
from ragspine_lite.lexical import store_index
from ragspine_lite.lexical.inverted_index import InvertedIndex, StoreBM25Index
from ragspine_lite.lexical.scoring import bm25_scores
from ragspine_lite.lexical.tokenizer import tokenize

# English words plus CJK characters: adjacent CJK characters form runs → unigrams + bigrams.
WORDS = ["revenue", "profit", "hk", "grew", "fell", "the", "q3", "香", "港", "收", "入", "增", "长"]
JOINERS = [" ", "", "，", ". "]
PARAMS = [(1.5, 0.75), (1.2, 0.0), (2.0, 1.0), (0.0, 0.5), (1.5, 1.3), (-0.5, 0.75)]

texts_st = st.builds(
    lambda words, joiner: joiner.join(words),
    st.lists(st.sampled_from(WORDS), max_size=12),
    st.sampled_from(JOINERS),
)
query_st = st.lists(st.sampled_from([*WORDS, "absent", "香港", "收入"]), max_size=6).map(" ".join)

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def reference(ids, texts, positions, query, k1=1.5, b=0.75):
    """(chunk_id, score) with score > 0 over the chosen texts, by (-score, chunk_id)."""
    scores = bm25_scores(tokenize(query), [tokenize(texts[i]) for i in positions], k1=k1, b=b)
    hits = [(ids[i], s) for i, s in zip(positions, scores, strict=True) if s > 0]
    return sorted(hits, key=lambda h: (-h[1], h[0]))


def pairs(hits):
    return [(cid, score) for _, cid, score in hits]


def test_pinned_reference_value():
    index = InvertedIndex(["a", "b"], [["x", "x", "y"], ["y", "z"]])
    hits = index.rank(["x"])
    assert [cid for _, cid, _ in hits] == ["a"]
    assert hits[0][2] == bm25_scores(["x"], [["x", "x", "y"], ["y", "z"]])[0]
    assert round(hits[0][2], 6) == 0.930399


@SETTINGS
@given(
    corpus=st.lists(st.tuples(st.integers(0, 15), texts_st), min_size=1, max_size=25),
    query=query_st,
    data=st.data(),
)
def test_in_memory_rank_equals_the_reference_on_any_candidates(corpus, query, data):
    ids = [f"c{n}" for n, _ in corpus]  # duplicate chunk ids allowed
    texts = [t for _, t in corpus]
    index = InvertedIndex.from_texts(ids, texts)
    positions = sorted(data.draw(st.sets(st.sampled_from(range(len(texts))))))
    use_all = data.draw(st.booleans())
    if use_all:
        positions = list(range(len(texts)))
    k1, b = data.draw(st.sampled_from(PARAMS))
    limit = data.draw(st.one_of(st.none(), st.integers(1, 8)))
    cand = None if use_all else index.candidates(positions)
    try:
        expected = reference(ids, texts, positions, query, k1, b)
    except ZeroDivisionError:  # a negative k1 can zero the BM25 denominator: fail alike
        with pytest.raises(ZeroDivisionError):
            index.rank(tokenize(query), k1=k1, b=b, candidates=cand, limit=limit)
        return
    got = pairs(index.rank(tokenize(query), k1=k1, b=b, candidates=cand, limit=limit))
    assert got == (expected if limit is None else expected[:limit])


def test_top_k_keeps_ties_in_chunk_id_order():
    ids = [f"c{i:02d}" for i in range(30)][::-1]
    index = InvertedIndex.from_texts(ids, ["revenue grew"] * 30)
    hits = index.rank(["revenue"], limit=5)
    assert [cid for _, cid, _ in hits] == ["c00", "c01", "c02", "c03", "c04"]
    assert len({s for _, _, s in hits}) == 1


def test_rank_rejects_a_bad_limit():
    index = InvertedIndex(["a"], [["x"]])
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="limit"):
            index.rank(["x"], limit=bad)


def test_in_memory_index_needs_one_token_list_per_id():
    with pytest.raises(ValueError, match="one token list per chunk id"):
        InvertedIndex(["a", "b"], [["x"]])


def test_small_lookup_cache_changes_no_result():
    ids = [f"c{i}" for i in range(200)]
    texts = [" ".join(WORDS[j % len(WORDS)] for j in range(i % 7, i % 7 + 1 + i % 5)) for i in
             range(200)]
    index = InvertedIndex.from_texts(ids, texts)
    index.lookup_cache_postings = 16  # evicts constantly; huge terms use binary search
    for query in ["revenue the hk", "the q3 grew fell profit", "香港 收入 the"]:
        assert pairs(index.rank(tokenize(query), limit=3)) == reference(
            ids, texts, range(200), query)[:3]


def test_empty_query_or_no_candidates_rank_nothing():
    index = InvertedIndex.from_texts(["a"], ["revenue"])
    assert index.rank([]) == []
    assert index.rank(["revenue"], candidates=index.candidates([])) == []
    assert index.rank(["absent"]) == []


# -- persisted index ------------------------------------------------------------------------


def chunk(doc: str, seq: int, text: str, topic: str = "", cid: str | None = None) -> Chunk:
    return Chunk(cid or f"{doc}#c{seq}", doc, seq, text, f"{doc}#para{seq + 1}", 1, 1, topic=topic)


def store_reference(store: ChunkStore, query: str, topic: str | None = None):
    rows = store.iter_chunk_rows(topic=topic)
    ids = [c.chunk_id for _, c in rows]
    texts = [c.text for _, c in rows]
    return reference(ids, texts, range(len(rows)), query), [r for r, _ in rows]


def check_store(index: StoreBM25Index, store: ChunkStore, query: str) -> None:
    for topic in (None, "A"):
        expected, rowids = store_reference(store, query, topic)
        with index.reading():
            cand = None if topic is None else index.candidates(rowids)
            full = pairs(index.rank(tokenize(query), candidates=cand))
            top = pairs(index.rank(tokenize(query), candidates=cand, limit=3))
        assert full == expected
        assert top == expected[:3]


op_st = st.tuples(
    st.integers(0, 5),  # document
    st.lists(st.tuples(texts_st, st.sampled_from(["A", "B"]), st.booleans()), max_size=4),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(op_st, min_size=1, max_size=10),
    merge_min=st.sampled_from([0, 8, 10**9]),
    queries=st.lists(query_st, min_size=1, max_size=3),
)
def test_store_index_equals_the_reference_through_reingests_and_retirements(
    ops, merge_min, queries
):
    with ChunkStore(":memory:") as store:
        store.init_schema()
        index = StoreBM25Index.attach(store, merge_min_postings=merge_min, merge_ratio=0.0)
        store.sync_indexers()
        for doc_n, specs in ops:
            doc = f"d{doc_n}"
            # The boolean makes a chunk id shared across documents (duplicates are legal).
            chunks = [chunk(doc, i, text, topic, cid=f"shared{i}" if dup else None)
                      for i, (text, topic, dup) in enumerate(specs)]
            store.replace_doc_chunks(doc, chunks)
            for query in queries:
                check_store(index, store, query)
        # A build from scratch gives the same answers as the incrementally kept index.
        fresh = StoreBM25Index(store)
        with store._transaction("rebuild") as conn:
            fresh._rebuild(conn, store.generation())
        for query in queries:
            check_store(fresh, store, query)


def test_bulk_write_rebuilds_in_one_pass_and_matches(monkeypatch):
    monkeypatch.setattr(store_index, "REBUILD_MIN_ROWS", 5)
    with ChunkStore(":memory:") as store:
        store.init_schema()
        index = StoreBM25Index.attach(store)
        store.sync_indexers()
        store.replace_docs(
            [(f"d{i}", [chunk(f"d{i}", 0, f"revenue {WORDS[i % len(WORDS)]} the", "A")])
             for i in range(40)]
        )
        store.replace_docs([("d1", []), ("d2", [chunk("d2", 0, "profit 香港 收入", "B")])])
        for query in ["revenue the", "profit 香港", "q3 hk"]:
            check_store(index, store, query)


def snapshot(store: ChunkStore) -> dict[str, list[tuple[object, ...]]]:
    tables = ["narrative_chunk", "lexical_term", "lexical_main", "lexical_delta", "lexical_doc",
              "lexical_dead", "lexical_stat", "ragspine_meta"]
    return {t: sorted(tuple(r) for r in store.execute_read(f"SELECT * FROM {t}")) for t in tables}


class FailingIndexer:
    name = "failing"

    def is_current(self, conn, generation):
        return True

    def ensure(self, conn, generation):
        pass

    def on_replace(self, conn, retired, added, generation):
        raise RuntimeError("index update failed")


def test_failed_ingest_leaves_index_and_chunks_as_they_were():
    with ChunkStore(":memory:") as store:
        store.init_schema()
        index = StoreBM25Index.attach(store)
        store.replace_doc_chunks("d", [chunk("d", 0, "revenue grew"), chunk("d", 1, "profit")])
        store.replace_doc_chunks("e", [chunk("e", 0, "revenue fell")])
        before = snapshot(store)
        check_store(index, store, "revenue")  # warm the read caches
        store.attach_indexer(FailingIndexer())  # runs after the BM25 index in the same write
        with pytest.raises(RuntimeError, match="index update failed"):
            store.replace_doc_chunks("d", [chunk("d", 0, "something else entirely")])
        assert snapshot(store) == before
        check_store(index, store, "revenue grew something")


def test_failed_ingest_on_a_bad_row_leaves_everything_as_it_was():
    with ChunkStore(":memory:") as store:
        store.init_schema()
        index = StoreBM25Index.attach(store)
        store.replace_doc_chunks("d", [chunk("d", 0, "revenue grew")])
        before = snapshot(store)
        clash = [chunk("x", 0, "profit"), chunk("x", 0, "profit again")]  # same (doc, version, seq)
        with pytest.raises(ChunkStoreError):
            store.replace_docs([("e", [chunk("e", 0, "new doc")]), ("x", clash)])
        assert snapshot(store) == before
        check_store(index, store, "revenue profit new")


def make_v1_store(path: Path) -> None:
    """A version-1 store: chunks, no generation counter, no BM25 index."""
    with ChunkStore(path) as store:
        store.init_schema()
        store.replace_doc_chunks("d", [chunk("d", 0, "revenue grew in hk", "A"),
                                       chunk("d", 1, "profit fell", "B")])
        store.replace_doc_chunks("e", [chunk("e", 0, "香港 收入 增长 revenue", "A")])
    conn = sqlite3.connect(path)
    conn.executescript(
        "DROP INDEX ix_narrative_chunk_id; DELETE FROM ragspine_meta; "
        "INSERT INTO ragspine_meta VALUES ('schema_version', '1');"
    )
    conn.commit()
    conn.close()


def test_v1_store_gets_its_index_built_on_first_use_with_a_log_line(tmp_path, caplog):
    path = tmp_path / "v1.db"
    make_v1_store(path)
    with ChunkStore(path) as store:
        assert store.schema_version() == 1
        index = StoreBM25Index.attach(store)
        with caplog.at_level(logging.INFO, logger="ragspine_lite.lexical.inverted_index"):
            store.sync_indexers()
        assert any("building the BM25 index" in r.getMessage() for r in caplog.records)
        check_store(index, store, "revenue 香港")


def test_v1_store_gets_its_index_built_on_init_schema(tmp_path, caplog):
    path = tmp_path / "v1.db"
    make_v1_store(path)
    with ChunkStore(path) as store:
        index = StoreBM25Index.attach(store)
        with caplog.at_level(logging.INFO):
            store.init_schema()
        messages = [r.getMessage() for r in caplog.records]
        assert any("migrating schema version 1 -> 2" in m for m in messages)
        assert any("building the BM25 index" in m for m in messages)
        assert store.schema_version() == 2
        check_store(index, store, "profit revenue")
        caplog.clear()
        store.init_schema()  # current now: nothing is rebuilt
        assert not any("building" in r.getMessage() for r in caplog.records)


def test_prebuilt_store_opens_read_only_without_retokenizing(tmp_path, monkeypatch):
    path = tmp_path / "bundle.db"
    with ChunkStore(path) as store:
        store.init_schema()
        StoreBM25Index.attach(store)
        for i in range(30):
            store.replace_doc_chunks(f"d{i}", [chunk(f"d{i}", 0, f"revenue {WORDS[i % 13]}", "A")])
    expected = None
    with ChunkStore(path) as store:
        expected = store_reference(store, "revenue hk")[0]

    def no_tokenizing(text):
        raise AssertionError("the corpus must not be tokenized when opening a built index")

    monkeypatch.setattr(store_index, "tokenize", no_tokenizing)
    with ChunkStore(path) as store:
        store._connection().execute("PRAGMA query_only = ON")
        index = StoreBM25Index.attach(store)
        store.sync_indexers()  # current: reads only (a write would fail under query_only)
        hits = pairs(index.rank(["revenue", "hk"]))
    assert hits == expected


def test_writes_made_without_the_index_are_caught_up(tmp_path, caplog):
    path = tmp_path / "s.db"
    with ChunkStore(path) as store:
        store.init_schema()
        index = StoreBM25Index.attach(store)
        store.replace_doc_chunks("d", [chunk("d", 0, "revenue grew")])
        check_store(index, store, "revenue")
        with ChunkStore(path) as other:  # another connection, no index attached
            other.replace_doc_chunks("e", [chunk("e", 0, "revenue fell sharply")])
            other.replace_doc_chunks("d", [])
        with pytest.raises(ChunkStoreError, match="behind the store"):
            index.rank(["revenue"])
        with caplog.at_level(logging.INFO):
            store.sync_indexers()
        assert any("behind the store" in r.getMessage() for r in caplog.records)
        check_store(index, store, "revenue fell")


def test_attach_returns_the_one_index_of_a_store():
    with ChunkStore(":memory:") as store:
        first = StoreBM25Index.attach(store)
        assert StoreBM25Index.attach(store) is first
        assert store.indexer("bm25") is first


def test_small_caches_change_no_result():
    with ChunkStore(":memory:") as store:
        store.init_schema()
        index = StoreBM25Index.attach(store, cache_postings=3)
        index.lookup_cache_postings = 8
        store.replace_docs(
            [(f"d{i}", [chunk(f"d{i}", 0, " ".join(WORDS[: 1 + i % 13]), "AB"[i % 2])])
             for i in range(60)]
        )
        for query in ["revenue the hk", "q3 香港 收入 grew"]:
            check_store(index, store, query)
            check_store(index, store, query)


def test_index_reports_its_size():
    with ChunkStore(":memory:") as store:
        store.init_schema()
        index = StoreBM25Index.attach(store)
        store.replace_doc_chunks("d", [chunk("d", 0, "revenue grew " * 50)])
        assert index.size_bytes() > 0


def _tampered(path: Path, sql: str) -> Path:
    """A built store of 30 documents at ``path``, then ``sql`` run on it behind its back."""
    with ChunkStore(path) as store:
        store.init_schema()
        StoreBM25Index.attach(store)
        for i in range(30):
            store.replace_doc_chunks(f"d{i}", [chunk(f"d{i}", 0, f"revenue {WORDS[i % 13]}", "A")])
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM lexical_main WHERE term = 'revenue'").fetchone()[0]
    conn.execute(sql)
    conn.commit()
    conn.close()
    return path


def test_a_tampered_index_names_the_database_the_table_and_the_term(tmp_path):
    path = _tampered(tmp_path / "bundle.db",
                     "UPDATE lexical_main SET docs = x'0102030405' WHERE term = 'revenue'")
    with ChunkStore(path) as store:
        index = StoreBM25Index.attach(store)
        with pytest.raises(ii.CorruptIndexError) as info:
            index.rank(["revenue"])
    message = str(info.value)
    assert repr(str(path)) in message
    assert "table lexical_main, term 'revenue', column docs holds 5 bytes" in message
    assert "rebuild it from the documents" in message
    assert isinstance(info.value, ChunkStoreError)  # what callers already catch


def test_a_tampered_length_table_names_the_database_too(tmp_path):
    path = _tampered(tmp_path / "bundle.db",
                     "UPDATE lexical_stat SET value = x'010203' WHERE key = 'main_lengths'")
    with ChunkStore(path) as store, pytest.raises(ii.CorruptIndexError,
                                                  match="table lexical_stat, key 'main_lengths'"):
        StoreBM25Index.attach(store).rank(["revenue"])
