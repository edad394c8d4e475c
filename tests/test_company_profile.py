"""The domain profile: the built-in ACME defaults and the JSON / TOML profile file."""

from __future__ import annotations

import json

import pytest

from ragspine_lite.common.company_profile import (
    COMPANY_CONFIG_ENV,
    CompanyProfile,
    DomainProfile,
    SensitivityPolicy,
    load_company_profile,
)
from ragspine_lite.common.glossary import ENTITY_SYNONYMS, EXTERNAL_ENTITIES, METRIC_SYNONYMS


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv(COMPANY_CONFIG_ENV, raising=False)


def test_the_defaults_are_the_glossarys():
    p = load_company_profile()
    assert CompanyProfile is DomainProfile and isinstance(p, DomainProfile)
    assert (p.home_company_name, p.home_entity_code) == ("ACME Group", "ACME_GROUP")
    assert p.home_entity_synonyms == ENTITY_SYNONYMS
    assert tuple(p.external_entities) == EXTERNAL_ENTITIES
    assert sorted(set(p.external_entities.values())) == ["AIA", "Manulife", "Ping An",
                                                          "Prudential"]
    assert p.entity_geography == {"ACME_GROUP": "ASIA", "ACME_HK": "HK", "ACME_CN": "CN"}
    assert p.sensitivity == SensitivityPolicy()
    dims = {d.name: d for d in p.dimensions}
    assert list(dims) == ["metric", "entity", "period", "channel", "geography"]
    assert dims["metric"].synonyms == METRIC_SYNONYMS
    geo = dims["geography"]
    assert (geo.derived_from, geo.identity, geo.default) == ("entity", False, "UNKNOWN")
    assert geo.derivation == p.entity_geography
    assert dims["channel"].default == "TOTAL"


def test_a_json_profile(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({
        "home": {"company_name": "Globex Holdings", "entity_code": "GLOBEX",
                 "synonyms": {"globex": "GLOBEX", "globex eu": "GLOBEX_EU"},
                 "geography": {"GLOBEX": "WORLD", "GLOBEX_EU": "EU"},
                 "labels": {"GLOBEX_EU": "Globex Europe"}},
        "external_entities": {"initech": "Initech"},
        "metrics": {"synonyms": {"sales": "SALES"}, "labels": {"SALES": "Sales"}},
    }), encoding="utf-8")
    p = load_company_profile(path)
    assert (p.home_company_name, p.home_entity_code) == ("Globex Holdings", "GLOBEX")
    assert p.external_entities == {"initech": "Initech"}
    dims = {d.name: d for d in p.dimensions}
    assert dims["metric"].synonyms == {"sales": "SALES"}
    assert dims["geography"].derivation == {"GLOBEX": "WORLD", "GLOBEX_EU": "EU"}
    assert dims["entity"].labels == {"GLOBEX_EU": "Globex Europe"}


def test_a_toml_profile_from_the_environment_and_a_list_extends(tmp_path, monkeypatch):
    path = tmp_path / "company.toml"
    path.write_text('external_entities = ["Globex"]\n[sensitivity]\n'
                    'restricted_keywords = ["board"]\n', encoding="utf-8")
    monkeypatch.setenv(COMPANY_CONFIG_ENV, str(path))
    p = load_company_profile()
    assert p.external_entities["Globex"] == "Globex" and p.external_entities["aia"] == "AIA"
    assert p.sensitivity.restricted_keywords == ("board",)
    assert p.home_entity_code == "ACME_GROUP"


@pytest.mark.parametrize("content, message", [
    ("{not json", "cannot read company profile"),
    ("[1, 2]", "must be a table"),
    ('{"home": []}', "'home' must be a table"),
    ('{"home": {"synonyms": {"a": 1}}}', "'synonyms' must be a table of strings"),
    ('{"home": {"entity_code": " "}}', "'home.entity_code' must be a non-blank string"),
    ('{"external_entities": ["ok", ""]}', "'external_entities' must list non-blank strings"),
    ('{"metrics": {"labels": "x"}}', "'labels' must be a table of strings"),
    ('{"sensitivity": {"restricted_keywords": "x"}}', "restricted_keywords"),
])
def test_a_malformed_profile_names_the_file_and_the_part(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as info:
        load_company_profile(path)
    assert "bad.json" in str(info.value)


def test_a_named_file_must_exist(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match=r"nope\.json"):
        load_company_profile(tmp_path / "nope.json")
    monkeypatch.setenv(COMPANY_CONFIG_ENV, str(tmp_path / "env.toml"))
    with pytest.raises(FileNotFoundError, match=r"env\.toml"):
        load_company_profile()
