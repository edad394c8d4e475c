"""chunking.chunking: DocumentMeta, Chunk and the chunk_document packing rules."""

from __future__ import annotations

import dataclasses
import random

import pytest

from ragspine_lite.chunking.chunking import (
    _SENTENCE_RE,
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    Chunk,
    DocumentMeta,
    chunk_document,
)

META = DocumentMeta(doc_id="doc-1")


def _paragraphs(text: str) -> list[str]:
    return [line.strip() for line in text.split("\n") if line.strip()]


def assert_provenance(text: str, chunks: list[Chunk], meta: DocumentMeta, max_chars: int) -> None:
    """Every chunk is a contiguous substring of its named paragraph span; ids are contiguous."""
    paragraphs = _paragraphs(text)
    joined = "\n".join(paragraphs)
    prefix = meta.source_locator_prefix or meta.doc_id
    for seq, chunk in enumerate(chunks):
        assert chunk.seq == seq
        assert chunk.chunk_id == f"{meta.doc_id}#c{seq}"
        assert chunk.doc_id == meta.doc_id
        assert 1 <= chunk.para_start <= chunk.para_end <= len(paragraphs)
        a, b = chunk.para_start, chunk.para_end
        expected_locator = f"{prefix}#para{a}" if a == b else f"{prefix}#para{a}-{b}"
        assert chunk.source_locator == expected_locator
        span = "\n".join(paragraphs[a - 1 : b])
        assert chunk.text in span
        assert chunk.text in joined
        assert chunk.text
        assert len(chunk.text) <= max_chars
        if a != b or len(paragraphs[a - 1]) <= max_chars:
            # Packed chunks are whole paragraphs; only oversized paragraphs are cut.
            assert chunk.text == span
    covered = {n for c in chunks for n in range(c.para_start, c.para_end + 1)}
    assert covered == set(range(1, len(paragraphs) + 1))


def test_defaults_are_the_reference_constants() -> None:
    assert DEFAULT_CHUNK_CHARS == 480
    assert DEFAULT_OVERLAP_CHARS == 80


def test_document_meta_defaults() -> None:
    meta = DocumentMeta("d")
    assert (meta.title, meta.topic, meta.entity, meta.geography, meta.period) == ("",) * 5
    assert meta.language == ""
    assert meta.sensitivity == "INTERNAL"
    assert meta.source_locator_prefix == ""


def test_chunk_field_order_and_defaults() -> None:
    names = [f.name for f in dataclasses.fields(Chunk)]
    assert names == [
        "chunk_id", "doc_id", "seq", "text", "source_locator", "para_start", "para_end",
        "title", "topic", "entity", "geography", "period", "language", "sensitivity",
        "parent_id", "heading", "window_text", "parent_locator",
    ]  # fmt: skip
    chunk = Chunk("d#c0", "d", 0, "t", "d#para1", 1, 1)
    assert chunk.sensitivity == "INTERNAL"
    assert (chunk.parent_id, chunk.heading, chunk.window_text, chunk.parent_locator) == ("",) * 4


def test_chunk_has_value_equality_and_is_mutable() -> None:
    a = Chunk("d#c0", "d", 0, "t", "d#para1", 1, 1)
    b = Chunk("d#c0", "d", 0, "t", "d#para1", 1, 1)
    assert a == b
    b.window_text = "context"
    assert a != b


@pytest.mark.parametrize(
    ("max_chars", "overlap_chars"),
    [(0, 0), (-5, 0), (100, -1), (100, 100), (100, 150)],
)
def test_bad_budget_raises_even_for_empty_text(max_chars: int, overlap_chars: int) -> None:
    with pytest.raises(ValueError, match=r"max_chars|overlap_chars"):
        chunk_document("", META, max_chars=max_chars, overlap_chars=overlap_chars)


def test_bad_budget_message_names_the_value() -> None:
    with pytest.raises(ValueError, match="-7"):
        chunk_document("text", META, max_chars=-7)


@pytest.mark.parametrize("text", ["", "   ", "\n\n \t\n", " \n\u3000\n"])
def test_empty_or_blank_text_gives_no_chunks(text: str) -> None:
    assert chunk_document(text, META) == []


def test_paragraphs_are_stripped_non_blank_lines() -> None:
    chunks = chunk_document("  first  \n\n   \nsecond\t", META)
    assert len(chunks) == 1
    assert chunks[0].text == "first\nsecond"
    assert (chunks[0].para_start, chunks[0].para_end) == (1, 2)
    assert chunks[0].source_locator == "doc-1#para1-2"


def test_single_paragraph_locator_has_no_range() -> None:
    chunks = chunk_document("only one", META)
    assert [c.source_locator for c in chunks] == ["doc-1#para1"]


def test_locator_prefix_overrides_doc_id() -> None:
    meta = DocumentMeta("doc-1", source_locator_prefix="reports/2024.md")
    chunks = chunk_document("one\ntwo", meta)
    assert chunks[0].source_locator == "reports/2024.md#para1-2"
    assert chunks[0].chunk_id == "doc-1#c0"


