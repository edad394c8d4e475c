"""chunking.layout_chunker: is_heading, group_children_by_parent, LayoutAwareChunker."""

from __future__ import annotations

import itertools

import pytest

from ragspine_lite.chunking.chunking import Chunk, DocumentMeta, chunk_document
from ragspine_lite.chunking.layout_chunker import (
    LayoutAwareChunker,
    group_children_by_parent,
    is_heading,
)

META = DocumentMeta("rep", title="Report", entity="ACME_HK", sensitivity="CONFIDENTIAL")


def _paragraphs(text: str) -> list[str]:
    return [line.strip() for line in text.split("\n") if line.strip()]


def assert_global_provenance(text: str, chunks: list[Chunk], meta: DocumentMeta) -> None:
    paragraphs = _paragraphs(text)
    prefix = meta.source_locator_prefix or meta.doc_id
    for seq, chunk in enumerate(chunks):
        assert (chunk.seq, chunk.chunk_id) == (seq, f"{meta.doc_id}#c{seq}")
        a, b = chunk.para_start, chunk.para_end
        assert chunk.source_locator == (f"{prefix}#para{a}" if a == b else f"{prefix}#para{a}-{b}")
        assert chunk.text in "\n".join(paragraphs[a - 1 : b])


@pytest.mark.parametrize(
    "line",
    [
        "# 一级标题",
        "## 1.2 收入分析",
        "###### deep heading",
        "第三章 风险因素",
        "第12节 附录",
        "第一百篇",
        "1. 概述",
        "2.3.1) Method",
        "一、背景",
        "十二）其他",
        "IV. Results",
        "iii) notes",
        "收入概览",
        "Annual Review",
        "   padded heading   ",
    ],
)
def test_headings(line: str) -> None:
    assert is_heading(line)


@pytest.mark.parametrize(
    "line",
    [
        "",
        "   ",
        "收入增长，利润下降。",
        "Revenue grew, profit fell.",
        "This sentence ends with a period.",
        "#no space after the hash, so no",
        "####### seven hashes, too many",
        "注意：以下内容",
        "x" * 31,
        "一个没有标点但是超过三十个字符的很长很长很长很长很长很长的句子啊",
    ],
)
def test_non_headings(line: str) -> None:
    assert not is_heading(line)


def test_short_line_limit_is_thirty_chars() -> None:
    assert is_heading("a" * 30)
    assert not is_heading("a" * 31)


def test_group_children_by_parent_keeps_order_and_falls_back_to_chunk_id() -> None:
    def c(chunk_id: str, parent: str) -> Chunk:
        return Chunk(chunk_id, "d", 0, "t", "d#para1", 1, 1, parent_id=parent)

    chunks = [c("d#c0", "d#s0"), c("d#c1", ""), c("d#c2", "d#s0"), c("d#c3", "d#s1")]
    groups = group_children_by_parent(chunks)
    assert list(groups) == ["d#s0", "d#c1", "d#s1"]
    assert [x.chunk_id for x in groups["d#s0"]] == ["d#c0", "d#c2"]
    assert [x.chunk_id for x in groups["d#c1"]] == ["d#c1"]
    assert group_children_by_parent([]) == {}


DOC = "\n".join(
    [
        "Preface text that is long enough to be a sentence, really.",
        "# Results",
        "Revenue grew strongly in every market we serve, led by Hong Kong.",
        "Profit rose as well, although costs increased.",
        "## Risks",
        "Rates may fall, which would reduce investment income.",
    ]
)


def test_sections_get_heading_and_parent_id() -> None:
    chunks = LayoutAwareChunker().chunk(DOC, META)
    assert [(c.heading, c.parent_id, c.para_start, c.para_end) for c in chunks] == [
        ("", "rep#s0", 1, 1),
        ("# Results", "rep#s1", 2, 4),
        ("## Risks", "rep#s2", 5, 6),
    ]
    assert chunks[1].text == "\n".join(_paragraphs(DOC)[1:4])
    assert [c.source_locator for c in chunks] == ["rep#para1", "rep#para2-4", "rep#para5-6"]
    assert_global_provenance(DOC, chunks, META)


