"""Where a site's runtime files come from, and the wheel the browser installs.

An installed wheel carries them as package data in ``ragspine_lite/bundle/site_runtime/``
(copied in at wheel-build time by ``setup.py`` with :func:`stage_runtime`):

    web/        the JS API, worker, element, dense scan, search page and demo (from web/)
    pyodide/    the Pyodide core at the pinned :data:`PYODIDE_VERSION` (npm ``pyodide``)
    ort/        onnxruntime-web's plain WASM build (npm ``onnxruntime-web``), for hybrid sites
    wheels/     micropip's pure wheel

A source checkout without them (an editable install, ``PYTHONPATH``) uses ``web/``,
``node_modules/`` (``npm ci``) and the wheel cache instead. The browser's own
``ragspine_lite`` wheel is packed from the package being run (:func:`pack_wheel`), so no
checkout, build tool or network is needed. Stdlib only.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from ragspine_lite.common.settings import env_value

__all__ = [
    "DEMO_FILES",
    "MICROPIP_VERSION",
    "MICROPIP_WHEEL",
    "ORT_FILES",
    "ORT_MODULE",
    "PAGE_TEMPLATE",
    "PYODIDE_FILES",
    "PYODIDE_VERSION",
    "RUNTIME_FILES",
    "WORKER_MODULES",
    "BuildError",
    "copy_files",
    "find_micropip",
    "ort_version",
    "pack_wheel",
    "pyodide_versions",
    "runtime_dir",
    "sha256_file",
    "stage_runtime",
]

PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: The package data folder an installed wheel carries.
PACKAGED = Path(__file__).resolve().parent / "site_runtime"
#: The source checkout this module sits in, if it is one.
CHECKOUT = PACKAGE_DIR.parent
USER_CACHE = Path(env_value("XDG_CACHE_HOME") or Path.home() / ".cache") / "ragspine-lite"

PYODIDE_VERSION = "314.0.8"
MICROPIP_VERSION = "0.11.1"
MICROPIP_WHEEL = f"micropip-{MICROPIP_VERSION}-py3-none-any.whl"
#: The worker's modules (ragspine-worker.mjs imports them, and they each other).
WORKER_MODULES = (
    "ragspine-messages.mjs", "ragspine-files.mjs", "ragspine-boot.mjs", "ragspine-embed.mjs",
    "ragspine-query.mjs", "ragspine-documents.mjs",
)
RUNTIME_FILES = (
    "ragspine-lite.mjs", "ragspine-lite.d.ts", "ragspine-worker.mjs", *WORKER_MODULES,
    "ragspine-search.mjs", "ragspine-panel.mjs", "ragspine-dense.mjs", "ragspine-instant.mjs",
    "ragspine-i18n.mjs", "ragspine-ui.mjs", "ragspine-contract.mjs",
)
DEMO_FILES = ("index.html", "demo.mjs", "demo.css")
#: The default search page's template (written as index.html with the site's title).
PAGE_TEMPLATE = "search.html"
PYODIDE_FILES = (
    "pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip",
    "pyodide-lock.json",
)
# onnxruntime-web's plain WASM build (no WebGPU/JSEP): the ES module and its runtime.
ORT_FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
ORT_MODULE = "ort.wasm.min.mjs"
#: Files a hybrid site also ships precompressed (``NAME.gz``, and ``NAME.br`` when the
#: ``brotli`` module is importable) for hosts that serve a precompressed sibling under the
#: file's own URL (e.g. nginx ``gzip_static``/``brotli_static``); the bytes served decode to
#: the listed file, so its sha256 check is unchanged.
PRECOMPRESSED = ("ort/ort-wasm-simd-threaded.wasm", "models/minilm/model.onnx")
#: The Pyodide runtime files every site ships precompressed the same way (its standard library
#: and the wheels are zip archives, compressed already).
RUNTIME_PRECOMPRESSED = ("pyodide/pyodide.asm.wasm", "pyodide/pyodide.asm.mjs")
#: Each kind of runtime file: (packaged folder, the checkout's folder, its files).
_KINDS = {
    "web": ("web", CHECKOUT / "web", (*RUNTIME_FILES, *DEMO_FILES, PAGE_TEMPLATE)),
    "pyodide": ("pyodide", CHECKOUT / "node_modules" / "pyodide", (*PYODIDE_FILES, "package.json")),
    "ort": ("ort", CHECKOUT / "node_modules" / "onnxruntime-web" / "dist", ORT_FILES),
}
# Never packed into the browser's wheel: the sample corpus (RESTRICTED documents), this
# package data, MiniLM's vocabulary (a hybrid site ships it beside the model), SPLADE-tiny's
# weights (8.8 MB; the browser never reranks with them).
_WHEEL_SKIP = ("samples", "bundle/site_runtime", "vector/minilm", "rerank/splade_tiny")


class BuildError(Exception):
    """The build cannot go on; the message says why (exit code 1)."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(functools.partial(fh.read, 1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def runtime_dir(kind: str) -> Path:
    """The folder of ``kind``'s files (``web``, ``pyodide``, ``ort``): the package data when
    the wheel carries it, else the source checkout's (``web/``, ``node_modules/``)."""
    packaged, checkout, _ = _KINDS[kind]
    return PACKAGED / packaged if (PACKAGED / packaged).is_dir() else checkout


