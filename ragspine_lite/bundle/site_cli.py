"""Where the site builder's command line used to live: its names, re-exported.

The options are :mod:`ragspine_lite.cli.site` and the static server
:mod:`ragspine_lite.bundle.site_server`. ``python -m ragspine_lite.bundle.site_cli build|serve``
keeps working.
"""

from __future__ import annotations

from ragspine_lite.bundle.site_server import MIME_TYPES, BundleRequestHandler, make_server, serve
from ragspine_lite.cli.site import DEFAULT_OUT, build_main
from ragspine_lite.cli.site import SITE_PROG as PROG
from ragspine_lite.cli.site import site_main as main
from ragspine_lite.cli.site import site_parser as build_parser

__all__ = [
    "DEFAULT_OUT",
    "MIME_TYPES",
    "PROG",
    "BundleRequestHandler",
    "build_main",
    "build_parser",
    "main",
    "make_server",
    "serve",
]

if __name__ == "__main__":
    raise SystemExit(main(prog="python -m ragspine_lite.bundle.site_cli"))
