"""lexical.retrieval: re-exports, Protocols, GlossaryQueryRewriter and the bilingual golden."""

from __future__ import annotations

import hashlib
import math

import pytest

import ragspine_lite.lexical as lexical_pkg
from ragspine_lite.chunking.chunking import Chunk
from ragspine_lite.common.glossary import Glossary
from ragspine_lite.lexical import retrieval
from ragspine_lite.lexical import scoring as scoring_mod
from ragspine_lite.lexical import tokenizer as tokenizer_mod
from ragspine_lite.lexical.retrieval import (
    DEFAULT_BM25_B,
    DEFAULT_BM25_K1,
    DEFAULT_RRF_K,
    DEFAULT_TOP_K,
    GlossaryQueryRewriter,
    HybridRetriever,
    QueryRewriter,
    RetrievableIndex,
    RetrievalResult,
    bm25_scores,
    tokenize,
)
from ragspine_lite.vector import embedding_backends as eb_mod
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend


def mk(cid: str, text: str, **kw: str) -> Chunk:
    return Chunk(cid, "doc", int(cid.lstrip("c") or 0), text, f"doc#para{cid}", 1, 1, **kw)


# --- module surface ---------------------------------------------------------------------


def test_constants_match_the_contract():
    assert DEFAULT_TOP_K == 50
    assert DEFAULT_RRF_K == 60
    assert DEFAULT_BM25_K1 == 1.5
    assert DEFAULT_BM25_B == 0.75


def test_primitives_are_reexported_not_redefined():
    assert retrieval.tokenize is tokenizer_mod.tokenize
    assert retrieval.bm25_scores is scoring_mod.bm25_scores
    assert retrieval.cosine_similarity is scoring_mod.cosine_similarity
    assert retrieval.rrf_fuse is scoring_mod.rrf_fuse
    assert retrieval.EmbeddingBackend is eb_mod.EmbeddingBackend


def test_module_all_names_exist():
    for name in retrieval.__all__:
        assert hasattr(retrieval, name), name


def test_lexical_package_exports_match_the_retrieval_and_index_modules():
    from ragspine_lite.lexical import inverted_index

    for name in lexical_pkg.__all__:
        home = inverted_index if name in inverted_index.__all__ else retrieval
        assert getattr(lexical_pkg, name) is getattr(home, name)
    assert set(retrieval.__all__) | set(inverted_index.__all__) == set(lexical_pkg.__all__)
    with pytest.raises(AttributeError):
        _ = lexical_pkg.no_such_name


def test_protocols_are_runtime_checkable():
    assert isinstance(GlossaryQueryRewriter(), QueryRewriter)
    assert not isinstance(object(), QueryRewriter)

    class Index:
        def retrieve(self, query, **kw):
            return []

    assert isinstance(Index(), RetrievableIndex)
    assert not isinstance(object(), RetrievableIndex)


def test_retrieval_result_holds_chunk_and_three_scores():
    c = mk("c1", "x")
    r = RetrievalResult(chunk=c, bm25_score=1.5, vector_score=0.25, fused_score=0.01)
    assert (r.chunk, r.bm25_score, r.vector_score, r.fused_score) == (c, 1.5, 0.25, 0.01)
    assert r == RetrievalResult(c, 1.5, 0.25, 0.01)


# --- primitives (pinned examples) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("影响", ["影", "响", "影响"]),
        ("MPFA新规", ["mpfa", "新", "规", "新规"]),
        ("?!，。…", []),
        ("", []),
        ("Hello, World_2024", ["hello", "world", "2024"]),
        ("ACME香港2023年", ["acme", "香", "港", "香港", "2023", "年"]),
        ("日本語のテキスト 한국어", ["日", "本", "語", "日本", "本語"]),
        ("café naïve", ["caf", "na", "ve"]),
        ("\u3400\u4dbf\uf900", ["\u3400", "\u4dbf", "\uf900", "\u3400\u4dbf", "\u4dbf\uf900"]),
    ],
)
def test_tokenize_ascii_runs_and_cjk_unigrams_then_bigrams(text, tokens):
    assert tokenize(text) == tokens


def test_bm25_pinned_value_and_degenerate_inputs():
    scores = bm25_scores(["x"], [["x", "x", "y"], ["y", "z"]])
    assert scores[0] == pytest.approx(0.930399, abs=1e-6)
    assert scores[1] == 0.0
    assert bm25_scores([], [["x"], ["y"]]) == [0.0, 0.0]
    assert bm25_scores(["x"], []) == []


def test_bm25_matches_the_okapi_formula_with_query_term_frequency():
    docs = [["a", "b", "a"], ["b", "c"], ["a"]]
    n, avgdl, k1, b = 3, 2.0, 1.5, 0.75

    def term(t, doc, qtf):
        df = sum(t in d for d in docs)
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        tf = doc.count(t)
        return qtf * idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(doc) / avgdl))

    got = bm25_scores(["a", "a", "b"], docs)
    for doc, score in zip(docs, got, strict=True):
        assert score == pytest.approx(term("a", doc, 2) + term("b", doc, 1), abs=1e-12)


