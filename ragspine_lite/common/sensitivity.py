"""The RESTRICTED label and the one comparison every exit uses."""

from __future__ import annotations

__all__ = ["RESTRICTED", "is_restricted"]

RESTRICTED = "RESTRICTED"


def is_restricted(sensitivity: object) -> bool:
    """Exit comparison: ``str(x).upper() == "RESTRICTED"`` (case-insensitive, no strip).

    >>> is_restricted("Restricted"), is_restricted("INTERNAL")
    (True, False)
    """
    return str(sensitivity).upper() == RESTRICTED
