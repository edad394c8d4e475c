"""Pure scoring primitives: Okapi BM25, fsum cosine, Reciprocal Rank Fusion, the tie rule."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

__all__ = [
    "DEFAULT_BM25_B",
    "DEFAULT_BM25_K1",
    "DEFAULT_RRF_K",
    "bm25_idf",
    "bm25_scores",
    "cosine_similarity",
    "rank_scores",
    "rrf_fuse",
]

DEFAULT_BM25_K1 = 1.5
DEFAULT_BM25_B = 0.75
DEFAULT_RRF_K = 60


def bm25_idf(n: int, df: int) -> float:
    """``ln(1 + (N - df + 0.5) / (df + 0.5))``: the IDF every BM25 path uses (a bundle
    stores it per term as a float64, so readers in other languages need no ``log``)."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def bm25_scores(
    query_tokens: Sequence[str],
    docs_tokens: Sequence[Sequence[str]],
    k1: float = DEFAULT_BM25_K1,
    b: float = DEFAULT_BM25_B,
) -> list[float]:
    """Okapi BM25 of every document for the query (the reference implementation).

    ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``; each distinct query term adds
    ``qtf * idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))``, with avgdl
    over the given documents. No documents or no query tokens → zeros.

    >>> round(bm25_scores(["x"], [["x", "x", "y"], ["y", "z"]])[0], 6)
    0.930399
    """
    n = len(docs_tokens)
    if n == 0 or not query_tokens:
        return [0.0] * n
    tfs = [Counter(doc) for doc in docs_tokens]
    lengths = [len(doc) for doc in docs_tokens]
    avgdl = sum(lengths) / n
    query_tf = Counter(query_tokens)
    df: Counter[str] = Counter()
    for tf in tfs:
        for term in query_tf:
            if term in tf:
                df[term] += 1
    scores = [0.0] * n
    for term, qtf in query_tf.items():
        d = df[term]
        if d == 0:
            continue
        idf = bm25_idf(n, d)
        for i, tf in enumerate(tfs):
            f = tf.get(term, 0)
            if f:
                norm = 1.0 - b + b * lengths[i] / avgdl if avgdl else 1.0
                scores[i] += qtf * idf * f * (k1 + 1.0) / (f + k1 * norm)
    return scores


def cosine_similarity(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine with ``math.fsum`` (bit-stable); a zero vector gives ``0.0``."""
    if len(a) != len(b):
        raise ValueError(f"cosine_similarity: dimension mismatch {len(a)} != {len(b)}")
    na = math.sqrt(math.fsum(x * x for x in a))
    nb = math.sqrt(math.fsum(y * y for y in b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return math.fsum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)


def rrf_fuse(rankings: Sequence[Sequence[str]], k: float = DEFAULT_RRF_K) -> dict[str, float]:
    """Reciprocal Rank Fusion: ``score[id] += 1 / (k + rank)``, rank from 1.

    >>> rrf_fuse([["a", "b"], ["b"]], k=1)
    {'a': 0.5, 'b': 0.8333333333333333}
    """
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return fused


def rank_scores(scores: Mapping[str, float], limit: int | None = None) -> list[tuple[str, float]]:
    """``(id, score)`` by score descending, ties by id ascending (the tie rule), ≤ ``limit``.

    >>> rank_scores({"b": 1.0, "a": 1.0, "c": 2.0}, 2)
    [('c', 2.0), ('a', 1.0)]
    """
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
