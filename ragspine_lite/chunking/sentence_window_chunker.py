"""Sentence-window chunking: one chunk per sentence, neighbours as generation context (pure).

Each sentence is its own chunk (precise retrieval); ``window_text`` holds the sentences
``i - window_size .. i + window_size`` of the whole document (context for the answer),
contiguous within a paragraph and joined by ``"\\n"`` across paragraphs.

>>> from ragspine_lite.chunking.chunking import DocumentMeta
>>> chunks = SentenceWindowChunker(window_size=1).chunk("甲。乙。丙。", DocumentMeta("d"))
>>> [(c.text, c.window_text) for c in chunks]
[('甲。', '甲。乙。'), ('乙。', '甲。乙。丙。'), ('丙。', '乙。丙。')]
"""

from __future__ import annotations

from ragspine_lite.chunking.chunking import (
    _SENTENCE_ENDERS,
    _SENTENCE_RE,
    Chunk,
    DocumentMeta,
    _make_chunk,
    _ParagraphChunker,
)

__all__ = ["DEFAULT_WINDOW_SIZE", "SentenceWindowChunker"]

DEFAULT_WINDOW_SIZE = 3

_NOT_CONTENT = frozenset(_SENTENCE_ENDERS)


def _sentence_spans(paragraph: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence with content, surrounding whitespace excluded."""
    spans: list[tuple[int, int]] = []
    for match in _SENTENCE_RE.finditer(paragraph):
        fragment = match.group()
        if all(ch.isspace() or ch in _NOT_CONTENT for ch in fragment):
            continue
        lead = len(fragment) - len(fragment.lstrip())
        trail = len(fragment) - len(fragment.rstrip())
        spans.append((match.start() + lead, match.end() - trail))
    return spans


class SentenceWindowChunker(_ParagraphChunker):
    """One chunk per sentence with a ``window_size``-sentence window on each side.

    ``window_size`` below 0 is treated as 0 (the window is the sentence itself).
    """

    def __init__(self, window_size: int = DEFAULT_WINDOW_SIZE) -> None:
        if not isinstance(window_size, int) or isinstance(window_size, bool):
            raise TypeError(f"window_size must be int, got {window_size!r}")
        self.window_size = max(0, window_size)

    def _chunk_paragraphs(
        self, paragraphs: list[str], meta: DocumentMeta, max_chars: int, overlap_chars: int
    ) -> list[Chunk]:
        """Sentence chunks; ``max_chars``/``overlap_chars`` are validated but not used."""
        # Flat, document-wide list: (paragraph number, start, end).
        sentences = [
            (number, start, end)
            for number, paragraph in enumerate(paragraphs, start=1)
            for start, end in _sentence_spans(paragraph)
        ]
        chunks: list[Chunk] = []
        for index, (number, start, end) in enumerate(sentences):
            window = sentences[max(0, index - self.window_size) : index + self.window_size + 1]
            sentence = paragraphs[number - 1][start:end]
            chunk = _make_chunk(meta, len(chunks), sentence, number, number)
            chunk.window_text = _window_text(paragraphs, window)
            chunks.append(chunk)
        return chunks


def _window_text(paragraphs: list[str], window: list[tuple[int, int, int]]) -> str:
    """The source span covering ``window``: one slice per paragraph, joined by ``"\\n"``."""
    parts: dict[int, tuple[int, int]] = {}
    for number, start, end in window:
        first, _ = parts.get(number, (start, end))
        parts[number] = (first, end)
    return "\n".join(paragraphs[number - 1][start:end] for number, (start, end) in parts.items())
