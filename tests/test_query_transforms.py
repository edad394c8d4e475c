"""query: HyDE, RAG-Fusion, step-back, decomposition, Adaptive-RAG and the query gate.

A scripted provider answers by instruction; the base retrievers are a recording fake (for
exact fusion orders) and the real link over a real SQLite store holding a RESTRICTED canary.
"""

from __future__ import annotations

import doctest
import json
import logging

import pytest
from _restricted import matches_restricted

import ragspine_lite.query.decompose as decompose_mod
import ragspine_lite.query.gate as gate_mod
import ragspine_lite.query.transform as transform_mod
from ragspine_lite.bundle.export import load_corpus
from ragspine_lite.chunking.chunking import DocumentMeta
from ragspine_lite.cli import samples_dir
from ragspine_lite.common.errors import ProviderError
from ragspine_lite.common.glossary import EXTERNAL_ENTITIES, Glossary, load_glossary
from ragspine_lite.common.llm import EchoProvider
from ragspine_lite.lexical.scoring import rrf_fuse
from ragspine_lite.link.narrative_link import build_narrative_retriever
from ragspine_lite.query import (
    AdaptiveDecomposer,
    DecompositionRetriever,
    ExternalEntityGate,
    HeuristicComplexityClassifier,
    HyDERetriever,
    LLMComplexityClassifier,
    LLMQueryDecomposer,
    QueryGate,
    RAGFusionRetriever,
    StepBackRetriever,
    apply_query_layers,
    default_query_gate,
    make_adaptive_decomposer,
    make_decomposer,
    make_query_transform,
)
from ragspine_lite.query.transform import fuse_snippet_lists, parse_query_list
from ragspine_lite.remote.openai_chat import provider_from_env

CANARY = "ZEPHYRCANARY"


class ScriptedProvider(EchoProvider):
    """Answers by the instruction's first words; ``raises`` makes every call fail."""

    def __init__(self, *, hyde="", fusion="", step_back="", decompose="", classify="",
                 raises: BaseException | None = None) -> None:
        self.script = {
            "Write one short passage": hyde,
            "Write ": fusion,
            "Rewrite the question": step_back,
            "Split the question": decompose,
            "Classify the question": classify,
        }
        self.raises = raises
        super().__init__(self._answer)

    def _answer(self, messages):
        if self.raises is not None:
            raise self.raises
        prompt = messages[-1]["content"]
        return next(text for start, text in self.script.items() if prompt.startswith(start))

    @property
    def prompts(self) -> list[str]:
        return [json.dumps(messages, ensure_ascii=False) for messages, _ in self.calls]


class Base:
    """A retriever answering from a script (query → chunk ids) and recording its calls."""

    def __init__(self, script: dict[str, list[str]] | None = None) -> None:
        self.script = script or {}
        self.calls: list[tuple[str, dict | None, int]] = []

    def retrieve(self, query, *, filters=None, top_k=50):
        self.calls.append((query, filters, top_k))
        ids = self.script.get(query, [w for w in query.split() if w.isalpha()])
        return [{"chunk_id": c, "text": f"text of {c}", "query": query} for c in ids][:top_k]

    @property
    def queries(self) -> list[str]:
        return [q for q, _, _ in self.calls]


def ids(snippets) -> list[str]:
    return [s["chunk_id"] for s in snippets]


# ---------------------------------------------------------------- make_query_transform


@pytest.mark.parametrize(
    ("spec", "cls"),
    [
        ("hyde", HyDERetriever), ("HyDE", HyDERetriever), (" hyde ", HyDERetriever),
        ("rag_fusion", RAGFusionRetriever), ("RAG-Fusion", RAGFusionRetriever),
        ("rag fusion", RAGFusionRetriever), ("fusion", RAGFusionRetriever),
        ("step_back", StepBackRetriever), ("Step-Back", StepBackRetriever),
        ("step back", StepBackRetriever), ("stepback", StepBackRetriever),
    ],
)
def test_every_spec_and_alias(spec, cls):
    base, provider = Base(), ScriptedProvider()
    wrapped = make_query_transform(base, spec, provider=provider)
    assert type(wrapped) is cls
    assert wrapped.base is base and wrapped.provider is provider
    if cls is RAGFusionRetriever:
        assert wrapped.max_variants == 4


