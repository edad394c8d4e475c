"""Lexical groundedness: how much of a claim's wording a context covers.

The token rule is deliberately coarser than :func:`ragspine_lite.lexical.tokenize`: ASCII
alphanumeric runs and *single* CJK characters, lowercased. The postprocessors and the
corrective grader share it.

>>> overlap_tokens("Revenue +12% 香港")
['revenue', '12', '香', '港']
>>> LexicalOverlapJudge(threshold=0.5).entails("revenue drop", "revenue grew strongly")
True
"""

from __future__ import annotations

import re

__all__ = [
    "DEFAULT_ENTAILMENT_THRESHOLD",
    "LexicalOverlapJudge",
    "check_unit_interval",
    "overlap_tokens",
]

DEFAULT_ENTAILMENT_THRESHOLD = 0.6

_TOKEN_RE = re.compile(r"[A-Za-z0-9]+|[一-鿿]")


def overlap_tokens(text: str) -> list[str]:
    """ASCII alphanumeric runs and single CJK characters, lowercased, in order."""
    return [t.lower() for t in _TOKEN_RE.findall(text)]


def check_unit_interval(value: object, name: str) -> float:
    """``value`` as a float in ``[0, 1]``, else a ``ValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


class LexicalOverlapJudge:
    """Entailment by word overlap: ``coverage(claim, context) >= threshold``."""

    def __init__(self, threshold: float = DEFAULT_ENTAILMENT_THRESHOLD) -> None:
        self.threshold = check_unit_interval(threshold, "threshold")

    @staticmethod
    def coverage(claim: str, context: str) -> float:
        """Share of the claim's tokens (with repetition) found in the context; 1.0 if none."""
        tokens = overlap_tokens(claim)
        if not tokens:
            return 1.0
        vocab = set(overlap_tokens(context))
        return sum(1 for t in tokens if t in vocab) / len(tokens)

    def entails(self, claim: str, context: str) -> bool:
        return self.coverage(claim, context) >= self.threshold
