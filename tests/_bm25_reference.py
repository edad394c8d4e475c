"""Test helper: pure-BM25 search as API.md specifies it, straight from bm25_scores and rrf_fuse.

Independent of the inverted index: candidates by equality filters then ``metadata_filter``,
query variants de-duplicated in order, one BM25 ranking per variant over the candidates
(score > 0, by (-score, chunk_id)), RRF over the rankings, cut to ``top_k``; each result's
chunk is the first candidate with that id.
"""

from __future__ import annotations

from ragspine_lite.lexical.scoring import bm25_scores, rrf_fuse
from ragspine_lite.lexical.tokenizer import tokenize


def reference_search(chunks, query, *, rewriter=None, filters=None, metadata_filter=None,
                     top_k=50, index_text=lambda c: c.text):
    """``[(chunk object, chunk_id, bm25_score, fused_score)]`` in result order."""
    active = {k: v for k, v in (filters or {}).items() if v is not None}
    candidates = [c for c in chunks if all(getattr(c, k, None) == v for k, v in active.items())]
    if metadata_filter is not None:
        candidates = metadata_filter.apply(candidates)
    if not candidates:
        return []
    queries = list(dict.fromkeys(rewriter.rewrite(query) if rewriter else [query]))
    docs = [tokenize(index_text(c)) for c in candidates]
    rankings, best = [], {}
    for q in queries:
        scores = bm25_scores(tokenize(q), docs)
        hits = sorted(
            ((c.chunk_id, s) for c, s in zip(candidates, scores, strict=True) if s > 0),
            key=lambda h: (-h[1], h[0]),
        )
        rankings.append([cid for cid, _ in hits])
        for cid, s in hits:
            best[cid] = max(best.get(cid, 0.0), s)
    fused = sorted(rrf_fuse(rankings, k=60).items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]
    first = {}
    for c in candidates:
        first.setdefault(c.chunk_id, c)
    return [(first[cid], cid, best.get(cid, 0.0), f) for cid, f in fused]


def as_tuples(results):
    """RetrievalResults as ``(chunk, chunk_id, bm25_score, fused_score)``."""
    return [(r.chunk, r.chunk.chunk_id, r.bm25_score, r.fused_score) for r in results]
