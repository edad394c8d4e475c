"""The external stores wired through: the factory's errors, ``sync_chunk_vectors``, the
narrative retriever, the CLI (``RAGSPINE_VECTOR_STORE``) and the RESTRICTED canary read back
from each store's raw contents."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from _cli import clean_edge_env, run
from _vector_stores import opener_for

from ragspine_lite import cli
from ragspine_lite.vector.adapters.pgvector_store import pg_connect_args
from ragspine_lite.vector.chunk_vectors import sync_chunk_vectors
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend
from ragspine_lite.vector.persistence_policy import PersistEverythingPolicy
from ragspine_lite.vector.sqlite_store import SqliteVectorStore
from ragspine_lite.vector.store import make_vector_store
from ragspine_lite.vector.store_env import model_table

pytestmark = pytest.mark.cpython_only
EXTERNAL = ["sqlite_vec", "qdrant", "pgvector"]
CANARY = "canary-7f3a9c"


@pytest.fixture(params=EXTERNAL)
def opener(request, tmp_path):
    op = opener_for(request, request.param, tmp_path)
    yield op
    op.close_all()


def raw_contents(kind: str, location: Path, store=None, url=None, table=None) -> str:
    """Everything the store holds, read beneath the adapter: file bytes, or every row as
    Postgres prints it."""
    if kind == "pgvector":
        import pg8000.dbapi

        conn = pg8000.dbapi.connect(**pg_connect_args(url))
        try:
            cur = conn.cursor()
            cur.execute(f"SELECT t::text FROM {table} t")
            return "\n".join(r[0] for r in cur.fetchall())
        finally:
            conn.close()
    files = [location] if location.is_file() else sorted(p for p in location.rglob("*")
                                                         if p.is_file())
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in files)


def drop_pg_table(url: str, table: str) -> None:
    """Empty the shared Postgres of ``table`` (another test of the session may have filled it)."""
    import pg8000.dbapi

    conn = pg8000.dbapi.connect(**pg_connect_args(url))
    try:
        conn.cursor().execute(f"DROP TABLE IF EXISTS {table}")
        conn.commit()
    finally:
        conn.close()


def chunk(cid: str, text: str, sensitivity: str = "INTERNAL", doc: str = "d") -> SimpleNamespace:
    return SimpleNamespace(chunk_id=cid, doc_id=doc, text=text, sensitivity=sensitivity,
                           topic="", entity="", geography="", period="", language="en")


# --- factory errors -------------------------------------------------------------------------


def test_pgvector_needs_a_url_and_reads_the_environment(monkeypatch, pg_url):
    monkeypatch.delenv("RAGSPINE_PG_URL", raising=False)
    with pytest.raises(ValueError, match="RAGSPINE_PG_URL"):
        make_vector_store("pgvector")
    monkeypatch.setenv("RAGSPINE_PG_URL", pg_url)
    store = make_vector_store("pg_vector")
    assert store.temporary and store.table.startswith("rv_")
    store.close()


def test_pg_urls_name_host_port_database_or_a_socket_directory():
    assert pg_connect_args("postgresql://u:p%40ss@db.example:6543/rag") == {
        "user": "u", "password": "p@ss", "database": "rag", "host": "db.example", "port": 6543}
    assert pg_connect_args("postgresql://postgres:@/postgres?host=/tmp/pg") == {
        "user": "postgres", "database": "postgres", "unix_sock": "/tmp/pg/.s.PGSQL.5432"}
    with pytest.raises(ValueError, match="postgresql://"):
        pg_connect_args("mysql://u@h/db")


@pytest.mark.parametrize("table", ["1abc", "a-b", "x; DROP TABLE y", ""])
def test_bad_table_names_are_rejected_before_connecting(table):
    with pytest.raises(ValueError, match="table must match"):
        make_vector_store("pgvector", dsn="postgresql://u@localhost/db", table=table)


def test_a_temp_table_is_private_to_its_connection_and_gone_after_close(pg_url):
    from ragspine_lite.vector.store import VectorRecord

    temp = make_vector_store("pgvector", dsn=pg_url)
    temp.upsert([VectorRecord("a", (1.0, 0.0))])
    assert temp.count() == 1
    other = make_vector_store("pgvector", dsn=pg_url, table=temp.table)
    assert other.count() == 0 and other.dim is None  # another session sees no such table
    temp.close()
    temp.close()
    other.close()


def test_sqlite_vec_without_an_extension_capable_sqlite_names_the_fix(monkeypatch, tmp_path):
    pytest.importorskip("sqlite_vec")
    import sqlite3

    from ragspine_lite.vector.adapters import sqlite_vec_store

    monkeypatch.delattr(sqlite3.Connection, "enable_load_extension", raising=False)
    monkeypatch.setitem(sys.modules, "sqlean", None)
    with pytest.raises(ImportError, match=r"cannot load SQLite extensions.*\[vector\]"):
        sqlite_vec_store.SqliteVecVectorStore(tmp_path / "v.db")


# --- sync and retriever -----------------------------------------------------------------------


def test_sync_chunk_vectors_is_incremental_and_never_writes_restricted(opener):
    store = opener.open()
    backend = DeterministicEmbeddingBackend(dim=16)
    chunks = [chunk("a", "revenue grew"), chunk("b", "profit fell"),
              chunk(CANARY, "the secret memo", "RESTRICTED", doc=CANARY)]
    everything = PersistEverythingPolicy()
    assert sync_chunk_vectors(chunks, backend, store, persistence_policy=everything) == (2, 0)
    assert sync_chunk_vectors(chunks, backend, store, persistence_policy=everything) == (0, 0)
    changed = [chunk("a", "revenue grew fast"), chunks[2]]
    assert sync_chunk_vectors(changed, backend, store, persistence_policy=everything) == (1, 2)
    assert sorted(store.metadata_by_id()) == ["a"]
    raw = raw_contents(opener.kind, _location(opener), url=opener.pg_url, table=opener.table)
    assert "profit" not in raw and "a" in raw  # the dump is readable: it shows what is there
    assert CANARY not in raw and "RESTRICTED" not in raw


def _location(opener) -> Path:
    return opener.where / {"sqlite_vec": "vec.db", "qdrant": "qdrant", "pgvector": ""}[opener.kind]


def test_the_narrative_retriever_over_an_external_store_finds_what_the_sqlite_one_does(
    opener, tmp_path
):
    from ragspine_lite.chunking.chunker import DocumentMeta
    from ragspine_lite.link.narrative_link import build_narrative_retriever

    backend = DeterministicEmbeddingBackend(dim=32)
    docs = [("hk", "Hong Kong revenue rose 11 percent.", "INTERNAL"),
            ("cn", "Mainland China profit fell on lower margins.", "PUBLIC"),
            (CANARY, "Secret acquisition memo about Hong Kong revenue.", "RESTRICTED")]
    results = {}
    # The reference keeps float32 vectors too, under the default policy (RESTRICTED held);
    # the external store is asked to persist everything and still gets no RESTRICTED vector.
    runs = (("external", opener.open(), PersistEverythingPolicy()),
            ("sqlite", SqliteVectorStore(":memory:", model_id="m"), None))
    for name, store, policy in runs:
        retriever, chunk_store = build_narrative_retriever(
            tmp_path / f"{name}.db", embedding_backend=backend, vector_store=store,
            persistence_policy=policy)
        try:
            for doc_id, text, sensitivity in docs:
                retriever.index.ingest(text, DocumentMeta(doc_id=doc_id, title=doc_id,
                                                          sensitivity=sensitivity))
            results[name] = retriever.retrieve("Hong Kong revenue", top_k=5)
            assert retriever.index.last_channel == "hybrid"
        finally:
            chunk_store.close()
    assert results["external"] and CANARY not in json.dumps(results["external"])
    assert json.dumps(results["external"]) == json.dumps(results["sqlite"])
    raw = raw_contents(opener.kind, _location(opener), url=opener.pg_url, table=opener.table)
    assert "hk" in raw and CANARY not in raw and "RESTRICTED" not in raw


def test_a_hybrid_retriever_over_an_external_store_embeds_no_restricted_chunk(opener):
    from ragspine_lite.chunking.chunking import Chunk
    from ragspine_lite.lexical.retrieval import HybridRetriever

    store = opener.open()
    chunks = [Chunk("open", "d", 0, "Hong Kong revenue rose", "d#para1", 1, 1),
              Chunk(CANARY, CANARY, 0, "Hong Kong revenue memo", f"{CANARY}#para1", 1, 1,
                    sensitivity="RESTRICTED")]
    retriever = HybridRetriever(chunks, embedding_backend=DeterministicEmbeddingBackend(dim=16),
                                vector_store=store)
    found = {r.chunk.chunk_id: r for r in retriever.search("Hong Kong revenue")}
    assert set(found) == {"open", CANARY}  # the retriever ranks both (the exits strip)
    assert found[CANARY].vector_score == 0.0  # ... but RESTRICTED competes on BM25 only
    assert sorted(store.metadata_by_id()) == ["open"]


# --- the command line -----------------------------------------------------------------------


def _cli_location(kind: str, db: Path) -> Path:
    return Path(f"{db}.sqlite-vec") if kind == "sqlite_vec" else Path(f"{db}.qdrant")


@pytest.mark.parametrize("kind", EXTERNAL)
def test_the_cli_keeps_vectors_in_the_store_the_environment_names(
    request, capsys, tmp_path, monkeypatch, kind
):
    clean_edge_env(monkeypatch)
    opener_for(request, kind, tmp_path)  # skips without the SDK (or Postgres)
    monkeypatch.chdir(tmp_path)
    samples = str(cli.samples_dir())
    emb = ("--embedding", "deterministic")
    assert run(capsys, "ingest", samples, "--db", "ref.db", *emb)[0] == 0
    code, ref, _ = run(capsys, "search", "Hong Kong revenue", "--db", "ref.db", "--json", *emb)
    assert code == 0
    monkeypatch.setenv("RAGSPINE_VECTOR_STORE", kind.replace("_", "-"))
    monkeypatch.setenv("RAGSPINE_PERSISTENCE_POLICY", "persist-everything")
    if kind == "pgvector":
        pg_url = request.getfixturevalue("pg_url")
        monkeypatch.setenv("RAGSPINE_PG_URL", pg_url)
        drop_pg_table(pg_url, model_table("DeterministicEmbeddingBackend/256"))
    code, out, err = run(capsys, "ingest", samples, "--db", "x.db", *emb)
    assert code == 0, err
    assert "embedded 12 chunk(s)" in out  # 14 chunks, the 2 RESTRICTED ones withheld
    code, out, err = run(capsys, "search", "Hong Kong revenue", "--db", "x.db", "--json", *emb)
    assert code == 0 and json.loads(out) == json.loads(ref), err
    code, out, _ = run(capsys, "ingest", samples, "--db", "x.db", *emb)
    assert "embedded 0 chunk(s)" in out  # the store already holds every vector
    if kind == "pgvector":
        raw = raw_contents(kind, Path(), url=request.getfixturevalue("pg_url"),
                           table=model_table("DeterministicEmbeddingBackend/256"))
    else:
        raw = raw_contents(kind, _cli_location(kind, tmp_path / "x.db"))
    assert "acme_hk_2024_annual_review" in raw
    assert "RESTRICTED" not in raw and "acquisition_memo" not in raw
    assert "board_minutes" not in raw


def test_the_cli_names_what_an_external_store_lacks(capsys, tmp_path, monkeypatch):
    clean_edge_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGSPINE_VECTOR_STORE", "pgvector")
    code, _out, err = run(capsys, "ingest", str(cli.samples_dir()), "--db", "n.db")
    assert code == 2 and "RAGSPINE_PG_URL" in err and not (tmp_path / "n.db").exists()
    monkeypatch.setitem(sys.modules, "qdrant_client", None)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    monkeypatch.setenv("RAGSPINE_VECTOR_STORE", "qdrant")
    code, _out, err = run(capsys, "ingest", str(cli.samples_dir()), "--db", "n.db")
    assert code == 2 and "pip install 'ragspine-lite[vector]'" in err


# --- the docs -------------------------------------------------------------------------------


def _doc_blocks() -> list[str]:
    doc = Path(__file__).resolve().parents[1] / "docs" / "vector-stores.md"
    if not doc.is_file():  # the Pyodide lane copies the tests only (and skips this module)
        return []
    text = doc.read_text("utf-8")
    return [part.split("```", 1)[0] for part in text.split("```python\n")[1:]]


def _expected(block: str) -> list[str]:
    """What the block's ``print`` lines say they print (``# …`` after or below them)."""
    lines, out = block.splitlines(), []
    for i, line in enumerate(lines):
        if "print(" in line:
            comment = line.partition(")  # ")[2] or lines[i + 1].removeprefix("# ")
            out.append(comment.strip())
    return out


@pytest.mark.parametrize("block", _doc_blocks())
def test_the_docs_examples_run_as_written(block, capsys):
    pytest.importorskip("sqlite_vec")
    pytest.importorskip("qdrant_client")
    exec(compile(block, "docs/vector-stores.md", "exec"), {})
    assert capsys.readouterr().out.splitlines() == _expected(block)
