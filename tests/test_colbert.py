"""maxsim: the late-interaction scoring rule."""

from __future__ import annotations

import math

from ragspine_lite.rerank.colbert import maxsim


def test_maxsim_sums_each_query_vectors_best_cosine():
    q = [[1.0, 0.0], [0.0, 2.0]]
    d = [[3.0, 0.0], [1.0, 1.0]]
    assert maxsim(q, d) == 1.0 + 1 / math.sqrt(2)


def test_maxsim_empty_or_zero_vectors_score_zero():
    assert maxsim([], [[1.0]]) == 0.0 and maxsim([[1.0]], []) == 0.0
    assert maxsim([[0.0, 0.0]], [[1.0, 0.0]]) == 0.0


def test_maxsim_is_not_symmetric():
    q, d = [[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0]]
    assert maxsim(q, d) == 2.0 and maxsim(d, q) == 1.0
