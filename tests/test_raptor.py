"""raptor: clustering, the recursive tree, summarisers, retrieval, factories, isolation."""

from __future__ import annotations

import logging

import pytest

from ragspine_lite.chunking.chunking import Chunk
from ragspine_lite.common.errors import ProviderError
from ragspine_lite.common.llm import EchoProvider
from ragspine_lite.raptor import (
    DEFAULT_MAX_LEVELS,
    DEFAULT_MIN_CLUSTER_SIZE,
    DEFAULT_SIMILARITY_THRESHOLD,
    DEFAULT_SUMMARY_TOP_K,
    RAPTOR_ENV,
    RAPTOR_SUMMARIZER_ENV,
    RESTRICTED_SENSITIVITY,
    ExtractiveRaptorSummarizer,
    LLMRaptorSummarizer,
    RaptorRetriever,
    RaptorSummarizer,
    RaptorTree,
    build_raptor_tree,
    cluster_by_similarity,
    make_raptor_retriever,
    make_raptor_summarizer,
)
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend

AXES = {"alpha": (1.0, 0.0, 0.0), "beta": (0.0, 1.0, 0.0), "gamma": (0.0, 0.0, 1.0)}


class KeywordEmbedder:
    """Text → the sum of the axes of the keywords it contains (``theme`` → alpha + beta)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed_texts(self, texts):
        self.seen.extend(texts)
        out = []
        for t in texts:
            if "theme" in t:
                out.append([1.0, 1.0, 0.0])
                continue
            vec = [0.0, 0.0, 0.0]
            for word, axis in AXES.items():
                if word in t:
                    vec = [a + b for a, b in zip(vec, axis, strict=True)]
            out.append(vec)
        return out


class RecordingSummarizer:
    def __init__(self, reply="theme summary") -> None:
        self.seen: list[list[str]] = []
        self.reply = reply

    def summarize(self, texts):
        self.seen.append(list(texts))
        return self.reply


def chunk(i: int, text: str, *, doc="d", sensitivity="INTERNAL") -> Chunk:
    return Chunk(f"{doc}#c{i}", doc, i, text, f"{doc}#para{i + 1}", i + 1, i + 1,
                 sensitivity=sensitivity)


def test_constants():
    assert (RAPTOR_ENV, RAPTOR_SUMMARIZER_ENV) == ("RAGSPINE_RAPTOR", "RAGSPINE_RAPTOR_SUMMARIZER")
    assert DEFAULT_SIMILARITY_THRESHOLD == 0.5 and DEFAULT_MAX_LEVELS == 3
    assert DEFAULT_MIN_CLUSTER_SIZE == 2 and DEFAULT_SUMMARY_TOP_K == 5
    assert RESTRICTED_SENSITIVITY == "RESTRICTED"
    assert ExtractiveRaptorSummarizer().max_chars == 240
    assert isinstance(ExtractiveRaptorSummarizer(), RaptorSummarizer)


# ---------------------------------------------------------------- clustering


def test_clusters_are_connected_components_sorted():
    ids = ["z", "b", "a", "c"]
    vecs = [[0, 1], [1, 0], [1, 0.1], [0, 1]]
    assert cluster_by_similarity(ids, vecs) == (("a", "b"), ("c", "z"))


def test_cluster_edges_at_the_threshold_and_chains():
    # cos(60°) = 0.5 exactly → an edge; chains join transitively.
    assert cluster_by_similarity(["a", "b"], [[1, 0], [0.5, 0.75 ** 0.5]]) == (("a", "b"),)
    chain = [[1, 0, 0], [1, 1, 0], [0, 1, 0]]  # a-b 0.707, b-c 0.707, a-c 0
    assert cluster_by_similarity(["a", "b", "c"], chain, threshold=0.7) == (("a", "b", "c"),)
    assert cluster_by_similarity(["a", "b", "c"], chain, threshold=0.8) == (
        ("a",), ("b",), ("c",))


def test_cluster_edge_cases():
    assert cluster_by_similarity([], []) == ()
    assert cluster_by_similarity(["x"], [[0, 0]]) == (("x",),)
    assert cluster_by_similarity(["x", "y"], [[0, 0], [0, 0]]) == (("x",), ("y",))
    with pytest.raises(ValueError, match="2 ids but 1 embeddings"):
        cluster_by_similarity(["a", "b"], [[1, 0]])


# ---------------------------------------------------------------- tree building


def corpus() -> list[Chunk]:
    return [chunk(0, "alpha one."), chunk(1, "alpha two."), chunk(2, "beta one.", doc="e"),
            chunk(3, "beta two.", doc="e"), chunk(4, "gamma alone.")]


def test_recursive_tree_levels_ids_and_provenance():
    summarizer = RecordingSummarizer()
    tree = build_raptor_tree(corpus(), embedder=KeywordEmbedder(), summarizer=summarizer)
    assert [n.node_id for n in tree.leaves] == [f"L0#{c.chunk_id}" for c in corpus()]
    assert [(n.node_id, n.level, n.member_ids) for n in tree.summaries] == [
        ("L1#c0", 1, ("L0#d#c0", "L0#d#c1")),
        ("L1#c1", 1, ("L0#e#c2", "L0#e#c3")),
        ("L2#c0", 2, ("L1#c0", "L1#c1")),
    ]
    assert tree.max_level == 2
    top = tree.summaries[-1]
    assert top.is_synthesis and top.doc_id == "" and top.source_locator == ""
    assert top.source_doc_ids == ("d", "e")
    assert top.source_locators == ("d#para1", "d#para2", "e#para3", "e#para4")
    leaf_locs = {n.source_locator for n in tree.leaves}
    for s in tree.summaries:
        assert set(s.source_locators) <= leaf_locs and s.embedding
    # summaries see their members' texts: leaves at level 1, summaries at level 2
    assert summarizer.seen == [["alpha one.", "alpha two."], ["beta one.", "beta two."],
                               ["theme summary", "theme summary"]]


def test_leaves_carry_single_element_provenance():
    leaf = build_raptor_tree([chunk(0, "alpha")], embedder=KeywordEmbedder()).leaves[0]
    assert (leaf.level, leaf.is_synthesis, leaf.text) == (0, False, "alpha")
    assert (leaf.doc_id, leaf.source_locator) == ("d", "d#para1")
    assert leaf.member_ids == ("d#c0",) and leaf.source_doc_ids == ("d",)
    assert leaf.source_locators == ("d#para1",) and leaf.embedding == (1.0, 0.0, 0.0)


def test_trees_are_deterministic():
    emb = DeterministicEmbeddingBackend(dim=64)
    chunks = [chunk(i, t) for i, t in enumerate(
        ["revenue grew fast.", "revenue grew.", "storm warning.", "storm warning issued."])]
    assert build_raptor_tree(chunks, embedder=emb) == build_raptor_tree(chunks, embedder=emb)
    assert len(build_raptor_tree(chunks, embedder=emb).summaries) == 2


def test_max_levels_and_min_cluster_size_stop_the_recursion():
    emb = KeywordEmbedder()
    assert build_raptor_tree(corpus(), embedder=emb, max_levels=1).max_level == 1
    assert build_raptor_tree(corpus(), embedder=emb, max_levels=0).summaries == []
    assert build_raptor_tree(corpus(), embedder=emb, min_cluster_size=3).summaries == []
    # every node its own cluster: the next level would not be smaller → leaves only
    distinct = [chunk(0, "alpha"), chunk(1, "beta"), chunk(2, "gamma")]
    assert build_raptor_tree(distinct, embedder=emb, min_cluster_size=1).summaries == []


def test_singletons_are_carried_up_unchanged():
    tree = build_raptor_tree(corpus(), embedder=KeywordEmbedder(), max_levels=3)
    assert "L0#d#c4" not in {m for s in tree.summaries for m in s.member_ids}
    assert [n.node_id for n in tree.nodes].count("L0#d#c4") == 1


def test_empty_all_restricted_and_no_embedder():
    assert build_raptor_tree([], embedder=KeywordEmbedder()) == RaptorTree()
    secret = [chunk(i, "alpha", sensitivity=s) for i, s in enumerate(["RESTRICTED", "restricted"])]
    emb = KeywordEmbedder()
    summarizer = RecordingSummarizer()
    assert build_raptor_tree(secret, embedder=emb, summarizer=summarizer) == RaptorTree()
    assert emb.seen == [] and summarizer.seen == []
    leaves_only = build_raptor_tree(corpus(), embedder=None)
    assert leaves_only.summaries == [] and len(leaves_only.leaves) == 5
    assert all(n.embedding == () for n in leaves_only.nodes)
    assert RaptorTree().max_level == 0


def test_restricted_chunks_never_reach_embedder_or_summariser_reverse_proof():
    def build(label):
        emb, summ = KeywordEmbedder(), RecordingSummarizer()
        chunks = [*corpus(), chunk(9, "alpha SECRET merger", doc="s", sensitivity=label)]
        tree = build_raptor_tree(chunks, embedder=emb, summarizer=summ)
        return tree, emb, summ

    # Labels outside the vocabulary (given through the Python API) fail closed too.
    for label in ("RESTRICTED", "Restricted", "rEsTrIcTeD", "SECRET", "RESTRICTED.",
                  "[RESTRICTED]", "R E S T R I C T E D", ""):
        tree, emb, summ = build(label)
        assert "SECRET" not in repr(tree) + repr(emb.seen) + repr(summ.seen)
    tree, emb, summ = build("INTERNAL")  # reverse proof: the same chunk unlabelled is used
    assert "SECRET" in repr(summ.seen) and "s#para10" in tree.summaries[0].source_locators


def test_summary_sensitivity_is_the_most_restrictive_member():
    chunks = [chunk(0, "alpha a", sensitivity="PUBLIC"), chunk(1, "alpha b",
              sensitivity="confidential"), chunk(2, "beta a", sensitivity="PUBLIC"),
              chunk(3, "beta b", sensitivity="Public ")]
    tree = build_raptor_tree(chunks, embedder=KeywordEmbedder(), max_levels=1)
    assert [s.sensitivity for s in tree.summaries] == ["confidential", "PUBLIC"]


def test_bad_build_arguments():
    for kw, name in (({"threshold": 2}, "threshold"), ({"max_levels": -1}, "max_levels"),
                     ({"min_cluster_size": 0}, "min_cluster_size"), ({"threshold": "x"},
                                                                    "threshold")):
        with pytest.raises(ValueError, match=name):
            build_raptor_tree(corpus(), embedder=KeywordEmbedder(), **kw)


# ---------------------------------------------------------------- summarisers


def test_extractive_summariser_first_sentences_capped_and_joined():
    s = ExtractiveRaptorSummarizer(max_chars=10)
    assert s.summarize(["  First one. Second.", "", "   ", "短句。后面", "no ender"]) == (
        "First one. 短句。 no ender")
    assert ExtractiveRaptorSummarizer().summarize(["A b. C d."]) == "A b."
    # a decimal point never ends the sentence: no figure is cut short
    assert ExtractiveRaptorSummarizer().summarize(["Profit fell to RMB 2.1 billion. Next."]) == (
        "Profit fell to RMB 2.1 billion.")
    assert ExtractiveRaptorSummarizer().summarize([]) == ""
    with pytest.raises(ValueError, match="max_chars"):
        ExtractiveRaptorSummarizer(max_chars=0)


def test_llm_summariser_one_call_with_the_texts_and_a_no_numbers_prompt():
    provider = EchoProvider("A shared theme.")
    out = LLMRaptorSummarizer(provider).summarize(["one text", "two text"])
    assert out == "A shared theme."
    ((messages, tools),) = provider.calls
    assert tools is None
    assert messages[0]["role"] == "system" and "number" in messages[0]["content"]
    assert messages[1] == {"role": "user", "content": "one text\n\ntwo text"}


def test_llm_summariser_falls_back_on_provider_error_and_blank_replies(caplog):
    class Failing:
        def chat(self, messages, *, tools=None):
            raise ProviderError("down")

    with caplog.at_level(logging.WARNING, logger="ragspine_lite.raptor"):
        assert LLMRaptorSummarizer(Failing()).summarize(["A b. C."]) == "A b."
        assert LLMRaptorSummarizer(EchoProvider("   ")).summarize(["X y."]) == "X y."
    assert "fallback" in caplog.text
    custom = RecordingSummarizer("custom")
    assert LLMRaptorSummarizer(Failing(), fallback=custom).summarize(["t"]) == "custom"


def test_llm_summariser_in_a_tree_never_sees_restricted():
    provider = EchoProvider("theme")
    chunks = [*corpus(), chunk(7, "alpha SECRET", sensitivity="RESTRICTED")]
    build_raptor_tree(chunks, embedder=KeywordEmbedder(),
                      summarizer=LLMRaptorSummarizer(provider))
    assert provider.calls and "SECRET" not in repr(provider.calls)


# ---------------------------------------------------------------- retrieval


class CountingEmbedder(KeywordEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def embed_texts(self, texts):
        self.calls += 1
        return super().embed_texts(texts)


def test_tree_retrieve_granularities_order_and_top_k():
    tree = build_raptor_tree(corpus(), embedder=KeywordEmbedder(), max_levels=1)
    emb = CountingEmbedder()
    hits = tree.retrieve("alpha", emb, granularity="leaves", top_k=3)
    assert emb.calls == 1
    assert [h.node.node_id for h in hits] == ["L0#d#c0", "L0#d#c1", "L0#d#c4"]
    assert [h.score for h in hits][:2] == [1.0, 1.0]
    summaries = tree.retrieve("alpha", emb, granularity="summaries")
    assert [h.node.node_id for h in summaries] == ["L1#c0", "L1#c1"]
    both = tree.retrieve("alpha", emb, top_k=10)
    assert [h.node.node_id for h in both][:3] == ["L0#d#c0", "L0#d#c1", "L1#c0"]
    with pytest.raises(ValueError, match="granularity"):
        tree.retrieve("alpha", emb, granularity="themes")
    with pytest.raises(ValueError, match="top_k"):
        tree.retrieve("alpha", emb, top_k=0)
    assert RaptorTree().retrieve("alpha", emb) == ()


class Base:
    def __init__(self, snippets):
        self.snippets = snippets
        self.calls = []

    def retrieve(self, query, *, filters=None, top_k=50):
        self.calls.append((query, filters, top_k))
        return self.snippets


def test_raptor_retriever_appends_synthesis_snippets_after_untouched_base():
    tree = build_raptor_tree(corpus(), embedder=KeywordEmbedder(), max_levels=1)
    base_out = [{"text": "alpha one.", "chunk_id": "d#c0", "doc_id": "d"}]
    base = Base(base_out)
    out = RaptorRetriever(base, tree, embedder=KeywordEmbedder(), summary_top_k=1).retrieve(
        "alpha", filters={"entity": "X"}, top_k=7)
    assert base.calls == [("alpha", {"entity": "X"}, 7)]
    assert out[0] is base_out[0]
    assert out[1] == {
        "text": tree.summaries[0].text, "is_synthesis": True, "doc_id": "d",
        "source_locator": "d#para1,d#para2", "sensitivity": "INTERNAL", "raptor_level": 1,
        "scores": {"raptor": 1.0},
    }
    assert "chunk_id" not in out[1]
    assert RaptorRetriever(base, tree, embedder=KeywordEmbedder(), summary_top_k=0).retrieve(
        "alpha") == base_out
    assert RaptorRetriever(base, RaptorTree(), embedder=KeywordEmbedder()).retrieve(
        "alpha") == base_out
    with pytest.raises(ValueError, match="summary_top_k"):
        RaptorRetriever(base, tree, embedder=KeywordEmbedder(), summary_top_k=-1)


# ---------------------------------------------------------------- factories


def test_make_raptor_summarizer(monkeypatch):
    monkeypatch.delenv(RAPTOR_SUMMARIZER_ENV, raising=False)
    assert make_raptor_summarizer() is None
    assert make_raptor_summarizer("none") is None
    assert isinstance(make_raptor_summarizer("Extractive"), ExtractiveRaptorSummarizer)
    assert make_raptor_summarizer("deterministic", max_chars=9).max_chars == 9
    assert make_raptor_summarizer("llm") is None  # no provider
    provider = EchoProvider("x")
    assert make_raptor_summarizer("on", provider=provider).provider is provider
    monkeypatch.setenv(RAPTOR_SUMMARIZER_ENV, "extractive")
    assert isinstance(make_raptor_summarizer(), ExtractiveRaptorSummarizer)
    assert make_raptor_summarizer("none") is None
    with pytest.raises(ValueError, match="'bogus'"):
        make_raptor_summarizer("bogus")


def test_make_raptor_retriever(monkeypatch):
    monkeypatch.delenv(RAPTOR_ENV, raising=False)
    base = Base([])
    tree = build_raptor_tree(corpus(), embedder=KeywordEmbedder())
    emb = KeywordEmbedder()
    assert make_raptor_retriever(base, tree=tree, embedder=emb) is base
    assert make_raptor_retriever(base, "none", tree=tree, embedder=emb) is base
    assert make_raptor_retriever(base, "raptor") is base  # no tree/embedder
    assert make_raptor_retriever(base, "on", tree=tree) is base
    r = make_raptor_retriever(base, "RAPTOR", tree=tree, embedder=emb, summary_top_k=2)
    assert isinstance(r, RaptorRetriever) and r.summary_top_k == 2
    monkeypatch.setenv(RAPTOR_ENV, "on")
    assert isinstance(make_raptor_retriever(base, tree=tree, embedder=emb), RaptorRetriever)
    with pytest.raises(ValueError, match="'tree'"):
        make_raptor_retriever(base, "tree")
