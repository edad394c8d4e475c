"""``ragspine-lite graph``: roll-up / compare / trace over an ingested store, text and JSON,
a RESTRICTED canary in every output; and docs/graph.md's examples, run as written."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _cli import clean_edge_env, run
from _graph import CANARY, RESTRICTED_DOCS, ingest_samples

import ragspine_lite

DOC = Path(__file__).resolve().parents[1] / "docs" / "graph.md"
HK = "en/acme_hk_2024_annual_review.md"


def fact(entity, value, doc, metric="REVENUE"):
    return {"metric_code": metric, "entity": entity, "geography": "", "channel": "TOTAL",
            "period_type": "FY", "period": "2024", "value": value, "unit": "HKD_B",
            "source_doc_id": doc, "source_locator": f"{doc}#para1"}


@pytest.fixture
def files(tmp_path, monkeypatch):
    clean_edge_env(monkeypatch)
    db = tmp_path / "chunks.db"
    ingest_samples(db)
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps([fact("ACME_HK", 18.6, HK),
                                 fact("ACME_CN", 12.5, "zh/acme_cn_2024_profit_zh.md"),
                                 fact("ACME_HK", 0.9, RESTRICTED_DOCS[0], "PROFIT")]),
                     encoding="utf-8")
    return ["--db", str(db), "--facts", str(facts)]


def graph(capsys, *argv):
    code, out, err = run(capsys, "graph", *argv)
    assert CANARY not in out + err
    return code, out, err


def test_rollup_text_and_json(capsys, files):
    code, out, _ = graph(capsys, "rollup", "ACME_GROUP", "REVENUE", "FY", "2024", *files)
    assert code == 0
    assert out.splitlines() == [
        "ACME_GROUP REVENUE FY2024: total 31.1 from 2 fact(s)",
        "  ACME_CN: 12.5 HKD_B  [zh/acme_cn_2024_profit_zh.md#para1]",
        f"  ACME_HK: 18.6 HKD_B  [{HK}#para1]"]
    code, out, _ = graph(capsys, "rollup", "ACME_GROUP", "REVENUE", "FY", "2024", *files,
                         "--json")
    data = json.loads(out)
    assert code == 0 and data["total"] == 31.1 and not data["refused"]
    assert [(f["entity"], f["source_locator"]) for f in data["facts"]] == [
        ("ACME_CN", "zh/acme_cn_2024_profit_zh.md#para1"), ("ACME_HK", f"{HK}#para1")]


def test_a_fact_citing_a_restricted_document_is_never_shown(capsys, files):
    for argv in (("rollup", "ACME_GROUP", "PROFIT", "FY", "2024"),
                 ("compare", "PROFIT", "FY", "2024", "ACME_HK")):
        code, out, _ = graph(capsys, *argv, *files, "--json")
        assert code == 0 and RESTRICTED_DOCS[0] not in out and "0.9" not in out
    assert json.loads(out)["rows"] == [{"entity": "ACME_HK", "found": False, "fact": None}]


def test_compare_and_refusals(capsys, files):
    code, out, _ = graph(capsys, "compare", "REVENUE", "FY", "2024", "ACME_HK", "ACME_XX",
                         *files)
    assert code == 0
    assert out.splitlines() == ["REVENUE FY2024:", f"  ACME_HK: 18.6 HKD_B  [{HK}#para1]",
                                "  ACME_XX: not found"]
    for peer in ("a i a", "平 安"):
        code, out, _ = graph(capsys, "compare", "REVENUE", "FY", "2024", "ACME_HK", peer,
                             *files, "--json")
        data = json.loads(out)
        assert code == 0 and data["refused"] and data["rows"] == []
        assert "outside the scope" in data["refusal_message"]


def test_trace_hides_restricted_documents(capsys, files):
    code, out, _ = graph(capsys, "trace", HK, "--edge-type", "mentions", *files, "--json")
    data = json.loads(out)
    assert code == 0 and [n["id"] for n in data["nodes"]] == ["ACME_HK", "REVENUE"]
    assert data["edges"][0]["metadata"]["source_locator"].startswith(f"{HK}#para")
    for doc in RESTRICTED_DOCS:
        code, out, _ = graph(capsys, "trace", doc, "--edge-type", "mentions", *files)
        assert (code, out) == (0, f"{doc}: 0 node(s), 0 edge(s)\n")
    for depth in ("1", "4"):
        code, out, _ = graph(capsys, "trace", "ACME_HK", "--edge-type", "mentions",
                             "--edge-type", "derives", "--depth", depth, *files,
                             "--relation-extractor", "deterministic", "--json")
        assert code == 0 and not any(d in out for d in RESTRICTED_DOCS)


@pytest.mark.parametrize("store", ["in_process", "networkx"])
def test_graph_store_option_gives_the_same_answer(capsys, files, store):
    if store == "networkx":
        pytest.importorskip("networkx")
    code, out, _ = graph(capsys, "trace", "ACME_GROUP", "--edge-type", "parent_of", *files,
                         "--graph-store", store)
    assert code == 0 and out.splitlines()[0] == "ACME_GROUP: 2 node(s), 2 edge(s)"


def test_errors_name_the_bad_input(capsys, files, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"metric_code": "REVENUE"}]', encoding="utf-8")
    code, _, err = graph(capsys, "rollup", "A", "M", "FY", "1", "--db", files[1],
                         "--facts", str(bad))
    assert code == 1 and "item 0 is not a fact" in err
    code, _, err = graph(capsys, "rollup", "A", "M", "FY", "1", "--db",
                         str(tmp_path / "none.db"))
    assert code == 1 and "does not exist" in err
    code, _, err = graph(capsys, "trace", "A", *files, "--profile", str(tmp_path / "p.json"))
    assert code == 1 and "p.json" in err
    code, _, err = graph(capsys, "trace", "A", *files, "--relation-extractor", "magic")
    assert code == 1 and "unknown relation extractor 'magic'" in err
    code, _, err = graph(capsys, "trace", "A", *files, "--depth", "-1")
    assert code == 2 and "non-negative" in err
    code, _, err = graph(capsys, "rollup", "A", *files)
    assert code == 2


def test_llm_extractor_without_a_server_says_so(capsys, files):
    code, _, err = graph(capsys, "trace", "ACME_GROUP", *files, "--relation-extractor", "llm")
    assert code == 0 and "needs --llm-url" in err


# ---------------------------------------------------------------- docs/graph.md, as written


def doc_blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.cpython_only  # the Pyodide lane mounts the tests, not docs/
def test_the_docs_python_example_runs(capsys, monkeypatch):
    monkeypatch.delenv("RAGSPINE_COMPANY_CONFIG", raising=False)
    exec(doc_blocks("python")[0], {})
    out = capsys.readouterr().out
    assert out.splitlines() == ["18.6", "True", "['HK']"]


@pytest.mark.cpython_only  # bash, a subprocess
def test_the_docs_cli_example_prints_what_the_docs_show(tmp_path):
    [script] = doc_blocks("sh")
    expected = doc_blocks("text")[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGSPINE_")}
    env["PYTHONPATH"] = str(Path(ragspine_lite.__file__).resolve().parents[1])
    env["RAGSPINE_EMBEDDING_BACKEND"] = "none"
    shim = f'ragspine-lite() {{ "{sys.executable}" -m ragspine_lite "$@"; }}\nset -e\n'
    done = subprocess.run([shutil.which("bash") or "bash", "-c", shim + script], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected
    assert CANARY not in done.stdout + done.stderr
    assert CANARY in (tmp_path / "reports" / "board_memo.md").read_text(encoding="utf-8")


@pytest.mark.cpython_only
def test_the_llm_extractor_through_the_cli_and_a_loopback_chat_server(capsys, files):
    from _remote_server import StubHTTPServer, chat_reply

    def answer(method, path, headers, body):
        return 200, chat_reply(json.dumps({"relations": [
            {"source": "ACME_HK", "target": "ACME_CN", "kind": "reinsures"},
            {"source": "ACME_HK", "target": "a i a", "kind": "reinsures"}]}))

    with StubHTTPServer(answer) as server:
        code, out, err = graph(capsys, "trace", "ACME_HK", "--edge-type", "reinsures", *files,
                               "--relation-extractor", "llm", "--llm-url", server.url + "/v1",
                               "--llm-model", "stub", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert [n["id"] for n in data["nodes"]] == ["ACME_CN"]
    [edge] = data["edges"]
    assert edge["metadata"]["derived"] == "model-derived"
    assert edge["metadata"]["verified"] == "unverified"
    bodies = b"".join(body for _m, _p, _h, body in server.requests)
    assert server.requests and CANARY.encode() not in bodies
    assert all(json.loads(body)["model"] == "stub" for _m, _p, _h, body in server.requests)