@pytest.mark.parametrize("spec", ["none", "NONE", " None ", ""])
def test_none_is_the_base_itself(spec):
    base = Base()
    assert make_query_transform(base, spec, provider=ScriptedProvider()) is base


def test_spec_from_the_environment(monkeypatch):
    base, provider = Base(), ScriptedProvider()
    monkeypatch.delenv("RAGSPINE_QUERY_TRANSFORM", raising=False)
    assert make_query_transform(base, provider=provider) is base
    monkeypatch.setenv("RAGSPINE_QUERY_TRANSFORM", "Step-Back")
    assert isinstance(make_query_transform(base, provider=provider), StepBackRetriever)
    # an explicit spec wins over the environment
    assert make_query_transform(base, "none", provider=provider) is base


def test_unknown_spec_lists_the_choices():
    choices = r"'multiquery'.*none, fusion, hyde, rag_fusion, ragfusion, step_back, stepback"
    with pytest.raises(ValueError, match=choices):
        make_query_transform(Base(), "multiquery", provider=ScriptedProvider())
    with pytest.raises(ValueError, match="multiquery"):  # bad specs fail even without a provider
        make_query_transform(Base(), "multiquery")


def test_no_provider_gives_the_base_and_says_so(caplog):
    base = Base()
    with caplog.at_level(logging.WARNING, logger="ragspine_lite.query"):
        assert make_query_transform(base, "hyde") is base
    assert "needs an LLM provider" in caplog.text


def test_keyword_arguments_reach_the_class():
    gate = ExternalEntityGate(["x"])
    fusion = make_query_transform(Base(), "fusion", provider=ScriptedProvider(), max_variants=2,
                                  gate=gate)
    assert fusion.max_variants == 2 and fusion.gate is gate
    with pytest.raises(ValueError, match="max_variants"):
        RAGFusionRetriever(Base(), ScriptedProvider(), max_variants=0)


# ---------------------------------------------------------------- the transforms


def test_hyde_searches_query_plus_passage_and_returns_only_real_chunks():
    passage = "Revenue rose strongly thanks to bancassurance."
    base, provider = Base({}), ScriptedProvider(hyde=f"Passage: {passage}")
    hits = HyDERetriever(base, provider).retrieve("hk revenue", filters={"period": "2024"},
                                                  top_k=3)
    assert base.calls == [(f"hk revenue\n{passage}", {"period": "2024"}, 3)]
    assert ids(hits) == ["hk", "revenue", "Revenue"]
    assert [s["text"] for s in hits] == ["text of hk", "text of revenue", "text of Revenue"]
    prompt = provider.calls[0][0][-1]["content"]
    assert prompt.endswith("Question: hk revenue") and provider.calls[0][1] is None


def test_hyde_passage_never_becomes_a_snippet_over_the_real_link(link):
    passage = "ACME Hong Kong new sales grew by a made-up 999 percent."
    hits = HyDERetriever(link, ScriptedProvider(hyde=passage)).retrieve("Hong Kong new sales")
    assert hits and all("999" not in json.dumps(s, ensure_ascii=False) for s in hits)
    assert {s["doc_id"] for s in hits} <= {d.doc_id for d in _sample_docs()}


def test_rag_fusion_keeps_the_original_and_fuses_by_chunk_id():
    base = Base({"q": ["a", "b", "c"], "v1": ["c", "d"], "v2": ["d", "a"]})
    provider = ScriptedProvider(fusion='Sure:\n```json\n["v1", "v2", "v1", "q"]\n```')
    hits = RAGFusionRetriever(base, provider).retrieve("q", top_k=10)
    assert base.queries == ["q", "v1", "v2"]  # original first, duplicates and the original dropped
    fused = rrf_fuse([["a", "b", "c"], ["c", "d"], ["d", "a"]])
    expected = sorted(fused, key=lambda c: (-fused[c], "abcd".index(c)))
    assert ids(hits) == expected == ["a", "d", "c", "b"]  # a ties d: a was met first
    assert hits[0]["query"] == "q"  # the snippet met first is kept


