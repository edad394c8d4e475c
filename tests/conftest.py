"""Shared fixtures. The Pyodide lane runs this same suite with ``-m "not cpython_only"``."""

from __future__ import annotations
