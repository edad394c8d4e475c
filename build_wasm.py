#!/usr/bin/env python3
"""Build and serve static search sites from a checkout: ``python build_wasm.py build|serve``.

A thin entry over the package (``ragspine_lite.bundle.site``, ``site_files``, ``site_server``
and the options in ``ragspine_lite.cli.site``);
an installed wheel does the same with ``ragspine-lite build-site``. The names below are
re-exported for the scripts and tests that load this file.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ragspine_lite.bundle.site import (  # noqa: F401
    EMBED_ONNX_INSTALL,
    ORT_DIR,
    PYODIDE_DIR,
    WEB_DIR,
    ProgressBar,
    build_site,
    clean_stale_scratch,
    copy_model,
    make_embedding_backend,
    render_search_page,
    scratch_dir,
)
from ragspine_lite.bundle.site_files import (  # noqa: F401
    DEMO_FILES,
    ORT_FILES,
    ORT_MODULE,
    RUNTIME_FILES,
    BuildError,
    find_micropip,
    pack_wheel,
)
from ragspine_lite.bundle.site_server import (  # noqa: F401
    MIME_TYPES,
    BundleRequestHandler,
    make_server,
    serve,
)
from ragspine_lite.cli.site import build_main  # noqa: F401
from ragspine_lite.cli.site import site_main as main
from ragspine_lite.cli.site import site_parser as build_parser  # noqa: F401

if __name__ == "__main__":
    raise SystemExit(main())
