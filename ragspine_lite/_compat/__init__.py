"""The one place that knows whether we run inside Pyodide."""

from __future__ import annotations

import sys
from typing import Any

IN_PYODIDE: bool = "_pyodide_core" in sys.modules or sys.platform == "emscripten"

__all__ = ["IN_PYODIDE", "await_js"]


def await_js(promise: Any) -> tuple[bool, Any]:
    """``(True, value)`` of a JavaScript promise, awaited from synchronous Python when this
    runtime can (Pyodide with JSPI: ``run_sync``); ``(False, None)`` when it cannot."""
    if not IN_PYODIDE:
        return False, None
    from pyodide import ffi

    can = getattr(ffi, "can_run_sync", None)
    if can is None or not can():
        return False, None
    return True, ffi.run_sync(promise)