def test_pinned_example_with_overlap_carries_one_paragraph() -> None:
    text = "\n".join(ch * 100 for ch in "ABCD")
    chunks = chunk_document(text, META, max_chars=250, overlap_chars=120)
    assert [(c.para_start, c.para_end) for c in chunks] == [(1, 2), (2, 3), (3, 4)]
    assert [c.text for c in chunks] == [
        "A" * 100 + "\n" + "B" * 100,
        "B" * 100 + "\n" + "C" * 100,
        "C" * 100 + "\n" + "D" * 100,
    ]


def test_pinned_example_without_overlap() -> None:
    text = "\n".join(ch * 100 for ch in "ABCD")
    chunks = chunk_document(text, META, max_chars=250, overlap_chars=0)
    assert [(c.para_start, c.para_end) for c in chunks] == [(1, 2), (3, 4)]


def test_joined_length_counts_the_newline_separators() -> None:
    # 100 + 1 + 100 = 201: fits in 201, not in 200.
    text = "a" * 100 + "\n" + "b" * 100
    assert len(chunk_document(text, META, max_chars=201, overlap_chars=0)) == 1
    assert len(chunk_document(text, META, max_chars=200, overlap_chars=0)) == 2


def test_carry_is_longest_trailing_run_within_overlap() -> None:
    # Paragraphs of 10 chars; the first chunk holds P1..P4 (43 chars with separators).
    # A carry of 21 allows P3+P4 (21 chars) but not P2+P3+P4 (32).
    text = "\n".join(str(i) * 10 for i in range(1, 7))
    chunks = chunk_document(text, META, max_chars=43, overlap_chars=21)
    assert (chunks[0].para_start, chunks[0].para_end) == (1, 4)
    assert (chunks[1].para_start, chunks[1].para_end) == (3, 6)


def test_carry_stops_at_the_first_paragraph_that_does_not_fit() -> None:
    # Emitted chunk: short, LONG, short. Walking back: "cc" fits, then LONG breaks the run,
    # so the earlier short "aa" is not carried even though it would fit on its own.
    text = "aa\n" + "L" * 30 + "\ncc\n" + "d" * 30
    chunks = chunk_document(text, META, max_chars=40, overlap_chars=10)
    assert [(c.para_start, c.para_end) for c in chunks] == [(1, 3), (3, 4)]
    assert chunks[1].text == "cc\n" + "d" * 30


def test_carried_paragraphs_are_dropped_when_new_one_does_not_fit() -> None:
    # Carry (P2, 50 chars) + P3 (60 chars) exceeds 100: the carry is dropped for progress.
    text = "a" * 40 + "\n" + "b" * 50 + "\n" + "c" * 60
    chunks = chunk_document(text, META, max_chars=100, overlap_chars=55)
    assert [(c.para_start, c.para_end) for c in chunks] == [(1, 2), (3, 3)]
    assert chunks[1].text == "c" * 60


def test_overlap_repeats_each_boundary_paragraph_once() -> None:
    text = "a" * 50 + "\n" + "b" * 50 + "\n" + "c" * 50
    chunks = chunk_document(text, META, max_chars=101, overlap_chars=60)
    assert [(c.para_start, c.para_end) for c in chunks] == [(1, 2), (2, 3)]


def test_oversized_paragraph_of_twenty_sentences_gives_three_chunks() -> None:
    sentence = "x" * 59 + "."
    paragraph = sentence * 20  # 1200 chars
    chunks = chunk_document(paragraph, META, max_chars=480)
    assert len(chunks) == 3
    assert "".join(c.text for c in chunks) == paragraph
    assert [(c.para_start, c.para_end) for c in chunks] == [(1, 1)] * 3
    assert all(len(c.text) <= 480 for c in chunks)
    # Greedy concatenation of whole sentences: 8 + 8 + 4.
    assert [len(c.text) for c in chunks] == [480, 480, 240]


def test_oversized_paragraph_without_enders_is_hard_cut() -> None:
    paragraph = "z" * 1000
    chunks = chunk_document(paragraph, META, max_chars=400, overlap_chars=0)
    assert [len(c.text) for c in chunks] == [400, 400, 200]
    assert "".join(c.text for c in chunks) == paragraph


def test_oversized_pieces_concatenate_back_for_chinese() -> None:
    paragraph = "".join(f"第{i}句话讲述公司的收入增长情况以及原因。" for i in range(60))
    chunks = chunk_document(paragraph, META, max_chars=100, overlap_chars=10)
    assert len(chunks) > 1
    assert "".join(c.text for c in chunks) == paragraph
    assert all(c.text.endswith("。") for c in chunks)  # cuts fall on sentence ends


