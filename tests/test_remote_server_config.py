"""Endpoint settings, the serve-remote command line and the OpenAPI document (pure)."""

from __future__ import annotations

import argparse

import pytest

from ragspine_lite.cli import main
from ragspine_lite.common.settings import Settings
from ragspine_lite.remote import wire
from ragspine_lite.remote.server import (
    SERVER_ENV,
    ServerConfig,
    add_serve_remote_arguments,
    check_bind,
    config_from_args,
    is_loopback_host,
    openapi_schema,
)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.0.3", "localhost", "::1", "[::1]"])
def test_loopback_hosts(host):
    assert is_loopback_host(host)
    check_bind(host, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "example.org", "192.168.1.4"])
def test_non_loopback_hosts_need_a_token(host):
    assert not is_loopback_host(host)
    with pytest.raises(ValueError, match="without a bearer token"):
        check_bind(host, None)
    check_bind(host, "tok")


def test_env_round_trip_and_overrides():
    env = {
        "RAGSPINE_REMOTE_TOKEN": "s3cr3t-value",
        "RAGSPINE_REMOTE_CORS_ORIGINS": "http://a:1, http://b:2",
        "RAGSPINE_REMOTE_MAX_CANDIDATES": "12",
        "RAGSPINE_REMOTE_TIMEOUT": "2.5",
        "RAGSPINE_SPLADE_MODEL": "none",
        "RAGSPINE_REMOTE_LLM_URL": "http://llm:8000/v1",
        "RAGSPINE_REMOTE_LLM_MODEL": "qwen",
    }
    config = ServerConfig.from_env(env, max_candidates=7)
    assert config.cors_origins == ("http://a:1", "http://b:2")
    assert config.max_candidates == 7 and config.request_timeout_s == 2.5
    assert config.splade_model == "none" and config.llm_model == "qwen"
    again = ServerConfig.from_env(config.to_env())
    assert again == config
    assert "s3cr3t-value" not in repr(config) and "***" in repr(config)
    assert set(SERVER_ENV.values()) >= set(env)


@pytest.mark.parametrize(
    "kw",
    [{"port": 70000}, {"max_candidates": 0}, {"request_timeout_s": -1}, {"token": " "},
     {"cors_origins": "http://a"}, {"llm_url": "http://x/v1"}, {"host": ""}],
)
def test_bad_settings_are_refused(kw):
    with pytest.raises(ValueError):
        ServerConfig(**kw)


def test_bad_env_numbers_name_the_variable():
    with pytest.raises(ValueError, match="RAGSPINE_REMOTE_MAX_BODY_BYTES"):
        ServerConfig.from_env({"RAGSPINE_REMOTE_MAX_BODY_BYTES": "lots"})


def _args(*argv):
    p = argparse.ArgumentParser()
    add_serve_remote_arguments(p)
    return p.parse_args(list(argv))


def test_options_beat_the_environment():
    env = {"RAGSPINE_REMOTE_TOKEN": "env-tok", "RAGSPINE_REMOTE_MAX_CANDIDATES": "9"}
    config = config_from_args(
        _args("--port", "0", "--token", "cli-tok", "--cors-origin", "http://x:1"),
        Settings.from_env(env),
    )
    assert config.token == "cli-tok" and config.max_candidates == 9 and config.port == 0
    assert config.cors_origins == ("http://x:1",)


def test_serve_remote_refuses_a_public_host_without_token_as_a_usage_error(capsys, monkeypatch):
    monkeypatch.delenv("RAGSPINE_REMOTE_TOKEN", raising=False)
    assert main(["serve-remote", "--host", "0.0.0.0", "--port", "1"]) == 2
    assert "without a bearer token" in capsys.readouterr().err


def test_serve_remote_rejects_bad_ports(capsys):
    assert main(["serve-remote", "--port", "99999"]) == 2
    assert "port" in capsys.readouterr().err


def test_openapi_document_covers_every_operation_and_resolves_its_refs():
    doc = openapi_schema("9.9")
    assert doc["openapi"].startswith("3.1") and doc["info"]["version"] == "9.9"
    paths = {wire.HEALTH_PATH, wire.MODELS_PATH, wire.OPENAPI_PATH, wire.RERANK_PATH,
             wire.EMBED_PATH, wire.OPENAI_EMBEDDINGS_PATH, wire.CHAT_PATH,
             wire.VISUAL_QUERY_PATH, wire.VISUAL_IMAGES_PATH,
             wire.VISUAL_PAGES_PATH, wire.VISUAL_SEARCH_PATH, wire.SEARCH_PATH}
    assert set(doc["paths"]) == paths
    schemas = doc["components"]["schemas"]

    def refs(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "$ref":
                    yield v
                else:
                    yield from refs(v)
        elif isinstance(node, list):
            for v in node:
                yield from refs(v)

    for ref in refs(doc):
        assert ref.rsplit("/", 1)[1] in schemas
    assert doc["paths"][wire.HEALTH_PATH]["get"]["security"] == []
    methods = schemas["RerankRequest"]["properties"]["method"]["enum"]
    assert set(wire.RERANK_METHODS) <= set(methods)
