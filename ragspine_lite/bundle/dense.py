"""A format-4 bundle's chunk vectors: raw int8 shards by docno range, scanned exactly.

The export keeps chunk vectors int8 (:class:`~ragspine_lite.vector.quantize.Int8Codec`
codes in the chunk store); :func:`write_vector_shards` copies those codes, row-major, into
``data/vectors/v-<hash16>.i8`` files of consecutive docnos (a missing vector is a zero row,
listed in ``missing``) and returns the header's ``vectors`` entry. A :class:`DenseScanner`
scores query codes against every row by exact integer dot product; :class:`ShardScanner`
reads the shards through the bundle's files (numpy when importable, else pure Python, the
same integers), :class:`JsDenseScanner` wraps the worker's JavaScript scanner
(``web/ragspine-dense.mjs``). :class:`DenseLane` turns a query vector into the dense
ranking the fusion takes (a :class:`DenseRanking`), ``(docno, cosine)`` best first by
``(-dot, docno)``, as the SQLite store ranks the same codes by ``(-dot, chunk_id)``.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ragspine_lite.bundle.manifest import BundleFormatError
from ragspine_lite.bundle.packs import BundleFiles, read_checked
from ragspine_lite.vector.quantize import Int8Codec, Int8Matrix

__all__ = [
    "VECTOR_SHARD_BYTES",
    "DenseLane",
    "DenseRanking",
    "DenseScanner",
    "JsDenseScanner",
    "ShardScanner",
    "entry_rows",
    "stored_codes",
    "write_vector_shards",
]

#: Target size of one vector shard (whole rows; a row larger than this is a shard alone).
VECTOR_SHARD_BYTES = 1_536 * 1024


class DenseScanner(Protocol):
    """Exact integer dot products of int8 query codes with a bundle's vector rows."""

    def scan(self, query: bytes, threshold: int | None) -> list[tuple[int, int]]:
        """``(docno, dot)`` of every row whose dot is ``> threshold`` (every row when
        ``None``), any order; rows without a vector never appear. A scanner that reads some
        rows only (coarse lists) has ``scan_also(query, threshold, also)`` too: the same,
        also reading the rows of ``also`` and the rows stored with them."""
        ...

    def dots(self, query: bytes, docnos: Sequence[int]) -> list[int]:
        """The dots of these rows (0 for a row without a vector), in the given order."""
        ...


def stored_codes(
    db_path: str | Path, chunk_ids: Sequence[str], model_id: str
) -> tuple[Int8Codec, int, bytes, list[int]]:
    """``(codec, dim, codes, missing)``: the int8 codes of ``chunk_ids`` (docno order) in the
    exported chunk store, row-major (a missing vector is a zero row, its docno in ``missing``).

    The store's vectors of ``model_id`` must be int8
    (:meth:`~ragspine_lite.vector.sqlite_store.SqliteVectorStore.int8_codes`).
    """
    from ragspine_lite.vector.sqlite_store import SqliteVectorStore

    with SqliteVectorStore(db_path, model_id=model_id, read_only=True) as store:
        codec, codes = store.int8_codes()
        dim = int(store.dim or 0)
    zero = bytes(dim)
    missing = [docno for docno, cid in enumerate(chunk_ids) if cid not in codes]
    return codec, dim, b"".join(codes.get(cid, zero) for cid in chunk_ids), missing


