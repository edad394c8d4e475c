"""Exact words: a word few chunks hold lifts them in a hybrid search; BM25 mode is untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragspine_lite.bundle.export import export_store, load_corpus
from ragspine_lite.bundle.manifest import BUNDLE_FORMAT_VERSION
from ragspine_lite.bundle.runtime import BundleSearcher
from ragspine_lite.bundle.shards import (
    DirectoryFiles,
    ShardedBM25Index,
    ShardedBundle,
    write_shards,
)
from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.chunking.chunking import Chunk
from ragspine_lite.lexical.bm25_index import TermDocuments
from ragspine_lite.lexical.fusion import CalibratedFusion, DenseCalibration
from ragspine_lite.lexical.inverted_index import InvertedIndex, StoreBM25Index
from ragspine_lite.lexical.retrieval import HybridRetriever, bm25_scores, tokenize
from ragspine_lite.pipeline import search as search_mod
from ragspine_lite.pipeline.exact import DEFAULT_EXACT_WORDS, ExactWords
from ragspine_lite.pipeline.fusion import RRFFusion, default_fusion
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend

QUERY = "zorblat population history"

# "census" is short and holds both filler words twice: BM25 (and the score-aware fusion of
# BM25's ranking) put it first. "festival" is the one chunk with "zorblat", in a long text.
# The filler words are common (df > 3), so only "zorblat" is rare.
TEXTS = {
    "census": "Population history: the population and history of the valley.",
    "festival": (
        "The old town square hosts a spring festival every year, where the zorblat lanterns "
        "are lit at dusk and music plays until late in the evening near the river banks, while "
        "the bakers sell bread and the children run between the market stalls."
    ),
    "railway": "The population of the valley grew after the railway came.",
    "harbour": "A short history of the harbour and its ships.",
    "schools": "Schools kept a record of the population every spring.",
    "museum": "The museum tells the history of the mills.",
    "farms": "The population of farmers fell when the mills closed.",
    "library": "The library keeps the history of the town.",
    "weather": "Rain fell on the hills for most of the week.",
}


class Flat(DeterministicEmbeddingBackend):
    """The hashed stand-in model, calibrated so high that its cosines are never evidence:
    the fused order is then BM25's own (what a model that cannot tell the pages apart gives)."""

    calibration = DenseCalibration(floor=0.97, ceiling=0.99)


def chunks() -> list[Chunk]:
    return [Chunk(cid, cid, 0, text, f"{cid}#para1", 1, 1) for cid, text in TEXTS.items()]


def ids(results) -> list[str]:
    return [r.chunk.chunk_id for r in results]


def hybrid(fusion=None) -> HybridRetriever:
    return HybridRetriever(chunks(), embedding_backend=Flat(dim=32), fusion=fusion)


# -- the rule ---------------------------------------------------------------------------------


def test_the_default_calibrated_fusion_carries_the_rule_and_rrf_does_not():
    assert default_fusion(Flat()).exact_words == DEFAULT_EXACT_WORDS == ExactWords(3, 0.5)
    assert not hasattr(default_fusion(DeterministicEmbeddingBackend()), "exact_words")
    assert RRFFusion() == default_fusion(None)


