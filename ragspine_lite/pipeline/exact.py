"""Exact words: a query word that few chunks hold lifts those chunks in a hybrid search.

BM25 adds up each query term's saturated weight, so two common words repeated in a short
chunk can outscore the one word of the query that only a single page holds ("zorblat
population history"): the page is not BM25's first hit, and no rule over BM25's ranking can
lift it back. The evidence is per term, so this stage reads it from the lexical lane's
document frequencies.

:class:`ExactWords` is carried by the calibrated fusion (``CalibratedFusion.exact_words``,
on by default) and run by :meth:`~ragspine_lite.pipeline.search.Pipeline.rank` on the hybrid
channel only: BM25 mode, a query outside the model's vocabulary and an RRF fusion are left
exactly as they were.

1. **rare words**: the words of the query as typed (not a rewriter's variants) that at most
   ``max_df`` of the search's candidates hold, the document frequency BM25's IDF counts
   (:meth:`~ragspine_lite.lexical.bm25_index.BM25Index.term_documents`: integers from the
   postings the search reads anyway, so the in-memory, SQLite and sharded indexes agree).
   Words are the tokenizer's ASCII runs (:meth:`ExactWords.words`): its CJK characters and
   bigrams are not words (a rare bigram often straddles two), and a rare Chinese word
   already brings BM25 several rare tokens;
2. **every holder is fused**: their exact BM25 joins the lexical ranking, also where a
   pooled hybrid search would otherwise stop at its pool;
3. **bonus**: a chunk's fused score gains ``bonus`` per rare word it holds, and the results
   are again sorted by ``(-score, key)`` and cut. Nothing is added: a chunk without a hit
   stays out, so a nonsense query still returns nothing.

With the calibrated scores (each at most 1.0) a bonus of 0.5 outweighs the BM25 lead of
filler words in practice (measured in ``docs/hybrid.md``), without putting a chunk that
merely holds a rare word ahead of much stronger evidence on both channels.

>>> from ragspine_lite.lexical.bm25_index import TermDocuments
>>> rule = ExactWords()
>>> held = rule.held([TermDocuments("zorblat", 1, ["c3"]), TermDocuments("history", 40, [])])
>>> held
{'c3': 1}
>>> rule.lift([("c1", 0.9), ("c2", 0.5), ("c3", 0.45)], held, 2)
[('c3', 0.95), ('c1', 0.9)]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ragspine_lite.lexical.bm25_index import TermDocuments
from ragspine_lite.lexical.scoring import rank_scores
from ragspine_lite.text.words import tokenize

__all__ = ["DEFAULT_EXACT_BONUS", "DEFAULT_EXACT_MAX_DF", "DEFAULT_EXACT_WORDS", "ExactWords"]

#: A word at most this many candidate chunks hold is rare (a word of one page, split over a
#: chunk boundary or repeated in a few of its chunks).
DEFAULT_EXACT_MAX_DF = 3
#: What each rare word a chunk holds adds to its fused score.
DEFAULT_EXACT_BONUS = 0.5

Hit = tuple[str, float]


@dataclass(frozen=True)
class ExactWords:
    """The exact-words stage (module docstring): words held by at most ``max_df`` candidates
    are rare, and each adds ``bonus`` to the fused score of the chunks holding it."""

    max_df: int = DEFAULT_EXACT_MAX_DF
    bonus: float = DEFAULT_EXACT_BONUS

    def __post_init__(self) -> None:
        if isinstance(self.max_df, bool) or not isinstance(self.max_df, int) or self.max_df < 1:
            raise ValueError(f"max_df must be an int >= 1, got {self.max_df!r}")
        if not isinstance(self.bonus, (int, float)) or not math.isfinite(self.bonus) or (
            self.bonus <= 0
        ):
            raise ValueError(f"bonus must be a finite number > 0, got {self.bonus!r}")

    @staticmethod
    def words(query: str) -> list[str]:
        """The query's distinct words as BM25 tokenizes them: its ASCII runs, not its CJK
        characters and bigrams.

        >>> ExactWords.words("zorblat 人口 Zorblat T1000")
        ['zorblat', 't1000']
        """
        return [t for t in dict.fromkeys(tokenize(query)) if t[0] < "\u0080"]

    def held(self, terms: Iterable[TermDocuments]) -> dict[str, int]:
        """key → how many rare words that chunk holds (``terms``: the lane's, for
        :meth:`words`)."""
        counts: dict[str, int] = {}
        for term in terms:
            if term.df <= self.max_df:
                for key in term.ids:
                    counts[key] = counts.get(key, 0) + 1
        return counts

    def lift(self, fused: Sequence[Hit], held: Mapping[str, int], limit: int) -> list[Hit]:
        """The fused ``(key, score)`` of every chunk, each rare word held adding ``bonus``,
        by ``(-score, key)``, at most ``limit``."""
        bonus = self.bonus
        lifted = {key: score + bonus * held[key] if key in held else score
                  for key, score in fused}
        return rank_scores(lifted, limit)


#: The rule the calibrated fusion carries by default.
DEFAULT_EXACT_WORDS = ExactWords()