def write_vector_shards(
    db_path: str | Path,
    chunk_ids: Sequence[str],
    write: Callable[[bytes], str],
    *,
    model_id: str,
    shard_bytes: int | None = None,
) -> dict[str, Any]:
    """Write the int8 codes of ``chunk_ids`` (docno order) as shards; → the header entry.

    ``db_path`` is the exported chunk store (:func:`stored_codes`); ``write(data)`` stores
    one shard's bytes and returns its path (the bundle writer names it
    ``data/vectors/v-<hash16>.i8``). Returns ``{"model_id", "dim", "scale", "shards":
    [[start, count, path], …], "missing": [docno, …]}``; a shard holds the rows of about
    ``shard_bytes`` (default :data:`VECTOR_SHARD_BYTES`).
    """
    codec, dim, flat, missing = stored_codes(db_path, chunk_ids, model_id)
    per_shard = max(1, (shard_bytes or VECTOR_SHARD_BYTES) // dim)
    shards: list[list[Any]] = []
    for start in range(0, len(chunk_ids), per_shard):
        block = flat[start * dim : (start + per_shard) * dim]
        shards.append([start, len(block) // dim, write(block)])
    return {
        "model_id": model_id,
        "dim": dim,
        "scale": codec.scale,
        "shards": shards,
        "missing": missing,
    }


def _check_entry(entry: Mapping[str, Any]) -> tuple[int, int, list[tuple[int, int, str]]]:
    """``(dim, rows, shards)`` of a header ``vectors`` entry; shards must tile ``0..rows``."""
    try:
        dim = int(entry["dim"])
        shards = [(int(s), int(n), str(p)) for s, n, p in entry["shards"]]
        Int8Codec(entry["scale"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleFormatError(f"the bundle's vectors entry is malformed: {exc}") from None
    rows = 0
    for start, count, path in shards:
        if start != rows or count < 1:
            raise BundleFormatError(f"vector shard {path!r} starts at {start}, expected {rows}")
        rows += count
    return dim, rows, shards


def entry_rows(entry: Mapping[str, Any]) -> int:
    """The docnos a header ``vectors`` entry covers (exact shards or the coarse ``lists``)."""
    if "lists" in entry:
        try:
            return int(entry["rows"])
        except (KeyError, TypeError, ValueError) as exc:
            raise BundleFormatError(f"the bundle's vectors entry is malformed: {exc}") from None
    return _check_entry(entry)[1]


class ShardScanner:
    """A :class:`DenseScanner` over the ``.i8`` shards of a header ``vectors`` entry.

    Shards are read through ``files`` (``read(path) -> bytes``) on the first scan, checked
    (size and the content hash in the name) and kept as one matrix. ``numpy`` as in
    :meth:`Int8Matrix.dots`: ``None`` uses it when importable.
    """

    def __init__(
        self, files: BundleFiles, entry: Mapping[str, Any], *, numpy: bool | None = None
    ) -> None:
        self.dim, self.rows, self._shards = _check_entry(entry)
        self.missing = frozenset(int(d) for d in entry.get("missing", ()))
        self._files = files
        self._numpy = numpy
        self._matrix: Int8Matrix | None = None

    def _load(self) -> Int8Matrix:
        if self._matrix is None:
            flat = bytearray()
            for _start, count, path in self._shards:
                data = read_checked(self._files, path)
                if len(data) != count * self.dim:
                    raise BundleFormatError(
                        f"vector shard {path!r} holds {len(data)} bytes, not {count} rows of "
                        f"{self.dim}: rebuild the bundle"
                    )
                flat += data
            self._matrix = Int8Matrix.from_buffer(range(self.rows), bytes(flat), self.dim)
        return self._matrix

    def scan(self, query: bytes, threshold: int | None) -> list[tuple[int, int]]:
        found = self._load().above(query, threshold, numpy=self._numpy)
        if self.missing:
            found = [hit for hit in found if hit[0] not in self.missing]
        return found

    def dots(self, query: bytes, docnos: Sequence[int]) -> list[int]:
        return self._load().dots(query, list(docnos), numpy=self._numpy)


class JsDenseScanner:
    """A :class:`DenseScanner` backed by the worker's JavaScript scanner (Pyodide only).

    ``js`` is the object ``web/ragspine-dense.mjs`` builds: ``scan(query, threshold)``
    returns an ``Int32Array`` of ``docno, dot`` pairs and ``dots(query, docnos)`` an
    ``Int32Array`` of dots; queries go over as ``Int8Array`` codes.
    """

    def __init__(self, js: Any) -> None:
        self._js = js

    @staticmethod
    def _int32s(result: Any) -> array:  # type: ignore[type-arg]
        values = array("i")
        values.frombytes(result.to_bytes())
        return values

    @staticmethod
    def _codes(query: bytes) -> Any:
        from pyodide.ffi import to_js

        return to_js(memoryview(bytes(query)).cast("b"))

    def _prefetch(self, *args: Any) -> None:
        """Let the JS scanner fetch what the next call reads, files in parallel, when it can
        (a coarse scanner's ``prefetch``) and Python can await it here (JSPI); otherwise the
        call reads its files one by one, synchronously. The results are the same."""
        from ragspine_lite._compat import await_js

        prefetch = getattr(self._js, "prefetch", None)
        if prefetch is not None:
            await_js(prefetch(*args))

    @staticmethod
    def _rows(docnos: Sequence[int]) -> Any:
        from pyodide.ffi import to_js

        return to_js(memoryview(array("i", docnos)))

    def begin(self, query: bytes) -> None:
        """Let the JS scanner start fetching what a scan of ``query`` reads first (a coarse
        scanner's lists), not awaited: the files come while Python ranks BM25."""
        begin = getattr(self._js, "begin", None)
        if begin is not None:
            begin(self._codes(query))

    def scan(self, query: bytes, threshold: int | None) -> list[tuple[int, int]]:
        return self.scan_also(query, threshold, ())

    def scan_also(
        self, query: bytes, threshold: int | None, also: Sequence[int]
    ) -> list[tuple[int, int]]:
        """:meth:`scan`, the JS scanner also reading the rows of ``also`` (a coarse one)."""
        codes, rows = self._codes(query), self._rows(also)
        self._prefetch(codes, rows, True)
        pairs = self._int32s(self._js.scan(codes, threshold, rows))
        return list(zip(pairs[0::2], pairs[1::2], strict=True))

    def dots(self, query: bytes, docnos: Sequence[int]) -> list[int]:
        codes, wanted = self._codes(query), self._rows(docnos)
        self._prefetch(codes, wanted)
        return list(self._int32s(self._js.dots(codes, wanted)))


class DenseLane:
    """The dense ranking of a bundle's rows for a query vector, on the cosine scale.

    ``entry`` is the header ``vectors`` entry (``scale``, ``missing``), ``scanner`` a
    :class:`DenseScanner` over its rows.
    """

    def __init__(self, entry: Mapping[str, Any], scanner: DenseScanner) -> None:
        self.codec = Int8Codec(entry["scale"])
        self.model_id = str(entry.get("model_id", ""))
        self.missing = frozenset(int(d) for d in entry.get("missing", ()))
        self.vectors = entry_rows(entry) - len(self.missing)
        self.scanner = scanner

    def rank(
        self,
        query_vector: Sequence[float],
        *,
        floor: float | None = None,
        limit: int | None = None,
        among: Callable[[int], Any] | None = None,
        keep: Callable[[int], Any] | None = None,
    ) -> DenseRanking:
        """The rows above ``floor`` (every row with a vector when ``None``; a calibrated
        fusion reads nothing else) as a chunk-store query ranks them: ``limit`` keeps the
        ``limit`` best of the rows ``among`` accepts (default all), as a store query with
        ``k = limit`` and a ``where`` (the chunk-store path asks for ``k =`` the number of
        candidates); ``keep(docno)`` then filters rows (the candidates)."""
        if limit is not None and among is None and limit >= self.vectors:
            limit = None  # nothing to cut
        query = self.codec.encode(tuple(float(x) for x in query_vector))
        threshold = None if floor is None else self.codec.dot_threshold(floor)
        return DenseRanking(self, query, threshold, limit, among, keep)

    def ranking(
        self,
        query_vector: Sequence[float],
        *,
        floor: float | None = None,
        also: Iterable[int] = (),
        limit: int | None = None,
        among: Callable[[int], Any] | None = None,
        keep: Callable[[int], Any] | None = None,
    ) -> list[tuple[int, float]]:
        """``(docno, cosine)`` best first by ``(-dot, docno)``: :meth:`rank`'s rows plus
        those of ``also`` the store query returns (:meth:`DenseRanking.extra`), then
        filtered by ``keep(docno)`` (the candidates)."""
        found = self.rank(query_vector, floor=floor, limit=limit, among=among, keep=keep)
        return found.cosines(found.ranked + found.extra(also))


class DenseRanking:
    """One query's rows above a threshold, ``ranked`` best first by ``(-dot, docno)``.

    The scan runs when :attr:`ranked` is first read; until then :meth:`rescore` may name rows
    a scanner that reads some rows only must read too (its ``scan_also``: the lexical hits'
    dense evidence). A scanner with ``begin(query)`` starts fetching what it reads at once.
    """

    def __init__(
        self,
        lane: DenseLane,
        query: bytes,
        threshold: int | None,
        limit: int | None,
        among: Callable[[int], Any] | None,
        keep: Callable[[int], Any] | None,
    ) -> None:
        self.lane, self.query, self.limit, self.among, self.keep = lane, query, limit, among, keep
        self.threshold = threshold
        self._also: list[int] = []
        self._ranked: list[tuple[int, int]] | None = None
        begin = getattr(lane.scanner, "begin", None)
        if begin is not None:
            begin(query)

    def rescore(self, docnos: Iterable[int]) -> None:
        """Read these rows too (those above the threshold rank); before :attr:`ranked` is
        read, else nothing changes."""
        if self._ranked is None:
            self._also = sorted(set(self._also).union(docnos))

    @property
    def ranked(self) -> list[tuple[int, int]]:
        """``(docno, dot)`` of the scan's rows and the rescored ones above the threshold."""
        if self._ranked is None:
            self._ranked = self._scan(self.threshold)[: self.limit]
        return self._ranked

    def _scan(self, threshold: int | None) -> list[tuple[int, int]]:
        scanner, also = self.lane.scanner, self._also
        wide = getattr(scanner, "scan_also", None)
        if also and wide is not None:
            hits = wide(self.query, threshold, also)
        else:
            hits = scanner.scan(self.query, threshold)
        if self.among is not None:
            hits = [hit for hit in hits if self.among(hit[0])]
        return sorted(hits, key=_best_first)

    def extra(self, docnos: Iterable[int]) -> list[tuple[int, int]]:
        """``(docno, dot)`` of the rows of ``docnos`` below the threshold that the store
        query still returns (within its ``limit``), best first; they rank after
        :attr:`ranked` (e.g. the lexical hits of a calibrated fusion's results)."""
        ranked = self.ranked
        found = {d for d, _ in ranked}
        among, missing = self.among, self.lane.missing
        extra = sorted(
            d for d in set(docnos) - found if d not in missing and (among is None or among(d))
        )
        if not extra or (self.limit is not None and len(ranked) >= self.limit):
            return []
        if self.limit is None:
            dots = self.lane.scanner.dots(self.query, extra)
            return sorted(zip(extra, dots, strict=True), key=_best_first)
        wanted = set(extra)  # their rank among all rows decides
        return [hit for hit in self._scan(None)[: self.limit] if hit[0] in wanted]

    def cosines(self, hits: Iterable[tuple[int, int]]) -> list[tuple[int, float]]:
        """``hits`` as ``(docno, cosine)``, only the candidates (``keep``)."""
        cosine, keep = self.lane.codec.cosine, self.keep
        return [(d, cosine(dot)) for d, dot in hits if keep is None or keep(d)]


def _best_first(hit: tuple[int, int]) -> tuple[int, int]:
    return -hit[1], hit[0]
