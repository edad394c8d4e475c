"""A site's Pyodide standard library: trimmed to what its wheels can import, deterministic."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from ragspine_lite.bundle.stdlib import imported_names, trim_stdlib, wheel_roots

REPO = Path(__file__).resolve().parents[1]
PYODIDE_STDLIB = REPO / "node_modules" / "pyodide" / "python_stdlib.zip"

STDLIB = {
    "json/__init__.py": "from .decoder import JSONDecoder\n",
    "json/decoder.py": "import re\n",
    "re/__init__.py": "from . import _parser\n",
    "re/_parser.py": "",
    "textwrap.py": "def wrap():\n    import re\n",
    "shutil.py": "def archive():\n    import tarfile\n",
    "tarfile.py": "from gzip import (\n    GzipFile,\n)\n",
    "gzip.py": "",
    "unittest/__init__.py": "import difflib\n",
    "difflib.py": "",
    "pdb.py": "",
    "csv.py": "",
    "encodings/__init__.py": "",
    "encodings/cp1252.py": "",
    "xml/__init__.py": "",
}


def _zip(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as out:
        for name, text in files.items():
            out.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), text)
    return path


def _names(path: Path) -> set[str]:
    return set(zipfile.ZipFile(path).namelist())


def test_imported_names_reads_every_import_line_on_any_python():
    source = (
        "import os, sys as system\nfrom collections.abc import (\n    Mapping,\n)\n"
        "def f():\n    from email import utils, header\n    from . import sibling\n"
    )
    assert imported_names(source) == {
        "os", "sys", "collections.abc", "email", "email.utils", "email.header"}
    assert "pkg.sibling" in imported_names(source, "pkg")


def test_only_what_the_roots_reach_is_kept(tmp_path):
    source = _zip(tmp_path / "stdlib.zip", STDLIB)
    dest = tmp_path / "trimmed.zip"
    before, after = trim_stdlib(source, dest, {"json", "shutil", "unittest", "pdb"})
    kept = _names(dest)
    # json's package, its relative import, what that imports; function-level imports too
    assert {"json/__init__.py", "json/decoder.py", "re/__init__.py", "re/_parser.py",
            "shutil.py", "tarfile.py", "gzip.py"} <= kept
    # never reached, or never kept whoever names them (unittest, pdb)
    assert not kept & {"textwrap.py", "csv.py", "xml/__init__.py", "unittest/__init__.py",
                       "difflib.py", "pdb.py"}
    assert {"encodings/__init__.py", "encodings/cp1252.py"} <= kept  # always: codecs by name
    assert after < before


def test_the_tools_roots_keep_what_never_drops(tmp_path):
    source = _zip(tmp_path / "stdlib.zip", STDLIB)
    dest = tmp_path / "trimmed.zip"
    trim_stdlib(source, dest, {"json"}, tool_roots={"unittest", "pdb"})
    assert {"unittest/__init__.py", "difflib.py", "pdb.py"} <= _names(dest)


def test_trimming_is_deterministic(tmp_path):
    source = _zip(tmp_path / "stdlib.zip", STDLIB)
    trim_stdlib(source, tmp_path / "a.zip", {"json", "shutil"})
    trim_stdlib(source, tmp_path / "b.zip", {"shutil", "json"})
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()


def test_wheel_roots_read_the_wheels_python_sources(tmp_path):
    wheel = _zip(tmp_path / "pkg-1-py3-none-any.whl", {
        "pkg/a.py": "import json\n", "pkg/b.py": "def f():\n    import sqlite3\n",
        "pkg/data.txt": "import csv\n",
    })
    assert wheel_roots([wheel]) == {"json", "sqlite3"}


@pytest.mark.cpython_only
def test_pyodides_archive_trimmed_for_this_package(tmp_path):
    if not PYODIDE_STDLIB.is_file():
        pytest.skip("node_modules/pyodide is missing (run npm ci)")
    source = tmp_path / "stdlib.zip"
    source.write_bytes(PYODIDE_STDLIB.read_bytes())
    roots: set[str] = set()
    for path in (REPO / "ragspine_lite").rglob("*.py"):
        roots |= imported_names(path.read_text("utf-8"))
    before, after = trim_stdlib(source, tmp_path / "trimmed.zip", roots)
    kept = _names(tmp_path / "trimmed.zip")
    for needed in ("json/__init__.py", "re/__init__.py", "html/parser.py", "sqlite3/__init__.py",
                   "_pyodide/_base.py", "pyodide/ffi/__init__.py", "codeop.py", "_strptime.py"):
        assert needed in kept
    assert not any(n.startswith(("unittest/", "pdb.py", "multiprocessing/", "_pyrepl/"))
                   for n in kept)
    assert after < 0.8 * before


def test_the_sites_lock_file_keeps_pyodides_info_and_no_package(tmp_path):
    from ragspine_lite.bundle.stdlib import LOCK_NAME, write_site_lock

    source, target = tmp_path / "pyodide", tmp_path / "site"
    source.mkdir(), target.mkdir()
    info = {"abi_version": "2026_0", "arch": "wasm32", "python": "3.14.2"}
    (source / LOCK_NAME).write_text(json.dumps({"info": info, "packages": {"numpy": {}}}))
    write_site_lock(source, target)
    assert json.loads((target / LOCK_NAME).read_text()) == {"info": info, "packages": {}}
