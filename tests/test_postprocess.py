"""postprocess: MMR, lost-in-the-middle, compression, chains and the factory."""

from __future__ import annotations

import copy

import pytest

from ragspine_lite.common.groundedness import LexicalOverlapJudge, overlap_tokens
from ragspine_lite.postprocess import (
    DEFAULT_COMPRESSION_THRESHOLD,
    DEFAULT_MMR_LAMBDA,
    POSTPROCESSOR_ENV,
    POSTPROCESSORS,
    PROMPT_TEXT_KEY,
    ChainPostprocessor,
    CompressionPostprocessor,
    LostInTheMiddlePostprocessor,
    MMRPostprocessor,
    NodePostprocessor,
    make_postprocessor,
)


def snip(text: str, **extra) -> dict:
    base = {
        "text": text, "doc_id": "d", "title": "T", "source_locator": "d#para1",
        "chunk_id": "d#c0", "sensitivity": "INTERNAL",
        "scores": {"bm25": 1.0, "vector": 0.0, "fused": 0.5},
    }
    return {**base, **extra}


def texts(snippets) -> list[str]:
    return [s["text"] for s in snippets]


def test_constants_are_the_documented_ones():
    assert POSTPROCESSOR_ENV == "RAGSPINE_POSTPROCESSOR"
    assert PROMPT_TEXT_KEY == "prompt_text"
    assert DEFAULT_MMR_LAMBDA == 0.5
    assert DEFAULT_COMPRESSION_THRESHOLD == 0.3
    assert MMRPostprocessor().lambda_ == 0.5 and MMRPostprocessor().top_n is None
    assert CompressionPostprocessor().threshold == 0.3


def test_every_builtin_is_a_node_postprocessor():
    for p in (MMRPostprocessor(), LostInTheMiddlePostprocessor(), CompressionPostprocessor(),
              ChainPostprocessor()):
        assert isinstance(p, NodePostprocessor)


# ---------------------------------------------------------------- groundedness helper


def test_overlap_tokens_are_ascii_runs_and_single_cjk_chars():
    assert overlap_tokens("ACME香港 revenue_2024!") == ["acme", "香", "港", "revenue", "2024"]
    assert overlap_tokens("—·。") == []


def test_lexical_overlap_coverage_counts_repetitions_and_empty_claims():
    assert LexicalOverlapJudge.coverage("revenue drop", "revenue grew strongly") == 0.5
    assert LexicalOverlapJudge.coverage("a a b", "a") == pytest.approx(2 / 3)
    assert LexicalOverlapJudge.coverage("。", "anything") == 1.0
    assert LexicalOverlapJudge().threshold == 0.6
    assert not LexicalOverlapJudge().entails("revenue drop", "revenue grew")


# ---------------------------------------------------------------- MMR


def test_mmr_moves_a_near_duplicate_behind_a_different_snippet():
    a, dup = snip("revenue grew in hong kong"), snip("revenue grew in hong kong")
    b = snip("profit fell")
    out = MMRPostprocessor().postprocess("q", [a, dup, b])
    assert [id(x) for x in out] == [id(a), id(b), id(dup)]  # the same dict objects


def test_mmr_top_n_drops_the_duplicate():
    a, dup, b = snip("revenue grew"), snip("revenue grew"), snip("profit fell")
    assert MMRPostprocessor(top_n=2).postprocess("q", [a, dup, b]) == [a, b]


def test_mmr_identical_texts_keep_their_order_and_first_pick_is_first_input():
    items = [snip("same words", chunk_id=f"c{i}") for i in range(4)]
    assert MMRPostprocessor().postprocess("q", items) == items
    varied = [snip("x y"), snip("completely other"), snip("x y z")]
    for lam in (0.0, 0.3, 0.5, 1.0):
        assert MMRPostprocessor(lambda_=lam).postprocess("q", varied)[0] is varied[0]


def test_mmr_lambda_bounds():
    items = [snip("a b"), snip("a b"), snip("c d"), snip("a b c")]
    # lambda 1: relevance only → input order.
    assert MMRPostprocessor(lambda_=1.0).postprocess("q", items) == items
    # lambda 0: diversity only → after the first, the least similar; ties to the earliest.
    assert texts(MMRPostprocessor(lambda_=0.0).postprocess("q", items)) == [
        "a b", "c d", "a b c", "a b"
    ]
    for bad in (-0.01, 1.01, "0.5", None, True, float("nan")):
        with pytest.raises(ValueError, match="lambda_"):
            MMRPostprocessor(lambda_=bad)


