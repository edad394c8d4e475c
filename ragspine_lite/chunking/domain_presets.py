"""Domain presets: layout-aware chunkers that differ only in what opens a section (pure).

* :class:`LawsChunker` — every clause (``第N条/款/项``), chapter, markdown or numbered heading.
* :class:`BookChunker` — chapters, markdown and numbered headings; short prose lines stay put.
* :class:`QaChunker` — every question (``Q:`` / ``问：`` / a line ending in ``?``); its answer
  follows in the same section, so question and answer share a ``parent_id``.
* :class:`ParentChildChunker` — the base heading rule; each child also carries its whole
  section as ``window_text`` and the section's span as ``parent_locator``.

>>> from ragspine_lite.chunking.chunking import DocumentMeta
>>> [c.heading for c in LawsChunker().chunk("第一条 甲。\\n第二条 乙。", DocumentMeta("law"))]
['第一条 甲。', '第二条 乙。']
"""

from __future__ import annotations

import re

from ragspine_lite.chunking.layout_chunker import (
    _CHAPTER_HEADING_RE,
    _CJK_NUMERALS,
    _MARKDOWN_HEADING_RE,
    _NUMBERED_HEADING_RE,
    LayoutAwareChunker,
    _is_structural_heading,
)

__all__ = ["BookChunker", "LawsChunker", "ParentChildChunker", "QaChunker"]

_CLAUSE_HEADING_RE = re.compile(f"^第[0-9{_CJK_NUMERALS}]+[条款项]")
_QUESTION_PREFIX_RE = re.compile(r"^(?:[Qq][:.、)）]|问[：:、])")
_QUESTION_SUFFIXES = ("?", "？")


class LawsChunker(LayoutAwareChunker):
    """Statutes and regulations: each clause is its own section; no short-line rule."""

    def _is_heading(self, line: str) -> bool:
        stripped = line.strip()
        return bool(
            _MARKDOWN_HEADING_RE.match(stripped)
            or _CHAPTER_HEADING_RE.match(stripped)
            or _CLAUSE_HEADING_RE.match(stripped)
            or _NUMBERED_HEADING_RE.match(stripped)
        )


class BookChunker(LayoutAwareChunker):
    """Books and long reports: chapters, markdown and numbered headings; no short-line rule."""

    def _is_heading(self, line: str) -> bool:
        return _is_structural_heading(line.strip())


class QaChunker(LayoutAwareChunker):
    """FAQs and interviews: each question opens a section that holds its answer."""

    def _is_heading(self, line: str) -> bool:
        stripped = line.strip()
        return bool(_QUESTION_PREFIX_RE.match(stripped)) or stripped.endswith(_QUESTION_SUFFIXES)


class ParentChildChunker(LayoutAwareChunker):
    """Small-to-big: retrieve the small child, hand its whole section to generation."""

    def _child_extra(self, section_text: str, parent_locator: str) -> dict[str, str]:
        return {"window_text": section_text, "parent_locator": parent_locator}
