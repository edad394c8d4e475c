"""Sensitivity labels: the closed vocabulary, its one normalisation and the RESTRICTED predicate.

Labels form a closed vocabulary, least to most restrictive: ``PUBLIC``, ``INTERNAL``,
``CONFIDENTIAL``, ``RESTRICTED``. A label is read after Unicode NFKC normalisation, with
format characters (zero-width space, BOM, bidi marks …) removed, surrounding whitespace
stripped and case folded, so ``" restricted\\n"`` and ``"RESTRICTED\\u200b"`` both read as
``RESTRICTED``.

Where labels enter (files, front matter, HTML ``<meta>``, page ingest, the endpoint's wire
model) :func:`parse_sensitivity` refuses anything else with a :class:`SensitivityError` that
names the source and a short, safe description of the value (:func:`describe_value`:
its length and first characters, never the text), so nothing outside the vocabulary is
stored from a file. Every exit asks :func:`is_restricted` (Python) or
:data:`NOT_RESTRICTED_SQL` (SQL, the same function registered on every store connection by
:func:`register_sql_predicate`); it fails closed: a label outside the vocabulary (given
through the Python API, or stored by an older version) is RESTRICTED, at every exit.
"""

from __future__ import annotations

import functools
import sqlite3
import unicodedata

from ragspine_lite.common.errors import RagspineError

__all__ = [
    "NOT_RESTRICTED_SQL",
    "RESTRICTED",
    "SENSITIVITY_LABELS",
    "SQL_IS_RESTRICTED",
    "SensitivityError",
    "canonical_sensitivity",
    "describe_value",
    "effective_sensitivity",
    "is_restricted",
    "normalise_sensitivity",
    "parse_sensitivity",
    "register_sql_predicate",
    "sends_text_off_host",
    "unknown_label_message",
]

RESTRICTED = "RESTRICTED"
#: The closed vocabulary, least to most restrictive.
SENSITIVITY_LABELS: tuple[str, ...] = ("PUBLIC", "INTERNAL", "CONFIDENTIAL", RESTRICTED)
_BY_FOLDED = {label.casefold(): label for label in SENSITIVITY_LABELS}

#: Name of the SQL function :func:`register_sql_predicate` adds: :func:`is_restricted` itself.
SQL_IS_RESTRICTED = "ragspine_is_restricted"
#: SQL condition for rows of a ``sensitivity`` column that an exit may show.
NOT_RESTRICTED_SQL = f"NOT {SQL_IS_RESTRICTED}(sensitivity)"


class SensitivityError(RagspineError, ValueError):
    """A sensitivity label outside the vocabulary, malformed, or contradicting another."""


def normalise_sensitivity(value: object) -> str:
    """The one normalisation: NFKC, format characters removed, stripped, case-folded.

    >>> normalise_sensitivity(" Restricted\\u200b\\n")
    'restricted'
    """
    text = unicodedata.normalize("NFKC", str(value))
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return text.strip().casefold()


def canonical_sensitivity(value: object) -> str | None:
    """The vocabulary label ``value`` normalises to, or ``None`` if it is not one.

    >>> canonical_sensitivity("\\tinternal "), canonical_sensitivity("[RESTRICTED]")
    ('INTERNAL', None)
    """
    return None if value is None else _canonical(str(value))


@functools.lru_cache(maxsize=256)
def _canonical(value: str) -> str | None:
    return _BY_FOLDED.get(normalise_sensitivity(value))


#: How many leading characters of a bad value an error message may show.
SHOWN_CHARS = 3


def describe_value(value: object) -> str:
    """A short, safe description of a bad label for messages: its length and first
    :data:`SHOWN_CHARS` characters, never more of its text (it may be document text).

    >>> describe_value("RESTRICTED Merger codename Tiger"), describe_value("")
    ("starting 'RES' (32 characters)", "'' (empty)")
    """
    if not isinstance(value, str):
        return f"of type {type(value).__name__}"
    if len(value) <= SHOWN_CHARS:
        return f"{value!r} (empty)" if not value else f"{value!r}"
    return f"starting {value[:SHOWN_CHARS]!r} ({len(value)} characters)"


def unknown_label_message(where: str, value: object) -> str:
    """The one message for a label outside the vocabulary (names ``where``, never the text)."""
    return (
        f"{where}: sensitivity {describe_value(value)} is not a known label; "
        f"use one of {', '.join(SENSITIVITY_LABELS)}"
    )


def parse_sensitivity(value: object, *, source: str = "<label>") -> str:
    """The canonical label of ``value``; :class:`SensitivityError` naming ``source`` otherwise."""
    label = canonical_sensitivity(value)
    if label is None:
        raise SensitivityError(unknown_label_message(source, value))
    return label


def effective_sensitivity(value: object) -> str:
    """The label to act on where only the vocabulary may pass (the network): the canonical
    label, or RESTRICTED for anything else.

    >>> effective_sensitivity(" public "), effective_sensitivity("RESTRICTED.")
    ('PUBLIC', 'RESTRICTED')
    """
    return canonical_sensitivity(value) or RESTRICTED


def is_restricted(sensitivity: object) -> bool:
    """The exit predicate, fail closed: RESTRICTED unless the label normalises to another
    label of the vocabulary (so ``"SECRET"``, ``"RESTRICTED."`` or ``None`` are RESTRICTED).

    >>> is_restricted(" RESTRICTED\\n"), is_restricted("SECRET"), is_restricted("INTERNAL")
    (True, True, False)
    """
    return effective_sensitivity(sensitivity) == RESTRICTED


def register_sql_predicate(conn: sqlite3.Connection) -> None:
    """Add :data:`SQL_IS_RESTRICTED` (:func:`is_restricted`, 1 or 0) to ``conn``."""
    conn.create_function(
        SQL_IS_RESTRICTED, 1, lambda value: int(is_restricted(value)), deterministic=True
    )


def sends_text_off_host(component: object) -> bool:
    """True for a backend that ships the texts it is given across the trust boundary.

    Remote clients set ``sends_text_off_host = True``; callers then never hand them
    RESTRICTED text (the network exit).
    """
    return bool(getattr(component, "sends_text_off_host", False))
