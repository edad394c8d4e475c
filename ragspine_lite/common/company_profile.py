"""The domain profile: home identity, entity vocabulary, external entities, declared dimensions.

:func:`load_company_profile` reads a profile file (JSON, or TOML for any other suffix) at
the edge; without one it returns the built-in ACME profile, whose vocabularies are the
glossary's (:mod:`ragspine_lite.common.glossary`). The file's layout::

    {"home": {"company_name": "…", "entity_code": "…", "synonyms": {alias: code},
              "geography": {code: geography}, "labels": {code: display}},
     "external_entities": {alias: display},        # or a list of names: extends the defaults
     "metrics": {"synonyms": {alias: code}, "labels": {code: display}, "units": {code: unit}},
     "sensitivity": {"default_level": "INTERNAL", …}}

Every part is optional (a missing part keeps the default); a part of the wrong shape raises
``ValueError`` naming the file and the part.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragspine_lite.common.glossary import (
    COMPANY_CONFIG_ENV,
    ENTITY_SYNONYMS,
    EXTERNAL_ENTITY_NAMES,
    METRIC_SYNONYMS,
)
from ragspine_lite.common.security_gate import SecurityGate
from ragspine_lite.common.settings import env_value

__all__ = [
    "COMPANY_CONFIG_ENV",
    "CompanyProfile",
    "DimensionSpec",
    "DomainProfile",
    "SensitivityPolicy",
    "default_security_gate",
    "load_company_profile",
]

_PACKAGED_CONFIG = Path(__file__).resolve().parent.parent / "config" / "company.toml"

_HOME_NAME = "ACME Group"
_HOME_CODE = "ACME_GROUP"
_GEOGRAPHY = {"ACME_GROUP": "ASIA", "ACME_HK": "HK", "ACME_CN": "CN"}
_HOME_LABELS = {"ACME_GROUP": "ACME Group", "ACME_HK": "ACME Hong Kong", "ACME_CN": "ACME China"}
_METRIC_UNITS = {"REVENUE": "USD_M", "NEWSALES": "USD_M", "PROFIT": "USD_M", "ROE": "PCT"}
_CHANNEL_SYNONYMS = {"代理": "AGENCY", "代理人": "AGENCY", "agency": "AGENCY",
                     "银保": "BANCA", "bancassurance": "BANCA", "banca": "BANCA"}


@dataclass(frozen=True)
class SensitivityPolicy:
    """How an ingest labels unlabelled material (carried by the profile, applied upstream)."""

    default_level: str = "INTERNAL"
    escalate_unknown_to_restricted: bool = False
    restricted_filename_patterns: tuple[str, ...] = ()
    restricted_keywords: tuple[str, ...] = ()


@dataclass(frozen=True)
class DimensionSpec:
    """One declared dimension: its vocabulary and behaviour flags."""

    name: str
    label: str
    kind: str = "categorical"
    synonyms: dict[str, str] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    default: str | None = None
    required: bool = False
    clarify: str = "assume"
    identity: bool = True
    expand: bool = True
    derived_from: str | None = None
    derivation: dict[str, str] = field(default_factory=dict)
    whitelist_in_fabrication_check: bool = False
    fabrication_whitelist_regex: str | None = None


@dataclass(frozen=True)
class DomainProfile:
    """The home company, its entities and their geography, external entities, dimensions."""

    home_company_name: str
    home_entity_code: str
    home_entity_synonyms: dict[str, str] = field(default_factory=dict)
    entity_geography: dict[str, str] = field(default_factory=dict)
    external_entities: dict[str, str] = field(default_factory=dict)
    home_entity_labels: dict[str, str] = field(default_factory=dict)
    sensitivity: SensitivityPolicy = field(default_factory=SensitivityPolicy)
    dimensions: tuple[DimensionSpec, ...] = ()


CompanyProfile = DomainProfile


def _dimensions(
    entity_synonyms: Mapping[str, str],
    entity_labels: Mapping[str, str],
    geography: Mapping[str, str],
    metrics: Mapping[str, Mapping[str, str]],
) -> tuple[DimensionSpec, ...]:
    """metric, entity, period, channel and geography (derived from entity)."""
    return (
        DimensionSpec("metric", "指标", required=True, clarify="ask_first",
                      synonyms=dict(metrics["synonyms"]), units=dict(metrics["units"]),
                      labels=dict(metrics["labels"])),
        DimensionSpec("entity", "实体", required=True, synonyms=dict(entity_synonyms),
                      labels=dict(entity_labels)),
        DimensionSpec("period", "期间", kind="temporal", required=True,
                      whitelist_in_fabrication_check=True),
        DimensionSpec("channel", "渠道", clarify="none", default="TOTAL", expand=False,
                      synonyms=dict(_CHANNEL_SYNONYMS)),
        DimensionSpec("geography", "地理", identity=False, expand=False, default="UNKNOWN",
                      derived_from="entity", derivation=dict(geography)),
    )


def _default_metrics() -> dict[str, dict[str, str]]:
    codes = dict.fromkeys(METRIC_SYNONYMS.values())
    return {"synonyms": dict(METRIC_SYNONYMS), "units": dict(_METRIC_UNITS),
            "labels": {code: code for code in codes}}


def _default_profile() -> DomainProfile:
    return DomainProfile(
        home_company_name=_HOME_NAME,
        home_entity_code=_HOME_CODE,
        home_entity_synonyms=dict(ENTITY_SYNONYMS),
        entity_geography=dict(_GEOGRAPHY),
        external_entities=dict(EXTERNAL_ENTITY_NAMES),
        home_entity_labels=dict(_HOME_LABELS),
        dimensions=_dimensions(ENTITY_SYNONYMS, _HOME_LABELS, _GEOGRAPHY, _default_metrics()),
    )


def _table(data: Mapping[str, Any], key: str, where: str) -> dict[str, str] | None:
    """``data[key]`` as a string→string table, ``None`` when absent; else ``ValueError``."""
    if key not in data:
        return None
    raw = data[key]
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise ValueError(f"{where}: {key!r} must be a table of strings")
    return dict(raw)


def _section(data: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    raw = data.get(key, {})
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: {key!r} must be a table")
    return raw


def _external(data: Mapping[str, Any], where: str) -> dict[str, str]:
    raw = data.get("external_entities")
    if isinstance(raw, list):
        if not all(isinstance(t, str) and t.strip() for t in raw):
            raise ValueError(f"{where}: 'external_entities' must list non-blank strings")
        return {**EXTERNAL_ENTITY_NAMES, **{t.strip(): t.strip() for t in raw}}
    table = _table(data, "external_entities", where)
    return dict(EXTERNAL_ENTITY_NAMES) if table is None else table


def _policy(data: Mapping[str, Any], where: str) -> SensitivityPolicy:
    raw = _section(data, "sensitivity", where)
    base = SensitivityPolicy()
    lists = {}
    for key in ("restricted_filename_patterns", "restricted_keywords"):
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{where}: 'sensitivity.{key}' must be a list of strings")
        lists[key] = tuple(value)
    return SensitivityPolicy(
        default_level=str(raw.get("default_level", base.default_level)),
        escalate_unknown_to_restricted=bool(raw.get("escalate_unknown_to_restricted", False)),
        **lists,
    )


def _profile_from(data: Mapping[str, Any], where: str) -> DomainProfile:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: a profile must be a table (JSON object)")
    home = _section(data, "home", where)
    synonyms = _table(home, "synonyms", f"{where} [home]") or dict(ENTITY_SYNONYMS)
    geography = _table(home, "geography", f"{where} [home]") or dict(_GEOGRAPHY)
    labels = _table(home, "labels", f"{where} [home]") or dict(_HOME_LABELS)
    metrics_raw = _section(data, "metrics", where)
    metrics = _default_metrics()
    for key in ("synonyms", "labels", "units"):
        metrics[key] = _table(metrics_raw, key, f"{where} [metrics]") or metrics[key]
    for key in ("company_name", "entity_code"):
        if key in home and (not isinstance(home[key], str) or not home[key].strip()):
            raise ValueError(f"{where}: 'home.{key}' must be a non-blank string")
    return DomainProfile(
        home_company_name=home.get("company_name", _HOME_NAME).strip(),
        home_entity_code=home.get("entity_code", _HOME_CODE).strip(),
        home_entity_synonyms=synonyms,
        entity_geography=geography,
        external_entities=_external(data, where),
        home_entity_labels=labels,
        sensitivity=_policy(data, where),
        dimensions=_dimensions(synonyms, labels, geography, metrics),
    )


def load_company_profile(path: str | Path | None = None) -> DomainProfile:
    """The profile at ``path``, else ``$RAGSPINE_COMPANY_CONFIG``, else the packaged
    ``config/company.toml``; none of them → the built-in ACME profile.

    A named file that does not exist raises ``FileNotFoundError``; unreadable or malformed
    content raises ``ValueError`` naming the file.
    """
    named = path if path is not None else (env_value(COMPANY_CONFIG_ENV) or None)
    config = Path(named) if named is not None else _PACKAGED_CONFIG
    if not config.is_file():
        if named is None:
            return _default_profile()
        raise FileNotFoundError(f"company profile {str(config)!r} does not exist")
    where = f"company profile {str(config)!r}"
    try:
        text = config.read_text(encoding="utf-8")
        if config.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import tomllib

            data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"cannot read {where}: {exc}") from None
    return _profile_from(data, where)


def default_security_gate(profile: DomainProfile) -> SecurityGate:
    """The security gate of ``profile``: its external entities, its home company's name."""
    return SecurityGate(profile.external_entities, profile.home_company_name)
