"""Chunking: paragraph packing, structure-aware strategies, and the versioned chunk store.

``chunk_document`` is the default strategy; ``make_chunker`` picks another by name; ``ChunkStore``
persists chunks with versioned re-ingest; ``load_document`` reads a ``.md``/``.txt``/``.html`` file.
"""

from __future__ import annotations

from ragspine_lite.chunking.chunk_store import (
    SCHEMA_VERSION,
    ChunkIndexer,
    ChunkRow,
    ChunkStore,
    ChunkStoreError,
    StoredChunk,
)
from ragspine_lite.chunking.chunker import (
    CHUNKER_ENTRY_POINT_GROUP,
    CHUNKER_ENV,
    Chunker,
    DefaultChunker,
    make_chunker,
)
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
from ragspine_lite.chunking.layout_chunker import (
    LayoutAwareChunker,
    group_children_by_parent,
    is_heading,
)
from ragspine_lite.chunking.semantic_chunker import (
    DEFAULT_BREAKPOINT_PERCENTILE,
    SemanticChunker,
)
from ragspine_lite.chunking.sentence_window_chunker import (
    DEFAULT_WINDOW_SIZE,
    SentenceWindowChunker,
)
from ragspine_lite.chunking.sources import (
    FRONT_MATTER_KEYS,
    HTML_EXTENSIONS,
    SUPPORTED_EXTENSIONS,
    ExtractedHtml,
    Section,
    discover_documents,
    document_from_text,
    extract_html,
    heading_sections,
    load_document,
    load_sections,
    parse_front_matter,
    slugify,
)

__all__ = [
    "CHUNKER_ENTRY_POINT_GROUP",
    "CHUNKER_ENV",
    "DEFAULT_BREAKPOINT_PERCENTILE",
    "DEFAULT_CHUNK_CHARS",
    "DEFAULT_OVERLAP_CHARS",
    "DEFAULT_WINDOW_SIZE",
    "FRONT_MATTER_KEYS",
    "HTML_EXTENSIONS",
    "SCHEMA_VERSION",
    "SUPPORTED_EXTENSIONS",
    "BookChunker",
    "Chunk",
    "ChunkIndexer",
    "ChunkRow",
    "ChunkStore",
    "ChunkStoreError",
    "Chunker",
    "DefaultChunker",
    "DocumentMeta",
    "ExtractedHtml",
    "LawsChunker",
    "LayoutAwareChunker",
    "ParentChildChunker",
    "QaChunker",
    "Section",
    "SemanticChunker",
    "SentenceWindowChunker",
    "StoredChunk",
    "chunk_document",
    "discover_documents",
    "document_from_text",
    "extract_html",
    "group_children_by_parent",
    "heading_sections",
    "is_heading",
    "load_document",
    "load_sections",
    "make_chunker",
    "parse_front_matter",
    "slugify",
]
