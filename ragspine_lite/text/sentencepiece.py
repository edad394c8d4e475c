"""A pure-Python SentencePiece tokenizer (unigram models), read straight from a ``.model`` file.

Stdlib only, so it runs under Pyodide. What it implements:

* a minimal protobuf reader for the ``ModelProto`` (pieces with score and type, the trainer's
  model type and special ids, the normalizer spec with its precompiled character map);
* the precompiled normalizer (e.g. ``nmt_nfkc``): the character map is a darts-clone double
  array over UTF-8 bytes whose leaves point into a NUL-separated replacement table; at each
  position the longest matching key is replaced, anything else is copied one character at a
  time; then SentencePiece's whitespace rules (drop leading/trailing/repeated spaces, a dummy
  prefix space, spaces escaped as ``▁``);
* unigram segmentation: the Viterbi best path over every vocabulary piece matching at each
  position (normal and user-defined pieces; control/unknown/unused pieces never match text);
  a character no piece starts with becomes ``<unk>`` with score ``min(score) - 10``. Ties
  keep the earliest-starting piece, as SentencePiece does.

BPE models are recognised and refused with a ``ValueError`` (none of the shipped models needs
one).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MODEL_TYPES",
    "PIECE_TYPES",
    "SentencePieceModel",
    "SentencePieceTokenizer",
    "parse_model_proto",
]

MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}
PIECE_TYPES = {1: "normal", 2: "unknown", 3: "control", 4: "user_defined", 5: "unused", 6: "byte"}
_SPACE = "\u2581"
_UNK_PENALTY = 10.0


# -- protobuf ------------------------------------------------------------------------------


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint in the model file")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes, start: int = 0, end: int | None = None) -> list[tuple[int, object]]:
    """``(field number, value)`` pairs of one message: ints for varints, ``bytes`` for
    length-delimited fields, raw 4/8-byte ``bytes`` for fixed-width ones."""
    end = len(data) if end is None else end
    out: list[tuple[int, object]] = []
    pos = start
    while pos < end:
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 1:
            out.append((number, data[pos : pos + 8]))
            pos += 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            out.append((number, data[pos : pos + length]))
            pos += length
        elif wire == 5:
            out.append((number, data[pos : pos + 4]))
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire!r} in the model file")
        if pos > end:
            raise ValueError("truncated field in the model file")
    return out


def _signed(value: int) -> int:
    """A proto ``int32`` sent as a 64-bit varint (``-1`` arrives as ``2**64 - 1``)."""
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass(frozen=True)
class SentencePieceModel:
    """The parts of a ``ModelProto`` the tokenizer needs."""

    pieces: tuple[str, ...]
    scores: tuple[float, ...]
    types: tuple[int, ...]
    model_type: int = 1
    unk_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    pad_id: int = -1
    byte_fallback: bool = False
    normalizer_name: str = ""
    precompiled_charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True


def parse_model_proto(data: bytes) -> SentencePieceModel:
    """Read a serialised SentencePiece ``ModelProto``."""
    pieces: list[str] = []
    scores: list[float] = []
    types: list[int] = []
    trainer: dict[int, object] = {}
    normalizer: dict[int, object] = {}
    for number, value in _fields(data):
        if number == 1 and isinstance(value, bytes):
            piece, score, kind = "", 0.0, 1
            for sub, sub_value in _fields(value):
                if sub == 1 and isinstance(sub_value, bytes):
                    piece = sub_value.decode("utf-8")
                elif sub == 2 and isinstance(sub_value, bytes):
                    score = struct.unpack("<f", sub_value)[0]
                elif sub == 3 and isinstance(sub_value, int):
                    kind = sub_value
            pieces.append(piece)
            scores.append(score)
            types.append(kind)
        elif number == 2 and isinstance(value, bytes):
            trainer.update(_fields(value))
        elif number == 3 and isinstance(value, bytes):
            normalizer.update(_fields(value))
    if not pieces:
        raise ValueError("the model file has no pieces")

    def flag(spec: dict[int, object], number: int, default: bool) -> bool:
        value = spec.get(number, int(default))
        return bool(value)

    def number_or(spec: dict[int, object], number: int, default: int) -> int:
        value = spec.get(number, default)
        return _signed(value) if isinstance(value, int) else default

    name = normalizer.get(1, b"")
    charsmap = normalizer.get(2, b"")
    return SentencePieceModel(
        pieces=tuple(pieces),
        scores=tuple(scores),
        types=tuple(types),
        model_type=number_or(trainer, 3, 1),
        unk_id=number_or(trainer, 40, 0),
        bos_id=number_or(trainer, 41, 1),
        eos_id=number_or(trainer, 42, 2),
        pad_id=number_or(trainer, 43, -1),
        byte_fallback=flag(trainer, 35, False),
        normalizer_name=name.decode("utf-8") if isinstance(name, bytes) else "",
        precompiled_charsmap=charsmap if isinstance(charsmap, bytes) else b"",
        add_dummy_prefix=flag(normalizer, 3, True),
        remove_extra_whitespaces=flag(normalizer, 4, True),
        escape_whitespaces=flag(normalizer, 5, True),
    )


# -- normalizer ----------------------------------------------------------------------------


class _CharsMap:
    """Longest-match replacement over a precompiled darts-clone double array."""

    def __init__(self, blob: bytes) -> None:
        if len(blob) < 4:
            raise ValueError("precompiled charsmap is too short")
        (trie_bytes,) = struct.unpack_from("<I", blob, 0)
        if trie_bytes % 4 or 4 + trie_bytes > len(blob):
            raise ValueError(f"precompiled charsmap has a bad trie size {trie_bytes!r}")
        self.units = struct.unpack_from(f"<{trie_bytes // 4}I", blob, 4)
        self.table = blob[4 + trie_bytes :]
        self._replacements: dict[int, bytes] = {}
        self._cache: dict[str, tuple[int, str]] = {}

    @staticmethod
    def _offset(unit: int) -> int:
        return (unit >> 10) << ((unit & 0x200) >> 6)

    def longest(self, key: bytes) -> tuple[int, int] | None:
        """``(matched byte length, table offset)`` of the longest key prefixing ``key``."""
        units = self.units
        pos = self._offset(units[0])
        best = None
        for i, byte in enumerate(key):
            pos ^= byte
            if pos >= len(units):
                break
            unit = units[pos]
            if (unit & 0x800000FF) != byte:
                break
            pos ^= self._offset(unit)
            if unit & 0x100:
                best = (i + 1, units[pos] & 0x7FFFFFFF)
        return best

    def replacement(self, offset: int) -> bytes:
        found = self._replacements.get(offset)
        if found is None:
            end = self.table.find(b"\x00", offset)
            found = self.table[offset : end if end >= 0 else len(self.table)]
            self._replacements[offset] = found
        return found


class SentencePieceTokenizer:
    """SentencePiece unigram tokenizer over a parsed model (``from_file`` reads one).

    ``encode(text)`` gives piece ids (optionally with BOS/EOS); ``encode_as_pieces`` the
    pieces; ``normalize`` the normalised, ``▁``-escaped text the lattice is built on.
    """

    def __init__(self, model: SentencePieceModel) -> None:
        if model.model_type != 1:
            kind = MODEL_TYPES.get(model.model_type, str(model.model_type))
            raise ValueError(f"only unigram SentencePiece models are supported, got {kind!r}")
        if model.byte_fallback:
            raise ValueError("SentencePiece byte fallback is not supported")
        self.model = model
        self.unk_id = model.unk_id
        self.bos_id = model.bos_id
        self.eos_id = model.eos_id
        matchable = [
            i for i, kind in enumerate(model.types) if kind in (1, 4) and model.pieces[i]
        ]
        normal = [model.scores[i] for i in matchable if model.types[i] == 1]
        self.unk_score = (min(normal) if normal else 0.0) - _UNK_PENALTY
        # every prefix of a matchable piece → its id, or -1 when it is only a prefix
        prefixes: dict[str, int] = {}
        for i in matchable:
            piece = model.pieces[i]
            for k in range(1, len(piece)):
                prefixes.setdefault(piece[:k], -1)
            prefixes[piece] = i
        self._prefixes = prefixes
        self._max_piece = max((len(model.pieces[i]) for i in matchable), default=1)
        blob = model.precompiled_charsmap
        self._charsmap = _CharsMap(blob) if blob else None

    @classmethod
    def from_file(cls, path: str | Path) -> SentencePieceTokenizer:
        return cls(parse_model_proto(Path(path).read_bytes()))

    @property
    def vocab_size(self) -> int:
        return len(self.model.pieces)

    def __repr__(self) -> str:
        return (
            f"SentencePieceTokenizer(vocab_size={self.vocab_size}, "
            f"normalizer={self.model.normalizer_name!r})"
        )

    # -- normalisation ------------------------------------------------------------------

    def _map_text(self, text: str) -> str:
        """Apply the character map (longest match over UTF-8 bytes) to the whole text."""
        cmap = self._charsmap
        if cmap is None:
            return text
        raw = text.encode("utf-8")
        out: list[bytes] = []
        pos, n = 0, len(raw)
        while pos < n:
            hit = cmap.longest(raw[pos : pos + 64])
            if hit is not None:
                length, offset = hit
                out.append(cmap.replacement(offset))
                pos += length
                continue
            first = raw[pos]
            size = 1 if first < 0x80 else 2 if first < 0xE0 else 3 if first < 0xF0 else 4
            out.append(raw[pos : pos + size])
            pos += size
        return b"".join(out).decode("utf-8", errors="replace")

    def normalize(self, text: str) -> str:
        """The text the lattice is built on: mapped, whitespace-folded, ``▁``-escaped."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {text!r}")
        mapped = self._map_text(text)
        model = self.model
        if model.remove_extra_whitespaces:
            mapped = " ".join(part for part in mapped.split(" ") if part)
        if not mapped:
            return ""
        if model.add_dummy_prefix:
            mapped = " " + mapped
        return mapped.replace(" ", _SPACE) if model.escape_whitespaces else mapped

    # -- segmentation -------------------------------------------------------------------

    def _viterbi(self, text: str) -> list[int]:
        n = len(text)
        best = [0.0] + [float("-inf")] * n
        back_start = [0] * (n + 1)
        back_id = [0] * (n + 1)
        prefixes = self._prefixes
        scores = self.model.scores
        max_piece = self._max_piece
        unk_id, unk_score = self.unk_id, self.unk_score
        for i in range(n):
            base = best[i]
            single = False
            for j in range(i + 1, min(n, i + max_piece) + 1):
                pid = prefixes.get(text[i:j])
                if pid is None:
                    break
                if pid < 0:
                    continue
                if j == i + 1:
                    single = True
                score = base + scores[pid]
                if score > best[j]:
                    best[j], back_start[j], back_id[j] = score, i, pid
            if not single:
                score = base + unk_score
                if score > best[i + 1]:
                    best[i + 1], back_start[i + 1], back_id[i + 1] = score, i, unk_id
        ids: list[int] = []
        pos = n
        while pos > 0:
            ids.append(back_id[pos])
            pos = back_start[pos]
        ids.reverse()
        return ids

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Piece ids of ``text``; a text that normalises to nothing gives ``[unk_id]``."""
        normalized = self.normalize(text)
        ids = self._viterbi(normalized) if normalized else [self.unk_id]
        if add_bos:
            ids.insert(0, self.bos_id)
        if add_eos:
            ids.append(self.eos_id)
        return ids

    def encode_as_pieces(self, text: str) -> list[str]:
        return self.id_to_pieces(self.encode(text))

    def id_to_pieces(self, ids: Iterable[int]) -> list[str]:
        pieces = self.model.pieces
        return [pieces[i] for i in ids]
