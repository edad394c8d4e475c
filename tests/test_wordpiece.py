"""Tests for the pure-Python BERT WordPiece tokenizer (both lanes) and its parity with the
``tokenizers`` library on the real all-MiniLM-L6-v2 vocabulary (CPython, optional packages)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from ragspine_lite.vector.wordpiece import (
    DEFAULT_MAX_INPUT_CHARS_PER_WORD,
    BatchEncoding,
    Encoding,
    WordPieceTokenizer,
    is_cjk_ideograph,
    load_vocab,
)

DATA = Path(__file__).resolve().parent / "data"

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PIECES = [
    "un", "una", "##aff", "##able", "##ffable", "hello", "world", "cafe", "!", ",", ".",
    "香", "港", "营", "收", "a", "##b", "##c", "σ", "##α", "##σ", "x", "##x",
]
VOCAB = SPECIALS + PIECES


def tok(**kwargs: object) -> WordPieceTokenizer:
    return WordPieceTokenizer(VOCAB, **kwargs)  # type: ignore[arg-type]


def vid(token: str) -> int:
    return VOCAB.index(token)


# --- vocabulary ------------------------------------------------------------------------


def test_load_vocab_numbers_lines_and_ignores_the_final_newline(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]  \nhello\n", encoding="utf-8")
    assert load_vocab(path) == {"[PAD]": 0, "[UNK]": 1, "hello": 2}


def test_load_vocab_keeps_the_last_id_of_a_repeated_token():
    assert load_vocab(["a", "b", "a"]) == {"a": 2, "b": 1}


def test_from_file_reads_a_vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    t = WordPieceTokenizer.from_file(path)
    assert t.vocab_size == len(VOCAB)
    assert t.encode("hello").ids == [vid("[CLS]"), vid("hello"), vid("[SEP]")]


def test_mapping_and_sequence_vocabularies_are_equivalent():
    a = WordPieceTokenizer({t: i for i, t in enumerate(VOCAB)})
    assert a.encode("unaffable, hello!").ids == tok().encode("unaffable, hello!").ids


@pytest.mark.parametrize("missing", ["[UNK]", "[CLS]", "[SEP]", "[PAD]"])
def test_a_special_token_missing_from_the_vocab_is_rejected(missing):
    with pytest.raises(ValueError, match=re.escape(repr(missing))):
        WordPieceTokenizer([t for t in VOCAB if t != missing])


def test_empty_vocab_and_bad_word_limit_are_rejected():
    with pytest.raises(ValueError, match="empty"):
        WordPieceTokenizer([])
    with pytest.raises(ValueError, match="max_input_chars_per_word"):
        tok(max_input_chars_per_word=0)


# --- normalisation ---------------------------------------------------------------------


def test_accents_are_stripped_and_text_lowercased_by_default():
    assert tok().normalize("Héllo WÖRLD Café") == "hello world cafe"


def test_strip_accents_false_keeps_marks_and_lowercase_false_keeps_case():
    assert tok(strip_accents=False).normalize("Café") == "café"
    assert tok(lowercase=False).normalize("Café") == "Café"
    assert tok(lowercase=False, strip_accents=True).normalize("Café") == "Cafe"


def test_sigma_is_lowercased_character_by_character():
    # str.lower() would give a final sigma at the end of the word.
    assert tok().normalize("ΣΑΣ") == "σασ"
    assert tok().tokenize("ΣΑΣ") == ["σ", "##α", "##σ"]


def test_control_format_and_private_use_characters_are_dropped():
    assert tok().normalize("a\x00b\x01c\u200bd\ufeffe\ue000f\ufffdg") == "abcdefg"


def test_unassigned_code_points_are_kept():
    assert tok().normalize("a\u0378b") == "a\u0378b"


def test_every_whitespace_becomes_a_space():
    assert tok().normalize("a\tb\nc\rd\u00a0e\u3000f\u2028g") == "a b c d e f g"


def test_cjk_ideographs_are_padded_with_spaces():
    assert tok().normalize("香港abc") == " 香  港 abc"


def test_cjk_ranges_follow_the_reference_including_its_gap():
    assert is_cjk_ideograph(0x4E00) and is_cjk_ideograph(0x9FFF)
    assert is_cjk_ideograph(0x20000) and is_cjk_ideograph(0x2B920)
    assert is_cjk_ideograph(0xF900) and is_cjk_ideograph(0x2FA1F)
    assert not is_cjk_ideograph(0x2B820)  # the reference skips U+2B820–U+2B91F
    assert not is_cjk_ideograph(0xAC00)  # Hangul is not split
    assert not is_cjk_ideograph(ord("a"))


def test_handle_chinese_chars_false_keeps_them_in_words():
    assert tok(handle_chinese_chars=False).normalize("香港abc") == "香港abc"


def test_normalize_rejects_non_strings():
    with pytest.raises(ValueError, match="str"):
        tok().normalize(b"bytes")  # type: ignore[arg-type]


# --- pre-tokenisation and WordPiece ----------------------------------------------------


def test_punctuation_is_split_off_as_single_words():
    assert tok().pre_tokenize("hello,world! (a.b) «x»—y") == [
        "hello", ",", "world", "!", "(", "a", ".", "b", ")", "«", "x", "»", "—", "y",
    ]


def test_ascii_symbols_count_as_punctuation():
    assert tok().pre_tokenize("a$b+c^d") == ["a", "$", "b", "+", "c", "^", "d"]


def test_wordpiece_is_greedy_longest_match_first():
    # "una" + "##ffable" beats "un" + "##aff" + "##able": the first piece is the longest.
    assert tok().tokenize("unaffable") == ["una", "##ffable"]
    small = WordPieceTokenizer([*SPECIALS, "un", "##aff", "##able"])
    assert small.tokenize("unaffable") == ["un", "##aff", "##able"]


def test_a_word_with_an_unmatchable_rest_is_a_single_unk():
    # "ab" matches "a" + "##b", but "abz" cannot be finished: the whole word is [UNK].
    assert tok().tokenize("ab abz") == ["a", "##b", "[UNK]"]


def test_words_over_the_char_limit_are_unk():
    assert DEFAULT_MAX_INPUT_CHARS_PER_WORD == 100
    assert tok().tokenize("x" * 100) == ["x"] + ["##x"] * 99
    assert tok().tokenize("x" * 101) == ["[UNK]"]
    assert tok(max_input_chars_per_word=3).tokenize("xxx xxxx") == ["x", "##x", "##x", "[UNK]"]


def test_chinese_characters_become_one_token_each():
    assert tok().tokenize("香港营收") == ["香", "港", "营", "收"]
    assert tok().tokenize("香港营业") == ["香", "港", "营", "[UNK]"]


def test_blank_text_has_no_pieces():
    assert tok().tokenize("") == []
    assert tok().tokenize(" \t\n ") == []


def test_tokenizing_twice_gives_the_same_pieces():
    t = tok()
    assert t.tokenize("unaffable hello") == t.tokenize("unaffable hello")


# --- encode ----------------------------------------------------------------------------


def test_encode_adds_cls_and_sep_with_masks_and_type_ids():
    e = tok().encode("Hello, world!")
    assert isinstance(e, Encoding)
    assert e.tokens == ["[CLS]", "hello", ",", "world", "!", "[SEP]"]
    assert e.ids == [vid(t) for t in e.tokens]
    assert e.attention_mask == [1] * 6
    assert e.token_type_ids == [0] * 6


def test_encode_without_special_tokens():
    assert tok().encode("hello world", add_special_tokens=False).tokens == ["hello", "world"]


def test_blank_text_encodes_to_cls_sep():
    assert tok().encode("").tokens == ["[CLS]", "[SEP]"]


def test_truncation_counts_the_special_tokens():
    e = tok().encode("hello world hello world", max_length=4)
    assert e.tokens == ["[CLS]", "hello", "world", "[SEP]"]
    assert tok().encode("hello", max_length=2).tokens == ["[CLS]", "[SEP]"]
    raw = tok().encode("hello world hello", max_length=2, add_special_tokens=False)
    assert raw.tokens == ["hello", "world"]


@pytest.mark.parametrize("bad", [1, 0, -5, 2.5, True, "8"])
def test_max_length_below_two_or_not_int_is_rejected(bad):
    with pytest.raises(ValueError, match="max_length"):
        tok().encode("hello", max_length=bad)


def test_encode_batch_pads_to_the_longest_row():
    b = tok().encode_batch(["hello", "hello world !", ""])
    assert isinstance(b, BatchEncoding)
    pad = vid("[PAD]")
    assert b.input_ids == [
        [vid("[CLS]"), vid("hello"), vid("[SEP]"), pad, pad],
        [vid("[CLS]"), vid("hello"), vid("world"), vid("!"), vid("[SEP]")],
        [vid("[CLS]"), vid("[SEP]"), pad, pad, pad],
    ]
    assert b.attention_mask == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]
    assert b.token_type_ids == [[0] * 5] * 3
    assert b.lengths == [3, 5, 2]


def test_encode_batch_pads_to_max_length_and_truncates():
    b = tok().encode_batch(["hello", "hello world hello world"], max_length=4, padding="max_length")
    assert [len(r) for r in b.input_ids] == [4, 4]
    assert b.attention_mask == [[1, 1, 1, 0], [1, 1, 1, 1]]


def test_encode_batch_rows_equal_single_encodes():
    texts = ["unaffable", "香港营收, hello", "ab abz"]
    t = tok()
    b = t.encode_batch(texts)
    for row, mask, text in zip(b.input_ids, b.attention_mask, texts, strict=True):
        n = sum(mask)
        assert row[:n] == t.encode(text).ids


def test_encode_batch_rejects_bad_padding_and_a_bare_string():
    with pytest.raises(ValueError, match="padding"):
        tok().encode_batch(["a"], padding="right")
    with pytest.raises(ValueError, match="max_length"):
        tok().encode_batch(["a"], padding="max_length")
    with pytest.raises(ValueError, match="sequence"):
        tok().encode_batch("hello")  # type: ignore[arg-type]


def test_empty_batch_is_empty():
    b = tok().encode_batch([])
    assert b.input_ids == [] and b.attention_mask == [] and b.token_type_ids == []


def test_convert_ids_to_tokens_round_trips():
    t = tok()
    e = t.encode("unaffable hello")
    assert t.convert_ids_to_tokens(e.ids) == e.tokens
    assert t.convert_ids_to_tokens([10_000]) == ["[UNK]"]


# --- parity with the tokenizers library on the real vocabulary (CPython) ----------------


def _minilm_vocab() -> Path:
    from ragspine_lite.vector.onnx_backend import MINILM_VOCAB_PATH

    return MINILM_VOCAB_PATH


def _slice_sentences() -> list[str]:
    """Paragraphs, questions and their sentences from the English and Chinese test slices."""
    out: list[str] = []
    for name in ("squad_slice", "cmrc_slice"):
        for fname in ("corpus.jsonl", "queries.jsonl"):
            for line in (DATA / name / fname).read_text(encoding="utf-8").splitlines():
                if not line:
                    continue
                text = json.loads(line)["text"]
                out.append(text)
                out.extend(s for s in re.split(r"(?<=[.!?。！？])\s*", text) if s)
    return out


def _random_strings(n: int, seed: int) -> list[str]:
    """Random strings over blocks whose character properties are stable across Unicode
    versions (Latin, accents, Greek/Cyrillic, punctuation, controls, CJK, Hangul, emoji…)."""
    pools = [
        (0x20, 0x7E), (0x00, 0x1F), (0x80, 0x2FF), (0x300, 0x36F), (0x370, 0x52F),
        (0x2000, 0x206F), (0x3000, 0x303F), (0x4E00, 0x4F00), (0xAC00, 0xAC40),
        (0xFF00, 0xFFEF), (0xE000, 0xE010), (0x1F600, 0x1F64F), (0x2B800, 0x2B940),
    ]
    rng = random.Random(seed)
    return [
        "".join(chr(rng.randint(*rng.choice(pools))) for _ in range(rng.randint(0, 40)))
        for _ in range(n)
    ]


@pytest.mark.cpython_only
def test_ids_match_the_tokenizers_library_on_english_and_chinese_text():
    tokenizers = pytest.importorskip("tokenizers")
    vocab = _minilm_vocab()
    reference = tokenizers.BertWordPieceTokenizer(str(vocab), lowercase=True)
    mine = WordPieceTokenizer.from_file(vocab)
    texts = _slice_sentences()
    assert len(texts) > 3000
    assert any(is_cjk_ideograph(ord(c)) for c in texts[-1] + texts[-2])
    expected = [e.ids for e in reference.encode_batch(texts)]
    got = [mine.encode(t).ids for t in texts]
    mismatches = [t for t, a, b in zip(texts, got, expected, strict=True) if a != b]
    assert mismatches == []


@pytest.mark.cpython_only
def test_truncated_ids_match_the_tokenizers_library():
    tokenizers = pytest.importorskip("tokenizers")
    vocab = _minilm_vocab()
    reference = tokenizers.BertWordPieceTokenizer(str(vocab), lowercase=True)
    reference.enable_truncation(max_length=64)
    mine = WordPieceTokenizer.from_file(vocab)
    texts = _slice_sentences()[:800]
    expected = [e.ids for e in reference.encode_batch(texts)]
    assert any(len(ids) == 64 for ids in expected)
    assert [mine.encode(t, max_length=64).ids for t in texts] == expected


@pytest.mark.cpython_only
def test_ids_match_the_model_tokenizer_json_on_random_unicode():
    tokenizers = pytest.importorskip("tokenizers")
    vocab = _minilm_vocab()
    # The model's tokenizer.json is this configuration: BertNormalizer(clean_text,
    # handle_chinese_chars, strip_accents=None, lowercase), BertPreTokenizer, WordPiece.
    reference = tokenizers.BertWordPieceTokenizer(
        str(vocab), clean_text=True, handle_chinese_chars=True, strip_accents=None,
        lowercase=True, wordpieces_prefix="##",
    )
    mine = WordPieceTokenizer.from_file(vocab)
    texts = _random_strings(3000, seed=20240531)
    expected = [e.ids for e in reference.encode_batch(texts)]
    got = [mine.encode(t).ids for t in texts]
    assert [t for t, a, b in zip(texts, got, expected, strict=True) if a != b] == []
