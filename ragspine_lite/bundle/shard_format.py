"""Bundle format 6, what its writer and its readers share: the site's file budget and the
file-size targets, the names of term shards and text fragments, the chunk fields a fragment
keeps, the export's facts, page and section tables as read back."""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Any

from ragspine_lite.bundle.manifest import (
    PAGE_TABLE,
    SECTION_TABLE,
    BundleFormatError,
    check_format_version,
)
from ragspine_lite.bundle.packs import slot_path
from ragspine_lite.chunking.chunk_store import ChunkStore, ChunkStoreError, StoredChunk

__all__ = [
    "CHUNK_FIELDS",
    "FILTER_FIELDS",
    "FRAGMENT_BYTES",
    "LENGTHS_FILE_MIN_DF",
    "LENGTHS_FILE_SHARE",
    "MIN_INDEX_FILES",
    "RESERVED_FILES",
    "SITE_FILES",
    "TERM_SHARD_BYTES",
    "bundle_facts",
    "byte_planes",
    "fragment_path",
    "from_byte_planes",
    "index_text_fn_of",
    "page_urls",
    "section_rows",
    "smallest_unsigned",
    "term_shard_path",
]

#: Raw (uncompressed) bytes aimed at per postings shard and per text fragment; a corpus too
#: big for the site's file budget at that size gets files twice as big (both kinds), and so on.
TERM_SHARD_BYTES = 4 * 1024
FRAGMENT_BYTES = 6 * 1024
#: A term whose postings are this many or more, and at least one chunk in
#: ``LENGTHS_FILE_SHARE``, keeps its postings' token counts in a file of its own
#: (``data/terms/l-<h>.bin``), read only when a search scores every one of its postings.
LENGTHS_FILE_MIN_DF = 1024
LENGTHS_FILE_SHARE = 8
#: Files a site may hold: the common static-host limit (Cloudflare Pages' free plan: 20,000).
SITE_FILES = 20_000
#: Of those, the files kept for what is not a term shard, a text fragment or a vector file:
#: the runtime (Pyodide, wheels, the JS modules, precompressed copies), the manifest, the
#: header, the filter, token-count and length files.
RESERVED_FILES = 1_000
#: The fewest term shards and text fragments (together) a site's budget leaves them, whatever
#: its vector files take.
MIN_INDEX_FILES = 4_000

#: The StoredChunk fields a fragment keeps (``active`` is always true in a bundle).
CHUNK_FIELDS = tuple(f.name for f in fields(StoredChunk) if f.name != "active")
#: What a metadata filter may test (the bundle's filter fields).
FILTER_FIELDS = ("doc_id", "title", "topic", "entity", "geography", "period", "language")


def term_shard_path(first_term: str, digest: int | bytes) -> str:
    """A term shard's name: its slot is its first term's first 8 UTF-8 bytes, in hex."""
    return slot_path("data/terms", "t", first_term.encode("utf-8")[:8].hex(), digest)


def fragment_path(start: int, digest: int | bytes) -> str:
    """A text fragment's name: its slot is its first docno."""
    return slot_path("data/text", "f", str(start), digest)


def smallest_unsigned(values: Sequence[int]) -> array:
    """``values`` in the narrowest unsigned array type that holds them."""
    largest = max(values, default=0)
    code = "B" if largest < 1 << 8 else "H" if largest < 1 << 16 else "I"
    return array(code, values)


def byte_planes(values: array) -> array:
    """4-byte unsigned ``values`` as their byte planes (every value's lowest byte, then every
    second byte, …; little-endian): small numbers leave whole planes of zeros, which zlib
    packs far better than interleaved zero bytes."""
    values = array("I", values)  # 4 bytes (ragspine_lite.lexical.bm25_index.UINT)
    if _BIG_ENDIAN:  # pragma: no cover - every CPython/Pyodide target is little-endian
        values.byteswap()
    data = values.tobytes()
    return array("B", b"".join(data[i::4] for i in range(4)))


def from_byte_planes(planes: Sequence[int]) -> array:
    """The 4-byte unsigned values :func:`byte_planes` gave ``planes``."""
    raw = bytes(planes)
    n, rest = divmod(len(raw), 4)
    if rest:
        raise BundleFormatError(f"byte planes of {len(raw)} bytes are not 4-byte values")
    data = bytearray(len(raw))
    for i in range(4):
        data[i::4] = raw[i * n : (i + 1) * n]
    values = array("I", bytes(data))
    if _BIG_ENDIAN:  # pragma: no cover
        values.byteswap()
    return values


_BIG_ENDIAN = array("I", [1]).tobytes()[0] == 0


def bundle_facts(rows: Iterable[tuple[str, str]], where: str) -> dict[str, Any]:
    """The export facts (``key → JSON value``) with a checked ``format_version``."""
    facts: dict[str, Any] = {}
    for key, value in rows:
        try:
            facts[key] = json.loads(value)
        except ValueError:
            facts[key] = value
    try:
        facts["format_version"] = check_format_version(facts.get("format_version"))
    except BundleFormatError as exc:
        raise BundleFormatError(f"{where}: {exc}") from None
    return facts


def index_text_fn_of(facts: Mapping[str, Any], where: str) -> Any:
    """The index text a bundle was exported with (its ``index_text`` fact; none if absent).

    A contextual bundle is searched with the same header; a setting this runtime cannot
    reproduce is refused.
    """
    from ragspine_lite.contextual import make_index_text_fn

    setting = str(facts.get("index_text") or "none")
    if setting not in ("none", "contextual"):
        raise BundleFormatError(
            f"{where!r} was indexed with index text {setting!r}, which this runtime cannot "
            "reproduce: rebuild the bundle with or without --contextual"
        )
    return make_index_text_fn(setting)


def page_urls(store: ChunkStore) -> dict[str, str]:
    """``doc_id → url`` of an exported bundle (empty for a bundle built without URLs)."""
    try:
        rows = store.execute_read(f"SELECT doc_id, url FROM {PAGE_TABLE}")
    except ChunkStoreError:
        return {}
    return {r["doc_id"]: r["url"] for r in rows}


def section_rows(store: ChunkStore) -> dict[str, list[tuple[int, int, str, str, int]]]:
    """``doc_id → [(para_start, para_end, heading, anchor, level)]`` of an exported bundle."""
    try:
        rows = store.execute_read(
            f"SELECT doc_id, para_start, para_end, level, heading, anchor FROM {SECTION_TABLE} "
            "ORDER BY doc_id, para_start, rowid"  # ties: in the document's order
        )
    except ChunkStoreError:
        return {}
    out: dict[str, list[tuple[int, int, str, str, int]]] = {}
    for r in rows:
        out.setdefault(r["doc_id"], []).append(
            (int(r["para_start"]), int(r["para_end"]), r["heading"], r["anchor"], int(r["level"]))
        )
    return out
