"""The one settings object: every variable declared once, checked once, passed to the edges."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

import ragspine_lite
from ragspine_lite.cli import main
from ragspine_lite.cli.common import resolve_backend
from ragspine_lite.common import validators
from ragspine_lite.common.settings import ENV_NAMES, SECRET_NAMES, Settings, env_value
from ragspine_lite.mode import ECONOMY, HYBRID
from ragspine_lite.remote.server.config import SERVER_ENV, ServerConfig

PACKAGE = Path(ragspine_lite.__file__).resolve().parent  # the source tree or the wheel
#: A valid raw value for each kind of variable, and what Settings makes of it.
SAMPLES = {
    "positive integer": ("12", 12),
    "positive number": ("2.5", 2.5),
    "url": ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"),
    "names": ("a, b,,c", ("a", "b", "c")),
    "text": ("  some-spec  ", "some-spec"),
}


@pytest.mark.parametrize("field", dataclasses.fields(Settings), ids=lambda f: f.metadata["env"])
def test_each_variable_is_read_into_its_field_and_round_trips(field):
    raw, expected = SAMPLES[field.metadata["kind"]]
    settings = Settings.from_env({field.metadata["env"]: raw})
    assert getattr(settings, field.name) == expected
    others = [f.name for f in dataclasses.fields(Settings) if f.name != field.name]
    assert all(getattr(settings, name) is None for name in others)
    assert Settings.from_env(settings.as_env()) == settings


def test_unset_and_blank_variables_are_none():
    assert Settings.from_env({}) == Settings()
    assert Settings.from_env({"RAGSPINE_RERANKER": "   "}).reranker is None


@pytest.mark.parametrize(("name", "raw"), [
    ("RAGSPINE_REMOTE_MAX_BODY_BYTES", "lots"),
    ("RAGSPINE_REMOTE_MAX_CANDIDATES", "0"),
    ("RAGSPINE_REMOTE_MAX_CONCURRENCY", "-3"),
    ("RAGSPINE_REMOTE_TIMEOUT", "nan"),
    ("RAGSPINE_LLM_TIMEOUT", "0"),
    ("RAGSPINE_REMOTE_READ_TIMEOUT", "soon"),
])
def test_a_bad_number_names_the_variable_and_the_value(name, raw):
    with pytest.raises(ValueError) as info:
        Settings.from_env({name: raw})
    assert str(info.value).startswith(f"{name}: expected a positive ")
    assert repr(raw) in str(info.value)


@pytest.mark.parametrize("name", ["RAGSPINE_LLM_URL", "RAGSPINE_REMOTE_URL",
                                  "RAGSPINE_REMOTE_LLM_URL", "RAGSPINE_OPENAI_BASE_URL"])
def test_a_bad_url_names_the_variable_but_never_echoes_the_value(name):
    raw = "ftp://admin:hunter2@example.org/v1"
    with pytest.raises(ValueError, match=rf"^{name}: expected an http\(s\):// URL") as info:
        Settings.from_env({name: raw})
    assert "hunter2" not in str(info.value) and "example.org" not in str(info.value)


def test_secrets_never_show_in_the_repr():
    secrets = {name: f"secret-{i}" for i, name in enumerate(sorted(SECRET_NAMES))}
    settings = Settings.from_env({**secrets, "RAGSPINE_RERANKER": "ce"})
    shown = repr(settings)
    assert "reranker='ce'" in shown and "***" in shown
    assert not any(value in shown for value in secrets.values())
    assert {"RAGSPINE_REMOTE_TOKEN", "RAGSPINE_LLM_API_KEY", "RAGSPINE_PG_URL"} <= SECRET_NAMES


def test_the_value_is_frozen():
    settings = Settings.from_env({"RAGSPINE_RERANKER": "ce"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.reranker = "colbert"  # type: ignore[misc]


def test_every_variable_named_in_the_package_is_declared():
    assert (PACKAGE / "common" / "settings.py").is_file()
    named = set()
    for path in PACKAGE.rglob("*.py"):
        named |= set(re.findall(r"RAGSPINE_[A-Z0-9_]+", path.read_text("utf-8")))
    assert named - set(ENV_NAMES.values()) == set()
    assert set(SERVER_ENV.values()) <= set(ENV_NAMES.values())


def test_only_the_settings_module_reads_the_environment():
    readers = sorted(
        str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
        if re.search(r"os\.environ(?!\.(setdefault|update))|getenv", path.read_text("utf-8"))
    )
    assert readers == ["common/settings.py"]


def test_env_value_refuses_an_undeclared_name(monkeypatch):
    monkeypatch.setenv("RAGSPINE_RERANKER", "ce")
    assert env_value("RAGSPINE_RERANKER") == "ce"
    with pytest.raises(KeyError, match="RAGSPINE_NOT_A_SETTING"):
        env_value("RAGSPINE_NOT_A_SETTING")


def test_the_cli_uses_the_settings_it_is_given_not_the_environment(monkeypatch):
    monkeypatch.setenv("RAGSPINE_RETRIEVAL_MODE", "hybrid")
    mode, backend = resolve_backend(None, None, Settings(retrieval_mode="bm25"))
    assert mode is ECONOMY and backend is None
    monkeypatch.setenv("RAGSPINE_RETRIEVAL_MODE", "bm25")
    mode, _ = resolve_backend(None, "none", Settings(retrieval_mode="hybrid"))
    assert mode is HYBRID


def test_a_bad_variable_is_a_usage_error_of_the_cli(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("RAGSPINE_REMOTE_MAX_BODY_BYTES", "lots")
    assert main(["stats", "--db", str(tmp_path / "absent.db")]) == 2
    err = capsys.readouterr().err
    assert err == (
        "ragspine-lite: error: RAGSPINE_REMOTE_MAX_BODY_BYTES: expected a positive integer, "
        "got 'lots'\n"
    )


def test_a_bad_secret_is_described_by_its_length_only():
    from ragspine_lite.common.settings import _read

    secret = type("Field", (), {"metadata": {"env": "RAGSPINE_X", "secret": True,
                                             "kind": "positive integer"}})
    with pytest.raises(ValueError) as info:
        _read(secret, "tok-123456")
    assert str(info.value) == "RAGSPINE_X: expected a positive integer, got a 10-character value"


def test_the_server_config_is_made_from_the_settings():
    settings = Settings(remote_max_candidates=9, remote_token="t", vector_store="in_process",
                        visual_embedder="colpali")
    config = ServerConfig.from_settings(settings, max_candidates=None, port=0)
    assert (config.max_candidates, config.token, config.port) == (9, "t", 0)
    assert (config.vector_store, config.visual_model) == ("in_process", "colpali")
    assert ServerConfig.from_settings(settings, max_candidates=3).max_candidates == 3


@pytest.mark.parametrize(("kind", "good", "bad"), [
    ("positive integer", ("1", 1), "0"),
    ("non-negative integer", ("0", 0), "-1"),
    ("positive number", ("0.5", 0.5), "inf"),
    ("port", ("65535", 65535), "65536"),
])
def test_one_set_of_validators_for_text_values_and_argparse(kind, good, bad):
    assert validators.parse(kind, good[0], "x") == good[1]
    with pytest.raises(ValueError, match=f"^x: expected a {kind}, got {bad!r}$"):
        validators.parse(kind, bad, "x")
    read = validators.arg_type(kind)
    assert read(good[0]) == good[1]
    with pytest.raises(argparse.ArgumentTypeError, match=f"expected a {kind}, got {bad!r}"):
        read(bad)


def test_typed_checks_name_the_argument():
    assert validators.positive_int(None, "top_n", optional=True) is None
    for bad in (0, True, 2.0, "3"):
        with pytest.raises(ValueError, match=r"^top_k must be an int >= 1, got "):
            validators.positive_int(bad, "top_k")
    with pytest.raises(ValueError, match="port must be an int in"):
        validators.check("port", 70000, "port")
    assert validators.choice(" CPU ", "device", ("cpu", "cuda")) == "cpu"
    with pytest.raises(ValueError, match="device: expected one of cpu, cuda, got 'tpu'"):
        validators.choice("tpu", "device", ("cpu", "cuda"))
