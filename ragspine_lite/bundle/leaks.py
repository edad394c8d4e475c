"""The bundle self-check: no RESTRICTED text, title or id, and no canary, anywhere in the output.

What is read: every SQLite database *logically*, through ``sqlite3``: every text and blob
value of every row of every table (chunk text and metadata, the BM25 index tables, vector
metadata, the schema itself), so text that SQLite spreads over overflow pages is read whole.
Then the raw bytes of every file (databases too: freed pages keep old text) and of every
member of a zip archive (the wheels): UTF-8 text like database values, binary data (the wasm
runtime, model weights: copied, never written from documents) for the canaries and the texts
no longer than a window, as UTF-8 bytes.

What is looked for (:func:`restricted_needles`): each ``--canary`` string, anywhere; and per
RESTRICTED document its ``doc_id``, its title, every body line of at least
:data:`MIN_NEEDLE_CHARS` characters and the text of each of its chunks, chunked with the
export's own chunker and budgets. A text longer than :data:`WINDOW_CHARS` is looked for as
every :data:`WINDOW_CHARS`-character stretch that starts at a word, so a passage is found
wherever :data:`WINDOW_CHARS` characters of it (plus at most a word) sit in one value or
file: split over two chunk rows, say, when a public document repeats a RESTRICTED paragraph
longer than one chunk. Both sides are folded alike first: Unicode NFKC, case-folded, format
characters (zero-width spaces) dropped, each whitespace run one space, JSON ``\\uXXXX``
escapes decoded.

RESTRICTED documents never enter an export, so RESTRICTED text found in its chunk store
means a document that is *not* RESTRICTED repeats it: the owner has published the secret in
that document. That fails the build like any other leak, and the message names the document.

A :class:`Leak` says where (file, zip member, or table, row and column with the row's
document) and what ("canary #2", "chunk 3 of RESTRICTED document 'x'"), never the text.

>>> [n.label for n in restricted_needles([], canaries=["", "  SECRET-CODENAME "])]
['canary #2']
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import sqlite3
import unicodedata
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragspine_lite.chunking.chunking import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    chunk_document,
)
from ragspine_lite.common.errors import RagspineError

__all__ = [
    "MIN_NEEDLE_CHARS",
    "WINDOW_CHARS",
    "Leak",
    "Needle",
    "RestrictedLeakError",
    "fold",
    "restricted_needles",
    "scan_for_leaks",
    "verify_no_leaks",
]

#: Texts of RESTRICTED documents shorter than this (folded) are not looked for (too generic).
MIN_NEEDLE_CHARS = 12
#: Longer texts are looked for as every stretch of this many characters that starts at a word.
WINDOW_CHARS = 48
#: How many leaks an error message lists.
SHOWN_LEAKS = 5

_SQLITE_MAGIC = b"SQLite format 3\x00"
_ZLIB_MAGIC = b"\x78"  # zlib streams (bundle pack files) start with it
_ZIP_MAGIC = b"PK\x03\x04"
# Scripts that do not separate words (CJK): each character counts as a word.
_CJK = "\u2e80-\u9fff\u3040-\u30ff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
# Where a window starts: a word character after a non-word one, or any CJK character.
_ANCHOR = re.compile(f"(?<!\\w)\\w|[{_CJK}]")
_CJK_CHAR = re.compile(f"[{_CJK}]")
# A token: a run of word characters outside CJK, or one CJK character.
_TOKEN = re.compile(f"[^\\W{_CJK}]+|[{_CJK}]")
# Up to this many needle keys are looked for one by one; above, through the text's tokens.
_FEW_KEYS = 256


class RestrictedLeakError(RagspineError):
    """RESTRICTED content was found where it must never be (an export or its output)."""


@dataclass(frozen=True)
class Needle:
    """A text that must not appear, and what it is (``label``: shown in place of the text).

    ``anywhere``: matched as a plain substring (canaries). Otherwise a text up to
    :data:`WINDOW_CHARS` long is matched whole (not continued by a word character at an end
    that is one), a longer one by its windows.
    """

    text: str
    label: str
    anywhere: bool = False


@dataclass(frozen=True)
class Leak:
    """Where a needle was found and which (``label``; never its text).

    ``path`` is relative to the scanned root; ``member`` names a zip archive's entry;
    ``location`` is ``"table T, row R, column C"`` inside a database, and ``document`` the
    ``doc_id`` of that row (when it has one).
    """

    path: str
    member: str
    label: str
    location: str = ""
    document: str = ""

    def describe(self) -> str:
        place = f"{self.path}!{self.member}" if self.member else self.path
        if self.location:
            place += f" ({self.location}"
            place += f", document {self.document!r})" if self.document else ")"
        return f"{place} holds {self.label}"


@functools.cache
def _format_chars() -> re.Pattern[str]:
    """A run of Unicode format characters (zero-width space, joiners, bidi marks, BOM …)."""
    planes = (range(0x20000), range(0xE0000, 0xE1000))  # where Unicode puts them
    spans: list[list[int]] = []
    for cp in (cp for r in planes for cp in r if unicodedata.category(chr(cp)) == "Cf"):
        if spans and spans[-1][1] == cp - 1:
            spans[-1][1] = cp
        else:
            spans.append([cp, cp])
    ranges = "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in spans)
    return re.compile(f"[{ranges}]+")


def fold(text: str) -> str:
    """``text`` as the check compares it: NFKC, case-folded, without format characters,
    whitespace runs as one space, stripped.

    >>> fold("  Ｒｅｖｅｎｕｅ\\u200b  GREW\\n\\tfast ")
    'revenue grew fast'
    """
    if not text.isascii():
        text = _format_chars().sub("", unicodedata.normalize("NFKC", text))
    return " ".join(text.casefold().split())


def _json_strings(text: str) -> str:
    """Every string (keys too) of ``text`` when it is a JSON document with escapes, one per
    line; else ``""`` (its folded text is then all there is to read)."""
    if "\\" not in text or text.lstrip()[:1] not in ("{", "[", '"'):
        return ""
    try:
        data = json.loads(text)
    except ValueError:
        return ""
    found: list[str] = []
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            found.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return "\n".join(found)


def _windows(text: str) -> list[str]:
    """Every :data:`WINDOW_CHARS`-character stretch of ``text`` that starts at a word."""
    starts = (m.start() for m in _ANCHOR.finditer(text))
    return [text[i : i + WINDOW_CHARS] for i in starts if i + WINDOW_CHARS <= len(text)]


def _key(piece: str) -> tuple[str, ...] | None:
    """The longest pair of adjacent *inner* tokens of ``piece`` (neither first nor last, so
    whole wherever the piece occurs), else its one inner token, else ``None``."""
    inner = _TOKEN.findall(piece)[1:-1]
    if len(inner) > 1:
        return max(itertools.pairwise(inner), key=lambda pair: len(pair[0] + pair[1]))
    return (inner[0],) if inner else None


def _keys_in(tokens: list[str]) -> set[tuple[str, ...]]:
    """Every token and pair of adjacent tokens, as :func:`_key` makes them."""
    out: set[tuple[str, ...]] = {(t,) for t in tokens}
    out.update(itertools.pairwise(tokens))
    return out


_Ends = tuple[bool, bool]  # (left, right): that end must not be continued by a word character


def _word_char(ch: str) -> bool:
    return (ch.isalnum() or ch == "_") and not _CJK_CHAR.match(ch)


def _ends(text: str) -> _Ends:
    """Which ends of a whole text are word characters (so the title "Plan 10" is not found
    in "Plan 1001"); CJK characters and punctuation need no boundary."""
    return _word_char(text[0]), _word_char(text[-1])


def _text_word(hay: str, at: int) -> bool:
    return _word_char(hay[at])


def _byte_word(hay: bytes, at: int) -> bool:
    return hay[at] >= 0x80 or hay[at : at + 1].isalnum() or hay[at] == 0x5F


def _found(hay: Any, piece: Any, ends: _Ends, word: Any) -> bool:
    """Whether ``piece`` occurs in ``hay`` (str or bytes) with the ``ends`` it must have."""
    left, right = ends
    at = hay.find(piece)
    while at != -1:
        end = at + len(piece)
        if not (left and at and word(hay, at - 1)) and not (
            right and end < len(hay) and word(hay, end)
        ):
            return True
        at = hay.find(piece, at + 1)
    return False


# bytes.translate table: ASCII letters, digits and "_" stay, every other byte is a space
_ASCII_WORDS = bytes(b if chr(b).isascii() and (chr(b).isalnum() or b == 0x5F) else 0x20
                     for b in range(256))
_FREE: _Ends = (False, False)


class _Matcher:
    """Finds many needles in a text or in binary data at once.

    Needles with inner tokens are filed under their longest pair of adjacent ones (or their
    one) and searched for only where that key occurs (a few substring tests, or a set
    intersection with the text's tokens and token pairs when there are many keys); then by
    substring search (whole texts as whole words, windows of longer ones as they are).
    Binary data is searched likewise for the canaries and the texts no longer than a window,
    as UTF-8 bytes (ASCII case ignored), keyed by their longest ASCII word.
    """

    def __init__(self, needles: Sequence[Needle]) -> None:
        self.labels = [n.label for n in needles]
        # (piece, needle, ends)
        self.plain: list[tuple[str, int, _Ends]] = []  # always searched for
        self.by_key: dict[tuple[str, ...], list[tuple[str, int, _Ends]]] = {}
        self.binary_plain: list[tuple[bytes, int, _Ends]] = []
        self.binary_by_key: dict[bytes, list[tuple[bytes, int, _Ends]]] = {}
        for i, needle in enumerate(needles):
            text = fold(needle.text)
            if not text:
                continue
            ends = _FREE if needle.anywhere else _ends(text)
            if needle.anywhere:
                self.plain.append((text, i, ends))
            elif len(text) > WINDOW_CHARS:
                for window in dict.fromkeys(_windows(text)):
                    self._file((window, i, _FREE))
            else:
                self._file((text, i, ends))
            if needle.anywhere or len(text) <= WINDOW_CHARS:
                data = text.encode("utf-8")
                words = [] if needle.anywhere else data.translate(_ASCII_WORDS).split()
                if words:
                    key = max(words, key=len)
                    self.binary_by_key.setdefault(key, []).append((data, i, ends))
                else:
                    self.binary_plain.append((data, i, ends))

    def _file(self, piece: tuple[str, int, _Ends]) -> None:
        key = _key(piece[0])
        if key is None:
            self.plain.append(piece)
        else:
            self.by_key.setdefault(key, []).append(piece)

    def find_text(self, text: str) -> set[str]:
        """The labels of the needles in ``text`` (folded here; JSON strings decoded too)."""
        hays = [fold(text)]
        strings = _json_strings(text)
        if strings:
            hays.append(fold(strings))
        hits: set[int] = set()
        for hay in hays:
            if len(self.by_key) > _FEW_KEYS:
                present: Iterable[tuple[str, ...]] = self.by_key.keys() & _keys_in(
                    _TOKEN.findall(hay)
                )
            else:  # a cheap superset: both tokens occur somewhere
                present = [key for key in self.by_key if all(t in hay for t in key)]
            candidates = self.plain + [c for key in present for c in self.by_key[key]]
            hits.update(
                i for piece, i, ends in candidates
                if i not in hits and _found(hay, piece, ends, _text_word)
            )
        return {self.labels[i] for i in hits}

    def find_bytes(self, data: bytes) -> set[str]:
        """:meth:`find_text` for UTF-8 text, else the binary search (see the class)."""
        try:
            return self.find_text(data.decode("utf-8"))
        except UnicodeDecodeError:
            pass
        hay = data.lower()
        if len(self.binary_by_key) > _FEW_KEYS:
            present: Iterable[bytes] = self.binary_by_key.keys() & set(
                hay.translate(_ASCII_WORDS).split()
            )
        else:
            present = [key for key in self.binary_by_key if key in hay]
        candidates = self.binary_plain + [c for k in present for c in self.binary_by_key[k]]
        return {
            self.labels[i] for piece, i, ends in candidates if _found(hay, piece, ends, _byte_word)
        }


def _chunks(doc: Any, max_chars: int, overlap_chars: int, chunker: Any | None) -> list[Any]:
    """``doc`` chunked as the export chunks it (its chunker, else :func:`chunk_document`)."""
    if chunker is not None:
        return chunker.chunk(doc.body, doc.meta, max_chars=max_chars, overlap_chars=overlap_chars)
    return chunk_document(doc.body, doc.meta, max_chars=max_chars, overlap_chars=overlap_chars)


def restricted_needles(
    docs: Iterable[Any],
    *,
    canaries: Iterable[str] = (),
    max_chars: int = DEFAULT_CHUNK_CHARS,
    overlap_chars: int = DEFAULT_OVERLAP_CHARS,
    chunker: Any | None = None,
) -> list[Needle]:
    """What must not appear in a bundle: the canaries (``"canary #n"``, n counting from 1 as
    given), then per RESTRICTED document (``docs`` are
    :class:`~ragspine_lite.bundle.export.SourceDocument`) its ``doc_id``, title, chunks (as
    the export would chunk it: ``max_chars``, ``overlap_chars``, ``chunker``) and body lines
    (Markdown ``#`` markers stripped) of at least :data:`MIN_NEEDLE_CHARS` folded characters.
    Deduplicated by folded text, the first label kept.
    """
    out: dict[str, Needle] = {}

    def add(text: str, label: str, *, anywhere: bool = False, minimum: int = MIN_NEEDLE_CHARS):
        key = fold(text)
        if len(key) >= minimum:
            out.setdefault(key, Needle(text.strip(), label, anywhere))

    for n, canary in enumerate(canaries, 1):
        add(canary, f"canary #{n}", anywhere=True, minimum=1)
    for doc in docs:
        if not doc.restricted:
            continue
        name = f"RESTRICTED document {doc.meta.doc_id!r}"
        add(doc.meta.doc_id, f"the id of {name}")
        add(doc.meta.title, f"the title of {name}")
        for n, chunk in enumerate(_chunks(doc, max_chars, overlap_chars, chunker), 1):
            add(chunk.text, f"text of chunk {n} of {name}")
        for n, line in enumerate(doc.body.split("\n"), 1):
            add(line.strip().lstrip("#").strip(), f"line {n} of {name}")
    return list(out.values())


def _as_needles(needles: Iterable[Needle | str]) -> list[Needle]:
    """Plain strings are canaries (numbered from 1 in the order given)."""
    out = []
    for n, needle in enumerate(needles, 1):
        if isinstance(needle, str):
            needle = Needle(needle.strip(), f"canary #{n}", anywhere=True)
        if needle.text.strip():
            out.append(needle)
    return out


def _row_document(columns: Sequence[str], row: Sequence[Any]) -> str:
    """The ``doc_id`` of a row: its ``doc_id`` column, or a ``metadata`` JSON's ``doc_id``."""
    values = dict(zip(columns, row, strict=False))
    if isinstance(values.get("doc_id"), str):
        return values["doc_id"]
    metadata = values.get("metadata")
    if isinstance(metadata, str):
        try:
            parsed = json.loads(metadata)
        except ValueError:
            return ""
        if isinstance(parsed, dict) and isinstance(parsed.get("doc_id"), str):
            return parsed["doc_id"]
    return ""


def _table_rows(
    conn: sqlite3.Connection, table: str
) -> tuple[list[str], Iterator[tuple[Any, Sequence[Any]]]]:
    """(columns, (row number, values)…): the rowid where the table has one, else 1, 2, …"""
    quoted = '"' + table.replace('"', '""') + '"'
    try:
        cursor = conn.execute(f"SELECT _rowid_, * FROM {quoted}")
        columns = [d[0] for d in cursor.description][1:]
        return columns, ((r[0], r[1:]) for r in cursor)
    except sqlite3.OperationalError:  # WITHOUT ROWID
        cursor = conn.execute(f"SELECT * FROM {quoted}")
        columns = [d[0] for d in cursor.description]
        return columns, enumerate(cursor, 1)


def _row_leaks(
    rel: str, table: str, number: Any, columns: list[str], row: Sequence[Any], matcher: _Matcher
) -> list[Leak]:
    """The leaks of one row, value by value, named by table, row, column and document."""
    leaks: list[Leak] = []
    for column, value in zip(columns, row, strict=False):
        if isinstance(value, str):
            labels = sorted(matcher.find_text(value))
        elif isinstance(value, bytes):
            labels = sorted(matcher.find_bytes(value))
        else:
            continue
        if not labels:
            continue
        where = f"table {table}, row {number}, column {column}"
        document = _row_document(columns, row)
        if document and matcher.find_text(document):  # naming it would tell
            where, document = f"{where}, of a document whose id it is", ""
        leaks.extend(Leak(rel, "", label, where, document) for label in labels)
    return leaks


def _scan_sqlite(path: Path, rel: str, matcher: _Matcher) -> list[Leak]:
    """Every text/blob value of every row of every table of the database at ``path``."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise RestrictedLeakError(f"cannot open {rel!r} to check it: {exc}") from None
    leaks: list[Leak] = []
    try:
        tables = ["sqlite_master"] + [
            name
            for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type='table'")
            if not (sql or "").upper().startswith("CREATE VIRTUAL")  # its shadow tables are read
        ]
        for table in tables:
            columns, rows = _table_rows(conn, table)
            for number, row in rows:
                leaks.extend(_row_leaks(rel, table, number, columns, row, matcher))
    except sqlite3.Error as exc:
        raise RestrictedLeakError(f"cannot read {rel!r} to check it: {exc}") from None
    finally:
        conn.close()
    return leaks


def _files(base: Path) -> list[tuple[Path, str]]:
    if base.is_file():
        return [(base, base.name)]
    paths = sorted(p for p in base.rglob("*") if p.is_file())
    return [(p, p.relative_to(base).as_posix()) for p in paths]


def scan_for_leaks(root: str | Path, needles: Iterable[Needle | str]) -> list[Leak]:
    """Every leak under ``root`` (a folder, or one file): SQLite databases row by row, then the
    bytes of every file and zip member. Plain strings in ``needles`` are canaries."""
    matcher = _Matcher(_as_needles(needles))
    if not matcher.labels:
        return []
    leaks: list[Leak] = []
    for path, rel in _files(Path(root)):
        data = path.read_bytes()
        logical: set[str] = set()
        if data.startswith(_SQLITE_MAGIC):
            found = _scan_sqlite(path, rel, matcher)
            leaks.extend(found)
            logical = {leak.label for leak in found}
        elif data.startswith(_ZLIB_MAGIC):
            found = _scan_pack(data, rel, matcher)
            leaks.extend(found)
            logical = {leak.label for leak in found}
        raw = matcher.find_bytes(data) - logical
        leaks.extend(Leak(rel, "", label) for label in sorted(raw))
        if data.startswith(_ZIP_MAGIC):
            leaks.extend(_scan_zip(path, rel, matcher))
    return leaks


def _scan_pack(data: bytes, rel: str, matcher: _Matcher) -> list[Leak]:
    """A bundle pack file decompressed: its chunk rows value by value (named like database
    rows), then the rest of its JSON; nothing for zlib data that is not a pack."""
    from ragspine_lite.bundle.manifest import BundleFormatError
    from ragspine_lite.bundle.packs import unpack

    try:
        meta, _ = unpack(data, rel)
    except BundleFormatError:
        return []
    leaks: list[Leak] = []
    columns, rows = meta.get("fields"), meta.get("rows")
    if isinstance(columns, list) and isinstance(rows, list):
        del meta["rows"]
        for number, row in enumerate(rows, 1):
            leaks.extend(_row_leaks(rel, "chunks", number, columns, row, matcher))
    found = {leak.label for leak in leaks}
    rest = matcher.find_text(json.dumps(meta, ensure_ascii=False)) - found
    leaks.extend(Leak(rel, "", label) for label in sorted(rest))
    return leaks


def _scan_zip(path: Path, rel: str, matcher: _Matcher) -> list[Leak]:
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        return []
    leaks = []
    with archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            for label in sorted(matcher.find_bytes(archive.read(info))):
                leaks.append(Leak(rel, info.filename, label))
    return leaks


def verify_no_leaks(root: str | Path, needles: Iterable[Needle | str]) -> int:
    """Raise :class:`RestrictedLeakError` naming where and what (never the text) when
    :func:`scan_for_leaks` finds anything; else return the number of needles."""
    needle_list = _as_needles(needles)
    leaks = scan_for_leaks(root, needle_list)
    if not leaks:
        return len(needle_list)
    shown = "; ".join(leak.describe() for leak in leaks[:SHOWN_LEAKS])
    more = f" (and {len(leaks) - SHOWN_LEAKS} more)" if len(leaks) > SHOWN_LEAKS else ""
    holders = sorted({leak.document for leak in leaks if leak.document})
    hint = ""
    if holders:  # RESTRICTED documents are never exported: these are public ones
        names = ", ".join(repr(d) for d in holders[:SHOWN_LEAKS])
        if len(holders) > SHOWN_LEAKS:
            names += f" and {len(holders) - SHOWN_LEAKS} more"
        hint = (
            f". The exported document(s) {names}, not RESTRICTED, hold that content: remove it "
            "from them, or label them RESTRICTED"
        )
    raise RestrictedLeakError(f"RESTRICTED content found in the bundle output: {shown}{more}{hint}")