def test_mmr_empty_input_and_top_n_validation():
    assert MMRPostprocessor().postprocess("q", []) == []
    assert MMRPostprocessor(top_n=5).postprocess("q", [snip("x")]) == [snip("x")]
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="top_n"):
            MMRPostprocessor(top_n=bad)


def test_mmr_reads_text_or_content_never_prompt_text():
    a = snip("alpha beta", prompt_text="zeta")
    b = snip("", content="gamma delta", prompt_text="alpha beta")
    c = snip("alpha beta gamma")
    # b's prompt_text duplicates a, but its content does not: b stays ahead of c.
    assert MMRPostprocessor(lambda_=0.4).postprocess("q", [a, b, c]) == [a, b, c]


def test_mmr_does_not_mutate_the_input_list():
    items = [snip("a"), snip("a"), snip("b")]
    before = copy.deepcopy(items)
    MMRPostprocessor(top_n=1).postprocess("q", items)
    assert items == before


# ---------------------------------------------------------------- lost in the middle


def test_lost_in_the_middle_order():
    items = [snip(f"d{i}") for i in range(5)]
    assert texts(LostInTheMiddlePostprocessor().postprocess("q", items)) == [
        "d0", "d2", "d4", "d3", "d1"
    ]
    six = [snip(f"d{i}") for i in range(6)]
    assert texts(LostInTheMiddlePostprocessor().postprocess("q", six)) == [
        "d0", "d2", "d4", "d5", "d3", "d1"
    ]


def test_lost_in_the_middle_small_inputs():
    p = LostInTheMiddlePostprocessor()
    assert p.postprocess("q", []) == []
    one = [snip("x")]
    assert p.postprocess("q", one) == one
    two = [snip("a"), snip("b")]
    assert p.postprocess("q", two) == two


# ---------------------------------------------------------------- compression


def test_compression_keeps_covered_sentences_verbatim_in_prompt_text():
    text = "Hong Kong revenue grew 12.5% in 2024.\n天气很好。香港营收增长。"
    s = snip(text)
    out = CompressionPostprocessor().postprocess("hong kong revenue 香港营收", [s])
    # '.' is not a separator: the English line is one sentence (with its newline).
    assert out[0][PROMPT_TEXT_KEY] == (
        "Hong Kong revenue grew 12.5% in 2024.\n香港营收增长。"
    )
    assert out[0]["text"] == text


def test_compression_leaves_every_other_key_and_the_input_untouched():
    s = snip("Revenue grew. 利润下降；\nOther line", prompt_text="a window", parent_locator="d#p")
    before = copy.deepcopy(s)
    out = CompressionPostprocessor().postprocess("revenue", [s])
    assert s == before
    assert out[0] is not s
    assert {k: v for k, v in out[0].items() if k != PROMPT_TEXT_KEY} == {
        k: v for k, v in before.items() if k != PROMPT_TEXT_KEY
    }
    # compresses the original text, not the old prompt_text
    assert out[0][PROMPT_TEXT_KEY] == "Revenue grew. 利润下降；\n"


def test_compression_keeps_the_best_sentence_when_none_reaches_the_threshold():
    s = snip("Nothing relevant here. Revenue fell sharply!\nRevenue and profit up?")
    out = CompressionPostprocessor(threshold=1.0).postprocess("revenue profit", [s])
    assert out[0][PROMPT_TEXT_KEY] == "Revenue and profit up?"
    # ties: the earliest best sentence
    tie = snip("alpha one! alpha two!")
    assert CompressionPostprocessor(threshold=1.0).postprocess("alpha", [tie])[0][
        PROMPT_TEXT_KEY
    ] == "alpha one!"


def test_compression_never_empty_and_no_sentences_gives_the_text():
    p = CompressionPostprocessor()
    assert p.postprocess("q", [snip("")])[0][PROMPT_TEXT_KEY] == ""
    assert p.postprocess("q", [snip("!!!")])[0][PROMPT_TEXT_KEY] == "!!!"
    out = p.postprocess("zzz", [snip("aaa bbb. ccc!")])
    assert out[0][PROMPT_TEXT_KEY] == "aaa bbb. ccc!"


