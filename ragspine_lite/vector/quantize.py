"""int8 vectors with exact integer scoring: the same scores and ranking everywhere.

A vector is L2-normalised, multiplied by a per-model ``scale``, rounded half-to-even and
clipped to ``[-127, 127]``; it is kept as one signed byte per dimension (25 % of float32).
The scale is *calibrated* once per model: :func:`calibrate_scale` returns
``127 / m`` where ``m`` is the largest ``|component|`` of the calibration vectors after
normalisation, so those vectors use the whole int8 range without clipping; later vectors
with a larger component saturate at ±127. The scale is stored beside the codes, so a
reader needs nothing else. Query vectors are quantised with the same scale.

Scores are dot products of integers, hence exact: :class:`Int8Matrix` computes them in pure
Python (runs in Pyodide) or, when numpy is importable, with int32 accumulation (exact:
``|dot| <= 127² · dim`` fits int32 for any ``dim`` below 133,000), and both give the same
integers. Ranking is ``(-dot, id)``; rows are kept in id order, so ties fall to the row
index. :func:`dot_to_cosine` puts a dot back on the cosine scale (``dot / scale²``), which
is what a store hands to the fusion.

>>> codec = Int8Codec(calibrate_scale([(3.0, 4.0), (1.0, 0.0)]))
>>> codec.scale, list(codec.encode((3.0, 4.0)))
(127.0, [76, 102])
>>> m = Int8Matrix(["b", "a"], [codec.encode((0.0, 1.0)), codec.encode((1.0, 0.0))], 2)
>>> m.top_k(codec.encode((0.6, 0.8)), 2, numpy=False)
[(12954, 'b'), (9652, 'a')]
>>> round(codec.cosine(12954), 4)  # the float cosine is 0.8
0.8031
"""

from __future__ import annotations

import heapq
import itertools
import math
import operator
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["INT8_MAX", "Int8Codec", "Int8Matrix", "calibrate_scale", "numpy_or_none"]

INT8_MAX = 127
_MAX_DIM = 2**31 // (INT8_MAX * INT8_MAX)  # int32 accumulation cannot overflow below this
_NUMPY_BLOCK = 8192  # rows widened to int32 at once by the numpy scan


