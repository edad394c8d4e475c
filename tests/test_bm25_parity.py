"""Pure-BM25 HybridRetriever == a direct ``bm25_scores`` ranking, on real English/Chinese slices.

This pins the reference scoring path so that a faster index can replace it without
changing a single id or score.
"""

from __future__ import annotations

import pytest
from _corpus import load_slice, slice_chunks

from ragspine_lite.lexical.retrieval import HybridRetriever
from ragspine_lite.lexical.scoring import bm25_scores
from ragspine_lite.lexical.tokenizer import tokenize

pytestmark = pytest.mark.slow  # a parity suite: the slow lane (scripts/test.sh --quick skips it)

SLICES = ["squad_slice", "cmrc_slice"]


def _assert_same_ranking(got, expected, query_id):
    assert [r.chunk.chunk_id for r in got] == [cid for cid, _ in expected], query_id
    for result, (_, score) in zip(got, expected, strict=True):
        assert result.bm25_score == pytest.approx(score, rel=0, abs=1e-12)
        assert result.vector_score == 0.0
    # One query, one BM25 ranking: the RRF score is exactly 1 / (60 + rank).
    assert [r.fused_score for r in got] == [1.0 / (60 + i) for i in range(1, len(got) + 1)]


@pytest.mark.parametrize("name", SLICES)
def test_pure_bm25_search_matches_direct_bm25_ranking(name):
    data = load_slice(name)
    chunks = slice_chunks(data)
    assert len(chunks) == len({c.chunk_id for c in chunks})
    ids = [c.chunk_id for c in chunks]
    docs_tokens = [tokenize(c.text) for c in chunks]
    retriever = HybridRetriever(chunks)  # default top_k=50, no rewriter, no vectors
    assert retriever.vector_store is None and retriever.query_rewriter is None
    small = HybridRetriever(chunks, top_k=10)
    relevant_in_top10 = 0
    for n, query in enumerate(data.queries):
        scores = bm25_scores(tokenize(query["text"]), docs_tokens)
        expected = sorted(
            ((cid, s) for cid, s in zip(ids, scores, strict=True) if s > 0),
            key=lambda cs: (-cs[1], cs[0]),
        )
        assert expected, query["id"]
        got = retriever.search(query["text"])
        _assert_same_ranking(got, expected[:50], query["id"])
        if n < 30:  # the ctor limit and the call-time limit cut the same ranking
            _assert_same_ranking(small.search(query["text"]), expected[:10], query["id"])
            _assert_same_ranking(
                retriever.search(query["text"], top_k=10), expected[:10], query["id"]
            )
        top10 = {cid for cid, _ in expected[:10]}
        relevant_in_top10 += bool(top10 & set(data.qrels[query["id"]]))
    # A sanity floor far below what Okapi BM25 reaches on these sets: it catches a
    # tokenizer or ranking regression (e.g. CJK bigrams lost), it is not tuning.
    assert relevant_in_top10 / len(data.queries) >= 0.8


@pytest.mark.parametrize("name", SLICES)
def test_slices_have_one_relevant_paragraph_per_query_inside_the_corpus(name):
    data = load_slice(name)
    corpus_ids = {row["id"] for row in data.corpus}
    assert data.queries and data.corpus
    assert {q["id"] for q in data.queries} == set(data.qrels)
    for judged in data.qrels.values():
        assert len(judged) == 1
        assert set(judged) <= corpus_ids
