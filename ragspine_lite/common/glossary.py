"""Default glossary (metric and entity synonyms → controlled codes, external entities).

Dict order matters: the query rewriter and the filter extractor scan METRIC then
ENTITY in insertion order. A company profile (TOML) can replace the defaults; it is
read only at the CLI/service edge (``RAGSPINE_COMPANY_CONFIG``) via :func:`load_glossary`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "COMPANY_CONFIG_ENV",
    "DEFAULT_GLOSSARY",
    "ENTITY_SYNONYMS",
    "EXTERNAL_ENTITIES",
    "EXTERNAL_ENTITY_NAMES",
    "METRIC_SYNONYMS",
    "Glossary",
    "TermMatch",
    "find_terms",
    "load_glossary",
]

COMPANY_CONFIG_ENV = "RAGSPINE_COMPANY_CONFIG"

METRIC_SYNONYMS: dict[str, str] = {
    "revenue": "REVENUE",
    "营收": "REVENUE",
    "newsales": "NEWSALES",
    "new sales": "NEWSALES",
    "新签金额": "NEWSALES",
    "profit": "PROFIT",
    "operating profit": "PROFIT",
    "营运利润": "PROFIT",
    "roe": "ROE",
    "return on equity": "ROE",
    "净资产收益率": "ROE",
    "股本回报率": "ROE",
}

ENTITY_SYNONYMS: dict[str, str] = {
    "acme group": "ACME_GROUP",
    "acme": "ACME_GROUP",
    "group": "ACME_GROUP",
    "ACME集团": "ACME_GROUP",
    "ACME": "ACME_GROUP",
    "集团": "ACME_GROUP",
    "acme hong kong": "ACME_HK",
    "acme hk": "ACME_HK",
    "hong kong": "ACME_HK",
    "hk": "ACME_HK",
    "香港": "ACME_HK",
    "ACME香港": "ACME_HK",
    "acme china": "ACME_CN",
    "acme cn": "ACME_CN",
    "china": "ACME_CN",
    "cn": "ACME_CN",
    "中国": "ACME_CN",
    "中国内地": "ACME_CN",
    "ACME中国": "ACME_CN",
    "ACME人寿": "ACME_CN",
    "acme_group": "ACME_GROUP",
    "acme_hk": "ACME_HK",
    "acme_cn": "ACME_CN",
}

# Out-of-scope (peer / competitor) names → display name: a generated query naming one is
# refused by the default query gate (ragspine_lite.query.gate), a question by the graph's
# security gate (ragspine_lite.common.company_profile). A company profile extends the list.
EXTERNAL_ENTITY_NAMES: dict[str, str] = {
    "aia": "AIA",
    "友邦": "AIA",
    "prudential": "Prudential",
    "保诚": "Prudential",
    "manulife": "Manulife",
    "宏利": "Manulife",
    "ping an": "Ping An",
    "平安": "Ping An",
}
EXTERNAL_ENTITIES: tuple[str, ...] = tuple(EXTERNAL_ENTITY_NAMES)


@dataclass(frozen=True)
class Glossary:
    """Metric terms (→ ``topic``), entity terms (→ ``entity``) and external entity names."""

    metric_synonyms: Mapping[str, str] = field(default_factory=lambda: dict(METRIC_SYNONYMS))
    entity_synonyms: Mapping[str, str] = field(default_factory=lambda: dict(ENTITY_SYNONYMS))
    external_entities: tuple[str, ...] = EXTERNAL_ENTITIES


DEFAULT_GLOSSARY = Glossary()


@dataclass(frozen=True)
class TermMatch:
    """One glossary term found in a (lowercased) query."""

    term: str
    code: str
    start: int
    end: int


def _term_regex(term: str) -> re.Pattern[str]:
    if term.isascii():
        return re.compile(r"\b" + re.escape(term) + r"\b")
    return re.compile(re.escape(term))


def find_terms(text: str, synonyms: Mapping[str, str]) -> list[TermMatch]:
    """Every occurrence of every glossary term in ``text``, in dict order then position.

    ``text`` is matched as given (callers lowercase the query first, so keys with
    uppercase letters never match — the original's documented quirk). ASCII terms
    need word boundaries ("cn" never matches "concern"); other terms match as substrings.
    """
    out: list[TermMatch] = []
    for term, code in synonyms.items():
        if not term:
            continue
        for m in _term_regex(term).finditer(text):
            out.append(TermMatch(term, code, m.start(), m.end()))
    return out


def load_glossary(path: str | Path) -> Glossary:
    """Read a company profile TOML with ``[metric_synonyms]`` / ``[entity_synonyms]`` tables.

    A missing table keeps the built-in default for that map; a top-level
    ``external_entities = ["…"]`` array extends :data:`EXTERNAL_ENTITIES`. Raises
    ``ValueError`` naming the file for malformed TOML or non-string values.
    """
    import tomllib

    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"cannot read company profile {str(p)!r}: {exc}") from exc
    maps: dict[str, dict[str, str]] = {}
    defaults = {"metric_synonyms": METRIC_SYNONYMS, "entity_synonyms": ENTITY_SYNONYMS}
    for key, default in defaults.items():
        table = data.get(key, default)
        if not isinstance(table, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in table.items()
        ):
            raise ValueError(f"company profile {str(p)!r}: [{key}] must map strings to strings")
        maps[key] = dict(table)
    extra = data.get("external_entities", [])
    if not isinstance(extra, list) or not all(isinstance(t, str) and t.strip() for t in extra):
        raise ValueError(
            f"company profile {str(p)!r}: external_entities must be a list of non-blank strings"
        )
    external = tuple(dict.fromkeys((*EXTERNAL_ENTITIES, *(t.strip() for t in extra))))
    return Glossary(maps["metric_synonyms"], maps["entity_synonyms"], external)