def test_rrf_hand_examples_and_cosine_zero_vector():
    assert retrieval.rrf_fuse([["a", "b"], ["b"]], k=1) == {"a": 0.5, "b": 1 / 3 + 1 / 2}
    fused = retrieval.rrf_fuse([["x", "y", "z"], ["z", "x"]])
    assert fused == {"x": 1 / 61 + 1 / 62, "y": 1 / 62, "z": 1 / 63 + 1 / 61}
    assert retrieval.rrf_fuse([]) == {}
    assert retrieval.cosine_similarity([0.0, 0.0], [1.0, 2.0]) == 0.0
    assert retrieval.cosine_similarity([1.0, 1.0], [2.0, 2.0]) == pytest.approx(1.0)


# --- GlossaryQueryRewriter --------------------------------------------------------------


def test_rewriter_without_glossary_terms_returns_only_the_original():
    assert GlossaryQueryRewriter().rewrite("weather forecast") == ["weather forecast"]
    assert GlossaryQueryRewriter().rewrite("") == [""]


def test_rewriter_keeps_the_original_query_first_and_unchanged():
    out = GlossaryQueryRewriter().rewrite("HK Revenue")
    assert out[0] == "HK Revenue"


def test_rewriter_round_one_codes_then_round_two_synonyms():
    # "revenue" (METRIC) is scanned before "hk" (ENTITY); round 1 puts the codes in,
    # round 2 every other synonym of REVENUE (营收), then of ACME_HK in dict order.
    out = GlossaryQueryRewriter(max_queries=20).rewrite("hk revenue")
    assert out == [
        "hk revenue",
        "hk REVENUE",
        "ACME_HK revenue",
        "hk 营收",
        "acme hong kong revenue",
        "acme hk revenue",
        "hong kong revenue",
        "香港 revenue",
        "ACME香港 revenue",
        "acme_hk revenue",
    ]


def test_rewriter_caps_at_max_queries():
    full = GlossaryQueryRewriter(max_queries=20).rewrite("hk revenue")
    for n in range(1, 8):
        assert GlossaryQueryRewriter(max_queries=n).rewrite("hk revenue") == full[:n]
    assert GlossaryQueryRewriter().max_queries == 5
    assert len(GlossaryQueryRewriter().rewrite("hk revenue")) == 5


def test_rewriter_matches_on_the_lowercased_query():
    out = GlossaryQueryRewriter(max_queries=3).rewrite("HK REVENUE")
    assert out == ["HK REVENUE", "hk REVENUE", "ACME_HK revenue"]


def test_rewriter_adds_a_candidate_only_if_new():
    # Lowercased "香港 revenue" with revenue → REVENUE is the original again: not added.
    out = GlossaryQueryRewriter().rewrite("香港 REVENUE 银保 增长")
    assert out == [
        "香港 REVENUE 银保 增长",
        "ACME_HK revenue 银保 增长",
        "香港 营收 银保 增长",
        "acme hong kong revenue 银保 增长",
        "acme hk revenue 银保 增长",
    ]
    assert len(out) == len(set(out))


def test_rewriter_ascii_terms_need_word_boundaries():
    assert GlossaryQueryRewriter().rewrite("concern about china") == [
        "concern about china",
        "concern about ACME_CN",
        "concern about acme china",
        "concern about acme cn",
        "concern about cn",
    ]
    assert GlossaryQueryRewriter().rewrite("concerns") == ["concerns"]
    assert GlossaryQueryRewriter().rewrite("hkd prices") == ["hkd prices"]


def test_rewriter_cjk_terms_match_as_substrings():
    out = GlossaryQueryRewriter(max_queries=2).rewrite("今年营收如何")
    assert out == ["今年营收如何", "今年REVENUE如何"]


def test_rewriter_uppercase_glossary_keys_never_match():
    # Matching runs on the lowercased query, so "ACME集团" cannot match; "集团" does.
    out = GlossaryQueryRewriter(max_queries=2).rewrite("ACME集团")
    assert out == ["ACME集团", "acmeACME_GROUP"]


def test_rewriter_uses_an_injected_glossary():
    g = Glossary(metric_synonyms={"sales": "SALES", "turnover": "SALES"}, entity_synonyms={})
    assert GlossaryQueryRewriter(glossary=g).rewrite("sales up") == [
        "sales up",
        "SALES up",
        "turnover up",
    ]


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "3", None])
def test_rewriter_rejects_max_queries_below_one_or_not_int(bad):
    with pytest.raises(ValueError, match=repr(bad).replace("(", r"\(")):
        GlossaryQueryRewriter(max_queries=bad)


# --- bilingual golden (expected values recomputed independently) ------------------------

GOLDEN_QUERY = "香港 REVENUE 银保 增长"
GOLDEN_TEXTS = {
    "c1": "ACME香港2023年营收增长12%，银保渠道贡献最大。",
    "c2": "Hong Kong revenue grew 12% in 2023, led by the bank channel.",
    "c3": "集团新签金额保持稳定，中国内地业务增长放缓。",
    "c4": "ACME HK revenue rose; 香港银保 revenue growth 增长 was strong.",
    "c5": "Operating profit in China declined while ROE fell.",
}


