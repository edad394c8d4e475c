"""The chunking package surface: every module's public names are re-exported, nothing else."""

from __future__ import annotations

import importlib

import ragspine_lite.chunking as chunking

MODULES = [
    "chunking",
    "chunk_store",
    "chunker",
    "layout_chunker",
    "domain_presets",
    "sentence_window_chunker",
    "semantic_chunker",
    "sources",
]


def test_package_all_is_the_union_of_module_alls() -> None:
    expected: set[str] = set()
    for name in MODULES:
        module = importlib.import_module(f"ragspine_lite.chunking.{name}")
        expected.update(module.__all__)
        for public in module.__all__:
            assert getattr(chunking, public) is getattr(module, public), public
    assert set(chunking.__all__) == expected
    assert len(chunking.__all__) == len(set(chunking.__all__))


def test_contract_names_are_exported() -> None:
    for name in (
        "DocumentMeta", "Chunk", "chunk_document", "DEFAULT_CHUNK_CHARS", "DEFAULT_OVERLAP_CHARS",
        "ChunkStore", "StoredChunk", "Chunker", "DefaultChunker", "make_chunker", "CHUNKER_ENV",
        "CHUNKER_ENTRY_POINT_GROUP", "LayoutAwareChunker", "is_heading",
        "group_children_by_parent", "LawsChunker", "BookChunker", "QaChunker",
        "ParentChildChunker", "SentenceWindowChunker", "DEFAULT_WINDOW_SIZE", "SemanticChunker",
        "DEFAULT_BREAKPOINT_PERCENTILE",
    ):  # fmt: skip
        assert name in chunking.__all__, name
