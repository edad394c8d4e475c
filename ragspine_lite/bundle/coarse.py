"""Vectors by need: an IVF layout of a bundle's int8 chunk vectors, probed then rescored exactly.

A large bundle groups its chunk vectors into *lists* at build time: spherical k-means over the
int8 codes (:func:`build_lists`, fixed seed, integer dot products, ties to the lower list) gives
``nlist`` int8 centroids (``data/vectors/v-<hash16>.i8``, read whole, the worker fetches it with
the model) and one file per list (``data/lists/v-<hash16>.i8``: the list's docnos as ascending
little-endian uint32, then their codes, row-major). A query's int8 codes are dotted with every
centroid; the ``probe`` best lists (by ``(-dot, list)``) are read and their rows scored exactly,
the same integers as the exact scan gives them. Rows outside those lists are not seen: that is
the approximation (measured in ``docs/hybrid.md``). ``dots`` of given rows stay exact: it reads
the docno → list map (``data/lists/v-<hash16>.i8`` too: a little-endian uint16 per docno) and
the lists it needs.

Every step is integer arithmetic, so numpy and pure Python build the same lists and every
scanner (:class:`CoarseScanner` here, ``CoarseScanner`` in ``web/ragspine-dense.mjs``) returns
the same ``(docno, dot)`` pairs. Bundles below :data:`COARSE_MIN_ROWS` vectors keep the exact
layout (:func:`~ragspine_lite.bundle.dense.write_vector_shards`).
"""

from __future__ import annotations

import math
import random
from array import array
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragspine_lite.bundle.dense import (
    DenseScanner,
    ShardScanner,
    stored_codes,
    write_vector_shards,
)
from ragspine_lite.bundle.manifest import BundleFormatError
from ragspine_lite.bundle.packs import BundleFiles, read_checked
from ragspine_lite.vector.quantize import Int8Codec, Int8Matrix, numpy_or_none

__all__ = [
    "COARSE_MIN_ROWS",
    "COARSE_SEED",
    "CoarseScanner",
    "build_lists",
    "list_count",
    "open_scanner",
    "probe_count",
    "write_vectors",
]

#: Vectors from which a bundle gets the coarse layout (below it, the exact scan reads them all).
COARSE_MIN_ROWS = 20_000
#: Seed of the k-means initialisation and training sample.
COARSE_SEED = 20240531
KMEANS_ROUNDS = 10
TRAIN_PER_LIST = 64  # training rows per list (all rows when fewer)
_NO_LIST = 0xFFFF  # the docno → list map's value for a row without a vector


def list_count(rows: int) -> int:
    """Lists for ``rows`` vectors: about ``4·√rows`` (rows of ~``√rows / 4``), at most 65,534."""
    return max(1, min(_NO_LIST - 1, round(4 * math.sqrt(rows))))


def probe_count(lists: int) -> int:
    """Lists a query reads by default: about 6 % of them, at least 4 (``docs/hybrid.md``: on
    the developer set's real vectors, hybrid recall@10 0.988 against the exact scan)."""
    return min(lists, max(4, round(0.06 * lists)))


def _dots_fn(codes: bytes, dim: int, numpy: bool | None) -> Callable[[bytes, int], list[int]]:
    """``best(centroid_codes, k)``: each row's best centroid (lowest index on ties)."""
    rows = len(codes) // dim
    np = None if numpy is False else numpy_or_none()
    if np is None:
        matrix = Int8Matrix.from_buffer(range(rows), codes, dim)

        def best_pure(centroids: bytes, k: int) -> list[int]:
            cents = Int8Matrix.from_buffer(range(k), centroids, dim)
            out = []
            for r in range(rows):
                dots = cents.dots(matrix._rows[r].tobytes(), numpy=False)
                out.append(max(range(k), key=lambda j: (dots[j], -j)))
            return out

        return best_pure
    # int8 · int8 products summed in float32 stay exact integers below 2**24 (dim <= 1040).
    kind = np.float32 if dim <= 1040 else np.float64
    matrix = np.frombuffer(codes, dtype=np.int8).reshape(rows, dim).astype(kind)

    def best_numpy(centroids: bytes, k: int) -> list[int]:
        cents = np.frombuffer(centroids, dtype=np.int8).reshape(k, dim).astype(kind).T
        out = np.empty(rows, dtype=np.int64)
        for start in range(0, rows, 4096):
            out[start : start + 4096] = (matrix[start : start + 4096] @ cents).argmax(axis=1)
        result: list[int] = out.tolist()
        return result

    return best_numpy


