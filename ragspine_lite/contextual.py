"""Contextual Retrieval: a deterministic context header on the indexed text only.

``contextual_index_text(chunk)`` prepends
``[文档:title · 实体:entity · 期间:period · 章节:heading]`` (non-empty fields only, values as
the chunk's metadata holds them: nothing invented) to the text that BM25 indexes and the
dense channel embeds. ``chunk.text``, ``source_locator`` and every citation field stay
byte-identical. Plug it in as ``index_text_fn=`` of ``HybridRetriever`` /
``NarrativeIndex`` / ``build_narrative_retriever``.

A persisted index records the index-text *setting* that built it (:func:`index_text_setting`,
kept under :data:`INDEX_TEXT_META_KEY` in the chunk store, and in a browser bundle's
manifest); :func:`check_index_text` refuses to open it with another setting, so contextual
and plain index texts never mix.

>>> from ragspine_lite.chunking.chunking import Chunk
>>> c = Chunk("d#c0", "d", 0, "Revenue grew.", "d#para1", 1, 1, title="HK review",
...           entity="ACME_HK", period="2024")
>>> print(contextual_index_text(c))
[文档:HK review · 实体:ACME_HK · 期间:2024]
Revenue grew.
>>> make_index_text_fn("on") is contextual_index_text, make_index_text_fn("none")
(True, None)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragspine_lite.common.errors import RagspineError
from ragspine_lite.common.registry import Registry

__all__ = [
    "CONTEXTUAL_ENV",
    "INDEX_TEXT_META_KEY",
    "IndexTextFn",
    "IndexTextMismatch",
    "build_context_header",
    "check_index_text",
    "contextual_index_text",
    "index_text_setting",
    "make_index_text_fn",
]

CONTEXTUAL_ENV = "RAGSPINE_CONTEXTUAL"
#: Where a chunk store records the index-text setting that built its indexes.
INDEX_TEXT_META_KEY = "index_text"

IndexTextFn = Callable[[Any], str]

# (chunk attribute, header label): a fixed, controlled vocabulary.
_HEADER_FIELDS = (("title", "文档"), ("entity", "实体"), ("period", "期间"), ("heading", "章节"))
_SEPARATOR = " · "


class IndexTextMismatch(RagspineError, ValueError):
    """A persisted index was built with another index-text setting than the one asked for."""


def build_context_header(chunk: Any) -> str:
    """``"[文档:T · 实体:E · 期间:P · 章节:H]"`` from the non-empty fields; ``""`` if none."""
    parts = [
        f"{label}:{value}"
        for attr, label in _HEADER_FIELDS
        if (value := getattr(chunk, attr, "") or "")
    ]
    return f"[{_SEPARATOR.join(parts)}]" if parts else ""


def contextual_index_text(chunk: Any) -> str:
    """The header, a newline, then ``chunk.text`` (just the text when there is no header)."""
    header = build_context_header(chunk)
    return f"{header}\n{chunk.text}" if header else chunk.text


INDEX_TEXT_FNS = Registry("index_text_fns", env=CONTEXTUAL_ENV, spaces=False, label="contextual")
INDEX_TEXT_FNS.register("contextual", lambda: contextual_index_text,
                        "default", "deterministic", "on")


def make_index_text_fn(spec: str | None = None) -> IndexTextFn | None:
    """``None``/``none`` → ``None`` (index ``chunk.text``); ``default``/``deterministic``/``on``/
    ``contextual`` → :func:`contextual_index_text`. ``spec=None`` reads ``$RAGSPINE_CONTEXTUAL``.
    """
    fn: IndexTextFn | None = INDEX_TEXT_FNS.build(spec)
    return fn


def index_text_setting(fn: IndexTextFn | None) -> str:
    """The name a persisted index records for ``fn``: ``none``, ``contextual`` or
    ``custom:<module>.<qualname>``."""
    if fn is None:
        return "none"
    if fn is contextual_index_text:
        return "contextual"
    name = getattr(fn, "__qualname__", type(fn).__qualname__)
    return f"custom:{getattr(fn, '__module__', '?')}.{name}"


def check_index_text(recorded: str | None, fn: IndexTextFn | None, *, where: str) -> None:
    """Raise :class:`IndexTextMismatch` when ``where`` was built with another setting.

    ``recorded=None`` (an index from before settings were recorded) means ``none``.
    """
    built, wanted = recorded or "none", index_text_setting(fn)
    if built != wanted:
        raise IndexTextMismatch(
            f"{where} was indexed with index text {built!r}, not {wanted!r}; "
            f"search it with {built!r} or rebuild it with {wanted!r}"
        )
