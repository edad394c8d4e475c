"""int8 quantisation and the exact integer scan: pure Python and numpy agree bit for bit."""

from __future__ import annotations

import doctest
import math
import random

import pytest

from ragspine_lite.vector import quantize
from ragspine_lite.vector.quantize import Int8Codec, Int8Matrix, calibrate_scale, numpy_or_none

needs_numpy = pytest.mark.skipif(numpy_or_none() is None, reason="numpy not importable")


def signed(codes: bytes) -> list[int]:
    return [b - 256 if b > 127 else b for b in codes]


def gaussian_rows(n: int, dim: int, seed: int) -> list[list[float]]:
    rnd = random.Random(seed)
    return [[rnd.gauss(0.0, 1.0) for _ in range(dim)] for _ in range(n)]


def test_doctests() -> None:
    assert doctest.testmod(quantize).failed == 0


def test_calibrate_scale_uses_the_largest_normalised_component() -> None:
    assert calibrate_scale([(0.0, 2.0), (3.0, -4.0)]) == 127.0  # (0, 1) after normalising
    assert calibrate_scale([(3.0, -4.0)]) == 127 / 0.8
    assert calibrate_scale([]) == 127.0
    assert calibrate_scale([(0.0, 0.0)]) == 127.0


def test_encode_normalises_rounds_half_even_and_clips() -> None:
    codec = Int8Codec(127.0)
    assert signed(codec.encode((3.0, -4.0))) == [76, -102]  # 76.2, -101.6
    assert codec.encode((30.0, -40.0)) == codec.encode((3.0, -4.0))
    assert signed(Int8Codec(5.0).encode((0.5, 0.5, 0.5, 0.5))) == [2, 2, 2, 2]  # 2.5 → 2
    assert signed(Int8Codec(7.0).encode((0.5, 0.5, 0.5, 0.5))) == [4, 4, 4, 4]  # 3.5 → 4
    assert signed(Int8Codec(1000.0).encode((1.0, -1.0, 0.01))) == [127, -127, 7]
    assert Int8Codec(300.0).encode((0.0, 0.0, 0.0)) == bytes(3)


@pytest.mark.parametrize("scale", [0.0, -1.0, math.inf, math.nan])
def test_codec_rejects_a_bad_scale(scale: float) -> None:
    with pytest.raises(ValueError, match="int8 scale"):
        Int8Codec(scale)


def test_cosine_is_the_dot_over_scale_squared_and_close_to_float_cosine() -> None:
    rows = gaussian_rows(40, 64, seed=3)
    codec = Int8Codec(calibrate_scale(rows))
    query = rows[0]
    qn = math.sqrt(math.fsum(x * x for x in query))
    q = signed(codec.encode(query))
    for row in rows:
        dot = sum(a * b for a, b in zip(q, signed(codec.encode(row)), strict=True))
        assert codec.cosine(dot) == dot / (codec.scale * codec.scale)
        rn = math.sqrt(math.fsum(x * x for x in row))
        exact = math.fsum(a * b for a, b in zip(query, row, strict=True)) / (qn * rn)
        assert abs(codec.cosine(dot) - exact) < 0.02


def test_pure_scan_is_the_integer_dot_product_ranked_by_dot_then_id() -> None:
    rows = gaussian_rows(60, 16, seed=5)
    codec = Int8Codec(calibrate_scale(rows))
    ids = [f"r{i:02d}" for i in range(60)]
    codes = [codec.encode(r) for r in rows]
    matrix = Int8Matrix(ids[::-1], codes[::-1], 16)  # given out of order
    query = codec.encode(rows[7])
    q = signed(query)
    want = sorted(
        (
            (sum(a * b for a, b in zip(q, signed(c), strict=True)), rid)
            for rid, c in zip(ids, codes, strict=True)
        ),
        key=lambda t: (-t[0], t[1]),
    )
    assert matrix.top_k(query, 60, numpy=False) == want
    assert matrix.top_k(query, 5, numpy=False) == want[:5]
    assert matrix.top_k(query, 5, numpy=False)[0][1] == "r07"


