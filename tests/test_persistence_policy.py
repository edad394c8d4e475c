"""Tests for the vector persistence policy (RESTRICTED vectors are not persisted by default)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ragspine_lite.vector.persistence_policy import (
    PERSISTENCE_POLICY_ENV,
    IsolationFirstPolicy,
    PersistencePolicy,
    PersistEverythingPolicy,
    make_persistence_policy,
)


def chunk(sensitivity: object) -> SimpleNamespace:
    return SimpleNamespace(chunk_id="d#c0", text="t", sensitivity=sensitivity)


def test_env_constant():
    assert PERSISTENCE_POLICY_ENV == "RAGSPINE_PERSISTENCE_POLICY"


@pytest.mark.parametrize(
    "sensitivity", ["RESTRICTED", "restricted", "Restricted", "  restricted ", "\tRESTRICTED\n"]
)
def test_isolation_first_holds_back_restricted_even_with_whitespace(sensitivity):
    assert IsolationFirstPolicy().persistable(chunk(sensitivity)) is False


@pytest.mark.parametrize("sensitivity", ["INTERNAL", "PUBLIC", "CONFIDENTIAL", " public\n"])
def test_isolation_first_persists_every_other_label_of_the_vocabulary(sensitivity):
    assert IsolationFirstPolicy().persistable(chunk(sensitivity)) is True


@pytest.mark.parametrize("sensitivity", ["", "RESTRICTED_X", "UNRESTRICTED", "SECRET", None])
def test_isolation_first_holds_back_labels_outside_the_vocabulary(sensitivity):
    assert IsolationFirstPolicy().persistable(chunk(sensitivity)) is False  # fails closed


@pytest.mark.parametrize(
    "sensitivity", ["RESTRICTED\u200b", "ＲＥＳＴＲＩＣＴＥＤ", "\ufeffrestricted"]
)
def test_isolation_first_uses_the_one_normalisation(sensitivity):
    assert IsolationFirstPolicy().persistable(chunk(sensitivity)) is False


@pytest.mark.parametrize("sensitivity", ["RESTRICTED", "  restricted ", "INTERNAL", ""])
def test_persist_everything_always_persists(sensitivity):
    assert PersistEverythingPolicy().persistable(chunk(sensitivity)) is True


def test_policies_satisfy_the_protocol():
    assert isinstance(IsolationFirstPolicy(), PersistencePolicy)
    assert isinstance(PersistEverythingPolicy(), PersistencePolicy)


@pytest.mark.parametrize("spec", ["default", "isolation_first", "isolation-first", " DEFAULT "])
def test_isolation_first_specs(spec):
    assert type(make_persistence_policy(spec)) is IsolationFirstPolicy


@pytest.mark.parametrize("spec", ["persist_everything", "persist-everything", "all", " ALL "])
def test_persist_everything_specs(spec):
    assert type(make_persistence_policy(spec)) is PersistEverythingPolicy


def test_default_without_env_is_isolation_first(monkeypatch):
    monkeypatch.delenv(PERSISTENCE_POLICY_ENV, raising=False)
    assert type(make_persistence_policy()) is IsolationFirstPolicy


def test_env_is_read_when_spec_is_none_and_explicit_spec_wins(monkeypatch):
    monkeypatch.setenv(PERSISTENCE_POLICY_ENV, "all")
    assert type(make_persistence_policy()) is PersistEverythingPolicy
    assert type(make_persistence_policy("default")) is IsolationFirstPolicy


@pytest.mark.parametrize("spec", ["everything", "none", "", "isolation first"])
def test_unknown_spec_raises_naming_it_and_the_valid_names(spec):
    with pytest.raises(ValueError, match="persistence policy") as info:
        make_persistence_policy(spec)
    assert repr(spec) in str(info.value)
    assert "isolation_first" in str(info.value)
    assert "persist_everything" in str(info.value)
