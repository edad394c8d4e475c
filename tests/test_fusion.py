"""The calibrated fusion: dense evidence above a model's floor only, lexical first, agreement."""

from __future__ import annotations

import pytest

from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.chunking.chunking import Chunk, DocumentMeta
from ragspine_lite.lexical.fusion import CalibratedFusion, DenseCalibration
from ragspine_lite.lexical.pipeline import ChannelHits, RRFFusion, default_fusion
from ragspine_lite.lexical.retrieval import GlossaryQueryRewriter, HybridRetriever, NarrativeIndex
from ragspine_lite.link.narrative_link import NarrativeIndexRetriever
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend
from ragspine_lite.vector.onnx_backend import MINILM_CONFIG, OnnxModelConfig

CAL = DenseCalibration(floor=0.3, ceiling=0.7)

# Unit vectors on three axes: "fruit", "river" and "market" texts.
AXES = {
    "apple": (1.0, 0.0, 0.0),
    "orchard": (1.0, 0.0, 0.0),
    "river": (0.0, 1.0, 0.0),
    "market": (0.0, 0.0, 1.0),
}


class AxisBackend:
    """A toy model: a text's vector is the axis of its first known word, else zero."""

    def __init__(self, calibration: DenseCalibration | None = CAL) -> None:
        self.calibration = calibration

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            axis = next((AXES[w] for w in text.lower().split() if w in AXES), (0.0, 0.0, 0.0))
            out.append(list(axis))
        return out


def chunk(cid: str, text: str) -> Chunk:
    return Chunk(cid, "d", 0, text, f"d#{cid}", 1, 1)


CHUNKS = [
    chunk("c1", "orchard trees in spring"),  # dense-only for "apple"
    chunk("c2", "the zorblat apple pie recipe"),  # lexical and dense
    chunk("c3", "a zorblat river crossing"),  # lexical only for "zorblat apple"
    chunk("c4", "stock market report"),
]


def ids(results) -> list[str]:
    return [r.chunk.chunk_id for r in results]


def test_a_calibrated_backend_gets_the_calibrated_fusion_others_keep_rrf():
    assert default_fusion(AxisBackend()) == CalibratedFusion(CAL)
    assert default_fusion(AxisBackend(None), rrf_k=5) == RRFFusion(5)
    assert default_fusion(DeterministicEmbeddingBackend()) == RRFFusion()
    assert isinstance(HybridRetriever(CHUNKS, embedding_backend=AxisBackend()).fusion,
                      CalibratedFusion)


def test_nonsense_returns_nothing_in_hybrid_as_in_bm25():
    hybrid = HybridRetriever(CHUNKS, embedding_backend=AxisBackend())
    assert HybridRetriever(CHUNKS).search("xyzzyplugh frobnicate") == []
    assert hybrid.search("xyzzyplugh frobnicate") == []
    assert hybrid.last_channel == "hybrid"
    # Old RRF gives every candidate a share: the failure this rule fixes.
    old = HybridRetriever(CHUNKS, embedding_backend=AxisBackend(None))
    assert len(old.search("xyzzyplugh frobnicate")) == len(CHUNKS)


def test_dense_evidence_alone_still_finds_a_paraphrase():
    got = HybridRetriever(CHUNKS, embedding_backend=AxisBackend()).search("apple")
    # c2 has "apple" (lexical) and the fruit axis; c1 only the fruit axis; c3, c4 nothing.
    assert ids(got) == ["c2", "c1"]
    assert got[1].bm25_score == 0.0 and got[1].vector_score == pytest.approx(1.0)


def test_an_exact_lexical_match_beats_a_dense_only_chunk_even_at_full_cosine():
    fusion = CalibratedFusion(CAL)
    hits = [ChannelHits("zorblat", [("z", 7.5)], [("a", 1.0), ("b", 0.1)])]
    assert fusion.fuse(hits, 10) == [("z", 0.6), ("a", pytest.approx(0.4))]
    # a tie on RRF (both rank 1 in their channel) used to go to the smaller id
    assert RRFFusion().fuse(hits, 1) == [("a", 1 / 61)]
    got = HybridRetriever(CHUNKS, embedding_backend=AxisBackend()).search("zorblat")
    assert ids(got)[:2] == ["c2", "c3"] or ids(got)[:2] == ["c3", "c2"]
    assert "c1" not in ids(got)  # no lexical hit, no dense evidence for "zorblat"


