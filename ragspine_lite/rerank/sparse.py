"""Learned-sparse scoring, pure Python: the dot product of two term-weight maps."""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["sparse_dot"]


def sparse_dot(query: Mapping[int, float], doc: Mapping[int, float]) -> float:
    """Σ over the term ids both sides share of the weight products; empty → 0.0.

    Summed in ascending term-id order with ``math.fsum`` so the result does not depend on
    dict order.

    >>> sparse_dot({1: 2.0, 5: 1.0}, {5: 3.0, 7: 4.0})
    3.0
    """
    if len(doc) < len(query):
        query, doc = doc, query
    return math.fsum(query[t] * doc[t] for t in sorted(query) if t in doc)
