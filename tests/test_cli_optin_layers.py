"""The opt-in layers at the command line: flags, RAGSPINE_* variables, output, canaries."""

from __future__ import annotations

import json
import os

import pytest
from test_cli import CANARY, SAMPLES, assert_one_line_error, run, search_json

from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.contextual import INDEX_TEXT_META_KEY
from ragspine_lite.postprocess import make_postprocessor


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    """No RAGSPINE_* variables, as in test_cli."""
    for name in list(os.environ):
        if name.startswith("RAGSPINE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("RAGSPINE_EMBEDDING_BACKEND", "none")


def ingest(capsys, path, *extra) -> tuple[int, str, str]:
    return run(capsys, "ingest", str(SAMPLES), "--db", str(path), *extra)


@pytest.fixture
def db(tmp_path, capsys) -> str:
    path = tmp_path / "chunks.db"
    assert ingest(capsys, path)[0] == 0
    return str(path)


def recorded(path) -> str | None:
    store = ChunkStore(path, read_only=True)
    try:
        return store.read_meta(INDEX_TEXT_META_KEY)
    finally:
        store.close()


# ---------------------------------------------------------------- contextual


def test_ingest_contextual_records_the_setting_and_search_follows_it(tmp_path, capsys, db):
    ctx = tmp_path / "ctx.db"
    assert ingest(capsys, ctx, "--contextual")[0] == 0
    assert recorded(ctx) == "contextual" and recorded(db) == "none"
    # "ACME_HK" / "ACME_CN" are metadata codes: only the context header holds them.
    plain = search_json(capsys, db, "ACME_CN")
    contextual = search_json(capsys, str(ctx), "ACME_CN")
    assert plain == [] or all("ACME_CN" not in s["text"] for s in plain)
    assert contextual and all(s["entity"] == "ACME_CN" for s in contextual[:2])
    assert all(not s["text"].startswith("[") for s in contextual)  # cited text unchanged


def test_env_contextual_also_switches_ingest_on(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RAGSPINE_CONTEXTUAL", "on")
    path = tmp_path / "env.db"
    assert ingest(capsys, path)[0] == 0
    assert recorded(path) == "contextual"


def test_search_refuses_a_conflicting_contextual_setting(tmp_path, capsys, db, monkeypatch):
    monkeypatch.setenv("RAGSPINE_CONTEXTUAL", "on")
    code, out, err = run(capsys, "search", "revenue", "--db", db)
    assert code == 1 and out == ""
    assert_one_line_error(err)
    assert "indexed with index text 'none', not 'contextual'" in err


def test_reingesting_with_another_setting_says_so_and_switches(tmp_path, capsys, db):
    code, _, err = ingest(capsys, db, "--contextual")
    assert code == 0 and "index text changed from 'none'" in err
    assert recorded(db) == "contextual"
    assert search_json(capsys, db, "ACME_CN")


def test_bad_contextual_env_is_a_usage_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RAGSPINE_CONTEXTUAL", "fancy")
    code, _, err = ingest(capsys, tmp_path / "x.db")
    assert code == 2 and "'fancy'" in err


def test_contextual_hybrid_keeps_its_own_vector_set(tmp_path, capsys):
    path = tmp_path / "h.db"
    args = ("--mode", "hybrid", "--embedding", "deterministic")
    assert ingest(capsys, path, "--contextual", *args)[0] == 0
    assert ingest(capsys, tmp_path / "p.db", *args)[0] == 0
    from ragspine_lite.vector.sqlite_store import SqliteVectorStore

    with SqliteVectorStore(str(path), model_id="x") as vs:
        models = vs.models()
    assert any(m.endswith("+contextual") for m in models), models
    assert search_json(capsys, str(path), "ACME_CN revenue", *args)


# ---------------------------------------------------------------- postprocess


def test_postprocess_chain_equals_the_library_chain_on_the_plain_output(capsys, db):
    plain = search_json(capsys, db, "revenue growth", "--top-k", "8")
    chained = search_json(capsys, db, "revenue growth", "--top-k", "8",
                          "--postprocess", "mmr,lost_in_middle")
    assert chained == make_postprocessor("mmr,lost_in_middle").postprocess("revenue growth", plain)
    assert sorted(s["chunk_id"] for s in chained) == sorted(s["chunk_id"] for s in plain)


def test_postprocess_from_the_environment(capsys, db, monkeypatch):
    plain = search_json(capsys, db, "revenue growth")
    monkeypatch.setenv("RAGSPINE_POSTPROCESSOR", "litm")
    assert search_json(capsys, db, "revenue growth") == make_postprocessor("litm").postprocess(
        "revenue growth", plain)
    # an explicit flag beats the variable
    assert search_json(capsys, db, "revenue growth", "--postprocess", "none") == plain


def test_compress_adds_prompt_text_and_keeps_every_citation_field(capsys, db):
    plain = search_json(capsys, db, "hong kong revenue")
    compressed = search_json(capsys, db, "hong kong revenue", "--postprocess", "compress")
    assert [{k: v for k, v in s.items() if k != "prompt_text"} for s in compressed] == plain
    assert all(s["prompt_text"] and s["prompt_text"] in s["text"] for s in compressed)
    code, out, _ = run(capsys, "search", "hong kong revenue", "--db", db,
                       "--postprocess", "compress")
    assert code == 0 and "    prompt: " in out


def test_bad_postprocess_spec_is_a_usage_error(capsys, db):
    code, _, err = run(capsys, "search", "revenue", "--db", db, "--postprocess", "mmr,bogus")
    assert code == 2
    assert_one_line_error(err)
    assert "'bogus'" in err and "mmr" in err


# ---------------------------------------------------------------- corrective


def test_corrective_refusal_is_visible_and_shows_nothing(capsys, db):
    code, out, _ = run(capsys, "search", "zebra quantum", "--db", db, "--corrective", "crag")
    assert code == 0
    assert "0 result(s)" in out and "+ crag" in out
    assert "corrective retrieval refused the context" in out
    code, out, err = run(capsys, "search", "zebra quantum", "--db", db, "--json",
                         "--corrective", "crag")
    assert json.loads(out) == [] and "refused" in err


def test_corrective_drops_a_filter_that_leaves_weak_context(capsys, db):
    query = "Hong Kong bancassurance revenue"
    strict = search_json(capsys, db, query, "--filter", "entity=ACME_CN")
    crag = search_json(capsys, db, query, "--filter", "entity=ACME_CN", "--corrective", "crag")
    unfiltered = search_json(capsys, db, query)
    assert all(s["entity"] == "ACME_CN" for s in strict)
    assert crag == unfiltered and any(s["entity"] == "ACME_HK" for s in crag)


def test_corrective_keeps_a_good_filtered_answer(capsys, db):
    query = "ACME China operating profit"
    filtered = search_json(capsys, db, query, "--filter", "entity=ACME_CN")
    assert filtered
    assert search_json(capsys, db, query, "--filter", "entity=ACME_CN",
                       "--corrective", "crag") == filtered


# ---------------------------------------------------------------- raptor


def test_raptor_appends_non_citable_themes_after_the_results(capsys, db, monkeypatch):
    plain = search_json(capsys, db, "hong kong revenue", "--top-k", "3")
    out = search_json(capsys, db, "hong kong revenue", "--top-k", "3", "--raptor", "raptor")
    assert out[:3] == plain
    themes = out[3:]
    assert themes and all(s["is_synthesis"] and "chunk_id" not in s for s in themes)
    monkeypatch.setenv("RAGSPINE_RAPTOR", "on")
    code, text, _ = run(capsys, "search", "hong kong revenue", "--db", db, "--top-k", "3")
    assert code == 0 and "not a citation" in text and "+ raptor" in text


def test_every_layer_on_never_prints_the_canary(tmp_path, capsys):
    path = str(tmp_path / "c.db")
    outputs = []
    assert ingest(capsys, path, "--contextual")[0] == 0
    layers = ("--postprocess", "mmr,lost_in_middle,compress", "--corrective", "crag",
              "--raptor", "raptor")
    for query in ("Macau broker acquisition", "董事会 分支机构", "revenue",
                  "Project memo board deal team"):
        for extra in ([], ["--json"], ["--filter", "sensitivity=RESTRICTED"]):
            code, out, err = run(capsys, "search", query, "--db", path, "--top-k", "50",
                                 *layers, *extra)
            assert code == 0
            outputs.append(out + err)
    assert any("not a citation" in text for text in outputs)
    for text in outputs:
        assert CANARY not in text.upper()
