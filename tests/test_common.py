"""The small shared homes: sensitivity, registry, glossary, chat types, trace."""

from __future__ import annotations

import logging
from importlib import metadata

import pytest

from ragspine_lite.common import glossary, registry
from ragspine_lite.common.errors import ProviderError, RagspineError, TraceError
from ragspine_lite.common.llm import (
    ChatCompletion,
    Choice,
    EchoProvider,
    LLMProvider,
    ResponseMessage,
    completion_text,
)
from ragspine_lite.common.observability import emit_trace
from ragspine_lite.common.sensitivity import RESTRICTED, is_restricted


@pytest.mark.parametrize("label", ["RESTRICTED", "restricted", "Restricted", "rEsTrIcTeD"])
def test_restricted_comparison_is_case_insensitive(label):
    assert is_restricted(label)


@pytest.mark.parametrize("label", ["INTERNAL", "PUBLIC", "confidential", " Public\n"])
def test_open_labels_are_not_restricted(label):
    assert not is_restricted(label)


def test_restricted_constant_value():
    assert RESTRICTED == "RESTRICTED"


def test_provider_error_is_a_ragspine_error_and_trace_error_a_value_error():
    assert issubclass(ProviderError, RagspineError)
    assert issubclass(TraceError, ValueError)


def test_normalize_spec_strips_lowers_and_maps_separators():
    assert registry.normalize_spec("  Sentence-Transformers ") == "sentence_transformers"
    assert registry.normalize_spec(" In Process ") == "in_process"
    assert registry.normalize_spec(" A-B ", hyphens=False) == "a-b"


def test_registry_make_passes_kwargs_and_normalises_spec():
    reg = registry.Registry("widgets")
    reg.register("big-one", lambda **kw: ("made", kw))
    assert reg.make("  BIG ONE ", size=3) == ("made", {"size": 3})


def test_registry_unknown_spec_names_it_and_lists_valid_names():
    reg = registry.Registry("widgets")
    reg.register("alpha", dict)
    reg.register("beta", dict)
    with pytest.raises(ValueError, match=r"'gamma'.*alpha, beta"):
        reg.make("gamma")


def _on_off_seams():
    from ragspine_lite.contextual import INDEX_TEXT_FNS
    from ragspine_lite.corrective import CORRECTIVE
    from ragspine_lite.graph.narrative import NARRATIVE_GRAPHS
    from ragspine_lite.raptor import RETRIEVERS

    return [(INDEX_TEXT_FNS, "contextual", "contextual, default, deterministic, on"),
            (CORRECTIVE, "corrective", "corrective, crag, on"),
            (RETRIEVERS, "raptor", "on, raptor"),
            (NARRATIVE_GRAPHS, "narrative graph", "llm, on")]


def test_on_off_seams_share_the_registry_error_and_env_fallback(monkeypatch):
    for reg, label, names in _on_off_seams():
        with pytest.raises(ValueError, match=rf"^unknown {label} 'bo gus'; valid names: "
                           rf"none, {names} \(plugins: entry points of the group "):
            reg.resolve("bo gus")
        monkeypatch.delenv(reg.env, raising=False)
        assert reg.resolve(None) is None  # off by default
        monkeypatch.setenv(reg.env, "ON")
        assert reg.resolve(None) == "on"
        monkeypatch.setenv(reg.env, " ")
        assert reg.resolve(None) is None


def test_registry_discovers_entry_points_and_builtins_win(monkeypatch):
    class FakeEP:
        def __init__(self, name, target):
            self.name, self._target = name, target

        def load(self):
            return self._target

    def fake_entry_points(*, group):
        assert group == "ragspine_lite.widgets"
        return [FakeEP("Plugin", lambda **kw: "plugin"), FakeEP("alpha", lambda **kw: "ep-alpha")]

    monkeypatch.setattr(metadata, "entry_points", fake_entry_points)
    reg = registry.Registry("widgets")
    reg.register("alpha", lambda: "builtin-alpha")
    assert reg.names() == ["alpha", "plugin"]
    assert reg.make("plugin") == "plugin"
    assert reg.make("alpha") == "builtin-alpha"