def _sums(
    codes: bytes, dim: int, assign: Sequence[int], k: int, numpy: bool | None
) -> list[list[int]]:
    """Per list, the integer sum of its rows' codes."""
    np = None if numpy is False else numpy_or_none()
    if np is not None:
        matrix = np.frombuffer(codes, dtype=np.int8).reshape(len(assign), dim)
        out = np.zeros((k, dim), dtype=np.int64)
        labels = np.asarray(assign, dtype=np.int64)
        order = np.argsort(labels, kind="stable")
        present, starts = np.unique(labels[order], return_index=True)
        if len(order):
            out[present] = np.add.reduceat(matrix[order].astype(np.int64), starts, axis=0)
        result: list[list[int]] = out.tolist()
        return result
    sums = [[0] * dim for _ in range(k)]
    view = memoryview(codes).cast("b")
    for r, j in enumerate(assign):
        total, row = sums[j], view[r * dim : (r + 1) * dim]
        for i in range(dim):
            total[i] += row[i]
    return sums


def build_lists(
    codes: bytes, dim: int, nlist: int, codec: Int8Codec, *, numpy: bool | None = None
) -> tuple[bytes, list[int]]:
    """Spherical k-means over row-major int8 ``codes``: → (centroid codes, list of each row).

    Initial centroids are ``nlist`` distinct rows in a :data:`COARSE_SEED` shuffle; each round
    assigns up to ``TRAIN_PER_LIST · nlist`` rows of that shuffle to their best centroid and
    re-encodes each list's mean with ``codec`` (an empty list keeps its centroid); the last
    assignment covers every row. Integer dots everywhere: numpy or not, the same result.
    """
    rows = len(codes) // dim
    order = list(range(rows))
    random.Random(COARSE_SEED).shuffle(order)
    view = memoryview(codes)
    picked: dict[bytes, None] = {}
    for r in order:
        picked.setdefault(bytes(view[r * dim : (r + 1) * dim]))
        if len(picked) == nlist:
            break
    centroids = list(picked)
    train = sorted(order[: TRAIN_PER_LIST * len(centroids)])
    sample = b"".join(view[r * dim : (r + 1) * dim] for r in train)
    best = _dots_fn(sample, dim, numpy)
    for _ in range(KMEANS_ROUNDS):
        assign = best(b"".join(centroids), len(centroids))
        sums = _sums(sample, dim, assign, len(centroids), numpy)
        counts = [0] * len(centroids)
        for j in assign:
            counts[j] += 1
        updated = [codec.encode([float(x) for x in sums[j]]) if counts[j] else c
                   for j, c in enumerate(centroids)]
        if updated == centroids:
            break
        centroids = updated
    flat = b"".join(centroids)
    return flat, _dots_fn(codes, dim, numpy)(flat, len(centroids))


def write_vectors(
    db_path: Any,
    chunk_ids: Sequence[str],
    write: Callable[[str, bytes], str],
    *,
    model_id: str,
    min_rows: int | None = None,
    numpy: bool | None = None,
) -> dict[str, Any]:
    """The header's ``vectors`` entry: exact shards, or from ``min_rows`` vectors (default
    :data:`COARSE_MIN_ROWS`) the coarse layout. ``write(folder, data)`` stores one file
    (``<folder>/v-<hash16>.i8``) and returns its path."""
    codec, dim, flat, missing = stored_codes(db_path, chunk_ids, model_id)
    if len(chunk_ids) - len(missing) < (COARSE_MIN_ROWS if min_rows is None else min_rows):
        return write_vector_shards(
            db_path, chunk_ids, lambda data: write("data/vectors", data), model_id=model_id
        )
    gone = set(missing)
    docnos = [d for d in range(len(chunk_ids)) if d not in gone]
    view = memoryview(flat)
    codes = b"".join(view[d * dim : (d + 1) * dim] for d in docnos)
    centroids, assign = build_lists(codes, dim, list_count(len(docnos)), codec, numpy=numpy)
    nlist = len(centroids) // dim
    members: list[list[int]] = [[] for _ in range(nlist)]
    owner = array("H", [_NO_LIST]) * len(chunk_ids)
    for docno, j in zip(docnos, assign, strict=True):
        members[j].append(docno)
        owner[docno] = j
    lists = []
    for rows in members:
        head = array("I", rows)
        if head.itemsize != 4 or array("H", [1]).tobytes() != b"\x01\x00":
            raise RuntimeError("the coarse layout needs 4-byte little-endian unsigned ints")
        body = b"".join(view[d * dim : (d + 1) * dim] for d in rows)
        lists.append([len(rows), write("data/lists", head.tobytes() + body) if rows else ""])
    return {
        "model_id": model_id,
        "dim": dim,
        "scale": codec.scale,
        "missing": missing,
        "rows": len(chunk_ids),
        "centroids": write("data/vectors", centroids),
        "probe": probe_count(nlist),
        "lists": lists,
        "assign": write("data/lists", owner.tobytes()),
    }


