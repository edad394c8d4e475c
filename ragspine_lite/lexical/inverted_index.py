"""Exact Okapi BM25 over an inverted index, in memory or persisted beside the chunk store.

:func:`~ragspine_lite.lexical.scoring.bm25_scores` scores every document for every query
token. An index only decides *which* documents to score: each score is computed with the
very expression the reference uses and summed in the same (query) order, so ids, scores and
ties are bit-identical to the reference on the same candidates. Statistics (N, df, avgdl)
are over the candidates: with a candidate set, df is counted over it from the postings.

Top-k queries (:meth:`BM25Index.rank` with ``limit``) are pruned MaxScore-style: each term
has an upper bound from its largest tf and shortest document; terms are scanned highest
bound first, and once the terms left cannot lift an unseen document over the current k-th
score they are only looked up (cached docno → tf dicts) for the documents still in the
running. Survivors are rescored exactly, so pruning never changes a score.

:class:`InvertedIndex` is the in-memory index (docno = position in a list).
:class:`StoreBM25Index` lives in a :class:`~ragspine_lite.chunking.chunk_store.ChunkStore`'s
SQLite file (docno = ``narrative_chunk`` rowid), is attached with
:meth:`StoreBM25Index.attach` and updated inside the store's own write transactions.
Postings are packed ``uint32`` arrays in BLOBs, read per query term on demand.

>>> index = InvertedIndex(["a", "b"], [["x", "x", "y"], ["y", "z"]])
>>> [(cid, round(score, 6)) for _, cid, score in index.rank(["x"])]
[('a', 0.930399)]
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from ragspine_lite.lexical.bm25_index import (
    LOOKUP_CACHE_POSTINGS as LOOKUP_CACHE_POSTINGS,
)
from ragspine_lite.lexical.bm25_index import (
    UINT,
    BM25Index,
    CandidateSet,
    Postings,
)
from ragspine_lite.lexical.bm25_index import (
    Hit as Hit,
)
from ragspine_lite.lexical.store_index import (
    BM25_INDEX_FORMAT,
    CorruptIndexError,
    StaleIndexError,
    StoreBM25Index,
)
from ragspine_lite.lexical.store_index import (
    REBUILD_HINT as REBUILD_HINT,
)
from ragspine_lite.text.words import tokenize

__all__ = [
    "BM25_INDEX_FORMAT",
    "BM25Index",
    "CandidateSet",
    "CorruptIndexError",
    "InvertedIndex",
    "Postings",
    "StaleIndexError",
    "StoreBM25Index",
]

# ---------------------------------------------------------------------------------- in memory


class InvertedIndex(BM25Index):
    """An in-memory index over a fixed list of token lists; docno = position in that list.

    >>> InvertedIndex.from_texts(["a", "b"], ["revenue grew", "profit fell"]).n_docs
    2
    """

    def __init__(self, chunk_ids: Sequence[str], token_lists: Iterable[Sequence[str]]) -> None:
        self.chunk_ids = list(chunk_ids)
        lengths = array(UINT)
        docs: dict[str, array] = {}
        tfs: dict[str, array] = {}
        for docno, tokens in enumerate(token_lists):
            lengths.append(len(tokens))
            for term, f in Counter(tokens).items():
                d = docs.get(term)
                if d is None:
                    d = docs[term] = array(UINT)
                    tfs[term] = array(UINT)
                d.append(docno)
                tfs[term].append(f)
        if len(lengths) != len(self.chunk_ids):
            raise ValueError(
                f"InvertedIndex needs one token list per chunk id: got {len(lengths)!r} "
                f"token lists for {len(self.chunk_ids)!r} ids"
            )
        self.lengths = lengths
        self.n_docs = len(lengths)
        self.total_length = sum(lengths)
        self._index = {
            term: Postings(d, tfs[term], len(d), max(tfs[term]), min(map(lengths.__getitem__, d)))
            for term, d in docs.items()
        }
        self._duplicates = len(set(self.chunk_ids)) != len(self.chunk_ids)

    @classmethod
    def from_texts(
        cls,
        chunk_ids: Sequence[str],
        texts: Iterable[str],
        tokenizer: Callable[[str], list[str]] = tokenize,
    ) -> InvertedIndex:
        """Tokenize ``texts`` (one per chunk id) and index them."""
        return cls(chunk_ids, (tokenizer(t) for t in texts))

    @property
    def has_duplicate_chunk_ids(self) -> bool:
        return self._duplicates

    @property
    def vocabulary_size(self) -> int:
        return len(self._index)

    def _postings(self, term: str) -> Postings | None:
        return self._index.get(term)

    def _lengths(self) -> Sequence[int]:
        return self.lengths

    def _chunk_ids(self, docnos: Iterable[int]) -> dict[int, str]:
        ids = self.chunk_ids
        return {d: ids[d] for d in docnos}
