"""The one place that knows whether we run inside Pyodide."""

from __future__ import annotations

import sys

IN_PYODIDE: bool = "_pyodide_core" in sys.modules or sys.platform == "emscripten"

__all__ = ["IN_PYODIDE"]