def test_lazy_extra_import_names_module_and_extra():
    with pytest.raises(ImportError, match=r"no_such_module_xyz.*ragspine-lite\[embed-onnx\]"):
        registry.lazy_extra_import("no_such_module_xyz", extra="embed-onnx")
    assert registry.lazy_extra_import("json", extra="x").__name__ == "json"


def test_glossary_ascii_terms_need_word_boundaries():
    found = glossary.find_terms("no concern here", glossary.ENTITY_SYNONYMS)
    assert [m.term for m in found] == []
    found = glossary.find_terms("acme cn results", glossary.ENTITY_SYNONYMS)
    assert ("acme cn", "ACME_CN") in [(m.term, m.code) for m in found]
    assert ("cn", "ACME_CN") in [(m.term, m.code) for m in found]


def test_glossary_cjk_terms_match_as_substrings_in_dict_order():
    both = {**glossary.METRIC_SYNONYMS, **glossary.ENTITY_SYNONYMS}
    found = glossary.find_terms("香港营收增长", both)
    assert [(m.term, m.code, m.start, m.end) for m in found] == [
        ("营收", "REVENUE", 2, 4),
        ("香港", "ACME_HK", 0, 2),
    ]


def test_glossary_default_maps_keep_the_documented_order():
    assert list(glossary.METRIC_SYNONYMS)[:3] == ["revenue", "营收", "newsales"]
    assert list(glossary.ENTITY_SYNONYMS)[-3:] == ["acme_group", "acme_hk", "acme_cn"]
    assert set(glossary.METRIC_SYNONYMS.values()) == {"REVENUE", "NEWSALES", "PROFIT", "ROE"}


def test_load_glossary_reads_tables_and_keeps_defaults_for_missing_ones(tmp_path):
    p = tmp_path / "profile.toml"
    p.write_text('[metric_synonyms]\n"turnover" = "REVENUE"\n', encoding="utf-8")
    g = glossary.load_glossary(p)
    assert dict(g.metric_synonyms) == {"turnover": "REVENUE"}
    assert dict(g.entity_synonyms) == glossary.ENTITY_SYNONYMS


def test_load_glossary_rejects_bad_files_naming_them(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[metric_synonyms]\nturnover = 3\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.toml"):
        glossary.load_glossary(p)
    with pytest.raises(ValueError, match=r"missing\.toml"):
        glossary.load_glossary(tmp_path / "missing.toml")


def test_chat_types_and_completion_text():
    resp = ChatCompletion(choices=(Choice(index=0, message=ResponseMessage(content=None)),))
    assert completion_text(resp) == ""
    assert completion_text(ChatCompletion(choices=())) == ""
    provider = EchoProvider("2,0,1")
    assert isinstance(provider, LLMProvider)
    out = provider.chat([{"role": "user", "content": "hi"}])
    assert completion_text(out) == "2,0,1"
    assert provider.calls == [([{"role": "user", "content": "hi"}], None)]


def test_emit_trace_logs_fields_as_record_attributes(caplog):
    caplog.set_level(logging.INFO, logger="ragspine_lite.trace")
    emit_trace(corrective_actions=["drop_filters"], grade=0.5)
    (record,) = [r for r in caplog.records if r.name == "ragspine_lite.trace"]
    assert record.getMessage() == "trace"
    assert record.corrective_actions == ["drop_filters"]
    assert record.grade == 0.5


@pytest.mark.parametrize("key", ["text", "Prompt", "CONTENT", "chunk_text", "answer", "body"])
def test_emit_trace_refuses_content_keys(key, caplog):
    caplog.set_level(logging.INFO)
    with pytest.raises(TraceError, match=key):
        emit_trace(**{key: "secret"})
    assert not [r for r in caplog.records if r.name == "ragspine_lite.trace"]
