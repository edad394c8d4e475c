"""Paragraph-granular chunking with honest provenance (pure, stdlib only).

Character count stands in for tokens, so chunking stays offline and deterministic. A chunk's
``text`` is always a contiguous substring of the document's non-blank paragraphs joined by
``"\\n"``, and its ``source_locator`` names the real 1-based paragraph span.

>>> meta = DocumentMeta(doc_id="d1")
>>> [c.source_locator for c in chunk_document("alpha\\n\\nbeta", meta)]
['d1#para1-2']
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "DEFAULT_CHUNK_CHARS",
    "DEFAULT_OVERLAP_CHARS",
    "Chunk",
    "DocumentMeta",
    "chunk_document",
]

DEFAULT_CHUNK_CHARS = 480
DEFAULT_OVERLAP_CHARS = 80

_SENTENCE_ENDERS = "。！？；.!?;"
# A run of non-enders followed by any enders, or a run of enders: the matches concatenate back
# to the paragraph exactly, so sentence pieces never lose or invent a character.
_ENDERS_CLASS = re.escape(_SENTENCE_ENDERS)
_SENTENCE_RE = re.compile(f"[^{_ENDERS_CLASS}]+[{_ENDERS_CLASS}]*|[{_ENDERS_CLASS}]+")


@dataclass
class DocumentMeta:
    """Document-level metadata copied onto every chunk.

    ``source_locator_prefix`` empty → locators start with ``doc_id``.
    """

    doc_id: str
    title: str = ""
    topic: str = ""
    entity: str = ""
    geography: str = ""
    period: str = ""
    language: str = ""
    sensitivity: str = "INTERNAL"
    source_locator_prefix: str = ""


@dataclass
class Chunk:
    """One retrievable unit: ``chunk_id = f"{doc_id}#c{seq}"``, ``seq`` 0-based per document.

    ``para_start``/``para_end`` are the 1-based inclusive paragraph span that ``source_locator``
    names. ``parent_id``, ``heading``, ``window_text`` and ``parent_locator`` are filled only by
    structure-aware chunkers; ``window_text`` is generation context, never a citation.
    """

    chunk_id: str
    doc_id: str
    seq: int
    text: str
    source_locator: str
    para_start: int
    para_end: int
    title: str = ""
    topic: str = ""
    entity: str = ""
    geography: str = ""
    period: str = ""
    language: str = ""
    sensitivity: str = "INTERNAL"
    parent_id: str = ""
    heading: str = ""
    window_text: str = ""
    parent_locator: str = ""


def _validate_budget(max_chars: int, overlap_chars: int) -> None:
    """Raise ``ValueError`` unless ``0 <= overlap_chars < max_chars``."""
    if max_chars <= 0:
        raise ValueError(f"max_chars must be > 0, got {max_chars!r}")
    if overlap_chars < 0:
        raise ValueError(f"overlap_chars must be >= 0, got {overlap_chars!r}")
    if overlap_chars >= max_chars:
        raise ValueError(
            f"overlap_chars must be < max_chars, got overlap_chars={overlap_chars!r} "
            f"and max_chars={max_chars!r}"
        )


def _split_paragraphs(text: str) -> list[str]:
    """Non-blank lines of ``text``, stripped; list index + 1 is the paragraph number."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__} {text!r:.60}")
    return [line.strip() for line in text.split("\n") if line.strip()]


def _locator(prefix: str, start: int, end: int) -> str:
    """``{prefix}#para{a}`` or ``{prefix}#para{a}-{b}``."""
    return f"{prefix}#para{start}" if start == end else f"{prefix}#para{start}-{end}"


def _locator_prefix(meta: DocumentMeta) -> str:
    return meta.source_locator_prefix or meta.doc_id


def _joined_len(paragraphs: list[str]) -> int:
    """Length of ``"\\n".join(paragraphs)`` without building it."""
    return sum(len(p) for p in paragraphs) + max(len(paragraphs) - 1, 0)


def _split_oversized(paragraph: str, max_chars: int) -> list[str]:
    """Cut one paragraph into pieces ≤ ``max_chars`` that concatenate back to it exactly."""
    units: list[str] = []
    for sentence in _SENTENCE_RE.findall(paragraph):
        if len(sentence) > max_chars:
            units.extend(sentence[i : i + max_chars] for i in range(0, len(sentence), max_chars))
        else:
            units.append(sentence)
    pieces: list[str] = []
    current = ""
    for unit in units:
        if current and len(current) + len(unit) > max_chars:
            pieces.append(current)
            current = unit
        else:
            current += unit
    if current:
        pieces.append(current)
    return pieces


def _overlap(paragraphs: list[str], numbers: list[int], overlap_chars: int) -> list[int]:
    """The longest run of trailing paragraph ``numbers`` whose text fits in ``overlap_chars``."""
    carry: list[int] = []
    for previous in reversed(numbers):
        if _joined_len([paragraphs[n - 1] for n in (previous, *carry)]) > overlap_chars:
            break
        carry.insert(0, previous)
    return carry


def _make_chunk(meta: DocumentMeta, seq: int, text: str, start: int, end: int) -> Chunk:
    return Chunk(
        chunk_id=f"{meta.doc_id}#c{seq}",
        doc_id=meta.doc_id,
        seq=seq,
        text=text,
        source_locator=_locator(_locator_prefix(meta), start, end),
        para_start=start,
        para_end=end,
        title=meta.title,
        topic=meta.topic,
        entity=meta.entity,
        geography=meta.geography,
        period=meta.period,
        language=meta.language,
        sensitivity=meta.sensitivity,
    )


