"""Layout-aware chunking: split at headings, never across them (pure).

Each heading paragraph opens a section; every section is packed by
:func:`~ragspine_lite.chunking.chunking.chunk_document` on its own, so no chunk ever spans two
sections. Chunks carry their section's ``heading`` and ``parent_id = f"{doc_id}#s{k}"``.

>>> from ragspine_lite.chunking.chunking import DocumentMeta
>>> chunks = LayoutAwareChunker().chunk("# A\\nalpha.\\n# B\\nbeta.", DocumentMeta("d"))
>>> [(c.heading, c.parent_id, c.source_locator) for c in chunks]
[('# A', 'd#s0', 'd#para1-2'), ('# B', 'd#s1', 'd#para3-4')]
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ragspine_lite.chunking.chunking import (
    Chunk,
    DocumentMeta,
    _locator,
    _locator_prefix,
    _pack_spans,
    _ParagraphChunker,
)
from ragspine_lite.text.markdown import HEADING

__all__ = ["LayoutAwareChunker", "group_children_by_parent", "is_heading"]

_CJK_NUMERALS = "一二三四五六七八九十百千"
_MARKDOWN_HEADING_RE = re.compile(rf"^{HEADING}\S")
_CHAPTER_HEADING_RE = re.compile(f"^第[0-9{_CJK_NUMERALS}]+[章节篇部回讲]")
_NUMBERED_HEADING_RE = re.compile(
    rf"^(\d+(\.\d+)*|[{_CJK_NUMERALS}]+|[IVXLCDMivxlcdm]+)[.、)）]\s*\S"
)
_SHORT_HEADING_MAX_CHARS = 30
_SHORT_HEADING_FORBIDDEN = frozenset("。！？；…，、：.!?;,:")


def _is_structural_heading(line: str) -> bool:
    """Markdown ATX, Chinese chapter or numbered heading (``line`` already stripped)."""
    return bool(
        _MARKDOWN_HEADING_RE.match(line)
        or _CHAPTER_HEADING_RE.match(line)
        or _NUMBERED_HEADING_RE.match(line)
    )


def is_heading(line: str) -> bool:
    """Whether a line looks like a heading.

    True for a markdown ATX heading, a Chinese chapter (``第三章 …``), a numbered heading
    (``1.2.``, ``一、``, ``IV)``) or a short line (≤ 30 chars) without sentence punctuation.

    >>> is_heading("## 1.2 收入分析"), is_heading("收入概览"), is_heading("收入增长，利润下降。")
    (True, True, False)
    """
    stripped = line.strip()
    if not stripped:
        return False
    if _is_structural_heading(stripped):
        return True
    return len(stripped) <= _SHORT_HEADING_MAX_CHARS and not (
        _SHORT_HEADING_FORBIDDEN.intersection(stripped)
    )


def group_children_by_parent(chunks: Iterable[Chunk]) -> dict[str, list[Chunk]]:
    """Group chunks by ``parent_id`` (a chunk without one is its own group); order is kept."""
    groups: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        groups.setdefault(chunk.parent_id or chunk.chunk_id, []).append(chunk)
    return groups


class LayoutAwareChunker(_ParagraphChunker):
    """Chunk per section; subclasses change ``_is_heading`` and ``_child_extra`` only."""

    def _is_heading(self, line: str) -> bool:
        """Whether this (stripped, non-blank) paragraph opens a new section."""
        return is_heading(line)

    def _child_extra(self, section_text: str, parent_locator: str) -> dict[str, str]:
        """Extra :class:`Chunk` fields for every chunk of a section (default: none)."""
        return {}

    def _sections(self, paragraphs: list[str]) -> list[tuple[str, int, int]]:
        """``(heading, first, last)`` per section, 1-based inclusive paragraph numbers."""
        sections: list[tuple[str, int, int]] = []
        for number, paragraph in enumerate(paragraphs, start=1):
            if self._is_heading(paragraph):
                sections.append((paragraph, number, number))
            elif not sections:
                sections.append(("", number, number))  # the preamble before any heading
            else:
                heading, first, _ = sections[-1]
                sections[-1] = (heading, first, number)
        return sections

    def _chunk_paragraphs(
        self, paragraphs: list[str], meta: DocumentMeta, max_chars: int, overlap_chars: int
    ) -> list[Chunk]:
        """Chunk each section separately; paragraph numbers and ``seq`` stay document-global."""
        prefix = _locator_prefix(meta)
        spans: list[tuple[int, int, dict[str, str]]] = []
        for index, (heading, first, last) in enumerate(self._sections(paragraphs)):
            section_text = "\n".join(paragraphs[first - 1 : last])
            extra = self._child_extra(section_text, _locator(prefix, first, last))
            fields = {"heading": heading, "parent_id": f"{meta.doc_id}#s{index}", **extra}
            spans.append((first, last, fields))
        return _pack_spans(paragraphs, meta, spans, max_chars, overlap_chars)
