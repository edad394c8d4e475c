"""Metadata filters (structured conditions over chunk fields) and automatic extraction."""

from __future__ import annotations

from ragspine_lite.filtering.automatic import (
    FILTER_EXTRACTOR_ENV,
    ControlledVocabFilterExtractor,
    FilterExtractor,
    extract_filter,
    make_filter_extractor,
)
from ragspine_lite.filtering.metadata_filter import (
    VALID_COMBINES,
    VALID_OPS,
    FilterCondition,
    MetadataFilter,
    make_filter,
    parse_filter_expression,
)

__all__ = [
    "FILTER_EXTRACTOR_ENV",
    "VALID_COMBINES",
    "VALID_OPS",
    "ControlledVocabFilterExtractor",
    "FilterCondition",
    "FilterExtractor",
    "MetadataFilter",
    "extract_filter",
    "make_filter",
    "make_filter_extractor",
    "parse_filter_expression",
]