def _golden_chunks() -> list[Chunk]:
    return [mk(cid, text) for cid, text in GOLDEN_TEXTS.items()]


def _hash_embed(text: str, dim: int) -> list[float]:
    """The documented deterministic embedding, written out again for the oracle."""
    vec = [0.0] * dim
    for tok in tokenize(text):
        digest = hashlib.blake2b(tok.encode("utf-8"), digest_size=8).digest()
        vec[int.from_bytes(digest, "big") % dim] += 1.0
    norm = math.sqrt(sum(x * x for x in vec))
    return [x / norm for x in vec] if norm else vec


def _cos(a: list[float], b: list[float]) -> float:
    na = math.sqrt(math.fsum(x * x for x in a))
    nb = math.sqrt(math.fsum(x * x for x in b))
    if not na or not nb:
        return 0.0
    return math.fsum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)


def _oracle(queries: list[str], texts: dict[str, str], *, dim: int | None):
    ids = sorted(texts)
    docs = [tokenize(texts[i]) for i in ids]
    fused: dict[str, float] = {}
    best_bm25: dict[str, float] = {}
    best_vec: dict[str, float] = {}
    for q in queries:
        lanes = []
        scores = bm25_scores(tokenize(q), docs)
        bm = sorted([(s, i) for s, i in zip(scores, ids, strict=True) if s > 0],
                    key=lambda t: (-t[0], t[1]))
        lanes.append([i for _, i in bm])
        for s, i in bm:
            best_bm25[i] = max(best_bm25.get(i, 0.0), s)
        if dim is not None:
            qv = _hash_embed(q, dim)
            vs = sorted(((_cos(qv, _hash_embed(texts[i], dim)), i) for i in ids),
                        key=lambda t: (-t[0], t[1]))
            lanes.append([i for _, i in vs])
            for s, i in vs:
                best_vec[i] = max(best_vec.get(i, s), s)
        for lane in lanes:
            for rank, i in enumerate(lane, start=1):
                fused[i] = fused.get(i, 0.0) + 1.0 / (60 + rank)
    order = sorted(fused, key=lambda i: (-fused[i], i))
    return [(i, best_bm25.get(i, 0.0), best_vec.get(i, 0.0), fused[i]) for i in order]


def _quads(results):
    return [(r.chunk.chunk_id, r.bm25_score, r.vector_score, r.fused_score) for r in results]


def _assert_quads_close(got, expected):
    assert [g[0] for g in got] == [e[0] for e in expected]
    for g, e in zip(got, expected, strict=True):
        for a, b in zip(g[1:], e[1:], strict=True):
            assert a == pytest.approx(b, rel=0, abs=1e-12)


def test_golden_hybrid_with_glossary_rewriter_matches_independent_computation():
    variants = GlossaryQueryRewriter().rewrite(GOLDEN_QUERY)
    assert len(variants) == 5
    expected = _oracle(variants, GOLDEN_TEXTS, dim=32)
    retriever = HybridRetriever(
        _golden_chunks(),
        embedding_backend=DeterministicEmbeddingBackend(dim=32),
        query_rewriter=GlossaryQueryRewriter(),
    )
    got = _quads(retriever.search(GOLDEN_QUERY))
    _assert_quads_close(got, expected)
    # Hybrid: every candidate is on the vector lane, so all five come back.
    assert sorted(g[0] for g in got) == sorted(GOLDEN_TEXTS)
    # Five variants x (BM25 + vector) = ten rankings: no fused score can exceed 10/61.
    assert all(0 < g[3] <= 10 / 61 for g in got)


def test_golden_pure_bm25_keeps_only_lexical_hits_in_reasoned_order():
    variants = GlossaryQueryRewriter().rewrite(GOLDEN_QUERY)
    got = _quads(HybridRetriever(_golden_chunks(), query_rewriter=GlossaryQueryRewriter())
                 .search(GOLDEN_QUERY))
    _assert_quads_close(got, _oracle(variants, GOLDEN_TEXTS, dim=None))
    # c5 shares no token with any variant, so pure BM25 drops it; c3 shares only 增长,
    # which every variant holds, so it stays.
    ids = [g[0] for g in got]
    assert sorted(ids) == ["c1", "c2", "c3", "c4"]
    assert all(g[2] == 0.0 for g in got)
    # c4 holds 香港, 银保, 增长, revenue, acme and hk: it wins every lane but the 营收 one.
    assert ids[0] == "c4"
    assert got[0][3] < 5 / 61


def test_golden_is_deterministic_across_searches_and_instances():
    def run():
        r = HybridRetriever(
            _golden_chunks(),
            embedding_backend=DeterministicEmbeddingBackend(dim=32),
            query_rewriter=GlossaryQueryRewriter(),
        )
        return repr(r.search(GOLDEN_QUERY)), repr(r.search(GOLDEN_QUERY))

    first, second = run()
    assert first == second
    assert run() == (first, second)
