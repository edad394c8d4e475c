"""A static file server for built search sites (``ragspine-lite build-site`` output).

``serve`` serves a built folder on 127.0.0.1 with the MIME types browsers insist on (``.mjs``
→ ``text/javascript``, ``.wasm`` → ``application/wasm``; ``.onnx`` is binary), lists no
folders (a folder answers with its ``index.html`` or 404) and answers a malformed path with
400.
"""

from __future__ import annotations

import functools
import http.server
import os
from pathlib import Path
from typing import Any

from ragspine_lite.bundle.site_files import BuildError

__all__ = ["MIME_TYPES", "BundleRequestHandler", "make_server", "serve"]

MIME_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".wasm": "application/wasm",
    ".zip": "application/zip",
    ".whl": "application/zip",
    ".db": "application/octet-stream",
    ".bin": "application/octet-stream",
    ".i8": "application/octet-stream",
    ".onnx": "application/octet-stream",
    ".ts": "text/plain; charset=utf-8",
    ".map": "application/json",
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
    ".md": "text/markdown; charset=utf-8",
    "": "application/octet-stream",
}


class BundleRequestHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with browser-correct MIME types; revalidated on every load.

    A folder answers with its ``index.html``, or 404: no directory listings. A path that
    cannot name a file (a NUL byte, undecodable bytes) is a 400, never a traceback.
    """

    extensions_map = MIME_TYPES
    quiet = False

    def send_head(self) -> Any:
        try:
            return super().send_head()
        except ValueError:  # "embedded null byte", surrogates from undecodable %XX escapes
            self.send_error(400, "Bad request path")
            return None

    def list_directory(self, path: str | os.PathLike[str]) -> None:
        self.send_error(404, "File not found")
        return None

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        if not self.quiet:
            super().log_message(format, *args)


def make_server(
    directory: str | Path, *, host: str = "127.0.0.1", port: int = 0, quiet: bool = True
) -> http.server.ThreadingHTTPServer:
    """A threading HTTP server for ``directory`` (not started); ``port=0`` picks a free one."""
    root = Path(directory).resolve()
    if not root.is_dir():
        raise BuildError(f"{str(root)!r} is not a directory")
    handler = type("Handler", (BundleRequestHandler,), {"quiet": quiet})
    server = http.server.ThreadingHTTPServer(
        (host, port), functools.partial(handler, directory=str(root))
    )
    server.daemon_threads = True
    return server


def serve(
    directory: str | Path, *, host: str = "127.0.0.1", port: int = 8000, quiet: bool = False
) -> None:
    """Serve a built site, or a site with one built into a subfolder (``public/`` holding
    ``public/_search/``), until interrupted, printing the search page's URL first."""
    root = Path(directory).resolve()
    found = [root] if (root / "manifest.json").is_file() else sorted(
        m.parent for m in root.glob("*/manifest.json")
    )
    if not found:
        raise BuildError(
            f"{str(root)!r} holds no manifest.json (nor does any folder in it); build it first: "
            f"ragspine-lite build-site DOCS_DIR --out {directory}"
        )
    server = make_server(root, host=host, port=port, quiet=quiet)
    actual_host, actual_port = server.server_address[:2]
    if isinstance(actual_host, bytes):  # never for TCP; the type allows it
        actual_host = actual_host.decode()
    prefix = found[0].relative_to(root).as_posix()
    search = f"{prefix}/" if prefix != "." else ""
    print(
        f"serving {root} at http://{actual_host}:{actual_port}/{search}  (Ctrl+C to stop)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", flush=True)
    finally:
        server.server_close()