def test_channel_agreement_outranks_the_best_lexical_only_hit():
    fusion = CalibratedFusion(CAL)
    hits = [ChannelHits("q", [("lex", 4.0), ("both", 2.0)], [("both", 0.7), ("lex", 0.2)])]
    assert fusion.fuse(hits, 10) == [("both", pytest.approx(0.7)), ("lex", 0.6)]
    got = HybridRetriever(CHUNKS, embedding_backend=AxisBackend()).search("zorblat apple")
    assert ids(got)[0] == "c2"


def test_variants_take_each_channels_best_score():
    fusion = CalibratedFusion(CAL)
    hits = [
        ChannelHits("q1", [("a", 2.0), ("b", 1.0)], [("b", 0.5)]),
        ChannelHits("q2", [("b", 3.0)], [("a", 0.9), ("b", 0.4)]),
    ]
    assert fusion.fuse(hits, 10) == [("a", pytest.approx(1.0)), ("b", pytest.approx(0.8))]


def test_without_a_dense_channel_it_is_rrf_exactly():
    hits = [ChannelHits("q1", [("a", 2.0), ("b", 1.0)]), ChannelHits("q2", [("b", 3.0)])]
    assert CalibratedFusion(CAL, rrf_k=7).fuse(hits, 10) == RRFFusion(7).fuse(hits, 10)


def test_no_calibration_leaves_hybrid_byte_identical_to_rrf():
    queries = ["apple", "zorblat apple", "river", "nothing"]
    plain = HybridRetriever(CHUNKS, embedding_backend=AxisBackend(None))
    explicit = HybridRetriever(CHUNKS, embedding_backend=AxisBackend(None), fusion=RRFFusion())
    assert repr([plain.search(q) for q in queries]) == repr([explicit.search(q) for q in queries])


def test_a_query_outside_the_vocabulary_stays_pure_bm25():
    class Unknown(AxisBackend):
        def coverage(self, text: str) -> float:
            return 0.0

    hybrid = HybridRetriever(CHUNKS, embedding_backend=Unknown())
    got = hybrid.search("zorblat", top_k=3)
    assert hybrid.last_channel == "bm25:outside-vocabulary"
    assert repr(got) == repr(HybridRetriever(CHUNKS).search("zorblat", top_k=3))


def test_the_index_and_the_link_return_nothing_for_nonsense(tmp_path):
    store = ChunkStore(tmp_path / "c.db")
    store.init_schema()
    try:
        index = NarrativeIndex(
            store, embedding_backend=AxisBackend(), query_rewriter=GlossaryQueryRewriter()
        )
        index.ingest("orchard trees in spring\n\nstock market report", DocumentMeta(doc_id="d"))
        assert index.retrieve("xyzzyplugh frobnicate") == []
        assert NarrativeIndexRetriever(index).retrieve("xyzzyplugh frobnicate") == []
        assert [r.vector_score for r in index.retrieve("apple")] == [pytest.approx(1.0)]
    finally:
        store.close()


def test_calibration_values_are_checked_and_round_trip():
    assert DenseCalibration.from_mapping(CAL.to_dict()) == CAL
    assert CAL.dense_score(0.3) == 0.0 and CAL.dense_score(0.5) == pytest.approx(0.5)
    assert CAL.dense_score(0.95) == 1.0
    for bad, match in [
        ({"floor": 0.5, "ceiling": 0.4}, "above its floor"),
        ({"floor": 0.1, "ceiling": 0.5, "lexical_weight": 0.5}, r"lexical_weight must be in"),
        ({"floor": "low", "ceiling": 0.5}, "floor must be a number"),
        ({"floor": 0.1}, "missing"),
        ({"floor": 0.1, "ceiling": 0.5, "cutoff": 1}, "unknown"),
    ]:
        with pytest.raises(ValueError, match=match):
            DenseCalibration.from_mapping(bad)


def test_model_configs_carry_their_calibration():
    assert isinstance(MINILM_CONFIG.calibration, DenseCalibration)
    data = MINILM_CONFIG.to_dict()
    assert OnnxModelConfig.from_mapping(data, default_model_id="x") == MINILM_CONFIG
    bare = OnnxModelConfig(model_id="m")
    assert "calibration" not in bare.to_dict()  # an uncalibrated config is written unchanged
    with pytest.raises(ValueError, match="calibration"):
        OnnxModelConfig.from_mapping({"calibration": {"floor": 2}}, default_model_id="m")
