"""The RESTRICTED label and the one comparison every exit uses."""

from __future__ import annotations

__all__ = ["RESTRICTED", "is_restricted", "sends_text_off_host"]

RESTRICTED = "RESTRICTED"


def is_restricted(sensitivity: object) -> bool:
    """Exit comparison: ``str(x).upper() == "RESTRICTED"`` (case-insensitive, no strip).

    >>> is_restricted("Restricted"), is_restricted("INTERNAL")
    (True, False)
    """
    return str(sensitivity).upper() == RESTRICTED


def sends_text_off_host(component: object) -> bool:
    """True for a backend that ships the texts it is given across the trust boundary.

    Remote clients set ``sends_text_off_host = True``; callers then never hand them
    RESTRICTED text (the network exit).
    """
    return bool(getattr(component, "sends_text_off_host", False))