def test_compression_with_a_custom_compressor_and_content_fallback():
    seen = []

    def compressor(query, text):
        seen.append((query, text))
        return text.upper()

    s = snip("", content="some content")
    out = CompressionPostprocessor(compressor=compressor).postprocess("q", [s])
    assert out[0][PROMPT_TEXT_KEY] == "SOME CONTENT"
    assert seen == [("q", "some content")]


def test_compression_never_hands_restricted_text_to_a_compressor():
    calls = []
    secret = snip("SECRET merger", sensitivity="Restricted")
    out = CompressionPostprocessor(compressor=lambda q, t: calls.append(t) or t).postprocess(
        "merger", [secret, snip("open text")]
    )
    assert calls == ["open text"]
    assert out[0] is secret and PROMPT_TEXT_KEY not in out[0]


def test_compression_threshold_bounds():
    for bad in (-0.1, 1.5, "x"):
        with pytest.raises(ValueError, match="threshold"):
            CompressionPostprocessor(threshold=bad)
    assert CompressionPostprocessor(threshold=0).threshold == 0.0


# ---------------------------------------------------------------- chain + factory


def test_chain_applies_in_order_and_empty_is_passthrough():
    items = [snip(f"d{i}") for i in range(3)]
    assert ChainPostprocessor().postprocess("q", items) == items
    chain = ChainPostprocessor([MMRPostprocessor(top_n=2), LostInTheMiddlePostprocessor()])
    assert texts(chain.postprocess("q", items)) == ["d0", "d1"]
    rev = ChainPostprocessor([LostInTheMiddlePostprocessor(), MMRPostprocessor(top_n=2)])
    assert texts(rev.postprocess("q", items)) == ["d0", "d2"]


def test_make_postprocessor_off_by_default(monkeypatch):
    monkeypatch.delenv(POSTPROCESSOR_ENV, raising=False)
    assert make_postprocessor() is None
    for spec in ("", "none", " NONE ", " , "):
        assert make_postprocessor(spec) is None


def test_make_postprocessor_names_are_normalised():
    assert isinstance(make_postprocessor(" MMR "), MMRPostprocessor)
    assert isinstance(make_postprocessor("Lost-In-Middle"), LostInTheMiddlePostprocessor)
    for name in ("litm", "long_context_reorder", "long context reorder"):
        assert isinstance(make_postprocessor(name), LostInTheMiddlePostprocessor)
    for name in ("compress", "Compression"):
        assert isinstance(make_postprocessor(name), CompressionPostprocessor)
    assert POSTPROCESSORS.names() >= [
        "compress", "compression", "litm", "long_context_reorder", "lost_in_middle", "mmr"
    ]


def test_make_postprocessor_kwargs_and_chains():
    mmr = make_postprocessor("mmr", lambda_=0.9, top_n=3)
    assert (mmr.lambda_, mmr.top_n) == (0.9, 3)
    chain = make_postprocessor("mmr, ,lost_in_middle,compress")
    assert isinstance(chain, ChainPostprocessor)
    assert [type(p) for p in chain.processors] == [
        MMRPostprocessor, LostInTheMiddlePostprocessor, CompressionPostprocessor
    ]
    assert chain.processors[0].lambda_ == DEFAULT_MMR_LAMBDA
    with pytest.raises(ValueError, match="single postprocessor"):
        make_postprocessor("mmr,litm", top_n=2)


def test_make_postprocessor_env_and_explicit_spec(monkeypatch):
    monkeypatch.setenv(POSTPROCESSOR_ENV, "mmr,lost_in_middle")
    assert isinstance(make_postprocessor(), ChainPostprocessor)
    assert isinstance(make_postprocessor("compress"), CompressionPostprocessor)
    assert make_postprocessor("none") is None


def test_make_postprocessor_unknown_names_the_spec_and_valid_names():
    with pytest.raises(ValueError, match=r"'bogus'.*valid names: .*mmr"):
        make_postprocessor("bogus")
    with pytest.raises(ValueError, match="bogus"):
        make_postprocessor("mmr,bogus")
