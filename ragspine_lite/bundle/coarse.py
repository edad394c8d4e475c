"""Vectors by need: an IVF layout of a bundle's int8 chunk vectors, estimated, then rescored.

A large bundle groups its chunk vectors into *lists* at build time: spherical k-means over the
int8 codes (:func:`build_lists`, fixed seed, integer dot products, ties to the lower list) gives
``nlist`` int8 centroids (``data/vectors/v-<hash16>.i8``, read whole, the worker fetches it with
the model). Each list is cut again by k-means into *blocks* of about :data:`BLOCK_ROWS` rows, one
file each (``data/lists/v-<hash16>.i8``: the block's docnos as ascending little-endian uint32,
then their int8 codes), numbered list by list (a ``lists`` entry is ``[rows, path, blocks]``).
The list's own file (``data/lists/`` too) is small: per row its docno (uint32), block within
the list (uint16), residual scale (uint16) and the sign bits of its residual to the centroid
(LSB first). The *block directory* (``blocks``, ``data/lists/`` too, read whole: the worker
fetches it with the scanner) names every block (uint32 count, then the 8 hash bytes of each
block's name), then each docno's block (uint16, or uint32 from 65,535 blocks; all bits set: no
vector), so the blocks of given rows are read without their lists.

A query's int8 codes are dotted with every centroid; in the ``probe`` best lists (by
``(-dot, list)``) each row's dot is *estimated* from its sign bits, ``16·(q·c) + scale·(q·s)``
(``s`` the ±1 signs, ``scale`` = ``16·mean|x − c|``, integers throughout); the blocks holding the
``candidates`` best estimates (by ``(-estimate, docno)``) are read and their rows scored exactly,
the same integers as the exact scan gives them. Rows outside those blocks are not seen: that is
the approximation (measured in ``docs/hybrid.md``). ``dots`` of given rows stay exact: they read
the rows' blocks (through the directory). Every file is read once and kept.

Every step is integer arithmetic, so numpy and pure Python build the same files and every
scanner (:class:`CoarseScanner` here, ``CoarseScanner`` in ``web/ragspine-dense.mjs``) returns
the same ``(docno, dot)`` pairs. Bundles below :data:`COARSE_MIN_ROWS` vectors keep the exact
layout (:func:`~ragspine_lite.bundle.dense.write_vector_shards`).
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import struct
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
    "candidate_count",
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
_MAX_LISTS = 0xFFFE  # lists a bundle may have (the scanners key a block as list · 65,536 + block)
#: Rows per block of a list (the unit a query reads for its exact rescoring).
BLOCK_ROWS = 16
#: Rows a query's sign-bit estimates cover by default (:func:`probe_count`).
PROBE_ROWS = 4_000
SIGN_WEIGHT = 16  # fixed point of the estimate: 16·(q·c) + scale·(q·s), scale = 16·mean|r|
_HASH = 8  # the hash bytes of a block's name (``v-<16 hex digits>.i8``)


def list_count(rows: int) -> int:
    """Lists for ``rows`` vectors: about ``√rows``, at most 65,534 (``docs/hybrid.md``: at 100k
    rows 316 lists read 14-17 files a question where 632 read 18-24, the same recall)."""
    return max(1, min(_MAX_LISTS, round(math.sqrt(rows))))


def probe_count(lists: int, rows: int) -> int:
    """Lists a query estimates by default: those of about :data:`PROBE_ROWS` rows, at least
    4 % of the lists and 4, at most half of them (``docs/hybrid.md``: at 100k rows 13 of 316,
    ≤ 1 MB cold, ≤ 300 kB later)."""
    budget = min(lists // 2, round(PROBE_ROWS * lists / max(1, rows)))
    return min(lists, max(4, round(0.04 * lists), budget))


def candidate_count(rows: int) -> int:
    """Best estimates whose blocks a query reads by default: 64 (blocks of ~16 rows)."""
    return min(rows, 64)


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


def _little_endian() -> None:
    if array("I").itemsize != 4 or array("H", [1]).tobytes() != b"\x01\x00":
        raise RuntimeError("the coarse layout needs 4-byte little-endian unsigned ints")


def residual_codes(
    codes: bytes, centroid: bytes, dim: int, *, numpy: bool | None = None
) -> tuple[list[int], bytes]:
    """Per row of ``codes``: its residual scale ``16·mean|x − c|`` (rounded half up, at most
    65,535) and the sign bits of ``x − c`` (bit ``i % 8`` of byte ``i // 8`` set when
    ``x_i > c_i``), ``⌈dim / 8⌉`` bytes a row."""
    rows, width = len(codes) // dim, (dim + 7) // 8
    np = None if numpy is False else numpy_or_none()
    if np is not None:
        matrix = np.frombuffer(codes, dtype=np.int8).reshape(rows, dim).astype(np.int32)
        res = matrix - np.frombuffer(centroid, dtype=np.int8).astype(np.int32)
        scales = np.minimum(0xFFFF, (SIGN_WEIGHT * np.abs(res).sum(axis=1) + dim // 2) // dim)
        bits = np.packbits(res > 0, axis=1, bitorder="little").reshape(rows, width)
        return [int(s) for s in scales], bits.tobytes()
    view, cent = memoryview(codes).cast("b"), memoryview(centroid).cast("b")
    scales, signs = [], bytearray(rows * width)
    for r in range(rows):
        res = [x - c for x, c in zip(view[r * dim : (r + 1) * dim], cent, strict=True)]
        scales.append(min(0xFFFF, (SIGN_WEIGHT * sum(map(abs, res)) + dim // 2) // dim))
        for i, x in enumerate(res):
            if x > 0:
                signs[r * width + (i >> 3)] |= 1 << (i & 7)
    return scales, bytes(signs)


def _block_hash(path: str) -> bytes:
    name = path.rsplit("/", 1)[-1]
    if not (path == f"data/lists/{name}" and name.startswith("v-") and name.endswith(".i8")):
        raise RuntimeError(f"a coarse block must be data/lists/v-<hash16>.i8, not {path!r}")
    return bytes.fromhex(name[2:-3])


def _block_path(raw: bytes) -> str:
    return f"data/lists/v-{raw.hex()}.i8"


def _list_file(
    docnos: Sequence[int],
    codes: bytes,
    centroid: bytes,
    write: Callable[[str, bytes], str],
    codec: Int8Codec,
    numpy: bool | None,
) -> tuple[bytes, list[tuple[list[int], str]]]:
    """One list's file and its blocks ``(docnos, path)`` in order (k-means of its rows, each
    written with ``write``)."""
    dim = len(centroid)
    count = len(docnos)
    parts = -(-count // BLOCK_ROWS)
    labels = build_lists(codes, dim, parts, codec, numpy=numpy)[1] if parts > 1 else [0] * count
    view = memoryview(codes)
    block_of, blocks = array("H", [0]) * count, []
    for b, label in enumerate(sorted(set(labels))):
        rows = [i for i in range(count) if labels[i] == label]
        for i in rows:
            block_of[i] = b
        body = b"".join(view[i * dim : (i + 1) * dim] for i in rows)
        ids = [docnos[i] for i in rows]
        blocks.append((ids, write("data/lists", array("I", ids).tobytes() + body)))
    scales, signs = residual_codes(codes, centroid, dim, numpy=numpy)
    columns = array("I", docnos).tobytes() + block_of.tobytes() + array("H", scales).tobytes()
    return columns + signs, blocks


def _directory(hashes: bytes, block_of: Sequence[int | None]) -> bytes:
    """The block directory: the block count, the blocks' hash bytes, each docno's block."""
    count = len(hashes) // _HASH
    kind = "H" if count < 0xFFFF else "I"
    none = 0xFFFF if kind == "H" else 0xFFFFFFFF
    owners = array(kind, [none if b is None else b for b in block_of])
    return struct.pack("<I", count) + hashes + owners.tobytes()


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
    _little_endian()
    gone = set(missing)
    docnos = [d for d in range(len(chunk_ids)) if d not in gone]
    view = memoryview(flat)
    codes = b"".join(view[d * dim : (d + 1) * dim] for d in docnos)
    centroids, assign = build_lists(codes, dim, list_count(len(docnos)), codec, numpy=numpy)
    nlist = len(centroids) // dim
    members: list[list[int]] = [[] for _ in range(nlist)]
    for docno, j in zip(docnos, assign, strict=True):
        members[j].append(docno)
    lists: list[list[Any]] = []
    hashes = bytearray()
    block_of: list[int | None] = [None] * len(chunk_ids)
    for j, rows in enumerate(members):
        if not rows:
            lists.append([0, "", 0])
            continue
        body = b"".join(view[d * dim : (d + 1) * dim] for d in rows)
        data, blocks = _list_file(rows, body, centroids[j * dim : (j + 1) * dim], write,
                                  codec, numpy)
        for number, (ids, path) in enumerate(blocks, len(hashes) // _HASH):
            hashes += _block_hash(path)
            for d in ids:
                block_of[d] = number
        lists.append([len(rows), write("data/lists", data), len(blocks)])
    return {
        "model_id": model_id,
        "dim": dim,
        "scale": codec.scale,
        "missing": missing,
        "rows": len(chunk_ids),
        "centroids": write("data/vectors", centroids),
        "probe": probe_count(nlist, len(docnos)),
        "candidates": candidate_count(len(docnos)),
        "lists": lists,
        "blocks": write("data/lists", _directory(bytes(hashes), block_of)),
    }


def _check_coarse(entry: Mapping[str, Any]) -> tuple[int, int, int, list[tuple[int, str, int]]]:
    """``(dim, probe, candidates, lists)`` of a coarse ``vectors`` entry (``lists``: ``(rows,
    path, blocks)`` each)."""
    if "candidates" not in entry or "blocks" not in entry:
        raise BundleFormatError("the bundle's coarse vectors are of an older layout: rebuild it")
    try:
        dim, probe, wanted = int(entry["dim"]), int(entry["probe"]), int(entry["candidates"])
        lists = [(int(n), str(p), int(b)) for n, p, b in entry["lists"]]
        str(entry["centroids"]), str(entry["blocks"]), int(entry["rows"])
        Int8Codec(entry["scale"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleFormatError(f"the bundle's vectors entry is malformed: {exc}") from None
    if not 1 <= probe <= len(lists) or wanted < 1 or any(
        n < 0 or (n > 0) != bool(p) or (n > 0) != (b > 0) or b > n for n, p, b in lists
    ):
        raise BundleFormatError(f"the bundle's coarse vectors entry is malformed (probe {probe})")
    return dim, probe, wanted, lists


class _Directory:
    """The block directory: each block's path, each docno's block (``None``: no vector)."""

    def __init__(self, data: bytes, rows: int, path: str) -> None:
        count = struct.unpack_from("<I", data)[0] if len(data) >= 4 else 0
        start = 4 + _HASH * count
        self.owners = array("H" if count < 0xFFFF else "I")
        self._none = (1 << 8 * self.owners.itemsize) - 1
        if not count or len(data) != start + self.owners.itemsize * rows:
            raise BundleFormatError(f"the vector block directory {path!r} holds {len(data)} "
                                    "bytes: rebuild")
        self.owners.frombytes(data[start:])
        if any(count <= b < self._none for b in self.owners):
            raise BundleFormatError(f"the vector block directory {path!r} names a block it has "
                                    "not: rebuild")
        self.hashes = data[4:start]

    def path(self, block: int) -> str:
        return _block_path(self.hashes[_HASH * block : _HASH * (block + 1)])

    def block(self, docno: int) -> int | None:
        if not 0 <= docno < len(self.owners):
            raise ValueError(f"no vector row {docno}")
        found = self.owners[docno]
        return None if found == self._none else found


class _List:
    """One list file: per row its docno, block (within the list), scale and sign bits."""

    def __init__(self, data: bytes, count: int, blocks: int, dim: int, path: str) -> None:
        width = (dim + 7) // 8
        if len(data) != count * (8 + width):
            raise BundleFormatError(f"vector list {path!r} holds {len(data)} bytes: rebuild")
        docnos, block_of, scales = array("I"), array("H"), array("H")
        docnos.frombytes(data[: 4 * count])
        block_of.frombytes(data[4 * count : 6 * count])
        scales.frombytes(data[6 * count : 8 * count])
        if any(b >= blocks for b in block_of):
            raise BundleFormatError(f"vector list {path!r} names a block it has not: rebuild")
        self.docnos, self.block_of = docnos.tolist(), block_of.tolist()
        self.scales = scales.tolist()
        self.signs, self.width, self.dim = data[8 * count :], width, dim

    def estimates(self, q: Sequence[int], centroid_dot: int, numpy: bool | None) -> list[int]:
        """Each row's estimate ``16·(q·c) + scale·(2·Σ_{bit set} q_i − Σ q_i)``."""
        np = None if numpy is False else numpy_or_none()
        if np is not None:
            bits = np.unpackbits(np.frombuffer(self.signs, dtype=np.uint8).reshape(-1, self.width),
                                 axis=1, bitorder="little")[:, : self.dim]
            ups: list[int] = (bits.astype(np.int64) @ np.asarray(q, dtype=np.int64)).tolist()
        else:
            tables = _bit_tables(q, self.width)
            w, signs = self.width, self.signs
            ups = [sum(t[b] for t, b in zip(tables, signs[r * w : (r + 1) * w], strict=True))
                   for r in range(len(self.docnos))]
        base, total = SIGN_WEIGHT * centroid_dot, sum(q)
        return [base + s * (2 * up - total) for s, up in zip(self.scales, ups, strict=True)]