def test_rag_fusion_is_bounded_and_cuts_to_top_k():
    answer = json.dumps([f"variant {i}" for i in range(9)])
    base = Base()
    hits = RAGFusionRetriever(base, ScriptedProvider(fusion=answer), max_variants=4).retrieve(
        "q", top_k=2)
    assert base.queries == ["q", "variant 0", "variant 1", "variant 2", "variant 3"]
    assert len(hits) == 2


def test_rag_fusion_prompt_names_the_bound():
    provider = ScriptedProvider(fusion="[]")
    RAGFusionRetriever(Base(), provider, max_variants=3).retrieve("q")
    assert provider.calls[0][0][-1]["content"].startswith("Write 3 different search queries")


def test_step_back_merges_both_lists_original_first_on_ties():
    base = Base({"q": ["a", "b"], "What is the broader topic?": ["a", "c"]})
    provider = ScriptedProvider(step_back='"What is the broader topic?"\nextra line')
    hits = StepBackRetriever(base, provider).retrieve("q")
    assert base.queries == ["q", "What is the broader topic?"]
    assert ids(hits) == ["a", "b", "c"]  # a twice; b ties c and comes from the original list


def test_fuse_snippet_lists_keys_without_chunk_id():
    a = {"doc_id": "d", "source_locator": "d#p1"}
    b = {"text": "no ids at all"}
    assert fuse_snippet_lists([[a, b], [dict(a), b]], 5) == [a, b, b]
    assert fuse_snippet_lists([[{"chunk_id": "x"}, {"chunk_id": "x"}]], 5) == [{"chunk_id": "x"}]


# ---------------------------------------------------------------- degradation


BROKEN = [
    ("provider_error", ScriptedProvider(raises=ProviderError("HTTP 500"))),
    ("provider_error", ScriptedProvider(raises=RuntimeError("socket closed"))),
    ("unparsed", ScriptedProvider()),  # empty answers
    ("unparsed", ScriptedProvider(hyde="  \n ", fusion="I cannot do that.",
                                  step_back="```\n```")),
    ("unparsed", ScriptedProvider(fusion="[1, 2, null]", step_back="hong kong NEW sales")),
]


@pytest.mark.parametrize("spec", ["hyde", "rag_fusion", "step_back"])
@pytest.mark.parametrize(("status", "provider"), BROKEN)
def test_failures_give_exactly_the_plain_retrieval(link, spec, status, provider, caplog):
    wrapped = make_query_transform(link, spec, provider=provider)
    plain = link.retrieve("Hong Kong new sales", filters={"period": "2023"}, top_k=3)
    with caplog.at_level(logging.WARNING, logger="ragspine_lite.query"):
        got = wrapped.retrieve("Hong Kong new sales", filters={"period": "2023"}, top_k=3)
    assert json.dumps(got, sort_keys=True) == json.dumps(plain, sort_keys=True)
    assert got and wrapped.last_outcome.status == status
    assert "plain retrieval" in caplog.text


# ---------------------------------------------------------------- the gate


def test_gate_defaults_from_the_glossary():
    gate = default_query_gate()
    assert isinstance(gate, QueryGate) and gate.terms == tuple(t.lower() for t in EXTERNAL_ENTITIES)
    assert not gate.allows("AIA new sales in Hong Kong")
    assert not gate.allows("友邦香港新业务")
    assert not gate.allows("Ping An ROE 2024")
    assert gate.allows("shopping and dining revenue in Asia")  # whole words only
    assert gate.refused_terms("AIA versus Prudential") == ["aia", "prudential"]


