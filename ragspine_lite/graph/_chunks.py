"""Duck-typed chunk reads shared by the relation graph and the relation extractors."""

from __future__ import annotations

from ragspine_lite.common.sensitivity import RESTRICTED, SENSITIVITY_LABELS, effective_sensitivity

_RANK = {label: rank for rank, label in enumerate(SENSITIVITY_LABELS)}


def chunk_field(chunk: object, name: str) -> str:
    """``str(chunk.<name>)`` stripped, ``""`` when absent or ``None``."""
    value = getattr(chunk, name, None)
    return "" if value is None else str(value).strip()


def chunk_sensitivity(chunk: object) -> str:
    """The chunk's canonical label; blank, absent or outside the vocabulary → RESTRICTED
    (fail closed, the project's one rule)."""
    return effective_sensitivity(chunk_field(chunk, "sensitivity"))


def chunk_is_restricted(chunk: object) -> bool:
    return chunk_sensitivity(chunk) == RESTRICTED


def most_restrictive(labels: list[str]) -> str:
    """The most restrictive of canonical ``labels`` (INTERNAL for none)."""
    return max(labels or ["INTERNAL"], key=lambda label: _RANK.get(label, _RANK[RESTRICTED]))
