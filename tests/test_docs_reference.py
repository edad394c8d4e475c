"""The docs checked against the code: the generated CLI reference, the environment table,
the relative links, and the Python examples that run as written."""

from __future__ import annotations

import importlib.util
import os
import re
import unicodedata
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpython_only  # the Pyodide lane mounts the tests, not the docs

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
ENV_NAME = re.compile(r"RAGSPINE_[A-Z0-9_]*[A-Z0-9]")
FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)


def _cli_docs():
    spec = importlib.util.spec_from_file_location("cli_docs", ROOT / "tools" / "cli_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_is_generated_from_the_parsers():
    tool = _cli_docs()
    current = tool.CLI_DOC.read_text(encoding="utf-8")
    assert tool.updated(current) == current, "run: python tools/cli_docs.py --write"


def test_the_cli_reference_names_every_command_and_option():
    from ragspine_lite.cli import build_parser

    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    tool = _cli_docs()
    for name, _, sub in tool._subcommands(build_parser()):
        assert f"### `ragspine-lite {name}`" in text
        for action in sub._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in text, (name, flag)


def _section(text: str, heading: str) -> str:
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def _names_in(paths) -> set[str]:
    return {n for p in paths for n in ENV_NAME.findall(p.read_text(encoding="utf-8"))}


@pytest.mark.parametrize(("heading", "sources"), [
    ("## The package", lambda: sorted((ROOT / "ragspine_lite").rglob("*.py"))),
    ("## The scripts", lambda: sorted((ROOT / "scripts").glob("*.sh"))),
])
def test_the_environment_table_names_exactly_the_variables_read(heading, sources):
    table = _section((DOCS / "environment.md").read_text(encoding="utf-8"), heading)
    documented = set(ENV_NAME.findall(table))
    used = _names_in(sources())
    assert used - documented == set(), "add these to docs/environment.md"
    assert documented - used == set(), "these are no longer read: drop them from the table"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = heading.strip().lower()
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"#{1,6} (.+)", line)
        if m:
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


@pytest.mark.parametrize("page", _markdown_files(), ids=lambda p: p.name)
def test_every_relative_link_points_at_a_file_and_heading(page):
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert broken == []


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300
    text = "\n".join(lines)
    assert "bash scripts/demo.sh" in text and "bash scripts/test.sh" in text
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def python_blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(encoding="utf-8"),
                      flags=re.S)


# (page, block index, a fragment the block holds): the examples that need nothing but the
# package and a working directory. The wiring section is run by test_readme_wiring.py.
EXAMPLES = [
    ("README.md", 0, "index.retrieve(\"hong kong revenue\""),
    ("docs/python-api.md", 0, "index.retrieve(\"hong kong revenue\""),
    ("docs/python-api.md", 1, "make_filter([(\"period\", \"gte\", \"2023\")])"),
    ("docs/pipeline.md", 0, "Pipeline(RRFFusion())"),
    ("docs/labels.md", 0, "sensitivity=\"SECRET\""),
    ("docs/remote.md", 0, "make_reranker(\"remote:colbert\""),
    ("docs/hybrid.md", 1, "quantization=\"int8\""),
]


@pytest.mark.parametrize(("page", "index", "fragment"), EXAMPLES,
                         ids=[f"{p}#{i}" for p, i, _ in EXAMPLES])
def test_the_docs_examples_run_as_written(page, index, fragment, tmp_path, monkeypatch, capsys):
    block = python_blocks(page)[index]
    assert fragment in block
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("RAGSPINE_")]:
        monkeypatch.delenv(name)
    exec(compile(block, f"{page}#{index}", "exec"), {"__name__": "__doc_example__"})
    out = capsys.readouterr().out
    if "print(" in block and "# [" in block:  # the block says what it prints
        assert re.search(r"# (\[.*\])", block).group(1) in out


def test_the_quickstart_finds_the_document_it_ingested(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(python_blocks("README.md")[0], {})
    assert capsys.readouterr().out.startswith("hk-2024#para1")