def compressed_siblings(data: bytes) -> dict[str, bytes]:
    """``{".gz": …}`` (deterministic: no name, mtime 0) and, with the ``brotli`` module,
    ``".br"``: the precompressed forms of ``data``."""
    import gzip

    siblings = {".gz": gzip.compress(data, compresslevel=9, mtime=0)}
    try:
        import brotli  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return siblings
    return {**siblings, ".br": brotli.compress(data)}


def write_precompressed(
    path: Path, siblings: Callable[[bytes], dict[str, bytes]] = compressed_siblings
) -> list[Path]:
    """Write ``path``'s ``.gz`` and (with ``brotli``) ``.br`` siblings; → the files written."""
    written = []
    for suffix, packed in siblings(path.read_bytes()).items():
        sibling = path.with_name(path.name + suffix)
        sibling.write_bytes(packed)
        written.append(sibling)
    return written


def copy_files(names: Sequence[str], src_dir: Path, dest_dir: Path, what: str) -> None:
    missing = [n for n in names if not (src_dir / n).is_file()]
    if missing:
        hint = " (run 'npm ci' in the repository)" if "node_modules" in str(src_dir) else ""
        raise BuildError(
            f"{what} is incomplete: {', '.join(missing)} not found in {str(src_dir)!r}{hint}"
        )
    dest_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy2(src_dir / name, dest_dir / name)