def _unit_factor(vector: Sequence[float]) -> float:
    """``1 / ‖vector‖`` (``0.0`` for a zero vector), with an exactly rounded norm."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return 0.0 if norm == 0.0 else 1.0 / norm


def calibrate_scale(vectors: Iterable[Sequence[float]]) -> float:
    """``127 / (largest |component| of the L2-normalised vectors)``; ``127.0`` if none.

    ``127.0`` is the scale that never clips (a unit vector's components are at most 1).
    """
    largest = 0.0
    for vector in vectors:
        factor = _unit_factor(vector)
        if factor:
            largest = max(largest, max(abs(x) for x in vector) * factor)
    return INT8_MAX / largest if largest > 0.0 else float(INT8_MAX)


class Int8Codec:
    """Quantise vectors at a fixed ``scale`` (> 0, finite) and map dots back to cosines."""

    def __init__(self, scale: float) -> None:
        scale = float(scale)
        if not math.isfinite(scale) or scale <= 0.0:
            raise ValueError(f"int8 scale must be a finite number > 0, got {scale!r}")
        self.scale = scale

    def __repr__(self) -> str:
        return f"Int8Codec(scale={self.scale!r})"

    def encode(self, vector: Sequence[float]) -> bytes:
        """The int8 codes of ``vector`` (normalised first; a zero vector → all zeros)."""
        factor = _unit_factor(vector) * self.scale
        top, bottom = INT8_MAX, -INT8_MAX
        return array("b", [max(bottom, min(top, round(x * factor))) for x in vector]).tobytes()

    def cosine(self, dot: int) -> float:
        """The integer dot product of two code vectors on the cosine scale: ``dot / scale²``."""
        return dot / (self.scale * self.scale)

    def dot_threshold(self, cosine: float) -> int:
        """The largest integer dot whose :meth:`cosine` is at most ``cosine``.

        ``dot > dot_threshold(c)`` exactly when ``self.cosine(dot) > c`` (the float
        comparison a fusion floor makes), so a scan can cut on integers.

        >>> codec = Int8Codec(100.0)
        >>> codec.dot_threshold(0.3), codec.cosine(3000) > 0.3, codec.cosine(3001) > 0.3
        (3000, False, True)
        """
        if not math.isfinite(cosine):
            raise ValueError(f"a cosine threshold must be finite, got {cosine!r}")
        dot = math.floor(cosine * self.scale * self.scale)
        while self.cosine(dot + 1) <= cosine:
            dot += 1
        while self.cosine(dot) > cosine:
            dot -= 1
        return dot


def numpy_or_none() -> Any:
    """The numpy module when importable, else ``None`` (e.g. Pyodide without numpy)."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


class Int8Matrix:
    """Rows of int8 codes, sorted by id, scanned exactly by integer dot product.

    ``codes[i]`` holds ``dim`` signed bytes for ``ids[i]`` (ids unique). ``numpy=None``
    in :meth:`dots`/:meth:`top_k` uses numpy when importable; ``False`` forces pure Python,
    ``True`` requires numpy. Both give identical integers.
    """

    def __init__(self, ids: Sequence[str], codes: Sequence[bytes], dim: int) -> None:
        if not 0 < dim < _MAX_DIM:
            raise ValueError(f"int8 dimension must be in 1..{_MAX_DIM - 1}, got {dim!r}")
        if len(ids) != len(codes):
            raise ValueError(f"{len(ids)} ids but {len(codes)} code rows")
        order = sorted(range(len(ids)), key=ids.__getitem__)
        self.ids = [ids[i] for i in order]
        if len(set(self.ids)) != len(self.ids):
            raise ValueError("Int8Matrix ids must be unique")
        for i in order:
            if len(codes[i]) != dim:
                raise ValueError(f"row {ids[i]!r}: {len(codes[i])} codes != dimension {dim}")
        self.dim = dim
        self._rows = [memoryview(bytes(codes[i])).cast("b") for i in order]
        self._flat: bytes | None = None
        self._np_rows: Any = None

    @classmethod
    def from_buffer(cls, ids: Sequence[Any], flat: bytes, dim: int) -> Int8Matrix:
        """Rows ``flat[i·dim : (i+1)·dim]`` for ``ids[i]`` (ascending, unique), without copies.

        For row-major int8 blocks such as a bundle's vector shards.
        """
        if not 0 < dim < _MAX_DIM:
            raise ValueError(f"int8 dimension must be in 1..{_MAX_DIM - 1}, got {dim!r}")
        if len(flat) != len(ids) * dim:
            raise ValueError(f"{len(flat)} code bytes for {len(ids)} rows of {dim}")
        if any(a >= b for a, b in itertools.pairwise(ids)):
            raise ValueError("Int8Matrix.from_buffer ids must be ascending and unique")
        matrix = cls.__new__(cls)
        view = memoryview(flat).cast("b")
        matrix.ids, matrix.dim, matrix._flat, matrix._np_rows = list(ids), dim, flat, None
        matrix._rows = [view[i * dim : (i + 1) * dim] for i in range(len(ids))]
        return matrix

    def __len__(self) -> int:
        return len(self.ids)

    def _numpy_rows(self, np: Any) -> Any:
        """The rows as one int8 numpy matrix (built once)."""
        if self._np_rows is None:
            flat = self._flat
            if flat is None:
                flat = b"".join(row.tobytes() for row in self._rows)
            matrix = np.frombuffer(flat, dtype=np.int8).reshape(len(self._rows), self.dim)
            self._np_rows = matrix
        return self._np_rows

    def _check_query(self, query: bytes) -> memoryview:
        if len(query) != self.dim:
            raise ValueError(f"query has {len(query)} codes, matrix dimension is {self.dim}")
        return memoryview(bytes(query)).cast("b")

    def _numpy_dots(self, np: Any, query: memoryview, rows: Sequence[int] | None) -> Any:
        matrix = self._numpy_rows(np)
        if rows is not None:
            matrix = matrix[np.asarray(rows, dtype=np.intp)]
        q = np.asarray(query, dtype=np.int32)
        out = np.empty(len(matrix), dtype=np.int32)
        for start in range(0, len(matrix), _NUMPY_BLOCK):  # int32 copies of a block at a time
            out[start : start + _NUMPY_BLOCK] = (
                matrix[start : start + _NUMPY_BLOCK].astype(np.int32) @ q
            )
        return out

    def dots(
        self, query: bytes, rows: Sequence[int] | None = None, *, numpy: bool | None = None
    ) -> list[int]:
        """Exact ``query · row`` for ``rows`` (row indices; default all), as Python ints."""
        q = self._check_query(query)
        np = _pick_numpy(numpy)
        if np is None:
            mul, table = operator.mul, self._rows
            picked = range(len(table)) if rows is None else rows
            return [sum(map(mul, q, table[i])) for i in picked]
        out: list[int] = self._numpy_dots(np, q, rows).tolist()
        return out

    def above(
        self, query: bytes, threshold: int | None, *, numpy: bool | None = None
    ) -> list[tuple[int, int]]:
        """``(row, dot)`` of every row whose dot with ``query`` is ``> threshold`` (all rows
        when ``None``), in row order."""
        np = _pick_numpy(numpy)
        if np is None:
            found = enumerate(self.dots(query, numpy=False))
            if threshold is None:
                return list(found)
            return [(i, d) for i, d in found if d > threshold]
        dots = self._numpy_dots(np, self._check_query(query), None)
        keep = np.arange(len(dots)) if threshold is None else np.flatnonzero(dots > threshold)
        return list(zip(keep.tolist(), dots[keep].tolist(), strict=True))

    def top_k(
        self,
        query: bytes,
        k: int,
        rows: Sequence[int] | None = None,
        *,
        numpy: bool | None = None,
    ) -> list[tuple[int, str]]:
        """The ``k`` best ``(dot, id)`` among ``rows``, by ``(-dot, id)``.

        With numpy, only rows scoring at least the k-th best dot (ties included) reach the
        final ranking, which is the same pure-Python ``(-dot, row)`` sort either way.
        """
        picked = list(range(len(self._rows))) if rows is None else sorted(rows)
        np = _pick_numpy(numpy)
        if np is None or len(picked) <= k:
            dots = self.dots(query, picked, numpy=numpy)
        else:
            found = self._numpy_dots(np, self._check_query(query), picked)
            kth = np.partition(found, len(picked) - k)[len(picked) - k]
            keep = np.flatnonzero(found >= kth)
            dots = found[keep].tolist()
            picked = [picked[i] for i in keep.tolist()]
        best = heapq.nsmallest(k, zip((-d for d in dots), picked, strict=True))
        return [(-neg, self.ids[i]) for neg, i in best]


def _pick_numpy(numpy: bool | None) -> Any:
    if numpy is False:
        return None
    np = numpy_or_none()
    if np is None and numpy:
        raise ImportError("the numpy int8 scan needs numpy (pip install numpy)")
    return np