def test_refused_variants_are_dropped_never_searched():
    base = Base()
    provider = ScriptedProvider(fusion='["AIA hong kong sales", "acme sales", "Prudential roe"]')
    fusion = RAGFusionRetriever(base, provider)
    fusion.retrieve("hong kong sales")
    assert base.queries == ["hong kong sales", "acme sales"]
    assert fusion.last_outcome.generated == ("acme sales",) and fusion.last_outcome.refused == 2


@pytest.mark.parametrize("spec", ["hyde", "rag_fusion", "step_back"])
def test_everything_refused_gives_the_plain_retrieval(spec):
    base = Base()
    provider = ScriptedProvider(hyde="AIA grew.", fusion='["AIA sales"]', step_back="AIA?")
    wrapped = make_query_transform(base, spec, provider=provider)
    assert ids(wrapped.retrieve("hong kong sales")) == ["hong", "kong", "sales"]
    assert base.queries == ["hong kong sales"]
    assert wrapped.last_outcome.status == "refused"


def test_a_custom_gate_and_a_company_profile(tmp_path):
    class NoDigits:
        def allows(self, query):
            return not any(ch.isdigit() for ch in query)

    base = Base()
    RAGFusionRetriever(base, ScriptedProvider(fusion='["sales 2024", "sales"]'),
                       gate=NoDigits()).retrieve("q")
    assert base.queries == ["q", "sales"]
    profile = tmp_path / "company.toml"
    profile.write_text('external_entities = ["Globex", "环球"]\n', encoding="utf-8")
    glossary = load_glossary(profile)
    assert glossary.external_entities == (*EXTERNAL_ENTITIES, "Globex", "环球")
    gate = default_query_gate(glossary)
    assert not gate.allows("globex revenue") and not gate.allows("环球营收")
    assert not gate.allows("AIA revenue")  # the profile extends the defaults
    profile.write_text("external_entities = [1]\n", encoding="utf-8")
    with pytest.raises(ValueError, match="external_entities"):
        load_glossary(profile)


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('["a b", "c"]', ["a b", "c"]),
        ('```json\n["a", "A", " a "]\n```', ["a"]),
        ('[{"query": "x"}, {"question": "y"}, 3]', ["x", "y"]),
        ("Here you go:\n1. first one\n2) second\n- third\n* fourth\n• fifth", None),
        ("（1）第一个问题\n2、第二个问题", ["第一个问题", "第二个问题"]),
        ("no list here", []),
        ('["q", "Q?", "' + "x" * 1001 + '"]', ["Q?"]),
        ("", []),
    ],
)
def test_parse_query_list(answer, expected):
    got = parse_query_list(answer, 4, exclude="q")
    assert got == (expected if expected is not None else
                   ["first one", "second", "third", "fourth"])


# ---------------------------------------------------------------- decomposition


def test_make_decomposer_specs(monkeypatch):
    provider = ScriptedProvider()
    monkeypatch.delenv("RAGSPINE_QUERY_DECOMPOSE", raising=False)
    assert make_decomposer(provider=provider) is None
    assert make_decomposer("none", provider=provider) is None
    assert isinstance(make_decomposer("LLM", provider=provider), LLMQueryDecomposer)
    monkeypatch.setenv("RAGSPINE_QUERY_DECOMPOSE", "llm")
    assert make_decomposer(provider=provider).provider is provider
    assert make_decomposer() is None  # no provider: off
    with pytest.raises(ValueError, match=r"'agent'.*none, llm"):
        make_decomposer("agent", provider=provider)


def test_llm_decomposer_parses_at_most_four_and_degrades():
    subs = json.dumps([f"sub {i}?" for i in range(6)])
    assert LLMQueryDecomposer(ScriptedProvider(decompose=subs)).decompose("q") == [
        "sub 0?", "sub 1?", "sub 2?", "sub 3?"]
    assert LLMQueryDecomposer(ScriptedProvider(decompose="1. a?\n2. b?")).decompose("q") == [
        "a?", "b?"]
    assert LLMQueryDecomposer(ScriptedProvider(decompose="hmm")).decompose("q") == ["q"]
    failing = ScriptedProvider(raises=ProviderError("down"))
    assert LLMQueryDecomposer(failing).decompose("q") == ["q"]
    with pytest.raises(ValueError, match="max_subquestions"):
        LLMQueryDecomposer(failing, max_subquestions=True)


