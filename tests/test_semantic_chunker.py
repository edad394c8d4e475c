"""chunking.semantic_chunker: embedding-distance breakpoints, then per-segment packing."""

from __future__ import annotations

import pytest

from ragspine_lite.chunking.chunking import DocumentMeta
from ragspine_lite.chunking.semantic_chunker import (
    DEFAULT_BREAKPOINT_PERCENTILE,
    SemanticChunker,
    _percentile,
)
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend

META = DocumentMeta("sem", entity="ACME_CN", language="en")


class RecordingEmbedder:
    """Alternating orthogonal vectors; records every call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [[1.0, 0.0] if i % 2 == 0 else [0.0, 1.0] for i in range(len(texts))]


class TableEmbedder:
    """Vectors looked up by paragraph text."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        return [self.table[t] for t in texts]


def test_default_percentile_constant() -> None:
    assert DEFAULT_BREAKPOINT_PERCENTILE == 90.0
    assert SemanticChunker(RecordingEmbedder()).breakpoint_percentile == 90.0


def test_default_embedder_is_the_deterministic_backend() -> None:
    chunker = SemanticChunker()
    assert isinstance(chunker.embedder, DeterministicEmbeddingBackend)
    assert chunker.embedder.dim == 256


def test_alternating_orthogonal_vectors_give_one_chunk_per_paragraph() -> None:
    embedder = RecordingEmbedder()
    text = "alpha one\nbeta two\ngamma three\ndelta four\nepsilon five"
    chunks = SemanticChunker(embedder).chunk(text, META)
    assert [c.text for c in chunks] == text.split("\n")
    assert [(c.para_start, c.para_end) for c in chunks] == [(i, i) for i in range(1, 6)]
    assert [c.chunk_id for c in chunks] == [f"sem#c{i}" for i in range(5)]
    assert [c.source_locator for c in chunks] == [f"sem#para{i}" for i in range(1, 6)]
    assert embedder.calls == [text.split("\n")]  # one call, every paragraph, in order


def test_identical_paragraphs_never_split() -> None:
    text = "\n".join(["the same paragraph again"] * 6)
    chunks = SemanticChunker(breakpoint_percentile=0.0).chunk(text, META)
    assert len(chunks) == 1
    assert (chunks[0].para_start, chunks[0].para_end) == (1, 6)


def test_zero_vectors_count_as_maximally_distant() -> None:
    table = {"a": [1.0, 0.0], "b": [0.0, 0.0], "c": [1.0, 0.0]}
    chunks = SemanticChunker(TableEmbedder(table), breakpoint_percentile=100.0).chunk(
        "a\nb\nc", META
    )
    assert [c.text for c in chunks] == ["a", "b", "c"]


TWO_TOPICS = "\n".join(
    [
        "Revenue grew in Hong Kong as premiums and revenue rose.",
        "Hong Kong revenue growth came from premiums, revenue up again.",
        "Premiums and revenue in Hong Kong grew for the third year.",
        "Revenue from Hong Kong premiums grew strongly this year.",
        "新冠疫情期间医院床位紧张，医生护士加班。",
        "医院的医生和护士在疫情中承担了巨大压力。",
        "疫情让医院床位和医护人员都非常紧张。",
    ]
)


def test_two_topic_text_splits_at_the_topic_change() -> None:
    chunks = SemanticChunker().chunk(TWO_TOPICS, META)
    assert [(c.para_start, c.para_end) for c in chunks] == [(1, 4), (5, 7)]
    assert chunks[0].text.startswith("Revenue grew")
    assert chunks[1].text.startswith("新冠疫情")


def test_segments_are_packed_with_the_budget_and_numbered_globally() -> None:
    chunks = SemanticChunker().chunk(TWO_TOPICS, META, max_chars=130, overlap_chars=60)
    paragraphs = TWO_TOPICS.split("\n")
    # No chunk crosses the topic boundary between paragraphs 4 and 5.
    assert all(c.para_end <= 4 or c.para_start >= 5 for c in chunks)
    assert [c.seq for c in chunks] == list(range(len(chunks)))
    assert len(chunks) > 2
    for c in chunks:
        assert c.text == "\n".join(paragraphs[c.para_start - 1 : c.para_end])
        expected = (
            f"sem#para{c.para_start}"
            if c.para_start == c.para_end
            else f"sem#para{c.para_start}-{c.para_end}"
        )
        assert c.source_locator == expected


def test_no_parent_or_heading_fields_and_meta_copied() -> None:
    for c in SemanticChunker().chunk(TWO_TOPICS, META):
        assert (c.parent_id, c.heading, c.window_text, c.parent_locator) == ("",) * 4
        assert (c.entity, c.language) == ("ACME_CN", "en")


def test_single_paragraph_is_one_segment() -> None:
    chunks = SemanticChunker(RecordingEmbedder()).chunk("just one paragraph", META)
    assert [(c.text, c.source_locator) for c in chunks] == [("just one paragraph", "sem#para1")]


def test_empty_text_gives_no_chunks_without_embedding() -> None:
    embedder = RecordingEmbedder()
    assert SemanticChunker(embedder).chunk(" \n ", META) == []
    assert embedder.calls == []


def test_budget_is_validated_before_anything_else() -> None:
    embedder = RecordingEmbedder()
    with pytest.raises(ValueError, match="max_chars"):
        SemanticChunker(embedder).chunk("a\nb", META, max_chars=-1)
    assert embedder.calls == []


def test_lower_percentile_splits_more() -> None:
    table = {"a": [1.0, 0.0], "b": [0.9, 0.1], "c": [0.5, 0.5], "d": [0.0, 1.0]}
    text = "a\nb\nc\nd"
    high = SemanticChunker(TableEmbedder(table), breakpoint_percentile=100.0).chunk(text, META)
    low = SemanticChunker(TableEmbedder(table), breakpoint_percentile=0.0).chunk(text, META)
    assert len(high) < len(low)
    assert len(low) == 4  # every positive distance reaches the minimum


@pytest.mark.parametrize("value", [-1.0, 100.5])
def test_percentile_out_of_range_is_rejected(value: float) -> None:
    with pytest.raises(ValueError, match="breakpoint_percentile"):
        SemanticChunker(RecordingEmbedder(), breakpoint_percentile=value)


def test_embedder_without_embed_texts_is_rejected() -> None:
    with pytest.raises(TypeError, match="embed_texts"):
        SemanticChunker(object())


def test_embedder_returning_wrong_count_is_an_error() -> None:
    class Short:
        def embed_texts(self, texts: list[str]) -> list[list[float]]:
            return [[1.0]]

    with pytest.raises(ValueError, match="1 vectors for 3 paragraphs"):
        SemanticChunker(Short()).chunk("a\nb\nc", META)


def test_percentile_is_linearly_interpolated() -> None:
    values = [0.4, 0.1, 0.3, 0.2]
    assert _percentile(values, 0.0) == 0.1
    assert _percentile(values, 100.0) == 0.4
    # rank = 0.5 * 3 = 1.5 → halfway between 0.2 and 0.3
    assert _percentile(values, 50.0) == pytest.approx(0.25)
    assert _percentile([0.7], 90.0) == 0.7
