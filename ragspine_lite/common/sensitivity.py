"""Sensitivity labels: the closed vocabulary, its one normalisation and the RESTRICTED predicate.

Labels form a closed vocabulary, least to most restrictive: ``PUBLIC``, ``INTERNAL``,
``CONFIDENTIAL``, ``RESTRICTED``. A label is read after Unicode NFKC normalisation, with
format characters (zero-width space, BOM, bidi marks …) removed, surrounding whitespace
stripped and case folded, so ``" restricted\\n"`` and ``"RESTRICTED\\u200b"`` both read as
``RESTRICTED``.

Where labels enter (files, front matter, HTML ``<meta>``, page ingest, the endpoint's wire
model) :func:`parse_sensitivity` refuses anything else with a :class:`SensitivityError` that
names the source and the value. At the exits, :func:`is_restricted` fails closed: a label
outside the vocabulary reads as RESTRICTED, never as something less restrictive.
:data:`OPEN_LABELS_SQL` is the same predicate for SQL over a ``sensitivity`` column.
"""

from __future__ import annotations

import functools
import unicodedata

from ragspine_lite.common.errors import RagspineError

__all__ = [
    "OPEN_LABELS_SQL",
    "RESTRICTED",
    "SENSITIVITY_LABELS",
    "SensitivityError",
    "canonical_sensitivity",
    "effective_sensitivity",
    "is_restricted",
    "normalise_sensitivity",
    "parse_sensitivity",
    "sends_text_off_host",
]

RESTRICTED = "RESTRICTED"
#: The closed vocabulary, least to most restrictive.
SENSITIVITY_LABELS: tuple[str, ...] = ("PUBLIC", "INTERNAL", "CONFIDENTIAL", RESTRICTED)
_BY_FOLDED = {label.casefold(): label for label in SENSITIVITY_LABELS}
_OPEN = tuple(label for label in SENSITIVITY_LABELS if label != RESTRICTED)

#: SQL condition true for rows whose ``sensitivity`` is an open label. Stored labels are
#: canonical (normalised on write); rows written before that are matched after ASCII
#: whitespace trimming and upper-casing, and anything else fails closed (reads as RESTRICTED).
OPEN_LABELS_SQL = (
    "UPPER(TRIM(sensitivity, ' ' || char(9, 10, 11, 12, 13))) IN ("
    + ", ".join(f"'{label}'" for label in _OPEN)
    + ")"
)


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
    if value is None:
        return None
    return _canonical(str(value))


@functools.lru_cache(maxsize=256)
def _canonical(value: str) -> str | None:
    return _BY_FOLDED.get(normalise_sensitivity(value))


def effective_sensitivity(value: object) -> str:
    """The label an exit acts on: the canonical label, or RESTRICTED for anything else.

    >>> effective_sensitivity(" public "), effective_sensitivity("RESTRICTED.")
    ('PUBLIC', 'RESTRICTED')
    """
    return canonical_sensitivity(value) or RESTRICTED


def parse_sensitivity(value: object, *, source: str = "<label>") -> str:
    """The canonical label of ``value``; :class:`SensitivityError` naming ``source`` otherwise."""
    label = canonical_sensitivity(value)
    if label is None:
        raise SensitivityError(
            f"{source}: sensitivity {value!r} is not a known label; "
            f"use one of {', '.join(SENSITIVITY_LABELS)}"
        )
    return label


def is_restricted(sensitivity: object) -> bool:
    """The exit predicate: RESTRICTED after normalisation, or not a label at all (fail closed).

    >>> is_restricted(" RESTRICTED\\n"), is_restricted("\\tRestricted"), is_restricted("INTERNAL")
    (True, True, False)
    >>> is_restricted("SECRET"), is_restricted("")
    (True, True)
    """
    return effective_sensitivity(sensitivity) == RESTRICTED


def sends_text_off_host(component: object) -> bool:
    """True for a backend that ships the texts it is given across the trust boundary.

    Remote clients set ``sends_text_off_host = True``; callers then never hand them
    RESTRICTED text (the network exit).
    """
    return bool(getattr(component, "sends_text_off_host", False))
