"""sparse_dot: the learned-sparse scoring rule."""

from __future__ import annotations

from ragspine_lite.rerank.splade import sparse_dot


def test_sparse_dot_sums_shared_terms_only():
    assert sparse_dot({1: 2.0, 5: 1.0, 9: 4.0}, {5: 3.0, 9: 0.5, 7: 4.0}) == 5.0


def test_sparse_dot_is_symmetric_and_order_independent():
    a = {i: 0.1 * i for i in range(1, 50)}
    b = {i: 1.0 / i for i in range(49, 0, -1)}
    assert sparse_dot(a, b) == sparse_dot(b, a) == sparse_dot(dict(reversed(a.items())), b)


def test_sparse_dot_empty_is_zero():
    assert sparse_dot({}, {1: 1.0}) == 0.0 and sparse_dot({2: 1.0}, {1: 1.0}) == 0.0
