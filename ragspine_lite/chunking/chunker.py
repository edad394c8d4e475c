"""The ``Chunker`` seam and its factory (pure).

``make_chunker(spec)`` picks a chunking strategy by name (env ``RAGSPINE_CHUNKER`` when
``spec`` is ``None``); ``"none"`` switches the seam off, so callers keep using
:func:`~ragspine_lite.chunking.chunking.chunk_document` unchanged. Third-party chunkers
register under the entry-point group ``ragspine.chunkers``; builtin names always win.

>>> type(make_chunker("  Parent-Child ")).__name__
'ParentChildChunker'
>>> make_chunker("none") is None
True
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ragspine_lite.chunking.chunking import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    Chunk,
    DocumentMeta,
    chunk_document,
)
from ragspine_lite.chunking.domain_presets import (
    BookChunker,
    LawsChunker,
    ParentChildChunker,
    QaChunker,
)
from ragspine_lite.chunking.layout_chunker import LayoutAwareChunker
from ragspine_lite.chunking.semantic_chunker import SemanticChunker
from ragspine_lite.chunking.sentence_window_chunker import SentenceWindowChunker
from ragspine_lite.common.registry import Registry

__all__ = [
    "CHUNKER_ENTRY_POINT_GROUP",
    "CHUNKER_ENV",
    "Chunker",
    "DefaultChunker",
    "make_chunker",
]

CHUNKER_ENV = "RAGSPINE_CHUNKER"
CHUNKER_ENTRY_POINT_GROUP = "ragspine.chunkers"


@runtime_checkable
class Chunker(Protocol):
    """Turns one document's text into chunks."""

    def chunk(
        self,
        text: str,
        meta: DocumentMeta,
        *,
        max_chars: int = DEFAULT_CHUNK_CHARS,
        overlap_chars: int = DEFAULT_OVERLAP_CHARS,
    ) -> list[Chunk]: ...


class DefaultChunker:
    """The paragraph packer of :func:`chunk_document`, behind the :class:`Chunker` seam."""

    chunk = staticmethod(chunk_document)


# Names are matched after strip().lower() and "-" → "_" (a space is never read as "_").
CHUNKERS = Registry("chunkers", env=CHUNKER_ENV, spaces=False, label="chunker",
                    group=CHUNKER_ENTRY_POINT_GROUP)
CHUNKERS.register("default", DefaultChunker, "recursive", "structural")
CHUNKERS.register("layout", LayoutAwareChunker)
CHUNKERS.register("parent_child", ParentChildChunker, "small_to_big")
CHUNKERS.register("sentence_window", SentenceWindowChunker)
CHUNKERS.register("semantic", SemanticChunker)
CHUNKERS.register("laws", LawsChunker, "law", "legal")
CHUNKERS.register("qa", QaChunker, "faq")
CHUNKERS.register("book", BookChunker, "chapter")


def make_chunker(spec: str | None = None, **kwargs: Any) -> Chunker | None:
    """Build the chunker named by ``spec`` (env ``RAGSPINE_CHUNKER`` if ``None``).

    ``"none"`` (the default) or a blank spec → ``None``. Builtin names get ``**kwargs`` passed
    to their class, e.g. ``make_chunker("sentence_window", window_size=2)``; then entry
    points of ``ragspine.chunkers`` are tried. Unknown → ``ValueError`` listing valid names.
    """
    if spec is not None and not isinstance(spec, str):
        raise TypeError(f"chunker spec must be a str or None, got {type(spec).__name__}")
    chunker: Chunker | None = CHUNKERS.build(spec, **kwargs)
    return chunker
