"""Bundle format 2 at the byte level: packs, content-hashed names, the reading seam.

A ``.bin`` file is a "pack": ``zlib(JSON line + "\\n" + binary arrays)`` (:func:`pack`,
:func:`unpack`). Every file name ends with the first :data:`HASH_CHARS` hex digits of its
sha256 (:func:`content_path`), or with the first :data:`SLOT_HASH_CHARS` after a *slot* that
no other file of its kind in a bundle has (:func:`slot_path`: term shards and text fragments,
whose names the header keeps as 4 bytes each); :func:`read_checked` reads a file through a
:class:`BundleFiles` and refuses bytes that do not match their name.
"""

from __future__ import annotations

import hashlib
import json
import sys
import zlib
from array import array
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.bundle.manifest import BundleFormatError

__all__ = [
    "HASH_CHARS",
    "REBUILD_HINT",
    "SLOT_HASH_CHARS",
    "BundleFiles",
    "DirectoryFiles",
    "as_bytes",
    "check_content",
    "content_path",
    "docno_key",
    "name_hash",
    "names_content",
    "pack",
    "read_checked",
    "slot_path",
    "unpack",
]

HASH_CHARS = 16
SLOT_HASH_CHARS = 8
LITTLE_ENDIAN = sys.byteorder == "little"
REBUILD_HINT = "rebuild the bundle with 'ragspine-lite build-site DOCS_DIR --out DIR'"


# ---------------------------------------------------------------- pack files


def pack(meta: Mapping[str, Any], arrays: Mapping[str, array] | None = None) -> bytes:
    """``zlib(JSON + "\\n" + arrays)``; the JSON gets ``"arrays": [[name, typecode, count]]``.

    >>> meta, arrays = unpack(pack({"n": 1}, {"x": array("H", [1, 2])}))
    >>> meta["n"], list(arrays["x"])
    (1, [1, 2])
    """
    listed = dict(arrays or {})
    head = {**meta, "arrays": [[name, a.typecode, len(a)] for name, a in listed.items()]}
    parts = [json.dumps(head, ensure_ascii=False, separators=(",", ":")).encode("utf-8"), b"\n"]
    for values in listed.values():
        if not LITTLE_ENDIAN:  # pragma: no cover - big-endian hosts only
            values = array(values.typecode, values)
            values.byteswap()
        parts.append(values.tobytes())
    return zlib.compress(b"".join(parts), 6)


def unpack(data: bytes, where: str = "pack") -> tuple[dict[str, Any], dict[str, array]]:
    """The JSON object and the arrays of a :func:`pack`; anything else is a
    :class:`BundleFormatError` naming ``where``."""
    try:
        raw = zlib.decompress(data)
        line, _, rest = raw.partition(b"\n")
        meta = json.loads(line.decode("utf-8"))
        arrays: dict[str, array] = {}
        offset = 0
        for name, code, count in meta.pop("arrays"):
            values = array(code)
            end = offset + values.itemsize * int(count)
            values.frombytes(rest[offset:end])
            if len(values) != count:
                raise ValueError(f"array {name!r} is cut short")
            if not LITTLE_ENDIAN:  # pragma: no cover - big-endian hosts only
                values.byteswap()
            arrays[str(name)] = values
            offset = end
    except (zlib.error, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise BundleFormatError(f"{where} is damaged ({exc}): {REBUILD_HINT}") from None
    if offset != len(rest):
        raise BundleFormatError(f"{where} has trailing bytes: {REBUILD_HINT}")
    return meta, arrays


def content_path(folder: str, kind: str, data: bytes, suffix: str = ".bin") -> str:
    """``folder/kind-<first 16 hex digits of sha256(data)>suffix``."""
    digest = hashlib.sha256(data).hexdigest()[:HASH_CHARS]
    return f"{folder}/{kind}-{digest}{suffix}"


def slot_path(folder: str, kind: str, slot: str, digest: int | bytes) -> str:
    """``folder/kind-<slot>-<8 hex digits>.bin``: ``digest`` is sha256(data) (bytes) or its
    first 4 bytes as a big-endian int (:func:`name_hash`, what a header keeps).

    The slot (a fragment's first docno, a term shard's first term) keeps two files of a kind
    apart, so 32 bits of hash suffice to tell a file's versions apart.
    """
    value = digest if isinstance(digest, int) else int.from_bytes(digest[:4], "big")
    return f"{folder}/{kind}-{slot}-{value:08x}.bin"


def name_hash(path: str) -> int:
    """The 4-byte hash a :func:`slot_path` name carries, as an int."""
    return int(PurePosixPath(path).stem.rpartition("-")[2], 16)


def names_content(path: str, data: bytes) -> bool:
    """Whether ``data`` has the hash ``path``'s name ends with (16 or 8 hex digits)."""
    expected = PurePosixPath(path).stem.rpartition("-")[2]
    return len(expected) in (HASH_CHARS, SLOT_HASH_CHARS) and (
        hashlib.sha256(data).hexdigest().startswith(expected)
    )


def check_content(path: str, data: bytes) -> None:
    """Raise :class:`BundleFormatError` unless ``data`` has the hash ``path`` names."""
    if not names_content(path, data):
        raise BundleFormatError(
            f"{path} does not match the hash in its name (a damaged or mixed-up download): "
            f"{REBUILD_HINT}"
        )


def as_bytes(data: Any) -> bytes:
    """Bytes from bytes-like data or a JS typed array (Pyodide's ``to_bytes``)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    to_bytes = getattr(data, "to_bytes", None)
    if to_bytes is None:
        raise ValueError(f"bundle file data must be bytes, got {type(data).__name__}")
    return bytes(to_bytes())


def docno_key(docno: int) -> str:
    """The ranking key of a docno: sorts like the docnos, hence like the chunk ids."""
    return f"{docno:010d}"


# ---------------------------------------------------------------- reading seam


@runtime_checkable
class BundleFiles(Protocol):
    """Where a :class:`ShardedBundle` reads its files: ``read(path)`` → bytes, ``path``
    relative to the bundle root (``"data/terms/t-….bin"``)."""

    def read(self, path: str) -> bytes: ...


class DirectoryFiles:
    """The files of a bundle folder on disk (a built site, on CPython)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"bundle folder not found: {str(self.root)!r}")

    def __repr__(self) -> str:
        return f"DirectoryFiles({str(self.root)!r})"

    def read(self, path: str) -> bytes:
        parts = PurePosixPath(path).parts
        if not parts or path.startswith("/") or ".." in parts:
            raise ValueError(f"bundle file path must be relative and inside the bundle: {path!r}")
        return self.root.joinpath(*parts).read_bytes()


def read_checked(files: BundleFiles, path: str) -> bytes:
    """``path``'s bytes from ``files``, refused unless they have the hash its name carries."""
    data = as_bytes(files.read(path))
    check_content(path, data)
    return data