@pytest.mark.parametrize("kwargs", [{"max_df": 0}, {"max_df": 1.5}, {"max_df": True},
                                    {"bonus": 0}, {"bonus": -1.0}, {"bonus": float("nan")}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        ExactWords(**kwargs)


def test_words_are_ascii_runs_not_cjk_characters_or_bigrams():
    assert ExactWords.words("Zorblat 人口历史 zorblat T-1000") == ["zorblat", "t", "1000"]
    assert ExactWords.words("人口历史") == []


def test_held_counts_the_rare_words_and_lift_adds_the_bonus_then_sorts():
    rule = ExactWords(max_df=2, bonus=0.5)
    terms = [TermDocuments("a", 2, ["x", "y"]), TermDocuments("b", 1, ["y"]),
             TermDocuments("c", 9, [])]
    held = rule.held(terms)
    assert held == {"x": 1, "y": 2}
    fused = [("z", 0.9), ("x", 0.6), ("w", 0.5), ("y", 0.25)]
    assert rule.lift(fused, held, 3) == [("y", 1.25), ("x", 1.1), ("z", 0.9)]
    assert rule.lift(fused, {}, 2) == fused[:2]


# -- in a search --------------------------------------------------------------------------------


def test_a_unique_word_page_loses_in_plain_fused_order_and_wins_with_exact_words():
    plain = hybrid(CalibratedFusion(Flat.calibration, exact_words=None)).search(QUERY)
    assert ids(plain)[0] == "census" and "festival" in ids(plain)[1:]  # fillers win BM25
    retriever = hybrid()
    got = retriever.search(QUERY)
    assert retriever.last_channel == "hybrid"
    assert ids(got)[0] == "festival"
    assert sorted(ids(got)) == sorted(ids(plain))  # nothing added, nothing dropped
    by_id = {r.chunk.chunk_id: r for r in plain}
    for r in got:  # the bonus is the only change: BM25 and vector scores stay
        assert r.bm25_score == by_id[r.chunk.chunk_id].bm25_score
        bonus = 0.5 if r.chunk.chunk_id == "festival" else 0.0
        assert r.fused_score == by_id[r.chunk.chunk_id].fused_score + bonus
    assert [r.fused_score for r in got] == sorted((r.fused_score for r in got), reverse=True)


def test_nonsense_still_returns_nothing():
    assert hybrid().search("qzvhx wplrt fobikaz") == []


def test_a_word_is_rare_among_the_candidates_a_filter_leaves():
    index = InvertedIndex.from_texts(list(TEXTS), TEXTS.values())
    assert [(t.term, t.df, t.ids) for t in index.term_documents(["population", "zorblat"], 3)] \
        == [("population", 4, []), ("zorblat", 1, ["festival"])]
    some = index.candidates([0, 2, 4])  # census, railway, schools
    assert [(t.term, t.df, t.ids) for t in index.term_documents(["population"], 3,
                                                                candidates=some)] \
        == [("population", 3, ["census", "railway", "schools"])]


# -- BM25 mode stays BM25 ----------------------------------------------------------------------


def test_bm25_mode_never_asks_for_exact_words(monkeypatch):
    reference = bm25_scores(tokenize(QUERY), [tokenize(t) for t in TEXTS.values()])
    want = sorted(((cid, s) for cid, s in zip(TEXTS, reference, strict=True) if s > 0),
                  key=lambda h: (-h[1], h[0]))

    def refuse(*_args, **_kwargs):
        raise AssertionError("exact words asked for outside the hybrid channel")

    monkeypatch.setattr(ExactWords, "held", refuse)
    got = HybridRetriever(chunks()).search(QUERY)
    assert [(r.chunk.chunk_id, r.bm25_score) for r in got] == want
    assert ids(got)[0] == "census"

    class Gated(Flat):
        def coverage(self, text: str) -> float:
            return 0.0  # every query outside the vocabulary: BM25 alone

    gated = HybridRetriever(chunks(), embedding_backend=Gated(dim=32))
    assert repr(gated.search(QUERY)) == repr(HybridRetriever(chunks()).search(QUERY))
    assert gated.last_channel == "bm25:outside-vocabulary"


# -- the three index siblings agree -------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, Path, Flat]:
    """The texts as a built site: (exported chunk store, sharded bundle root, model)."""
    tmp = tmp_path_factory.mktemp("exact")
    docs = tmp / "docs"
    docs.mkdir()
    for name, text in TEXTS.items():
        (docs / f"{name}.md").write_text(
            f"---\ntitle: {name}\nsensitivity: PUBLIC\n---\n{text}\n", encoding="utf-8")
    backend = Flat(dim=32)
    db, root = tmp / "chunks.db", tmp / "site"
    export_store(load_corpus([docs]), db, embedding_backend=backend)
    report = write_shards(db, root)
    (root / "manifest.json").write_text(json.dumps({
        "format_version": BUNDLE_FORMAT_VERSION, "entry": {"index": report.header},
        "files": {p: {} for p in report.files},
    }), encoding="utf-8")
    return db, root, backend


def test_the_three_indexes_count_the_same_documents(site):
    db, root, _ = site
    words = [*ExactWords.words(QUERY), "valley", "spring", "nothing"]
    with ChunkStore(db, read_only=True) as store:
        rows = store.iter_chunk_rows()
        stored = StoreBM25Index.attach(store)
        memory = InvertedIndex.from_texts([c.chunk_id for _, c in rows], [c.text for _, c in rows])
        want = memory.term_documents(words, 3)
        assert stored.term_documents(words, 3) == want
        ordered = sorted(c.chunk_id for _, c in rows)  # sharded docnos: chunk ids in order
    sharded = ShardedBM25Index(ShardedBundle(DirectoryFiles(root)))
    got = sharded.term_documents(words, 3)
    assert [(t.term, t.df, [ordered[int(k)] for k in t.ids]) for t in got] == \
        [(t.term, t.df, t.ids) for t in want]
    assert [t.term for t in want] == ["zorblat", "population", "history", "valley", "spring"]
    assert [len(t.ids) for t in want] == [1, 0, 0, 2, 2]


@pytest.mark.parametrize("pool", [1, 100])
def test_the_sqlite_and_the_sharded_paths_put_the_unique_page_first(site, monkeypatch, pool):
    db, root, backend = site
    monkeypatch.setattr(search_mod, "LEXICAL_POOL", pool)  # 1: the page is outside the pool
    sizes: list[int | None] = []
    original = search_mod.pooled_ranking

    def spy(*args, **kwargs):
        found = original(*args, **kwargs)
        sizes.append(None if found is None else len(found))
        return found

    monkeypatch.setattr(search_mod, "pooled_ranking", spy)
    with BundleSearcher(db, embedding_backend=backend) as reference, \
            BundleSearcher.from_files(DirectoryFiles(root), embedding_backend=backend) as lazy:
        for kwargs in ({}, {"top_k": 1}, {"top_k": 3}):
            want = reference.search(QUERY, **kwargs).as_dict()
            got = lazy.search(QUERY, **kwargs).as_dict()
            assert got["semantic"] == want["semantic"] == {
                "mode": "hybrid", "channel": "hybrid", "error": None}
            assert got["hits"] == want["hits"]
            assert got["hits"][0]["snippet"]["text"].startswith("The old town square")
        bm25 = lazy.search(QUERY, mode="bm25").as_dict()["hits"]
        assert bm25 == reference.search(QUERY, mode="bm25").as_dict()["hits"]
        assert bm25[0]["snippet"]["text"].startswith("Population history")
    with BundleSearcher.from_files(DirectoryFiles(root)) as plain:  # no model: BM25 alone
        assert plain.search(QUERY).as_dict()["hits"] == bm25
    if pool == 1:  # top_k=1: a pool of 2 BM25 hits plus the page, proven
        assert 3 in sizes