def _bit_tables(q: Sequence[int], width: int) -> list[list[int]]:
    """Per sign byte, the sum of ``q`` over the dims of each of its 256 values."""
    padded = [*q, *[0] * (8 * width - len(q))]
    tables = []
    for k in range(width):
        table = [0] * 256
        for value in range(1, 256):
            low = value & -value
            table[value] = table[value ^ low] + padded[8 * k + low.bit_length() - 1]
        tables.append(table)
    return tables


class CoarseScanner:
    """A :class:`~ragspine_lite.bundle.dense.DenseScanner` over a coarse ``vectors`` entry.

    ``scan`` reads the centroids (once), the ``probe`` best lists of the query and the blocks
    of its ``candidates`` best estimates (each file once, kept); ``probe`` and ``candidates``
    override the entry's (every list and every row: the exact scan). ``numpy`` as in
    :meth:`Int8Matrix.dots`. ``read`` lists the paths read, in order.
    """

    def __init__(
        self,
        files: BundleFiles,
        entry: Mapping[str, Any],
        *,
        probe: int | None = None,
        candidates: int | None = None,
        numpy: bool | None = None,
    ) -> None:
        self.dim, self.probe, self.candidates, self._lists = _check_coarse(entry)
        if probe is not None:
            self.probe = max(1, min(len(self._lists), int(probe)))
        if candidates is not None:
            self.candidates = max(1, int(candidates))
        self._entry, self._files, self._numpy = entry, files, numpy
        self._firsts = list(itertools.accumulate((b for _, _, b in self._lists), initial=0))
        self._centroids: Int8Matrix | None = None
        self._loaded: dict[int, _List] = {}
        self._blocks: dict[tuple[int, int], Int8Matrix] = {}
        self._directory: _Directory | None = None

    def _read(self, path: str) -> bytes:
        return read_checked(self._files, path)

    def _probe(self, query: bytes) -> list[tuple[int, int]]:
        """``(list, centroid dot)`` of the lists a scan of ``query`` reads, best first."""
        if self._centroids is None:
            flat = self._read(str(self._entry["centroids"]))
            if len(flat) != len(self._lists) * self.dim:
                raise BundleFormatError("the coarse centroids do not match the lists: rebuild")
            self._centroids = Int8Matrix.from_buffer(range(len(self._lists)), flat, self.dim)
        dots = self._centroids.dots(query, numpy=self._numpy)
        best = sorted(range(len(dots)), key=lambda j: (-dots[j], j))[: self.probe]
        return [(j, dots[j]) for j in best]

    def probed(self, query: bytes) -> list[int]:
        """The lists a scan of ``query`` reads, best first by ``(-dot, list)``."""
        return [j for j, _ in self._probe(query)]

    def _list(self, j: int) -> _List:
        if j not in self._loaded:
            count, path, blocks = self._lists[j]
            if not count:
                raise BundleFormatError(f"vector list {j} is empty: rebuild")
            self._loaded[j] = _List(self._read(path), count, blocks, self.dim, path)
        return self._loaded[j]

    def _dir(self) -> _Directory:
        if self._directory is None:
            path = str(self._entry["blocks"])
            self._directory = _Directory(self._read(path), int(self._entry["rows"]), path)
        return self._directory

    def _block(self, j: int, b: int) -> Int8Matrix:
        if (j, b) not in self._blocks:
            path = self._dir().path(self._firsts[j] + b)
            data = self._read(path)
            count = len(data) // (4 + self.dim)
            if not count or len(data) != count * (4 + self.dim):
                raise BundleFormatError(f"vector block {path!r} holds {len(data)} bytes: rebuild")
            docnos = array("I")
            docnos.frombytes(data[: 4 * count])
            codes = data[4 * count :]
            self._blocks[j, b] = Int8Matrix.from_buffer(docnos.tolist(), codes, self.dim)
        return self._blocks[j, b]

    def _home(self, docno: int) -> tuple[int, int] | None:
        """``(list, block)`` of a row (``None``: it has no vector), from the block directory."""
        found = self._dir().block(docno)
        if found is None:
            return None
        j = bisect.bisect_right(self._firsts, found) - 1
        return j, found - self._firsts[j]

    def blocks(self, query: bytes, also: Sequence[int] = ()) -> list[tuple[int, int]]:
        """``(list, block)`` a scan of ``query`` rescores, in that order: those of the
        ``candidates`` best estimates by ``(-estimate, docno)`` and those of ``also``."""
        q = list(memoryview(bytes(query)).cast("b"))
        if len(q) != self.dim:
            raise ValueError(f"query has {len(q)} codes, dimension is {self.dim}")
        ranked: list[tuple[int, int, int, int]] = []
        for j, dot in self._probe(query):
            found = self._list(j)
            ests = found.estimates(q, dot, self._numpy)
            ranked += zip(
                [-e for e in ests], found.docnos, [j] * len(ests), found.block_of, strict=True
            )
        ranked.sort()
        picked = {(j, b) for _, _, j, b in ranked[: self.candidates]}
        homes = (self._home(d) for d in also)
        return sorted(picked.union(home for home in homes if home is not None))

    def scan(self, query: bytes, threshold: int | None) -> list[tuple[int, int]]:
        return self.scan_also(query, threshold, ())

    def scan_also(
        self, query: bytes, threshold: int | None, also: Sequence[int]
    ) -> list[tuple[int, int]]:
        """:meth:`scan`, also reading the blocks that hold the rows of ``also``."""
        found: list[tuple[int, int]] = []
        for j, b in self.blocks(query, also):
            matrix = self._block(j, b)
            ids: list[Any] = matrix.ids  # a block's ids are docnos (ints)
            found += [(ids[i], dot) for i, dot in matrix.above(query, threshold, numpy=self._numpy)]
        return found

    def dots(self, query: bytes, docnos: Sequence[int]) -> list[int]:
        out = []
        for d in docnos:
            home = self._home(d)
            if home is None:
                out.append(0)
                continue
            matrix = self._block(*home)
            ids: list[Any] = matrix.ids  # a block's ids are docnos (ints)
            out.append(matrix.dots(query, [ids.index(d)], numpy=self._numpy)[0])
        return out


def open_scanner(
    files: BundleFiles, entry: Mapping[str, Any], *, numpy: bool | None = None
) -> DenseScanner:
    """The scanner of a header ``vectors`` entry: coarse lists or exact shards."""
    if "lists" in entry:
        return CoarseScanner(files, entry, numpy=numpy)
    return ShardScanner(files, entry, numpy=numpy)