def _check_coarse(entry: Mapping[str, Any]) -> tuple[int, int, list[tuple[int, str]]]:
    """``(dim, probe, lists)`` of a coarse ``vectors`` entry."""
    try:
        dim, probe = int(entry["dim"]), int(entry["probe"])
        lists = [(int(n), str(p)) for n, p in entry["lists"]]
        str(entry["centroids"]), str(entry["assign"]), int(entry["rows"])
        Int8Codec(entry["scale"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleFormatError(f"the bundle's vectors entry is malformed: {exc}") from None
    if not 1 <= probe <= len(lists) or any(n < 0 or (n and not p) for n, p in lists):
        raise BundleFormatError(f"the bundle's coarse vectors entry is malformed (probe {probe})")
    return dim, probe, lists


class CoarseScanner:
    """A :class:`~ragspine_lite.bundle.dense.DenseScanner` over a coarse ``vectors`` entry.

    ``scan`` reads the centroids (once) and the ``probe`` best lists of the query (each
    once, kept); ``probe`` overrides the entry's (its number of lists: the exact scan).
    ``numpy`` as in :meth:`Int8Matrix.dots`. ``read`` lists the paths read, in order.
    """

    def __init__(
        self,
        files: BundleFiles,
        entry: Mapping[str, Any],
        *,
        probe: int | None = None,
        numpy: bool | None = None,
    ) -> None:
        self.dim, self.probe, self._lists = _check_coarse(entry)
        if probe is not None:
            self.probe = max(1, min(len(self._lists), int(probe)))
        self._entry, self._files, self._numpy = entry, files, numpy
        self._centroids: Int8Matrix | None = None
        self._loaded: dict[int, Int8Matrix] = {}
        self._owner: array | None = None  # type: ignore[type-arg]
        self._where: dict[int, tuple[int, int]] = {}  # docno → (list, row) of the lists read

    def _read(self, path: str) -> bytes:
        return read_checked(self._files, path)

    def probed(self, query: bytes) -> list[int]:
        """The lists a scan of ``query`` reads, best first by ``(-dot, list)``."""
        if self._centroids is None:
            flat = self._read(str(self._entry["centroids"]))
            if len(flat) != len(self._lists) * self.dim:
                raise BundleFormatError("the coarse centroids do not match the lists: rebuild")
            self._centroids = Int8Matrix.from_buffer(range(len(self._lists)), flat, self.dim)
        dots = self._centroids.dots(query, numpy=self._numpy)
        return sorted(range(len(dots)), key=lambda j: (-dots[j], j))[: self.probe]

    def _list(self, j: int) -> Int8Matrix:
        if j not in self._loaded:
            count, path = self._lists[j]
            data = self._read(path) if count else b""
            if len(data) != count * (4 + self.dim):
                raise BundleFormatError(f"vector list {path!r} holds {len(data)} bytes: rebuild")
            docnos = array("I")
            docnos.frombytes(data[: 4 * count])
            ids = docnos.tolist()
            self._loaded[j] = Int8Matrix.from_buffer(ids, data[4 * count :], self.dim)
            self._where.update((d, (j, row)) for row, d in enumerate(ids))
        return self._loaded[j]

    def scan(self, query: bytes, threshold: int | None) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        for j in sorted(self.probed(query)):
            matrix = self._list(j)
            ids: list[Any] = matrix.ids  # a list's ids are docnos (ints)
            found += [(ids[i], dot) for i, dot in matrix.above(query, threshold, numpy=self._numpy)]
        return found

    def dots(self, query: bytes, docnos: Sequence[int]) -> list[int]:
        if any(d not in self._where for d in docnos) and self._owner is None:
            assign = array("H")
            assign.frombytes(self._read(str(self._entry["assign"])))
            self._owner = assign
        out = []
        for d in docnos:
            if d not in self._where:
                owner = self._owner
                if owner is None or not 0 <= d < len(owner):
                    raise ValueError(f"no vector row {d}")
                if owner[d] == _NO_LIST:
                    out.append(0)
                    continue
                self._list(owner[d])
            j, row = self._where[d]
            out.append(self._loaded[j].dots(query, [row], numpy=self._numpy)[0])
        return out


def open_scanner(
    files: BundleFiles, entry: Mapping[str, Any], *, numpy: bool | None = None
) -> DenseScanner:
    """The scanner of a header ``vectors`` entry: coarse lists or exact shards."""
    if "lists" in entry:
        return CoarseScanner(files, entry, numpy=numpy)
    return ShardScanner(files, entry, numpy=numpy)