def test_first_section_index_is_zero_without_preamble() -> None:
    chunks = LayoutAwareChunker().chunk("# A\nalpha, one.\n# B\nbeta, two.", META)
    assert [c.parent_id for c in chunks] == ["rep#s0", "rep#s1"]
    assert [c.heading for c in chunks] == ["# A", "# B"]


def test_never_merges_across_a_heading_even_if_budget_allows() -> None:
    text = "# A\nshort, a.\n# B\nshort, b."
    assert len(chunk_document(text, META)) == 1  # the plain packer would merge everything
    chunks = LayoutAwareChunker().chunk(text, META)
    assert [(c.para_start, c.para_end) for c in chunks] == [(1, 2), (3, 4)]


def test_budget_split_inside_a_section_keeps_global_numbers() -> None:
    body = [f"Paragraph {i} of the section has some words, more words." for i in range(6)]
    text = "Intro, before headings.\n# Big section\n" + "\n".join(body)
    chunks = LayoutAwareChunker().chunk(text, META, max_chars=130, overlap_chars=60)
    big = [c for c in chunks if c.heading == "# Big section"]
    assert len(big) > 2
    assert {c.parent_id for c in big} == {"rep#s1"}
    assert big[0].para_start == 2
    assert big[-1].para_end == 8
    # Overlap is kept inside the section (consecutive chunks share a paragraph).
    assert all(b.para_start <= a.para_end for a, b in itertools.pairwise(big))
    assert_global_provenance(text, chunks, META)


def test_oversized_paragraph_in_a_section_is_split_with_global_range() -> None:
    long_paragraph = "香港业务投资收益下降。" * 60
    text = f"第一章 概况\n简介，一句。\n第二章 详情\n{long_paragraph}"
    chunks = LayoutAwareChunker().chunk(text, META, max_chars=100, overlap_chars=20)
    pieces = [c for c in chunks if c.heading == "第二章 详情" and c.para_start == 4]
    assert len(pieces) > 1
    assert all(c.para_end == 4 and c.source_locator == "rep#para4" for c in pieces)
    assert "".join(c.text for c in pieces) == long_paragraph
    assert_global_provenance(text, chunks, META)


def test_metadata_is_copied_and_window_fields_stay_empty() -> None:
    for chunk in LayoutAwareChunker().chunk(DOC, META):
        assert (chunk.title, chunk.entity, chunk.sensitivity) == (
            "Report", "ACME_HK", "CONFIDENTIAL"
        )
        assert (chunk.window_text, chunk.parent_locator) == ("", "")


def test_locator_prefix_is_used() -> None:
    meta = DocumentMeta("rep", source_locator_prefix="docs/rep.md")
    chunks = LayoutAwareChunker().chunk(DOC, meta)
    assert chunks[1].source_locator == "docs/rep.md#para2-4"
    assert chunks[1].parent_id == "rep#s1"


@pytest.mark.parametrize("text", ["", " \n\t\n"])
def test_empty_text_gives_no_chunks(text: str) -> None:
    assert LayoutAwareChunker().chunk(text, META) == []


def test_budget_is_validated_even_for_empty_text() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        LayoutAwareChunker().chunk("", META, max_chars=0)


def test_only_headings_give_one_chunk_each() -> None:
    chunks = LayoutAwareChunker().chunk("# A\n# B\n# C", META)
    assert [(c.text, c.heading, c.parent_id) for c in chunks] == [
        ("# A", "# A", "rep#s0"), ("# B", "# B", "rep#s1"), ("# C", "# C", "rep#s2")
    ]


class _UpperHeadings(LayoutAwareChunker):
    def _is_heading(self, line: str) -> bool:
        return line.isupper()

    def _child_extra(self, section_text: str, parent_locator: str) -> dict[str, str]:
        return {"parent_locator": parent_locator, "window_text": section_text.upper()}


def test_hooks_are_overridable() -> None:
    text = "INTRO\nsome text, here.\nNEXT\nmore text, there."
    chunks = _UpperHeadings().chunk(text, META)
    assert [c.heading for c in chunks] == ["INTRO", "NEXT"]
    assert [c.parent_locator for c in chunks] == ["rep#para1-2", "rep#para3-4"]
    assert chunks[0].window_text == "INTRO\nSOME TEXT, HERE."


def test_same_input_gives_identical_output() -> None:
    assert LayoutAwareChunker().chunk(DOC, META) == LayoutAwareChunker().chunk(DOC, META)
