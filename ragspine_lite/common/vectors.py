"""Vector arithmetic shared across stages (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["plain_cosine"]


def plain_cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine with plain ``sum`` (as ColBERT and the semantic chunker compute it); a zero
    vector gives ``0.0``, vectors of different lengths raise ``ValueError``.

    >>> plain_cosine([1.0, 0.0], [1.0, 1.0])
    0.7071067811865475
    """
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)