def test_decomposition_retriever_fuses_the_question_and_its_gated_parts():
    base = Base({"q": ["a"], "x?": ["b", "a"], "y?": ["c"]})
    provider = ScriptedProvider(decompose='["x?", "AIA y?", "y?", "Q"]')
    wrapped = DecompositionRetriever(base, LLMQueryDecomposer(provider))
    assert ids(wrapped.retrieve("q")) == ["a", "b", "c"]
    assert base.queries == ["q", "x?", "y?"]
    assert wrapped.last_outcome.refused == 1


def test_a_question_kept_whole_is_the_plain_retrieval(link):
    wrapped = DecompositionRetriever(link, LLMQueryDecomposer(ScriptedProvider(decompose='["Q?"]')))
    assert wrapped.retrieve("Q?") == link.retrieve("Q?")
    assert wrapped.last_outcome.status == "not_decomposed"


@pytest.mark.parametrize(
    ("question", "level"),
    [
        ("revenue", "simple"),
        ("ACME Hong Kong revenue in 2024", "single"),
        ("acme hong kong new sales growth last year", "single"),
        ("Compare ACME HK and ACME China profit", "multi"),
        ("Hong Kong revenue vs China revenue", "multi"),
        ("What was revenue in 2023? And in 2024?", "multi"),
        ("revenue and profit of the group", "multi"),
        ("Hong Kong revenue 2023 2024", "multi"),
        ("香港和中国内地的营收", "multi"),
        ("对比集团2023年的营收", "multi"),
        ("集团2023年营收是多少", "single"),
    ],
)
def test_heuristic_classifier(question, level):
    assert HeuristicComplexityClassifier().classify(question) == level


def test_heuristic_classifier_reads_the_profile():
    glossary = Glossary(entity_synonyms={"north": "N", "south": "S"})
    assert HeuristicComplexityClassifier(glossary).classify("north and south sales") == "multi"
    assert HeuristicComplexityClassifier().classify("north and south sales") == "single"


@pytest.mark.parametrize(
    ("answer", "level"),
    [("multi", "multi"), ("Single.", "single"), ("The answer is: SIMPLE", "simple"),
     ("multi-hop", "multi"), ("complex", "single"), ("", "single")],
)
def test_llm_classifier(answer, level):
    assert LLMComplexityClassifier(ScriptedProvider(classify=answer)).classify("q") == level


def test_llm_classifier_error_is_single():
    failing = ScriptedProvider(raises=ProviderError("down"))
    assert LLMComplexityClassifier(failing).classify("q") == "single"


def test_make_adaptive_decomposer_specs(monkeypatch):
    provider = ScriptedProvider()
    monkeypatch.delenv("RAGSPINE_ADAPTIVE", raising=False)
    assert make_adaptive_decomposer(provider=provider) is None
    heuristic = make_adaptive_decomposer("Heuristic", provider=provider)
    assert isinstance(heuristic, AdaptiveDecomposer)
    assert isinstance(heuristic.classifier, HeuristicComplexityClassifier)
    monkeypatch.setenv("RAGSPINE_ADAPTIVE", "llm")
    llm = make_adaptive_decomposer(provider=provider)
    assert isinstance(llm.classifier, LLMComplexityClassifier)
    assert make_adaptive_decomposer() is None
    with pytest.raises(ValueError, match=r"'always'.*none, heuristic, llm"):
        make_adaptive_decomposer("always", provider=provider)


def test_adaptive_decomposes_only_multi_questions():
    provider = ScriptedProvider(decompose='["hk revenue?", "cn revenue?"]')
    adaptive = make_adaptive_decomposer("heuristic", provider=provider)
    assert adaptive.decompose("ACME Hong Kong revenue") == ["ACME Hong Kong revenue"]
    assert adaptive.last_level == "single" and provider.calls == []
    assert adaptive.decompose("Compare HK and China revenue") == ["hk revenue?", "cn revenue?"]
    assert adaptive.last_level == "multi" and len(provider.calls) == 1
    llm = make_adaptive_decomposer("llm", provider=ScriptedProvider(classify="simple"))
    assert llm.decompose("Compare HK and China revenue") == ["Compare HK and China revenue"]


