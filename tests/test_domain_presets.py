"""chunking.domain_presets: laws, book, QA and parent-child chunkers."""

from __future__ import annotations

from ragspine_lite.chunking.chunking import DocumentMeta
from ragspine_lite.chunking.domain_presets import (
    BookChunker,
    LawsChunker,
    ParentChildChunker,
    QaChunker,
)
from ragspine_lite.chunking.layout_chunker import LayoutAwareChunker, group_children_by_parent

META = DocumentMeta("law", title="保险法")


def _paragraphs(text: str) -> list[str]:
    return [line.strip() for line in text.split("\n") if line.strip()]


def _spans(chunks: list) -> list[tuple[str, int, int]]:
    return [(c.heading, c.para_start, c.para_end) for c in chunks]


LAW = "\n".join(
    [
        "第一章 总则",
        "第一条 为了规范保险活动，制定本法。",
        "第二条 本法所称保险，是指投保人根据合同约定支付保险费。",
        "保险人承担赔偿责任",  # short substantive line, no punctuation
        "第三条 在中华人民共和国境内从事保险活动，适用本法。",
        "第1款 具体规定如下。",
        "第二项 其他规定。",
    ]
)


def test_laws_every_clause_is_its_own_section() -> None:
    chunks = LawsChunker().chunk(LAW, META)
    assert _spans(chunks) == [
        ("第一章 总则", 1, 1),
        ("第一条 为了规范保险活动，制定本法。", 2, 2),
        ("第二条 本法所称保险，是指投保人根据合同约定支付保险费。", 3, 4),
        ("第三条 在中华人民共和国境内从事保险活动，适用本法。", 5, 5),
        ("第1款 具体规定如下。", 6, 6),
        ("第二项 其他规定。", 7, 7),
    ]
    assert [c.parent_id for c in chunks] == [f"law#s{i}" for i in range(6)]


def test_laws_short_substantive_line_stays_inside_its_clause() -> None:
    laws = LawsChunker().chunk(LAW, META)
    assert "保险人承担赔偿责任" in laws[2].text
    # The base chunker's short-line rule would have made it a heading.
    base = LayoutAwareChunker().chunk(LAW, META)
    assert "保险人承担赔偿责任" in [c.heading for c in base]


def test_laws_also_split_on_markdown_and_numbered_headings() -> None:
    text = "# 附则\n内容一，说明。\n1. 定义\n内容二，说明。"
    assert [c.heading for c in LawsChunker().chunk(text, META)] == ["# 附则", "1. 定义"]


BOOK = "\n".join(
    [
        "第一章 开端",
        "那年夏天，雨一直下。",
        "她没有回头",  # short prose line
        "他站在门口，看着远方。",
        "# Chapter Two",
        "The rain stopped, finally.",
        "2. Aftermath",
        "Nobody spoke, not even him.",
    ]
)


def test_book_short_prose_line_is_not_a_heading() -> None:
    book = BookChunker().chunk(BOOK, META)
    assert _spans(book) == [("第一章 开端", 1, 4), ("# Chapter Two", 5, 6), ("2. Aftermath", 7, 8)]
    base = LayoutAwareChunker().chunk(BOOK, META)
    assert "她没有回头" in [c.heading for c in base]  # the base chunker would split there


def test_book_does_not_split_on_clauses() -> None:
    text = "第一章 法\n第一条 内容，一。\n第二条 内容，二。"
    assert len(BookChunker().chunk(text, META)) == 1
    assert len(LawsChunker().chunk(text, META)) == 3


QA = "\n".join(
    [
        "Welcome to the FAQ, read on.",
        "Q: How do I reset my password?",
        "Open settings, then choose reset.",
        "q) what about two-factor",
        "It is enabled by default, always.",
        "问：如何联系客服",
        "请拨打热线电话。",
        "问:保单如何续期",
        "登录后点击续期。",
        "What is covered?",
        "Hospital stays are covered.",
        "理赔需要多久？",
        "通常五个工作日。",
        "Q、第三种写法",
        "答案在这里。",
    ]
)


def test_qa_questions_open_sections_and_answers_share_parent_id() -> None:
    chunks = QaChunker().chunk(QA, META)
    assert [h for h, _, _ in _spans(chunks)] == [
        "",
        "Q: How do I reset my password?",
        "q) what about two-factor",
        "问：如何联系客服",
        "问:保单如何续期",
        "What is covered?",
        "理赔需要多久？",
        "Q、第三种写法",
    ]
    reset = next(c for c in chunks if c.heading.startswith("Q: How"))
    assert reset.text == "Q: How do I reset my password?\nOpen settings, then choose reset."


def test_qa_answer_split_by_budget_keeps_the_question_parent_id() -> None:
    answer = "\n".join(f"Step {i}: do the thing carefully, then check it." for i in range(8))
    text = f"Q. How do I file a claim?\n{answer}\nQ: Next question?\nShort answer."
    chunks = QaChunker().chunk(text, META, max_chars=120, overlap_chars=0)
    groups = group_children_by_parent(chunks)
    first = groups["law#s0"]
    assert len(first) > 2
    assert all(c.heading == "Q. How do I file a claim?" for c in first)
    assert first[0].text.startswith("Q. How do I file a claim?")
    assert [c.text for c in groups["law#s1"]] == ["Q: Next question?\nShort answer."]


def test_qa_plain_statements_are_not_questions() -> None:
    chunker = QaChunker()
    assert not chunker._is_heading("Quality matters.")
    assert not chunker._is_heading("Answer: yes")
    assert chunker._is_heading("Does it work?")
    assert chunker._is_heading("Q) short")


PC_DOC = "\n".join(
    [
        "Intro paragraph, before any heading.",
        "# Results",
        *[f"Result sentence number {i}, with a few extra words." for i in range(6)],
        "# Outlook",
        "We expect growth, cautiously.",
    ]
)


def test_parent_child_siblings_share_parent_window_and_locator() -> None:
    chunks = ParentChildChunker().chunk(PC_DOC, META, max_chars=120, overlap_chars=0)
    paragraphs = _paragraphs(PC_DOC)
    groups = group_children_by_parent(chunks)
    results = groups["law#s1"]
    assert len(results) > 1
    section_text = "\n".join(paragraphs[1:8])
    for child in results:
        assert child.window_text == section_text
        assert child.parent_locator == "law#para2-8"
        assert child.text in child.window_text
        assert child.heading == "# Results"
    (intro,) = groups["law#s0"]
    assert (intro.window_text, intro.parent_locator) == (paragraphs[0], "law#para1")
    (outlook,) = groups["law#s2"]
    assert outlook.parent_locator == "law#para9-10"


def test_parent_child_uses_locator_prefix_and_keeps_child_boundaries() -> None:
    meta = DocumentMeta("law", source_locator_prefix="kb/law.md")
    pc = ParentChildChunker().chunk(PC_DOC, meta, max_chars=120, overlap_chars=0)
    layout = LayoutAwareChunker().chunk(PC_DOC, meta, max_chars=120, overlap_chars=0)
    assert [(c.chunk_id, c.text, c.source_locator) for c in pc] == [
        (c.chunk_id, c.text, c.source_locator) for c in layout
    ]
    assert pc[0].parent_locator == "kb/law.md#para1"


def test_layout_chunker_leaves_window_fields_empty_where_parent_child_fills_them() -> None:
    layout = LayoutAwareChunker().chunk(PC_DOC, META)
    assert all(c.window_text == "" and c.parent_locator == "" for c in layout)
    pc = ParentChildChunker().chunk(PC_DOC, META)
    assert all(c.window_text and c.parent_locator for c in pc)
