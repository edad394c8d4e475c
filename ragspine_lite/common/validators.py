"""The package's one set of value checks: positive integer, positive number, port, choice, URL.

Each check takes what it is given (a value or, from a command line or the environment, its
text) and returns it typed, or raises ``ValueError`` naming ``name`` and the bad value.
:func:`arg_type` makes a check an ``argparse`` type.

>>> positive_int(3, "top_k"), parse("port", "8080", "--port")
(3, 8080)
>>> positive_int(0, "top_k")
Traceback (most recent call last):
ValueError: top_k must be an int >= 1, got 0
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "KINDS",
    "arg_type",
    "check",
    "choice",
    "parse",
    "positive_float",
    "positive_int",
    "url",
]

#: kind → (type the text is read as, test of the typed value, what a typed value must be).
KINDS: dict[str, tuple[type, Callable[[Any], bool], str]] = {
    "positive integer": (int, lambda v: v >= 1, "an int >= 1"),
    "non-negative integer": (int, lambda v: v >= 0, "an int >= 0"),
    "positive number": (float, lambda v: math.isfinite(v) and v > 0, "a positive number"),
    "port": (int, lambda v: 0 <= v <= 65535, "an int in [0, 65535]"),
}


def check(kind: str, value: Any, name: str, *, optional: bool = False) -> Any:
    """``value`` when it is of ``kind`` (:data:`KINDS`; ``None`` too when ``optional``)."""
    if value is None and optional:
        return None
    typ, test, what = KINDS[kind]
    numeric = (int, float) if typ is float else int
    if isinstance(value, bool) or not isinstance(value, numeric) or not test(value):
        raise ValueError(f"{name} must be {what}{' or None' if optional else ''}, got {value!r}")
    return typ(value)


def parse(kind: str, text: str, name: str, *, shown: str | None = None) -> Any:
    """``text`` read as a value of ``kind``; the error names ``name`` and shows ``shown``
    (default ``repr(text)``; pass a description for a secret)."""
    typ, test, _what = KINDS[kind]
    try:
        value = typ(str(text).strip())
    except ValueError:
        value = None
    if value is None or not test(value):
        raise ValueError(f"{name}: expected a {kind}, got {shown or repr(text)}")
    return value


def positive_int(value: Any, name: str, *, optional: bool = False) -> Any:
    """An int >= 1 (not a bool), or ``None`` when ``optional``."""
    return check("positive integer", value, name, optional=optional)


def positive_float(value: Any, name: str) -> float:
    """A finite number > 0, as a float."""
    return float(check("positive number", value, name))


def choice(text: str, name: str, choices: Iterable[str]) -> str:
    """``text`` (stripped, lower case) when it is one of ``choices``."""
    options = tuple(choices)
    key = str(text).strip().lower()
    if key not in options:
        raise ValueError(f"{name}: expected one of {', '.join(options)}, got {text!r}")
    return key


def url(text: str, name: str) -> str:
    """An ``http(s)://host...`` URL (stripped); the error never shows the value (it may hold
    credentials), only its shape."""
    value = str(text).strip()
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        shape = f"{parts.scheme}:// URL" if parts.scheme else f"{len(value)}-character text"
        raise ValueError(f"{name}: expected an http(s):// URL, got a {shape}")
    return value


def arg_type(kind: str) -> Callable[[str], Any]:
    """An ``argparse`` type reading :data:`KINDS` ``kind`` (``expected a …, got '…'``)."""

    def read(text: str) -> Any:
        try:
            return parse(kind, text, "value")
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind}, got {text!r}") from None

    read.__name__ = kind.replace(" ", "_").replace("-", "_")
    return read
