"""Opt-in seams, when off, leave outputs byte-identical (full outputs compared via repr)."""

from __future__ import annotations

import pytest

from ragspine_lite.chunking.chunking import DocumentMeta
from ragspine_lite.lexical.retrieval import HybridRetriever, NarrativeIndex
from ragspine_lite.link.narrative_link import NarrativeIndexRetriever, build_narrative_retriever

DOCS = {
    "en1": ("Hong Kong revenue grew 12% in 2024.\nProfit was flat.", "ACME_HK", "2024"),
    "en2": ("ACME China revenue fell.\nOperating profit declined in 2023.", "ACME_CN", "2023"),
    "zh1": ("香港营收增长，银保渠道贡献最大。\n新签金额稳定。", "ACME_HK", "2024"),
    "zh2": ("中国内地营运利润下降。\n净资产收益率回落。", "ACME_CN", "2023"),
    "mix": ("ACME HK 营收 revenue outlook for 2025.", "ACME_HK", "2025"),
}
QUERIES = ["hong kong revenue", "营收 增长", "profit", "ACME 2024", "nothing here", "香港 REVENUE"]
FILTERS = [{}, {"entity": "ACME_HK"}, {"period": "2023"}, {"entity": "ACME_CN", "period": "2023"}]


def ingest(index: NarrativeIndex) -> None:
    for doc_id, (text, entity, period) in DOCS.items():
        index.ingest(text, DocumentMeta(doc_id=doc_id, entity=entity, period=period))


def run_hybrid(retriever: HybridRetriever) -> str:
    return repr([retriever.search(q, **f) for q in QUERIES for f in FILTERS])


def test_hybrid_defaults_equal_explicit_none_seams_and_the_index_path(store):
    index = NarrativeIndex(store)
    ingest(index)
    chunks = store.iter_chunks()
    default = run_hybrid(HybridRetriever(chunks))
    explicit = run_hybrid(
        HybridRetriever(chunks, embedding_backend=None, query_rewriter=None, vector_store=None)
    )
    assert explicit == default
    via_index = repr([index.retrieve(q, **f) for q in QUERIES for f in FILTERS])
    assert via_index == default
    explicit_index = NarrativeIndex(
        store, embedding_backend=None, query_rewriter=None, judge=None, vector_store=None,
        filter_extractor=None, index_text_fn=None, chunker=None,
    )
    assert repr([explicit_index.retrieve(q, **f) for q in QUERIES for f in FILTERS]) == default
    assert "RetrievalResult(" in default  # the comparison is over real, non-empty output


def test_rerank_flag_without_a_judge_changes_nothing(store):
    index = NarrativeIndex(store)
    ingest(index)
    for q in QUERIES:
        assert repr(index.retrieve(q, rerank=False)) == repr(index.retrieve(q))
        assert repr(index.retrieve(q, top_n=2)) == repr(index.retrieve(q))


def test_two_searches_and_two_fresh_instances_are_identical(store):
    index = NarrativeIndex(store)
    ingest(index)
    r = HybridRetriever(store.iter_chunks())
    first = run_hybrid(r)
    assert run_hybrid(r) == first
    assert run_hybrid(HybridRetriever(store.iter_chunks())) == first


def _run_link(retriever) -> str:
    return repr([retriever.retrieve(q, filters=f or None, top_k=k)
                 for q in QUERIES for f in FILTERS for k in (50, 3)])


def test_build_narrative_retriever_postprocessor_none_equals_no_postprocessor(tmp_path):
    plain, s1 = build_narrative_retriever(tmp_path / "a.db")
    explicit, s2 = build_narrative_retriever(tmp_path / "b.db", postprocessor=None)
    try:
        ingest(plain.index)
        ingest(explicit.index)
        out = _run_link(plain)
        assert _run_link(explicit) == out
        assert "'scores':" in out
        # ... and equals a hand-wired retriever over the same index without the keyword.
        assert _run_link(NarrativeIndexRetriever(plain.index)) == out
    finally:
        s1.close()
        s2.close()


def test_built_retriever_defaults_equal_explicit_none_arguments(tmp_path):
    plain, s1 = build_narrative_retriever(tmp_path / "a.db")
    explicit, s2 = build_narrative_retriever(
        tmp_path / "b.db", None, embedding_backend=None, vector_store=None,
        persistence_policy=None, reranker=None, postprocessor=None,
    )
    try:
        ingest(plain.index)
        ingest(explicit.index)
        assert _run_link(explicit) == _run_link(plain)
    finally:
        s1.close()
        s2.close()


# ---------------------------------------------------------------- the opt-in layers, off


LAYER_ENVS = ("RAGSPINE_POSTPROCESSOR", "RAGSPINE_CORRECTIVE", "RAGSPINE_CONTEXTUAL",
              "RAGSPINE_RAPTOR", "RAGSPINE_RAPTOR_SUMMARIZER")


def _layers_off(link, spec):
    """The link wrapped by every layer factory with ``spec`` (``None`` = the unset env)."""
    from ragspine_lite.corrective import make_corrective_retriever
    from ragspine_lite.raptor import make_raptor_retriever

    wrapped = make_corrective_retriever(link, spec)
    return make_raptor_retriever(wrapped, spec)


@pytest.mark.parametrize("spec", [None, "none", " NONE "])
def test_every_opt_in_layer_switched_off_is_byte_identical(tmp_path, monkeypatch, spec):
    from ragspine_lite.contextual import make_index_text_fn
    from ragspine_lite.postprocess import make_postprocessor
    from ragspine_lite.raptor import make_raptor_summarizer

    for env in LAYER_ENVS:
        monkeypatch.delenv(env, raising=False)
    plain, s1 = build_narrative_retriever(tmp_path / "a.db")
    layered, s2 = build_narrative_retriever(
        tmp_path / "b.db",
        postprocessor=make_postprocessor(spec),
        index_text_fn=make_index_text_fn(spec),
    )
    try:
        assert make_raptor_summarizer(spec) is None
        ingest(plain.index)
        ingest(layered.index)
        wrapped = _layers_off(layered, spec)
        assert wrapped is layered  # the factories hand back the very same retriever
        out = _run_link(plain)
        assert _run_link(wrapped) == out
        assert "'scores':" in out
        # the index level too, over one store: the same RetrievalResults
        off = NarrativeIndex(s2, index_text_fn=make_index_text_fn(spec))
        assert repr([off.retrieve(q, **f) for q in QUERIES for f in FILTERS]) == repr(
            [NarrativeIndex(s2).retrieve(q, **f) for q in QUERIES for f in FILTERS])
    finally:
        s1.close()
        s2.close()


def test_layers_off_through_a_hybrid_retriever_are_byte_identical(store):
    from ragspine_lite.contextual import make_index_text_fn

    index = NarrativeIndex(store)
    ingest(index)
    chunks = store.iter_chunks()
    assert run_hybrid(HybridRetriever(chunks, index_text_fn=make_index_text_fn("none"))) == (
        run_hybrid(HybridRetriever(chunks)))