def test_oversized_paragraph_flushes_buffer_and_no_carry_crosses_it() -> None:
    text = "intro paragraph\n" + "y" * 30 + "." + "w" * 30 + "\nafter"
    chunks = chunk_document(text, META, max_chars=40, overlap_chars=30)
    spans = [(c.para_start, c.para_end) for c in chunks]
    assert spans == [(1, 1), (2, 2), (2, 2), (3, 3)]
    assert chunks[0].text == "intro paragraph"
    assert chunks[-1].text == "after"  # nothing carried from the oversized paragraph


def test_buffer_with_new_content_is_flushed_before_oversized_paragraph() -> None:
    text = "a" * 20 + "\n" + "b" * 20 + "\n" + "c" * 20 + "\n" + "o" * 90
    chunks = chunk_document(text, META, max_chars=45, overlap_chars=25)
    spans = [(c.para_start, c.para_end) for c in chunks]
    assert spans == [(1, 2), (2, 3), (4, 4), (4, 4)]


def test_metadata_is_copied_to_every_chunk() -> None:
    meta = DocumentMeta(
        doc_id="r",
        title="Annual report",
        topic="finance",
        entity="ACME_HK",
        geography="HK",
        period="2024",
        language="en",
        sensitivity="CONFIDENTIAL",
    )
    chunks = chunk_document("\n".join(["p" * 300] * 3), meta)
    assert len(chunks) == 3
    for chunk in chunks:
        assert (chunk.title, chunk.topic, chunk.entity) == ("Annual report", "finance", "ACME_HK")
        assert (chunk.geography, chunk.period, chunk.language) == ("HK", "2024", "en")
        assert chunk.sensitivity == "CONFIDENTIAL"
        assert (chunk.parent_id, chunk.heading, chunk.window_text, chunk.parent_locator) == (
            ("",) * 4
        )


def test_sentence_regex_restores_the_paragraph() -> None:
    samples = ["..leading enders. Then words!? and a tail", "甲。乙！丙？丁；戊", "!!!", "x"]
    for paragraph in samples:
        assert "".join(_SENTENCE_RE.findall(paragraph)) == paragraph


def test_non_str_text_is_rejected() -> None:
    with pytest.raises(TypeError, match="text must be str"):
        chunk_document(None, META)  # type: ignore[arg-type]


_EN_WORDS = "revenue profit growth market policy risk the of and in grew fell sharply".split()
_ZH_CHARS = "公司收入利润增长市场政策风险香港中国内地保险业务新签金额净资产收益率"


def _random_doc(rng: random.Random, chinese: bool) -> str:
    lines = []
    for _ in range(rng.randint(0, 14)):
        if rng.random() < 0.15:
            lines.append(rng.choice(["", "   ", "\t"]))
            continue
        sentences = []
        for _ in range(rng.randint(1, 12)):
            if chinese:
                body = "".join(rng.choice(_ZH_CHARS) for _ in range(rng.randint(2, 40)))
                sentences.append(body + rng.choice("。！？；，"))
            else:
                body = " ".join(rng.choice(_EN_WORDS) for _ in range(rng.randint(1, 25)))
                sentences.append(body + rng.choice([".", "!", "?", ";", ",", ""]) + " ")
        lines.append(rng.choice(["", " ", "  "]) + "".join(sentences))
    return "\n".join(lines)


@pytest.mark.parametrize("chinese", [False, True], ids=["english", "chinese"])
def test_provenance_invariant_on_generated_documents(chinese: bool) -> None:
    rng = random.Random(20240601 + chinese)
    meta = DocumentMeta("gen", source_locator_prefix="corpus/gen.txt")
    for _ in range(150):
        text = _random_doc(rng, chinese)
        max_chars = rng.choice([20, 50, 120, 480])
        overlap_chars = rng.randrange(0, max_chars)
        chunks = chunk_document(text, meta, max_chars=max_chars, overlap_chars=overlap_chars)
        assert_provenance(text, chunks, meta, max_chars)
        # Oversized paragraphs are recoverable from their pieces.
        paragraphs = _paragraphs(text)
        for number, paragraph in enumerate(paragraphs, start=1):
            if len(paragraph) > max_chars:
                pieces = [c.text for c in chunks if c.para_start == c.para_end == number]
                assert "".join(pieces) == paragraph


@pytest.mark.parametrize("chinese", [False, True], ids=["english", "chinese"])
def test_same_input_gives_identical_chunks(chinese: bool) -> None:
    text = _random_doc(random.Random(7), chinese)
    assert chunk_document(text, META, max_chars=60, overlap_chars=20) == chunk_document(
        text, META, max_chars=60, overlap_chars=20
    )


def test_chinese_report_provenance_with_defaults() -> None:
    text = (
        "第一章 经营概况\n"
        "本集团二零二四年营收稳步增长，新签金额创历史新高。\n\n"
        + "香港业务受利率环境影响，投资收益有所下降。" * 30
        + "\n中国内地业务保持增长。"
    )
    chunks = chunk_document(text, META)
    assert_provenance(text, chunks, META, DEFAULT_CHUNK_CHARS)
    assert chunks[0].text.startswith("第一章 经营概况\n本集团")
