"""The search contract is declared once in Python and generated into the page's JavaScript.

``web/ragspine-contract.mjs`` and the contract block of ``web/ragspine-lite.d.ts`` must be what
``python -m ragspine_lite.bundle.contract --write`` writes from the declaration; unknown search
options are refused by Python's door and by the page's API (run by Node), each naming the bad one.
"""

from __future__ import annotations

import inspect
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ragspine_lite.bundle import contract
from ragspine_lite.bundle.options import SEARCH_DEFAULTS, SEARCH_OPTIONS, search_keywords
from ragspine_lite.bundle.runtime import BundleSearcher

# Reads the checkout's web/ (or runs Node): not in the Pyodide lane.
checkout_only = pytest.mark.cpython_only

WEB = Path(__file__).resolve().parent.parent / "web"
NODE = shutil.which("node")


@checkout_only
def test_the_generated_files_are_what_the_declaration_generates():
    for path, text in contract.generated(WEB).items():
        assert path.read_text("utf-8") == text, f"{path.name} drifted: run {contract.REGENERATE}"


@checkout_only
def test_the_check_catches_a_hand_edit_and_write_repairs_it(tmp_path, capsys):
    for name in (contract.CONTRACT_MODULE, contract.TYPINGS, contract.LITE):
        shutil.copy(WEB / name, tmp_path / name)
    module = tmp_path / contract.CONTRACT_MODULE
    module.write_text(module.read_text("utf-8").replace("DEFAULT_TOP_K = 10", "DEFAULT_TOP_K = 12"))
    typings = tmp_path / contract.TYPINGS
    typings.write_text(typings.read_text("utf-8").replace("  topK?: number;", "  topk?: number;"))
    assert contract.main(["--check", "--web", str(tmp_path)]) == 1
    assert capsys.readouterr().err.count("differs from the contract") == 2
    assert contract.main(["--write", "--web", str(tmp_path)]) == 0
    assert contract.main(["--check", "--web", str(tmp_path)]) == 0
    assert module.read_text("utf-8") == (WEB / contract.CONTRACT_MODULE).read_text("utf-8")
    assert typings.read_text("utf-8") == (WEB / contract.TYPINGS).read_text("utf-8")


def test_typings_without_the_contract_block_are_refused():
    with pytest.raises(ValueError, match="has no contract block"):
        contract.with_typings("export interface SearchOptions {}\n")


def test_the_runtime_defaults_are_the_declared_ones():
    params = inspect.signature(BundleSearcher.search).parameters
    assert {k: params[k].default for k in SEARCH_DEFAULTS} == dict(SEARCH_DEFAULTS)
    assert search_keywords({}) == dict(SEARCH_DEFAULTS)


def test_python_refuses_an_unknown_search_option_naming_it():
    with BundleSearcher() as searcher:
        searcher.ingest("x.md", "kiwi bird")
        ok = json.loads(searcher.dispatch("search", json.dumps({"query": "kiwi", "topK": 1})))
        assert [h["snippet"]["doc_id"] for h in ok["hits"]] == ["x.md"]
        bad = "unknown search option 'topk'; valid options: filters"
        with pytest.raises(ValueError, match=bad):
            searcher.dispatch("search", json.dumps({"query": "kiwi", "topk": 1}))


NODE_SCRIPT = """
const contract = await import(%(contract)s);
const { RagSpineLite, RagSpineLiteError } = await import(%(lite)s);
const posted = [];
const listeners = {};
const worker = {
  addEventListener: (type, fn) => { listeners[type] = fn; },
  postMessage: (message) => {
    posted.push(message);
    const result = message.op === "search" ? { hits: [], took_ms: 0 } : { paths: [] };
    const data = { type: "reply", id: message.id, ok: true, result };
    queueMicrotask(() => listeners.message({ data }));
  },
};
const rs = new RagSpineLite(worker, { onProgress: null, onLog: null, workerURL: "fake" });
const refused = async (run) => {
  try { await run(); return null; } catch (err) {
    return { name: err.name, message: err.message, isLite: err instanceof RagSpineLiteError };
  }
};
const out = {
  contract: Object.keys(contract).sort(),
  search: await refused(() => rs.searchDetailed("kiwi", { topk: 5 })),
  plain: await refused(() => rs.search("kiwi", { Mode: "bm25" })),
  prefetch: await refused(() => rs.prefetch("kiwi", { highlight: false })),
  postedAfterRefusals: posted.length,
};
await rs.searchDetailed("kiwi", { topK: 3, mode: undefined });
await rs.prefetch("kiwi", { filters: { language: "en" } });
out.posted = posted.map(({ op, args }) => ({ op, args }));
process.stdout.write(JSON.stringify(out));
"""


@checkout_only
def test_the_page_refuses_an_unknown_search_option_naming_it():
    if NODE is None:
        pytest.skip("node is not installed")
    script = NODE_SCRIPT % {
        "contract": json.dumps((WEB / contract.CONTRACT_MODULE).as_uri()),
        "lite": json.dumps((WEB / "ragspine-lite.mjs").as_uri()),
    }
    run = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True,
                         text=True, timeout=60, check=True)
    out = json.loads(run.stdout)
    assert "SEARCH_DEFAULTS" in out["contract"] and "FORMAT_VERSION" in out["contract"]
    assert out["search"]["message"].startswith(
        'unknown search option "topk"; valid options: filters, topK, postprocess, highlight')
    assert 'unknown search option "highlight"; valid options: mode, filters, topK' == \
        out["prefetch"]["message"]
    for case, bad in (("search", "topk"), ("plain", "Mode"), ("prefetch", "highlight")):
        assert out[case]["isLite"] and out[case]["name"] == "RagSpineLiteError", case
        assert f'unknown search option "{bad}"' in out[case]["message"], case
    assert out["postedAfterRefusals"] == 0  # nothing reached the worker
    defaults = {o.name: o.default for o in SEARCH_OPTIONS}
    assert out["posted"] == [
        {"op": "search", "args": {"query": "kiwi", **defaults, "topK": 3}},
        {"op": "prefetch", "args": {"query": "kiwi", "mode": None,
                                    "filters": {"language": "en"}, "topK": defaults["topK"]}},
    ]