# ---------------------------------------------------------------- apply_query_layers


def test_all_layers_off_is_the_base_itself(monkeypatch):
    for env in ("RAGSPINE_QUERY_TRANSFORM", "RAGSPINE_QUERY_DECOMPOSE", "RAGSPINE_ADAPTIVE"):
        monkeypatch.delenv(env, raising=False)
    base = Base()
    assert apply_query_layers(base, provider=ScriptedProvider()) is base
    assert apply_query_layers(base, transform="hyde", decompose="llm", adaptive="llm") is base


def test_layers_stack_decomposition_over_the_transform():
    provider = ScriptedProvider(step_back="general?", decompose='["x?", "y?"]',
                                classify="multi")
    base = Base({"q": ["a"]})
    wrapped = apply_query_layers(base, transform="step_back", decompose="llm", adaptive="none",
                                 provider=provider)
    assert isinstance(wrapped, DecompositionRetriever)
    assert isinstance(wrapped.base, StepBackRetriever) and wrapped.base.base is base
    wrapped.retrieve("q")
    assert base.queries == ["q", "general?", "x?", "general?", "y?", "general?"]
    adaptive = apply_query_layers(base, decompose="llm", adaptive="llm", provider=provider)
    assert isinstance(adaptive.decomposer, AdaptiveDecomposer)
    gated = apply_query_layers(base, transform="fusion", provider=provider,
                               glossary=Glossary(external_entities=("globex",)))
    assert gated.gate.terms == ("globex",)


def test_provider_from_env():
    assert provider_from_env({}) is None
    assert provider_from_env({"RAGSPINE_LLM_MODEL": "m"}) is None
    env = {"RAGSPINE_LLM_URL": "http://127.0.0.1:8080/v1", "RAGSPINE_LLM_MODEL": "m",
           "RAGSPINE_LLM_API_KEY": "sekrit", "RAGSPINE_LLM_TIMEOUT": "2.5"}
    provider = provider_from_env(env)
    assert provider.url == "http://127.0.0.1:8080/v1/chat/completions"
    assert (provider.model, provider.timeout, provider.max_tokens) == ("m", 2.5, 256)
    assert "sekrit" not in repr(provider)
    flagged = provider_from_env(env, url="http://h:1", model="other")
    assert (flagged.url, flagged.model) == ("http://h:1/chat/completions", "other")
    with pytest.raises(ValueError, match="needs a model name"):
        provider_from_env({"RAGSPINE_LLM_URL": "http://h:1"})
    with pytest.raises(ValueError, match=r"RAGSPINE_LLM_TIMEOUT.*'soon'"):
        provider_from_env({**env, "RAGSPINE_LLM_TIMEOUT": "soon"})
    with pytest.raises(ValueError, match="timeout"):
        provider_from_env({**env, "RAGSPINE_LLM_TIMEOUT": "-1"})


# ---------------------------------------------------------------- RESTRICTED at the prompt


def _sample_docs() -> list[DocumentMeta]:
    return [meta for meta, _text in _corpus()]


def _corpus() -> list[tuple[DocumentMeta, str]]:
    return [(doc.meta, doc.body) for doc in load_corpus([samples_dir()])]


@pytest.fixture
def link(tmp_path):
    retriever, store = build_narrative_retriever(tmp_path / "chunks.db")
    for meta, text in _corpus():
        retriever.index.ingest(text, meta)
    yield retriever
    store.close()


