"""A pure-Python BERT WordPiece tokenizer (the uncased BERT scheme), loaded from a ``vocab.txt``.

Stdlib only, so it runs unchanged under Pyodide. The pipeline reproduces the ``tokenizers``
library's ``BertNormalizer`` + ``BertPreTokenizer`` + ``WordPiece`` + BERT template:

1. clean text: drop NUL, U+FFFD and control/format/private-use characters (categories
   ``Cc Cf Co Cs``) except ``\\t \\n \\r``; every whitespace character becomes a space;
2. CJK ideographs are surrounded by spaces (so each one is its own word);
3. accents are stripped (NFD, then nonspacing marks ``Mn`` dropped), then each character is
   lowercased on its own (``Σ`` → ``σ`` everywhere, like the reference);
4. words = whitespace-separated pieces, each punctuation character split off on its own
   (ASCII punctuation or Unicode category ``P*``);
5. WordPiece: greedy longest match from the left, continuation pieces prefixed with ``##``; a
   word longer than ``max_input_chars_per_word`` or with an unmatchable rest is one ``[UNK]``;
6. ``[CLS] … [SEP]``, truncation to ``max_length`` (special tokens included), optional padding
   with ``[PAD]``, attention masks and (all-zero) token type ids.

>>> tok = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "!"])
>>> tok.tokenize("Unaffable!")
['un', '##aff', '##able', '!']
>>> tok.encode("Unaffable!").ids
[2, 4, 5, 6, 7, 3]
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_MAX_INPUT_CHARS_PER_WORD",
    "BatchEncoding",
    "Encoding",
    "WordPieceTokenizer",
    "is_cjk_ideograph",
    "load_vocab",
]

DEFAULT_MAX_INPUT_CHARS_PER_WORD = 100
_WORD_CACHE_LIMIT = 200_000

# Code point ranges treated as CJK ideographs (as the reference implementation does; note
# that it skips U+2B820–U+2B91F).
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
# "Other" characters dropped by the clean step: control, format, private use, surrogate
# (unassigned code points, ``Cn``, are kept, as the reference does).
_REMOVED_CATEGORIES = frozenset(("Cc", "Cf", "Co", "Cs"))
_ASCII_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def is_cjk_ideograph(cp: int) -> bool:
    """True for a code point in one of the CJK ideograph blocks split into single words."""
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def _is_punctuation(ch: str) -> bool:
    return ch in _ASCII_PUNCT or unicodedata.category(ch).startswith("P")


class _CleanTable(dict):  # type: ignore[type-arg]
    """``str.translate`` table for steps 1–2, filled lazily per code point."""

    def __init__(self, clean_text: bool, handle_chinese_chars: bool) -> None:
        super().__init__()
        self.clean_text = clean_text
        self.handle_chinese_chars = handle_chinese_chars

    def __missing__(self, cp: int) -> str:
        ch = chr(cp)
        out = ch
        if self.clean_text:
            if ch in "\t\n\r":
                out = " "
            elif cp == 0 or cp == 0xFFFD or unicodedata.category(ch) in _REMOVED_CATEGORIES:
                out = ""
            elif ch.isspace():
                out = " "
        if out == ch and self.handle_chinese_chars and is_cjk_ideograph(cp):
            out = f" {ch} "
        self[cp] = out
        return out


class _MarkTable(dict):  # type: ignore[type-arg]
    """``str.translate`` table dropping nonspacing marks (category ``Mn``)."""

    def __missing__(self, cp: int) -> str | None:
        ch = chr(cp)
        out = None if unicodedata.category(ch) == "Mn" else ch
        self[cp] = out
        return out


class _LowerTable(dict):  # type: ignore[type-arg]
    """``str.translate`` table lowercasing each character on its own (no final-sigma rule)."""

    def __missing__(self, cp: int) -> str:
        out = chr(cp).lower()
        self[cp] = out
        return out


@dataclass(frozen=True)
class Encoding:
    """One encoded text: ``ids``, ``tokens``, ``attention_mask`` and ``token_type_ids``."""

    ids: list[int]
    tokens: list[str]
    attention_mask: list[int]
    token_type_ids: list[int]


@dataclass(frozen=True)
class BatchEncoding:
    """A padded batch: one row per text in each list, all rows of the same length."""

    input_ids: list[list[int]]
    attention_mask: list[list[int]]
    token_type_ids: list[list[int]]

    @property
    def lengths(self) -> list[int]:
        """Number of real (unpadded) tokens per row."""
        return [sum(row) for row in self.attention_mask]


def load_vocab(source: str | Path | Iterable[str]) -> dict[str, int]:
    """Token → id from a ``vocab.txt`` path or an iterable of lines (id = line number).

    Trailing whitespace is trimmed from each line; a repeated token keeps its last id.
    """
    lines: Iterable[str]
    if isinstance(source, (str, Path)):
        text_lines = Path(source).read_text(encoding="utf-8").split("\n")
        # A final newline is a terminator, not an empty last token.
        if text_lines and text_lines[-1] == "":
            text_lines.pop()
        lines = text_lines
    else:
        lines = source
    vocab: dict[str, int] = {}
    for index, line in enumerate(lines):
        vocab[line.rstrip()] = index
    return vocab


class WordPieceTokenizer:
    """BERT WordPiece tokenizer: ``normalize`` → ``pre_tokenize`` → ``tokenize`` → ``encode``.

    ``vocab`` is a token → id mapping or a sequence of tokens (id = position). With
    ``strip_accents=None`` accents are stripped iff ``lowercase``. The special tokens must
    be in the vocabulary. Words are cached (up to 200,000 distinct ones), which never changes
    a result.
    """

    def __init__(
        self,
        vocab: Mapping[str, int] | Sequence[str],
        *,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        clean_text: bool = True,
        handle_chinese_chars: bool = True,
        unk_token: str = "[UNK]",
        cls_token: str = "[CLS]",
        sep_token: str = "[SEP]",
        pad_token: str = "[PAD]",
        continuing_subword_prefix: str = "##",
        max_input_chars_per_word: int = DEFAULT_MAX_INPUT_CHARS_PER_WORD,
    ) -> None:
        if isinstance(vocab, Mapping):
            self.vocab: dict[str, int] = dict(vocab)
        else:
            self.vocab = load_vocab(vocab)
        if not self.vocab:
            raise ValueError("vocab must not be empty")
        for name, token in (
            ("unk_token", unk_token),
            ("cls_token", cls_token),
            ("sep_token", sep_token),
            ("pad_token", pad_token),
        ):
            if token not in self.vocab:
                raise ValueError(f"{name} {token!r} is not in the vocabulary")
        if (
            isinstance(max_input_chars_per_word, bool)
            or not isinstance(max_input_chars_per_word, int)
            or max_input_chars_per_word < 1
        ):
            raise ValueError(
                f"max_input_chars_per_word must be an int >= 1, got {max_input_chars_per_word!r}"
            )
        self.lowercase = bool(lowercase)
        self.strip_accents = self.lowercase if strip_accents is None else bool(strip_accents)
        self.clean_text = bool(clean_text)
        self.handle_chinese_chars = bool(handle_chinese_chars)
        self.unk_token = unk_token
        self.cls_token = cls_token
        self.sep_token = sep_token
        self.pad_token = pad_token
        self.continuing_subword_prefix = continuing_subword_prefix
        self.max_input_chars_per_word = max_input_chars_per_word
        self.unk_id = self.vocab[unk_token]
        self.cls_id = self.vocab[cls_token]
        self.sep_id = self.vocab[sep_token]
        self.pad_id = self.vocab[pad_token]
        self._id_to_token: dict[int, str] | None = None
        self._clean = _CleanTable(self.clean_text, self.handle_chinese_chars)
        self._marks = _MarkTable()
        self._lower = _LowerTable()
        self._punct: dict[str, bool] = {}
        self._word_cache: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = {}

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: object) -> WordPieceTokenizer:
        """A tokenizer over the ``vocab.txt`` at ``path`` (``kwargs`` as for the class)."""
        return cls(load_vocab(path), **kwargs)  # type: ignore[arg-type]

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def __repr__(self) -> str:
        return (
            f"WordPieceTokenizer(vocab_size={len(self.vocab)}, lowercase={self.lowercase}, "
            f"strip_accents={self.strip_accents})"
        )

    # -- pipeline -----------------------------------------------------------------------

    def normalize(self, text: str) -> str:
        """Steps 1–3: clean, pad CJK ideographs, strip accents, lowercase."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {text!r}")
        if text.isascii():
            if self.clean_text or self.handle_chinese_chars:
                text = text.translate(self._clean)
            return text.lower() if self.lowercase else text
        if self.clean_text or self.handle_chinese_chars:
            text = text.translate(self._clean)
        if self.strip_accents:
            text = unicodedata.normalize("NFD", text).translate(self._marks)
        if self.lowercase:
            text = text.translate(self._lower)
        return text

    def _is_punct(self, ch: str) -> bool:
        found = self._punct.get(ch)
        if found is None:
            found = self._punct[ch] = _is_punctuation(ch)
        return found

    def pre_tokenize(self, normalized: str) -> list[str]:
        """Step 4 on already normalised text: whitespace split, punctuation isolated."""
        words: list[str] = []
        for piece in normalized.split():
            if piece.isalnum():
                words.append(piece)
                continue
            start = 0
            for i, ch in enumerate(piece):
                if self._is_punct(ch):
                    if start < i:
                        words.append(piece[start:i])
                    words.append(ch)
                    start = i + 1
            if start < len(piece):
                words.append(piece[start:])
        return words

    def _wordpiece(self, word: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
        cached = self._word_cache.get(word)
        if cached is not None:
            return cached
        vocab = self.vocab
        if len(word) > self.max_input_chars_per_word:
            out: tuple[tuple[str, ...], tuple[int, ...]] = ((self.unk_token,), (self.unk_id,))
        else:
            tokens: list[str] = []
            ids: list[int] = []
            start, n = 0, len(word)
            prefix = self.continuing_subword_prefix
            while start < n:
                end = n
                match = None
                while start < end:
                    piece = word[start:end]
                    if start > 0:
                        piece = prefix + piece
                    tid = vocab.get(piece)
                    if tid is not None:
                        match = (piece, tid)
                        break
                    end -= 1
                if match is None:
                    tokens, ids = [self.unk_token], [self.unk_id]
                    break
                tokens.append(match[0])
                ids.append(match[1])
                start = end
            out = (tuple(tokens), tuple(ids))
        if len(self._word_cache) < _WORD_CACHE_LIMIT:
            self._word_cache[word] = out
        return out

    def tokenize(self, text: str) -> list[str]:
        """The word pieces of ``text`` (no special tokens, no truncation)."""
        out: list[str] = []
        for word in self.pre_tokenize(self.normalize(text)):
            out.extend(self._wordpiece(word)[0])
        return out

    def _piece_ids(self, text: str) -> tuple[list[str], list[int]]:
        tokens: list[str] = []
        ids: list[int] = []
        for word in self.pre_tokenize(self.normalize(text)):
            t, i = self._wordpiece(word)
            tokens.extend(t)
            ids.extend(i)
        return tokens, ids

    def encode(
        self, text: str, *, max_length: int | None = None, add_special_tokens: bool = True
    ) -> Encoding:
        """Ids, tokens and masks for one text; ``max_length`` counts special tokens."""
        limit = _check_max_length(max_length, add_special_tokens)
        tokens, ids = self._piece_ids(text)
        if add_special_tokens:
            if limit is not None:
                tokens, ids = tokens[: limit - 2], ids[: limit - 2]
            tokens = [self.cls_token, *tokens, self.sep_token]
            ids = [self.cls_id, *ids, self.sep_id]
        elif limit is not None:
            tokens, ids = tokens[:limit], ids[:limit]
        n = len(ids)
        return Encoding(ids=ids, tokens=tokens, attention_mask=[1] * n, token_type_ids=[0] * n)

    def encode_batch(
        self,
        texts: Sequence[str],
        *,
        max_length: int | None = None,
        padding: str = "longest",
        add_special_tokens: bool = True,
    ) -> BatchEncoding:
        """Encode and pad ``texts``: ``padding`` is ``"longest"`` (to the longest row) or
        ``"max_length"`` (to ``max_length``, which is then required)."""
        if padding not in ("longest", "max_length"):
            raise ValueError(f"padding must be 'longest' or 'max_length', got {padding!r}")
        if padding == "max_length" and max_length is None:
            raise ValueError("padding='max_length' needs max_length")
        if isinstance(texts, str):
            raise ValueError(f"texts must be a sequence of str, got the str {texts!r}")
        encodings = [
            self.encode(t, max_length=max_length, add_special_tokens=add_special_tokens)
            for t in texts
        ]
        width = max((len(e.ids) for e in encodings), default=0)
        if padding == "max_length" and max_length is not None:
            width = max_length
        input_ids, masks, types = [], [], []
        for e in encodings:
            pad = width - len(e.ids)
            input_ids.append(e.ids + [self.pad_id] * pad)
            masks.append(e.attention_mask + [0] * pad)
            types.append(e.token_type_ids + [0] * pad)
        return BatchEncoding(input_ids=input_ids, attention_mask=masks, token_type_ids=types)

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        """Tokens for ``ids`` (unknown ids → ``unk_token``)."""
        if self._id_to_token is None:
            self._id_to_token = {i: t for t, i in self.vocab.items()}
        table = self._id_to_token
        return [table.get(i, self.unk_token) for i in ids]


def _check_max_length(max_length: object, add_special_tokens: bool) -> int | None:
    if max_length is None:
        return None
    low = 2 if add_special_tokens else 1
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < low:
        raise ValueError(f"max_length must be an int >= {low}, got {max_length!r}")
    return max_length
