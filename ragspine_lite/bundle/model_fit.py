"""Does a hybrid site's model fit its documents? What does it cost a visitor?

Before a build embeds anything, :func:`model_fit_warning` samples each document's text through
the model's vocabulary gate (:func:`~ragspine_lite.vector.embedding_backends.outside_vocabulary`:
the share of word pieces it knows) and, when a fair share of the documents lies outside it
(Chinese for the English-only MiniLM), says so, with the megabytes the model and
onnxruntime-web add to every cold visit, and what to build instead. Stdlib only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["MISFIT_SHARE", "SAMPLE_CHARS", "model_fit_warning", "visitor_megabytes"]

#: Warn when at least this share of the documents lies outside the model's vocabulary.
MISFIT_SHARE = 0.2
#: How much of each document the check reads (the start of its body).
SAMPLE_CHARS = 2000
#: What to build instead, per model that does not fit.
ALTERNATIVES = {
    "minilm": "build without --embeddings (BM25 only, no model download), or with "
    "--embeddings use-multilingual (Chinese and English, 16 languages)",
}


def visitor_megabytes(files: Iterable[Path]) -> float:
    """The megabytes a cold visit downloads for ``files`` (those that exist)."""
    return sum(p.stat().st_size for p in files if p.is_file()) / 1e6


def _outside(backend: Any, docs: Sequence[Any]) -> Counter[str]:
    from ragspine_lite.vector.embedding_backends import outside_vocabulary

    misfits: Counter[str] = Counter()
    for doc in docs:
        sample = doc.body[:SAMPLE_CHARS]
        if sample.strip() and outside_vocabulary(backend, sample):
            misfits[doc.meta.language or "unknown language"] += 1
    return misfits


def model_fit_warning(
    name: str, backend: Any, corpus: Sequence[Any], cost_files: Iterable[Path]
) -> str | None:
    """A warning when ``backend`` (``--embeddings name``) cannot represent a fair share of
    ``corpus``'s (non-RESTRICTED) documents, else ``None``. Backends without a ``coverage``
    method (USE multilingual) are never flagged."""
    docs = [d for d in corpus if not d.restricted]
    misfits = _outside(backend, docs)
    count = sum(misfits.values())
    if not docs or count < MISFIT_SHARE * len(docs):
        return None
    languages = ", ".join(f"{lang}: {n}" for lang, n in misfits.most_common())
    instead = ALTERNATIVES.get(name, "build without --embeddings (BM25 only)")
    return (
        f"--embeddings {name} does not cover this site's language: {count} of {len(docs)} "
        f"document(s) ({languages}) lie mostly outside its vocabulary, so their vectors carry "
        f"no meaning and searches in that language fall back to BM25. The model and "
        f"onnxruntime-web still add {visitor_megabytes(cost_files):.1f} MB to every cold "
        f"visit. Suggestion: {instead}."
    )
