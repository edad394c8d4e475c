"""ragspine_lite: citation-honest hybrid retrieval in pure Python (CPython and Pyodide)."""

__version__ = "0.1.0"
