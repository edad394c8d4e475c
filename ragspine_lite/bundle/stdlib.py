"""What a site ships of Pyodide's Python: the standard library archive trimmed to what the
site's Python can import, and the package lock file without packages.

A site's worker runs ``ragspine_lite`` (and, on request, micropip) on Pyodide, whose
``python_stdlib.zip`` holds the whole standard library (2.5 MB). :func:`trim_stdlib` keeps
the modules that code can reach: every module named by an ``import`` line of the given
sources (the browser's wheel and micropip's), what Pyodide itself and its C modules import by
name (:data:`ALWAYS`), then, transitively, every module an ``import`` line of a kept module
names, function bodies included. A package is kept with its parents. Left out whatever
names them: :data:`NEVER`, the developer tools, debuggers, the REPL, test frameworks,
process pools and mail/FTP clients that nothing in a browser worker runs.

A site loads no package of Pyodide's distribution (its wheel is installed from its own bytes),
so its ``pyodide-lock.json`` keeps only the ``info`` Pyodide checks (119 kB → 0.2 kB).

The Pyodide test lane runs the suite against an archive trimmed the same way (the test tools'
sources added to the roots). The output is deterministic: the kept entries in the archive's
order, with their own timestamps.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "ALWAYS",
    "LOCK_NAME",
    "NEVER",
    "STDLIB_NAME",
    "imported_names",
    "trim_stdlib",
    "wheel_roots",
    "write_site_lock",
    "write_site_stdlib",
]

STDLIB_NAME = "python_stdlib.zip"
LOCK_NAME = "pyodide-lock.json"
#: Modules kept whatever the roots: Pyodide's own packages, the codecs looked up by name,
#: the site/sysconfig start-up and what C code imports lazily (``time.strptime``).
ALWAYS = ("_pyodide", "pyodide", "encodings", "site", "sysconfig", "_sysconfigdata",
          "_strptime", "importlib", "zipimport")
#: Never kept (top-level names): nothing a site's worker runs needs them.
NEVER = frozenset((
    "__hello__", "__phello__", "_pyrepl", "antigravity", "bdb", "cProfile", "cmd",
    "compileall", "dbm", "doctest", "ensurepip", "ftplib", "getpass", "idlelib",
    "imaplib", "lib2to3", "mailbox", "modulefinder", "multiprocessing", "pdb", "pickletools",
    "poplib", "profile", "pstats", "pty", "py_compile", "pyclbr", "pydoc", "pydoc_data",
    "rlcompleter", "sched", "shelve", "smtplib", "symtable", "tabnanny", "this", "timeit",
    "tkinter", "trace", "tracemalloc", "tty", "turtle", "turtledemo", "unittest", "venv",
    "webbrowser", "wsgiref", "xmlrpc", "zipapp",
))


def imported_names(source: str, package: str = "") -> set[str]:
    """Every module an ``import`` line of ``source`` names, wherever it stands (``from a
    import b`` names ``a`` and ``a.b``; relative imports resolved against ``package``, left
    out without one). A line scan, the same on every Python version."""
    names: set[str] = set()
    for line in source.splitlines():
        names |= _named(line.strip(), package)
    return names


_FROM = re.compile(r"from\s+(\.*)([\w.]*)\s+import\s*\(?\s*([\w., ]*)")
_IMPORT = re.compile(r"import\s+([\w., ]+)")


def _named(text: str, package: str) -> set[str]:
    """The modules one stripped line imports (relative ones only with a ``package``)."""
    match = _FROM.match(text)
    if match:
        dots, module, members = match.groups()
        if dots:
            if not package:
                return set()
            parts = package.split(".")
            parts = parts[: len(parts) - (len(dots) - 1)]
            module = ".".join(parts + ([module] if module else []))
        members_ = {m.split()[0] for m in members.split(",") if m.split()}
        return {module, *(f"{module}.{m}" for m in members_)}
    match = _IMPORT.match(text)
    if match:
        return {part.split()[0] for part in match.group(1).split(",") if part.split()}
    return set()


def _module_name(path: str) -> str:
    name = path[: -len(".py")].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def wheel_roots(wheels: Iterable[Path]) -> set[str]:
    """The modules the Python sources inside ``wheels`` import (see :func:`imported_names`)."""
    roots: set[str] = set()
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if name.endswith(".py"):
                    roots |= imported_names(archive.read(name).decode("utf-8", "replace"))
    return roots


def _kept_modules(
    archive: zipfile.ZipFile, roots: Iterable[str], never: frozenset[str] = NEVER
) -> set[str]:
    """The archive's modules reachable from ``roots`` but ``never`` (see the module
    docstring)."""
    paths = {_module_name(n): n for n in archive.namelist() if n.endswith(".py")}
    kept: set[str] = set()
    pending = list(roots)
    while pending:
        parts = pending.pop().split(".")
        for end in range(1, len(parts) + 1):
            module = ".".join(parts[:end])
            if module in paths and module not in kept and parts[0] not in never:
                kept.add(module)
                path = paths[module]
                package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
                source = archive.read(path).decode("utf-8", "replace")
                pending.extend(imported_names(source, package))
    return {paths[m] for m in kept}


def _tops(names: Iterable[str]) -> set[str]:
    """The top-level folders of ``names`` (members at the root are not in one)."""
    return {n.split("/")[0] for n in names if "/" in n}


def trim_stdlib(
    source: Path, dest: Path, roots: Iterable[str], tool_roots: Iterable[str] = ()
) -> tuple[int, int]:
    """Write ``source`` (a ``python_stdlib.zip``) to ``dest`` with only the modules reachable
    from ``roots`` (and from ``tool_roots``, :data:`NEVER` included: the test lane's pytest),
    other members kept unless their folder lost every module; ``(bytes before, after)``."""
    with zipfile.ZipFile(source) as archive:
        modules = {_module_name(n) for n in archive.namelist() if n.endswith(".py")}
        always = {m for m in modules if m.split(".")[0].startswith(ALWAYS)}
        kept = _kept_modules(archive, {*roots, *always})
        kept |= _kept_modules(archive, tool_roots, frozenset())
        with zipfile.ZipFile(dest, "w") as out:
            dropped = _tops(n for n in archive.namelist() if n.endswith(".py")) - _tops(kept)
            for info in archive.infolist():
                name = info.filename
                if name not in kept and (name.endswith(".py") or _tops([name]) <= dropped):
                    continue
                out.writestr(info, archive.read(info), compress_type=info.compress_type)
    return source.stat().st_size, dest.stat().st_size


def write_site_stdlib(pyodide_dir: Path, target: Path, wheels: list[Path]) -> None:
    """A site's ``python_stdlib.zip``: Pyodide's, trimmed for ``wheels``' imports."""
    trim_stdlib(pyodide_dir / STDLIB_NAME, target / STDLIB_NAME, wheel_roots(wheels))


def write_site_lock(pyodide_dir: Path, target: Path) -> None:
    """A site's ``pyodide-lock.json``: Pyodide's ``info`` (its ABI is checked), no packages."""
    info = json.loads((pyodide_dir / LOCK_NAME).read_text("utf-8"))["info"]
    lock = json.dumps({"info": info, "packages": {}}, sort_keys=True)
    (target / LOCK_NAME).write_text(lock + "\n", "utf-8")


def main(argv: list[str] | None = None) -> int:
    """``python -m ragspine_lite.bundle.stdlib SOURCE DEST --roots-from WHEEL... [--tools-from
    WHEEL|DIR ...]``: trim an archive for those wheels, and for the tools' sources with
    :data:`NEVER` ignored (the test lane: ragspine_lite's wheel, then pytest's and the tests)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("source", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--roots-from", type=Path, nargs="+", default=[])
    parser.add_argument("--tools-from", type=Path, nargs="+", default=[])
    args = parser.parse_args(argv)
    tools = wheel_roots(p for p in args.tools_from if p.suffix == ".whl")
    for folder in (p for p in args.tools_from if p.is_dir()):
        for path in sorted(folder.rglob("*.py")):
            tools |= imported_names(path.read_text("utf-8", "replace"))
    before, after = trim_stdlib(args.source, args.dest, wheel_roots(args.roots_from), tools)
    print(f"python_stdlib.zip: {before:,} -> {after:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
