"""``/v1/search`` over real HTTP: two stateless replicas over one Postgres+pgvector answer like
the CLI, and RESTRICTED never leaves (nor reaches the shared store)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from contextlib import contextmanager

import pytest

pytestmark = pytest.mark.cpython_only
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("pg8000", reason="pip install 'ragspine-lite[vector]'")

from _cli import clean_edge_env, run  # noqa: E402
from _remote_server import EndpointServer  # noqa: E402

from ragspine_lite import cli  # noqa: E402
from ragspine_lite.remote.server import ServerConfig, create_app  # noqa: E402
from ragspine_lite.remote.server.models import ModelSet  # noqa: E402
from ragspine_lite.remote.wire import SEARCH_PATH  # noqa: E402

EMB = ("--embedding", "deterministic")
SETTINGS = {"search_embedding": "deterministic", "vector_store": "pgvector"}


def post(url: str, payload: dict) -> tuple[int, bytes]:
    req = urllib.request.Request(url + SEARCH_PATH, json.dumps(payload).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture
def served_db(capsys, tmp_path, monkeypatch, pg_url):
    """The samples ingested by the CLI, vectors in the shared Postgres (persist-everything
    asked for: RESTRICTED must still stay out of it)."""
    clean_edge_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGSPINE_VECTOR_STORE", "pgvector")
    monkeypatch.setenv("RAGSPINE_PG_URL", pg_url)
    monkeypatch.setenv("RAGSPINE_PERSISTENCE_POLICY", "persist-everything")
    code, _out, err = run(capsys, "ingest", str(cli.samples_dir()), "--db", "chunks.db", *EMB)
    assert code == 0, err
    monkeypatch.delenv("RAGSPINE_PERSISTENCE_POLICY")
    return tmp_path / "chunks.db"


def cli_search(capsys, db, query: str) -> list[dict]:
    code, out, err = run(capsys, "search", query, "--db", str(db), "--json", "--top-k", "5", *EMB)
    assert code == 0, err
    return json.loads(out)


@contextmanager
def replica(config: ServerConfig):
    app = create_app(config, models=ModelSet({}))
    try:
        with EndpointServer(app) as server:
            yield server
    finally:
        app.state.search.close()  # the test servers run without a lifespan


def test_two_replicas_over_one_pgvector_answer_like_the_cli(capsys, served_db):
    config = ServerConfig(search_db=str(served_db), **SETTINGS)
    want = cli_search(capsys, served_db, "Hong Kong revenue")
    with replica(config) as one, replica(config) as two:
        answers = [post(s.url, {"query": "Hong Kong revenue", "top_k": 5}) for s in (one, two)]
        filtered = post(one.url, {"query": "revenue", "filters": {"entity": "ACME_HK"}})
    for status, body in answers:
        assert status == 200
        reply = json.loads(body)
        assert reply["channel"] == "hybrid" and reply["hits"] == want
    assert answers[0][1] == answers[1][1]
    hits = json.loads(filtered[1])["hits"]
    assert hits and {h["entity"] for h in hits} == {"ACME_HK"}


def test_restricted_text_never_leaves_the_endpoint(capsys, served_db):
    config = ServerConfig(search_db=str(served_db), **SETTINGS)
    with replica(config) as server:
        replies = [post(server.url, {"query": q, "top_k": 50})
                   for q in ("acquisition memo", "board minutes", "董事会", "revenue")]
    for status, body in replies:
        assert status == 200
        text = body.decode("utf-8")
        assert "RESTRICTED" not in text and "acquisition_memo" not in text
        assert "board_minutes" not in text


def test_search_is_off_without_a_database_and_bad_settings_stop_the_start(tmp_path, pg_url,
                                                                          monkeypatch):
    with replica(ServerConfig()) as server:
        status, body = post(server.url, {"query": "revenue"})
    assert status == 503 and b"RAGSPINE_REMOTE_DB" in body
    db = tmp_path / "c.db"
    db.write_bytes(b"")
    with pytest.raises(ValueError, match="qdrant"):
        create_app(ServerConfig(search_db=str(db), vector_store="qdrant"), models=ModelSet({}))
    monkeypatch.delenv("RAGSPINE_PG_URL", raising=False)
    with pytest.raises(ValueError, match="RAGSPINE_PG_URL"):
        create_app(ServerConfig(search_db=str(db), vector_store="pgvector"), models=ModelSet({}))
    with pytest.raises(ValueError, match="does not exist"):
        create_app(ServerConfig(search_db=str(tmp_path / "none.db")), models=ModelSet({}))
