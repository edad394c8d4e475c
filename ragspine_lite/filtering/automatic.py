"""Automatic metadata filters: turn glossary terms in a query into ``eq`` conditions.

An extractor can only *narrow* retrieval: when it finds nothing it returns ``None``
(no filter), and :func:`extract_filter` turns an extractor failure into ``None`` too,
so a broken extractor leaves the candidate set exactly as without one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.common.glossary import DEFAULT_GLOSSARY, Glossary, find_terms
from ragspine_lite.common.registry import Registry
from ragspine_lite.filtering.metadata_filter import (
    VALID_COMBINES,
    FilterCondition,
    MetadataFilter,
)

__all__ = [
    "FILTER_EXTRACTOR_ENV",
    "ControlledVocabFilterExtractor",
    "FilterExtractor",
    "extract_filter",
    "make_filter_extractor",
]

FILTER_EXTRACTOR_ENV = "RAGSPINE_FILTER_EXTRACTOR"

logger = logging.getLogger(__name__)


@runtime_checkable
class FilterExtractor(Protocol):
    """Derives a metadata filter from a query; ``None`` means "no filter"."""

    def extract(self, query: str) -> MetadataFilter | None: ...


@dataclass(frozen=True)
class ControlledVocabFilterExtractor:
    """Glossary terms → ``topic``/``entity`` equality conditions.

    Matching is the query rewriter's: on the lowercased query, ASCII terms at word
    boundaries, other terms as substrings. METRIC terms give ``topic eq CODE`` and
    ENTITY terms ``entity eq CODE``, metric first, in glossary order, one condition
    per ``(field, code)``.

    >>> ControlledVocabFilterExtractor().extract("HK revenue").conditions
    (FilterCondition(field='topic', op='eq', value='REVENUE'), \
FilterCondition(field='entity', op='eq', value='ACME_HK'))
    >>> ControlledVocabFilterExtractor().extract("weather") is None
    True
    """

    combine: str = "and"
    glossary: Glossary | None = None

    def __post_init__(self) -> None:
        if self.combine not in VALID_COMBINES:
            raise ValueError(
                f"unknown filter combine {self.combine!r}; valid: {', '.join(VALID_COMBINES)}"
            )

    def extract(self, query: str) -> MetadataFilter | None:
        if not query:
            return None
        glossary = self.glossary if self.glossary is not None else DEFAULT_GLOSSARY
        text = query.lower()
        seen: set[tuple[str, str]] = set()
        conditions: list[FilterCondition] = []
        for field_name, synonyms in (
            ("topic", glossary.metric_synonyms),
            ("entity", glossary.entity_synonyms),
        ):
            for match in find_terms(text, synonyms):
                key = (field_name, match.code)
                if key not in seen:
                    seen.add(key)
                    conditions.append(FilterCondition(field_name, "eq", match.code))
        if not conditions:
            return None
        return MetadataFilter(tuple(conditions), combine=self.combine)


def extract_filter(extractor: FilterExtractor | None, query: str) -> MetadataFilter | None:
    """``extractor.extract(query)``, but a missing or failing extractor gives ``None``.

    A failure is logged on this module's logger, never raised: falling back to "no
    automatic filter" can only keep the unfiltered candidate set, never widen it.
    """
    if extractor is None:
        return None
    try:
        result = extractor.extract(query)
    except Exception:
        logger.warning("filter extraction failed; retrieving without an automatic filter",
                       exc_info=True)
        return None
    if result is not None and not isinstance(result, MetadataFilter):
        logger.warning("filter extractor returned %r, not a MetadataFilter; ignoring it",
                       type(result).__name__)
        return None
    return result


FILTER_EXTRACTORS = Registry("filter_extractors", env=FILTER_EXTRACTOR_ENV, spaces=False)
FILTER_EXTRACTORS.register(
    "keyword", ControlledVocabFilterExtractor, "vocab", "controlled_vocab", "glossary"
)


def make_filter_extractor(spec: str | None = None, **kwargs: Any) -> FilterExtractor | None:
    """Extractor for ``spec`` (``None`` → ``$RAGSPINE_FILTER_EXTRACTOR``, unset → off).

    ``none`` (or blank) → ``None``; ``keyword``/``vocab``/``controlled_vocab``/``glossary``
    → :class:`ControlledVocabFilterExtractor` with ``kwargs``; ``-`` counts as ``_``.
    """
    extractor: FilterExtractor | None = FILTER_EXTRACTORS.build(spec, **kwargs)
    return extractor
