"""chunking.sentence_window_chunker: one chunk per sentence with a context window."""

from __future__ import annotations

import pytest

from ragspine_lite.chunking.chunking import DocumentMeta
from ragspine_lite.chunking.sentence_window_chunker import (
    DEFAULT_WINDOW_SIZE,
    SentenceWindowChunker,
)

META = DocumentMeta("sw", topic="ops", sensitivity="PUBLIC")

DOC = "第一句。第二句！第三句？\n\n第四句；第五句\nSixth one. Seventh one!"


def test_default_window_size() -> None:
    assert DEFAULT_WINDOW_SIZE == 3
    assert SentenceWindowChunker().window_size == 3


def test_negative_window_size_is_clamped_to_zero() -> None:
    assert SentenceWindowChunker(-4).window_size == 0


def test_non_int_window_size_is_rejected() -> None:
    with pytest.raises(TypeError, match="window_size"):
        SentenceWindowChunker("3")  # type: ignore[arg-type]


def test_one_chunk_per_sentence_with_paragraph_locators() -> None:
    chunks = SentenceWindowChunker(window_size=1).chunk(DOC, META)
    assert [c.text for c in chunks] == [
        "第一句。", "第二句！", "第三句？", "第四句；", "第五句", "Sixth one.", "Seventh one!"
    ]
    assert [c.para_start for c in chunks] == [1, 1, 1, 2, 2, 3, 3]
    assert all(c.para_start == c.para_end for c in chunks)
    assert [c.source_locator for c in chunks] == [f"sw#para{c.para_start}" for c in chunks]
    assert [c.chunk_id for c in chunks] == [f"sw#c{i}" for i in range(7)]
    assert all(c.topic == "ops" and c.sensitivity == "PUBLIC" for c in chunks)
    assert all((c.parent_id, c.heading, c.parent_locator) == ("", "", "") for c in chunks)


def test_window_spans_neighbours_across_paragraphs() -> None:
    chunks = SentenceWindowChunker(window_size=1).chunk(DOC, META)
    assert chunks[0].window_text == "第一句。第二句！"
    assert chunks[1].window_text == "第一句。第二句！第三句？"
    assert chunks[2].window_text == "第二句！第三句？\n第四句；"
    assert chunks[4].window_text == "第四句；第五句\nSixth one."
    assert chunks[5].window_text == "第五句\nSixth one. Seventh one!"
    assert chunks[6].window_text == "Sixth one. Seventh one!"


def test_window_zero_gives_window_equal_to_text() -> None:
    chunks = SentenceWindowChunker(window_size=0).chunk(DOC, META)
    assert chunks
    assert all(c.window_text == c.text for c in chunks)


def test_large_window_covers_the_whole_document() -> None:
    chunks = SentenceWindowChunker(window_size=50).chunk(DOC, META)
    paragraphs = [p.strip() for p in DOC.split("\n") if p.strip()]
    assert {c.window_text for c in chunks} == {"\n".join(paragraphs)}


def test_text_and_window_are_contiguous_source_substrings() -> None:
    text = "Alpha beta. Gamma delta!  Epsilon?\nZeta eta; theta.\n甲乙。丙丁！"
    joined = "\n".join(p.strip() for p in text.split("\n") if p.strip())
    for size in range(4):
        for chunk in SentenceWindowChunker(size).chunk(text, META):
            assert chunk.text in joined
            assert chunk.text in chunk.window_text
            assert chunk.window_text in joined
            assert chunk.text == chunk.text.strip()


def test_fragments_without_content_are_dropped() -> None:
    chunks = SentenceWindowChunker(0).chunk("...Start here. . !\n。。。\nEnd.", META)
    assert [c.text for c in chunks] == ["Start here.", "End."]
    assert [c.para_start for c in chunks] == [1, 3]


def test_empty_text_gives_no_chunks_and_budget_is_validated() -> None:
    assert SentenceWindowChunker().chunk("", META) == []
    assert SentenceWindowChunker().chunk("\n  \n", META) == []
    with pytest.raises(ValueError, match="overlap_chars"):
        SentenceWindowChunker().chunk("", META, max_chars=10, overlap_chars=20)
    with pytest.raises(ValueError, match="max_chars"):
        SentenceWindowChunker().chunk("One. Two.", META, max_chars=0)


def test_locator_prefix_is_used() -> None:
    meta = DocumentMeta("sw", source_locator_prefix="kb/sw.txt")
    chunks = SentenceWindowChunker().chunk("A. B.\nC.", meta)
    assert [c.source_locator for c in chunks] == ["kb/sw.txt#para1"] * 2 + ["kb/sw.txt#para2"]
