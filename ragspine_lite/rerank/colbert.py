"""Late interaction scoring (ColBERT-style MaxSim), pure Python.

The model-backed late-interaction reranker runs on the remote endpoint
(``make_reranker("remote:colbert")``); this module holds the scoring rule that the
endpoint, the visual (ColPali) retriever and tests share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["maxsim"]


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)


def maxsim(
    query_vectors: Sequence[Sequence[float]], doc_vectors: Sequence[Sequence[float]]
) -> float:
    """Σ over query vectors of the best cosine to any doc vector; either side empty → 0.0.

    Plain ``sum`` (as the original's ColBERT cosines); zero vectors score 0.0.

    >>> maxsim([[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 1.0]])
    1.7071067811865475
    """
    if not query_vectors or not doc_vectors:
        return 0.0
    return sum(max(_cosine(q, d) for d in doc_vectors) for q in query_vectors)