def test_no_prompt_carries_restricted_text(link):
    """Every layer at once, over a store whose RESTRICTED memo matches the query."""
    query = "ACME Hong Kong broker acquisition revenue 2024"
    assert any(CANARY in json.dumps(h) for h in _unfiltered(link, query))
    provider = ScriptedProvider(
        hyde="A broker acquisition adds revenue.", fusion='["broker acquisition revenue"]',
        step_back="How do acquisitions change revenue?", decompose='["broker?", "revenue?"]',
        classify="multi",
    )
    for transform in ("hyde", "rag_fusion", "step_back"):
        wrapped = apply_query_layers(link, transform=transform, adaptive="llm", provider=provider)
        hits = wrapped.retrieve(query)
        assert hits and not any(CANARY in json.dumps(h) for h in hits)
        assert all(h["sensitivity"].upper() != "RESTRICTED" for h in hits)
    assert len(provider.calls) == 3 * 2 + 3 * 3  # classify + decompose, one transform per probe
    assert all(CANARY not in p and "RESTRICTED" not in p for p in provider.prompts)


def _unfiltered(link, query):
    return [{"text": r.chunk.text} for r in link.index.retrieve(query, top_k=50)]


def test_doctests():
    for module in (transform_mod, decompose_mod, gate_mod):
        assert doctest.testmod(module).failed == 0


# ---------------------------------------------------------------- the browser searcher

SECRET_PAGE = """---
sensitivity: RESTRICTED
---
ZEPHYRCANARY: the quokka merger of the Hong Kong broker is confidential.
"""


def test_searcher_without_llm_layers_is_unchanged(searcher):
    plain = searcher.search("Hong Kong new sales").as_dict()
    assert "query_layers" not in plain
    info = searcher.configure_llm(transform="hyde")  # no URL, no provider: off
    assert info == {"transform": "hyde", "decompose": "none", "adaptive": "none", "url": None,
                    "enabled": False}
    assert searcher.search("Hong Kong new sales").as_dict()["hits"] == plain["hits"]


def test_searcher_runs_the_layers_and_reports_them(searcher):
    searcher.ingest("secret.md", SECRET_PAGE)
    provider = ScriptedProvider(fusion='["quokka merger broker", "AIA broker"]',
                                decompose='["Hong Kong new sales?", "quokka merger?"]',
                                classify="multi")
    plain = searcher.search("Hong Kong broker new sales", top_k=5)
    info = searcher.configure_llm(transform="RAG-Fusion", adaptive="llm", provider=provider)
    assert info["enabled"] and info["transform"] == "RAG-Fusion"
    outcome = searcher.search("Hong Kong broker new sales", top_k=5)
    report = outcome.query_layers
    assert report["applied"] == ["rag_fusion", "decompose"]
    assert report["outcomes"][0]["refused"] == 1  # the AIA variant, never searched
    assert outcome.as_dict()["query_layers"] == report
    assert matches_restricted(searcher, "quokka merger broker")  # the exit is exercised
    assert len(outcome.snippets) == 5 and all(
        s["sensitivity"] != "RESTRICTED" for s in outcome.snippets)
    assert all(CANARY not in p and "quokka merger is" not in p for p in provider.prompts)
    skipped = searcher.search("Hong Kong broker new sales", top_k=5, query_layers=False)
    assert skipped.as_dict() | {"took_ms": 0} == plain.as_dict() | {"took_ms": 0}


def test_searcher_layers_fall_back_and_bad_specs_keep_the_setting(searcher):
    failing = ScriptedProvider(raises=ProviderError("endpoint down"))
    plain = searcher.search("operating profit", top_k=3).snippets
    searcher.configure_llm(transform="step_back", provider=failing)
    outcome = searcher.search("operating profit", top_k=3)
    assert outcome.snippets == plain
    assert outcome.query_layers["applied"] == []
    assert outcome.query_layers["outcomes"][0]["error"] == "endpoint down"
    with pytest.raises(ValueError, match="unknown query transform 'sideways'"):
        searcher.configure_llm(transform="sideways", provider=failing)
    assert searcher.query_layers.transform == "step_back"
    out = json.loads(searcher.dispatch("configure_llm", json.dumps({"transform": "none"})))
    assert out["enabled"] is False and searcher.query_layers.provider is None
