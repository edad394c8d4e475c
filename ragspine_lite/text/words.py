"""The CJK-aware tokenizer shared by BM25, routing and the deterministic embedder."""

from __future__ import annotations

import re

__all__ = ["tokenize"]

# An ASCII alphanumeric run, or a run of CJK ideographs (Ext. A, URO, compatibility).
_TOKEN_RE = re.compile(r"[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def tokenize(text: str) -> list[str]:
    """Lowercase, then ASCII words as tokens and CJK runs as unigrams followed by bigrams.

    Everything else (punctuation, ``_``, non-ASCII letters, kana, Hangul) separates.

    >>> tokenize("MPFA新规")
    ['mpfa', '新', '规', '新规']
    """
    out: list[str] = []
    for run in _TOKEN_RE.findall(text.lower()):
        if run[0] < "\u0080":
            out.append(run)
        else:
            out.extend(run)
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out