def _renumber(chunk: Chunk, *, seq: int, offset: int, prefix: str, **fields: str) -> Chunk:
    """Move a section-local chunk to document-global ``seq`` and paragraph numbers."""
    start, end = chunk.para_start + offset, chunk.para_end + offset
    return dataclasses.replace(
        chunk,
        chunk_id=f"{chunk.doc_id}#c{seq}",
        seq=seq,
        source_locator=_locator(prefix, start, end),
        para_start=start,
        para_end=end,
        **fields,
    )


def chunk_document(
    text: str,
    meta: DocumentMeta,
    *,
    max_chars: int = DEFAULT_CHUNK_CHARS,
    overlap_chars: int = DEFAULT_OVERLAP_CHARS,
) -> list[Chunk]:
    """Split ``text`` into paragraph-packed chunks of at most ``max_chars`` characters.

    Paragraphs (non-blank lines, stripped) are packed greedily; when the next one does not fit,
    the buffer becomes a chunk and the next buffer starts with the longest run of its trailing
    paragraphs that fits in ``overlap_chars``. A paragraph longer than ``max_chars`` is split
    into sentence pieces (hard-cut if a sentence is itself too long), each its own chunk, with
    no overlap on either side. Raises ``ValueError`` for a bad budget, even for empty text.

    >>> meta = DocumentMeta(doc_id="d")
    >>> doc = "\\n".join(c * 100 for c in "abcd")
    >>> [(c.para_start, c.para_end) for c in chunk_document(doc, meta, max_chars=250,
    ...                                                     overlap_chars=120)]
    [(1, 2), (2, 3), (3, 4)]
    """
    _validate_budget(max_chars, overlap_chars)
    paragraphs = _split_paragraphs(text)
    chunks: list[Chunk] = []
    # The buffer holds 1-based paragraph numbers; the first ``carried`` of them are overlap
    # copied from the previous chunk, the rest are new content.
    buffer: list[int] = []
    carried = 0

    def texts(numbers: list[int]) -> list[str]:
        return [paragraphs[n - 1] for n in numbers]

    def emit(numbers: list[int]) -> None:
        chunks.append(
            _make_chunk(meta, len(chunks), "\n".join(texts(numbers)), numbers[0], numbers[-1])
        )

    for number, paragraph in enumerate(paragraphs, start=1):
        if len(paragraph) > max_chars:
            if len(buffer) > carried:
                emit(buffer)
            buffer, carried = [], 0
            for piece in _split_oversized(paragraph, max_chars):
                chunks.append(_make_chunk(meta, len(chunks), piece, number, number))
            continue
        if _joined_len([*texts(buffer), paragraph]) <= max_chars:
            buffer.append(number)
            continue
        if len(buffer) > carried:
            emit(buffer)
            buffer = _overlap(paragraphs, buffer, overlap_chars)
        # Only carried paragraphs are left: drop them from the front until the new one fits.
        while buffer and _joined_len([*texts(buffer), paragraph]) > max_chars:
            buffer.pop(0)
        carried = len(buffer)
        buffer.append(number)
    if len(buffer) > carried:
        emit(buffer)
    return chunks


class _ParagraphChunker:
    """Base of the strategies that work on a document's paragraphs.

    :meth:`chunk` validates the budget and splits the paragraphs; text without any, or a
    document that :meth:`_packs_plainly`, is packed by :func:`chunk_document`; the rest goes
    to the subclass's :meth:`_chunk_paragraphs`.
    """

    def chunk(
        self,
        text: str,
        meta: DocumentMeta,
        *,
        max_chars: int = DEFAULT_CHUNK_CHARS,
        overlap_chars: int = DEFAULT_OVERLAP_CHARS,
    ) -> list[Chunk]:
        _validate_budget(max_chars, overlap_chars)
        paragraphs = _split_paragraphs(text)
        if not paragraphs or self._packs_plainly(meta):
            return chunk_document(text, meta, max_chars=max_chars, overlap_chars=overlap_chars)
        return self._chunk_paragraphs(paragraphs, meta, max_chars, overlap_chars)

    def _packs_plainly(self, meta: DocumentMeta) -> bool:
        """Whether this document skips the strategy for plain packing (default: never)."""
        return False

    def _chunk_paragraphs(
        self, paragraphs: list[str], meta: DocumentMeta, max_chars: int, overlap_chars: int
    ) -> list[Chunk]:
        raise NotImplementedError


def _pack_spans(
    paragraphs: list[str],
    meta: DocumentMeta,
    spans: Iterable[tuple[int, int, dict[str, str]]],
    max_chars: int,
    overlap_chars: int,
) -> list[Chunk]:
    """Pack each ``(first, last, fields)`` paragraph span on its own, numbered document-wide.

    ``first``/``last`` are 1-based inclusive; ``fields`` are set on every chunk of the span.
    """
    prefix = _locator_prefix(meta)
    out: list[Chunk] = []
    for first, last, fields in spans:
        span_text = "\n".join(paragraphs[first - 1 : last])
        for local in chunk_document(
            span_text, meta, max_chars=max_chars, overlap_chars=overlap_chars
        ):
            out.append(_renumber(local, seq=len(out), offset=first - 1, prefix=prefix, **fields))
    return out
