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

import importlib.metadata
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
from ragspine_lite.common.settings import env_value

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


_OFF = "none"
# Names are matched after strip().lower() only, so hyphenated aliases are listed explicitly.
_BUILTIN_CHUNKERS: dict[str, type[Any]] = {
    "default": DefaultChunker,
    "recursive": DefaultChunker,
    "structural": DefaultChunker,
    "layout": LayoutAwareChunker,
    "parent_child": ParentChildChunker,
    "parent-child": ParentChildChunker,
    "small_to_big": ParentChildChunker,
    "small-to-big": ParentChildChunker,
    "sentence_window": SentenceWindowChunker,
    "sentence-window": SentenceWindowChunker,
    "semantic": SemanticChunker,
    "laws": LawsChunker,
    "law": LawsChunker,
    "legal": LawsChunker,
    "qa": QaChunker,
    "faq": QaChunker,
    "book": BookChunker,
    "chapter": BookChunker,
}


def _discover_entry_points() -> dict[str, Any]:
    """Entry points of :data:`CHUNKER_ENTRY_POINT_GROUP`, keyed by normalised name.

    Looked up on every call, so packages installed (or patched in) later are seen.
    """
    try:
        found = importlib.metadata.entry_points(group=CHUNKER_ENTRY_POINT_GROUP)
    except Exception:  # a broken installed distribution must not break the builtin names
        return {}
    return {ep.name.strip().lower(): ep for ep in found}


def make_chunker(spec: str | None = None, **kwargs: Any) -> Chunker | None:
    """Build the chunker named by ``spec`` (env ``RAGSPINE_CHUNKER`` if ``None``).

    ``"none"`` (the default) or a blank spec → ``None``. Builtin names get ``**kwargs`` passed
    to their class, e.g. ``make_chunker("sentence_window", window_size=2)``; then entry
    points of ``ragspine.chunkers`` are tried. Unknown → ``ValueError`` listing valid names.
    """
    raw = env_value(CHUNKER_ENV, _OFF) if spec is None else spec
    if not isinstance(raw, str):
        raise TypeError(f"chunker spec must be a str or None, got {raw!r}")
    name = raw.strip().lower()
    if name in ("", _OFF):
        return None
    builtin = _BUILTIN_CHUNKERS.get(name)
    if builtin is not None:
        return builtin(**kwargs)
    entry_points = _discover_entry_points()
    entry_point = entry_points.get(name)
    if entry_point is not None:
        return entry_point.load()(**kwargs)
    valid = sorted({_OFF, *_BUILTIN_CHUNKERS, *entry_points})
    raise ValueError(f"unknown chunker {raw!r}; valid names: {', '.join(valid)}")