def _npm_version(folder: Path, name: str) -> str:
    for package in (folder / "package.json", folder.parent / "package.json"):
        try:
            data = json.loads(package.read_text("utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if data.get("name") == name:
            return str(data.get("version", ""))
    return ""


def pyodide_versions(pyodide_dir: Path) -> dict[str, str]:
    """``{"pyodide": ..., "python": ...}`` from the npm package and its lock file."""
    versions: dict[str, str] = {}
    if _npm_version(pyodide_dir, "pyodide"):
        versions["pyodide"] = _npm_version(pyodide_dir, "pyodide")
    lock = pyodide_dir / "pyodide-lock.json"
    if lock.is_file():
        info = json.loads(lock.read_text("utf-8")).get("info", {})
        versions["python"] = str(info.get("python", ""))
        versions.setdefault("pyodide", str(info.get("version", "")))
    return versions


def ort_version(ort_dir: Path) -> str:
    """The onnxruntime-web version from its ``package.json`` (``""`` if none)."""
    return _npm_version(ort_dir, "onnxruntime-web")


def find_micropip(explicit: Path | None = None, *, cache: Path | None = None) -> Path:
    """The micropip wheel: ``explicit``, else the package data or a cache, else
    ``pip download`` into ``cache`` (default: the checkout's ``.cache/wheels``, or the user's
    cache folder outside a checkout)."""
    if explicit is not None:
        if not explicit.is_file():
            raise BuildError(f"--micropip {str(explicit)!r} is not a file")
        return explicit
    default = CHECKOUT / ".cache" / "wheels"
    if not (CHECKOUT / "pyproject.toml").is_file():
        default = USER_CACHE / "wheels"
    cache = default if cache is None else cache
    for folder in (PACKAGED / "wheels", cache, default, CHECKOUT / ".cache" / "pyodide-wheels"):
        if (folder / MICROPIP_WHEEL).is_file():
            return folder / MICROPIP_WHEEL
    cache.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-I", "-m", "pip", "download", "-q", "--disable-pip-version-check",
         "--no-deps", "--python-version", "3.14", "--only-binary=:all:", "-d", str(cache),
         f"micropip=={MICROPIP_VERSION}"],
        capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0 or not (cache / MICROPIP_WHEEL).is_file():
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise BuildError(f"downloading micropip {MICROPIP_VERSION} (pip download) failed: {tail}")
    return cache / MICROPIP_WHEEL


def _wheel_members(package: Path) -> list[tuple[str, Path]]:
    out = []
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(package).as_posix()
        if not path.is_file() or "__pycache__" in rel or path.suffix == ".pyc":
            continue
        if any(rel == skip or rel.startswith(skip + "/") for skip in _WHEEL_SKIP):
            continue
        out.append((f"ragspine_lite/{rel}", path))
    return out


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def pack_wheel(out_dir: Path, *, package: Path = PACKAGE_DIR) -> Path:
    """The pure ``ragspine_lite`` wheel of the package being run, written to ``out_dir``.

    Its ``.py`` files and typed marker as they are (no samples, no site runtime, no model
    vocabulary); fixed timestamps, so the same code gives the same bytes.
    """
    from ragspine_lite import __version__

    dist = f"ragspine_lite-{__version__}.dist-info"
    meta = {
        f"{dist}/METADATA": (
            f"Metadata-Version: 2.1\nName: ragspine-lite\nVersion: {__version__}\n"
            "Summary: Citation-honest hybrid retrieval in pure Python\n"
            "License: Apache-2.0\nRequires-Python: >=3.11\n"
        ),
        f"{dist}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: ragspine_lite.bundle.site_files\n"
            "Root-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"ragspine_lite-{__version__}-py3-none-any.whl"
    records = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        entries = [(n, p.read_bytes()) for n, p in _wheel_members(package)]
        entries += [(n, text.encode("utf-8")) for n, text in meta.items()]
        for name, data in entries:
            archive.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data,
                             zipfile.ZIP_DEFLATED)
            records.append(_record_line(name, data))
        records.append(f"{dist}/RECORD,,")
        archive.writestr(zipfile.ZipInfo(f"{dist}/RECORD", (1980, 1, 1, 0, 0, 0)),
                         "\n".join(records) + "\n", zipfile.ZIP_DEFLATED)
    return target


def stage_runtime(dest: Path) -> list[str]:
    """Copy the checkout's runtime files into ``dest`` (the wheel's ``site_runtime/``):
    what ``setup.py`` runs at wheel-build time. The Pyodide core must be the pinned version;
    a missing npm package is skipped (the wheel then builds sites from a checkout only).
    Returns the kinds copied."""
    copied = []
    for kind, (packaged, source, names) in _KINDS.items():
        if not all((source / n).is_file() for n in names):
            continue
        if kind == "pyodide" and _npm_version(source, "pyodide") != PYODIDE_VERSION:
            raise BuildError(
                f"node_modules/pyodide is {_npm_version(source, 'pyodide')!r}, not the pinned "
                f"{PYODIDE_VERSION}: run 'npm ci'"
            )
        copy_files(names, source, dest / packaged, f"the {kind} runtime")
        if kind == "ort":
            shutil.copy2(source.parent / "package.json", dest / packaged / "package.json")
        copied.append(kind)
    try:  # the checkout's cache, else pip download into it
        wheel = find_micropip(cache=CHECKOUT / ".cache" / "wheels")
    except BuildError:
        return copied  # a site build then downloads it (pip download)
    copy_files([MICROPIP_WHEEL], wheel.parent, dest / "wheels", "micropip")
    return [*copied, "micropip"]