def tied_matrix() -> tuple[Int8Matrix, bytes]:
    rnd = random.Random(11)
    dim = 24
    base = [bytes(rnd.randrange(256) for _ in range(dim)) for _ in range(30)]
    ids = [f"id{rnd.randrange(10**6):06d}-{i}" for i in range(120)]
    codes = [base[i % 30] for i in range(120)]  # every score is shared by four ids
    codes[5] = bytes([0x81] * dim)  # -127 everywhere: the extreme values
    codes[6] = bytes([0x7F] * dim)
    return Int8Matrix(ids, codes, dim), bytes([0x7F] * (dim // 2) + [0x81] * (dim // 2))


@needs_numpy
def test_numpy_and_pure_scans_agree_bit_for_bit_including_ties() -> None:
    matrix, query = tied_matrix()
    pure = matrix.top_k(query, len(matrix), numpy=False)
    assert len({d for d, _ in pure}) < len(pure)  # ties really occur
    assert matrix.top_k(query, len(matrix), numpy=True) == pure
    assert matrix.top_k(query, 7, numpy=True) == pure[:7]
    assert matrix.dots(query, numpy=True) == matrix.dots(query, numpy=False)
    assert all(type(d) is int for d in matrix.dots(query, numpy=True))
    subset = [90, 3, 64, 5, 6, 17]
    assert matrix.top_k(query, 4, subset, numpy=True) == matrix.top_k(query, 4, subset, numpy=False)


@needs_numpy
def test_numpy_and_pure_scans_agree_on_calibrated_gaussian_vectors() -> None:
    rows = gaussian_rows(300, 48, seed=9)
    codec = Int8Codec(calibrate_scale(rows[:50]))  # later rows may saturate
    matrix = Int8Matrix([f"d{i}" for i in range(300)], [codec.encode(r) for r in rows], 48)
    for q in rows[:5]:
        query = codec.encode(q)
        assert matrix.top_k(query, 10, numpy=True) == matrix.top_k(query, 10, numpy=False)


def test_numpy_required_but_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quantize, "numpy_or_none", lambda: None)
    matrix, query = tied_matrix()
    with pytest.raises(ImportError, match="numpy"):
        matrix.dots(query, numpy=True)
    assert matrix.dots(query) == matrix.dots(query, numpy=False)  # auto falls back


def test_matrix_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="dimension"):
        Int8Matrix(["a"], [b"\x01\x02"], 3)
    with pytest.raises(ValueError, match="unique"):
        Int8Matrix(["a", "a"], [b"\x01", b"\x02"], 1)
    with pytest.raises(ValueError, match="2 ids but 1"):
        Int8Matrix(["a", "b"], [b"\x01"], 1)
    with pytest.raises(ValueError, match="query has 2 codes"):
        Int8Matrix(["a"], [b"\x01"], 1).top_k(b"\x01\x02", 1)


def test_dot_threshold_cuts_exactly_where_the_float_cosine_passes_the_floor() -> None:
    rnd = random.Random(4)
    for scale in (127.0, 127 / 0.31, 250.3, calibrate_scale(gaussian_rows(5, 8, seed=1))):
        codec = Int8Codec(scale)
        for floor in (-0.2, 0.0, 0.1, 0.3, 0.45, 0.999, *(rnd.uniform(-1, 1) for _ in range(30))):
            t = codec.dot_threshold(floor)
            assert codec.cosine(t) <= floor < codec.cosine(t + 1)
    with pytest.raises(ValueError, match="finite"):
        Int8Codec(127.0).dot_threshold(math.nan)


def flat_rows(n: int, dim: int, seed: int) -> bytes:
    rnd = random.Random(seed)
    return bytes(rnd.randrange(256) for _ in range(n * dim))


@pytest.mark.parametrize("numpy", [False, pytest.param(True, marks=needs_numpy)])
def test_from_buffer_and_above_are_the_exact_dots_over_a_threshold(numpy: bool) -> None:
    dim, flat = 12, flat_rows(50, 12, seed=2)
    matrix = Int8Matrix.from_buffer(range(50), flat, dim)
    rows = [signed(flat[i * dim : (i + 1) * dim]) for i in range(50)]
    query = flat_rows(1, dim, seed=3)
    q = signed(query)
    want = [sum(a * b for a, b in zip(q, r, strict=True)) for r in rows]
    assert matrix.dots(query, numpy=numpy) == want
    assert matrix.above(query, None, numpy=numpy) == list(enumerate(want))
    cut = sorted(want)[35]
    assert matrix.above(query, cut, numpy=numpy) == [(i, d) for i, d in enumerate(want) if d > cut]
    assert all(type(i) is int and type(d) is int for i, d in matrix.above(query, cut, numpy=numpy))


def test_from_buffer_checks_its_shape_and_ids() -> None:
    with pytest.raises(ValueError, match="7 code bytes for 2 rows of 3"):
        Int8Matrix.from_buffer([0, 1], bytes(7), 3)
    with pytest.raises(ValueError, match="ascending"):
        Int8Matrix.from_buffer([1, 0], bytes(6), 3)
