"""Post-retrieval postprocessors: MMR diversity, lost-in-the-middle order, compression.

A :class:`NodePostprocessor` takes the agent-facing snippet dicts of one retrieval and
returns them re-ordered, cut or annotated. It runs after the link's RESTRICTED exit (#2)
(``NarrativeIndexRetriever(postprocessor=...)``), so it never sees RESTRICTED content, and
it never edits a citation: ``text``, ``source_locator`` and every other lineage field stay
byte-identical. Compression writes its shortened context into a separate ``prompt_text``
key, which the agent prefers for the prompt.

Everything is deterministic and off by default: ``make_postprocessor(None)`` with
``RAGSPINE_POSTPROCESSOR`` unset returns ``None``.

>>> snippets = [{"text": t} for t in ("revenue grew", "revenue grew", "profit fell")]
>>> [s["text"] for s in make_postprocessor("mmr").postprocess("revenue", snippets)]
['revenue grew', 'profit fell', 'revenue grew']
>>> [s["text"] for s in LostInTheMiddlePostprocessor().postprocess("", [{"text": "d0"},
...  {"text": "d1"}, {"text": "d2"}, {"text": "d3"}, {"text": "d4"}])]
['d0', 'd2', 'd4', 'd3', 'd1']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.common.groundedness import (
    LexicalOverlapJudge,
    check_unit_interval,
    overlap_tokens,
)
from ragspine_lite.common.registry import Registry
from ragspine_lite.common.sensitivity import is_restricted
from ragspine_lite.common.settings import env_value

__all__ = [
    "DEFAULT_COMPRESSION_THRESHOLD",
    "DEFAULT_MMR_LAMBDA",
    "POSTPROCESSORS",
    "POSTPROCESSOR_ENV",
    "PROMPT_TEXT_KEY",
    "ChainPostprocessor",
    "CompressionPostprocessor",
    "LostInTheMiddlePostprocessor",
    "MMRPostprocessor",
    "NodePostprocessor",
    "Snippet",
    "make_postprocessor",
]

POSTPROCESSOR_ENV = "RAGSPINE_POSTPROCESSOR"
PROMPT_TEXT_KEY = "prompt_text"
DEFAULT_MMR_LAMBDA = 0.5
DEFAULT_COMPRESSION_THRESHOLD = 0.3

Snippet = dict[str, object]

# A sentence: a run of non-separators plus its separators. '.' is not a separator, so
# decimals ("12.5%") and abbreviations stay whole.
_SENTENCE_RE = re.compile(r"[^。！？!?；;\n]+[。！？!?；;\n]*")


@runtime_checkable
class NodePostprocessor(Protocol):
    """Re-orders, cuts or annotates the snippets of one retrieval."""

    def postprocess(self, query: str, results: list[Snippet]) -> list[Snippet]: ...


def _original_text(snippet: Snippet) -> str:
    """The snippet's own text (``text`` or ``content``), never a ``prompt_text``."""
    return str(snippet.get("text") or snippet.get("content") or "")


def _jaccard(a: set[str], b: set[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def _check_top_n(top_n: Any) -> int | None:
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
        raise ValueError(f"top_n must be None or an int >= 1, got {top_n!r}")
    return top_n


class MMRPostprocessor:
    """Maximal Marginal Relevance: trade rank relevance against redundancy.

    The relevance of input position ``i`` (of ``n``) is ``(n - i) / n``; similarity is the
    Jaccard overlap of token sets. Each step picks the snippet maximising
    ``lambda_ * rel - (1 - lambda_) * max_sim(selected)``, earliest on ties. ``lambda_=1``
    keeps the input order; ``lambda_=0`` picks by diversity alone. Returns the same dict
    objects, optionally cut to ``top_n``.
    """

    def __init__(self, lambda_: float = DEFAULT_MMR_LAMBDA, top_n: int | None = None) -> None:
        self.lambda_ = check_unit_interval(lambda_, "lambda_")
        self.top_n = _check_top_n(top_n)

    def postprocess(self, query: str, results: list[Snippet]) -> list[Snippet]:
        n = len(results)
        limit = n if self.top_n is None else min(self.top_n, n)
        tokens = [set(overlap_tokens(_original_text(s))) for s in results]
        max_sim = [0.0] * n
        remaining = list(range(n))
        picked: list[int] = []
        lam = self.lambda_
        while len(picked) < limit:
            best, best_score = remaining[0], None
            for i in remaining:
                score = lam * (n - i) / n - (1 - lam) * max_sim[i]
                if best_score is None or score > best_score:
                    best, best_score = i, score
            picked.append(best)
            remaining.remove(best)
            for i in remaining:
                max_sim[i] = max(max_sim[i], _jaccard(tokens[i], tokens[best]))
        return [results[i] for i in picked]


class LostInTheMiddlePostprocessor:
    """Put the best snippets at both ends: even positions in order, then odd ones reversed."""

    def postprocess(self, query: str, results: list[Snippet]) -> list[Snippet]:
        return list(results[0::2]) + list(results[1::2])[::-1]


def _sentences(text: str) -> list[str]:
    return _SENTENCE_RE.findall(text)


class CompressionPostprocessor:
    """Extractive compression into ``prompt_text``; ``text`` and citations stay untouched.

    Each snippet's original text is split into sentences (``。！？!?；;`` and newlines end
    one); the sentences whose words the query covers at ``threshold`` or more are kept
    verbatim, in order, concatenated. If none qualifies the best-covered sentence (earliest
    on ties) is kept, so ``prompt_text`` is never empty for a non-empty text. A custom
    ``compressor(query, text) -> str`` replaces the extractive rule; it is never handed a
    RESTRICTED snippet's text (such a snippet is returned unchanged). Returns new dicts:
    the input is not mutated.
    """

    def __init__(
        self,
        threshold: float = DEFAULT_COMPRESSION_THRESHOLD,
        compressor: Callable[[str, str], str] | None = None,
    ) -> None:
        self.threshold = check_unit_interval(threshold, "threshold")
        self.compressor = compressor
        self._judge = LexicalOverlapJudge(self.threshold)

    def compress(self, query: str, text: str) -> str:
        """The extractive rule alone (what ``prompt_text`` gets without a compressor)."""
        sentences = _sentences(text)
        if not sentences:
            return text
        kept = [s for s in sentences if self._judge.entails(s, query)]
        if kept:
            return "".join(kept)
        coverage = [self._judge.coverage(s, query) for s in sentences]
        return sentences[coverage.index(max(coverage))]

    def postprocess(self, query: str, results: list[Snippet]) -> list[Snippet]:
        out: list[Snippet] = []
        for snippet in results:
            if is_restricted(snippet.get("sensitivity", "")):
                out.append(snippet)
                continue
            text = _original_text(snippet)
            compress = self.compressor if self.compressor is not None else self.compress
            out.append({**snippet, PROMPT_TEXT_KEY: compress(query, text)})
        return out


class ChainPostprocessor:
    """Apply postprocessors in order; an empty chain passes the snippets through."""

    def __init__(self, processors: Sequence[NodePostprocessor] = ()) -> None:
        self.processors = list(processors)

    def postprocess(self, query: str, results: list[Snippet]) -> list[Snippet]:
        out = list(results)
        for processor in self.processors:
            out = processor.postprocess(query, out)
        return out


POSTPROCESSORS = Registry("postprocessors")
POSTPROCESSORS.register("mmr", MMRPostprocessor)
for _name in ("lost_in_middle", "litm", "long_context_reorder"):
    POSTPROCESSORS.register(_name, LostInTheMiddlePostprocessor)
for _name in ("compress", "compression"):
    POSTPROCESSORS.register(_name, CompressionPostprocessor)


def make_postprocessor(spec: str | None = None, **kwargs: Any) -> NodePostprocessor | None:
    """A postprocessor from ``spec`` (``None`` → ``$RAGSPINE_POSTPROCESSOR``); off → ``None``.

    ``""``/``none`` → ``None``. One name (``mmr``, ``lost_in_middle``/``litm``/
    ``long_context_reorder``, ``compress``/``compression``; case, ``-`` and spaces are
    normalised) → that postprocessor built with ``kwargs``. A comma list
    (``"mmr,lost_in_middle"``) → a :class:`ChainPostprocessor` of default-built ones in
    order; ``kwargs`` then raise, since they could not say which one they are for.
    Unknown names → ``ValueError`` listing the valid ones.
    """
    if spec is None:
        spec = env_value(POSTPROCESSOR_ENV, "")
    normalized = str(spec).strip().lower()
    if normalized in ("", "none"):
        return None
    parts = [p.strip() for p in normalized.split(",") if p.strip()]
    if not parts:
        return None
    if len(parts) == 1:
        return POSTPROCESSORS.make(parts[0], **kwargs)
    if kwargs:
        raise ValueError(
            f"keyword arguments {sorted(kwargs)} need a single postprocessor, "
            f"not the chain {spec!r}"
        )
    return ChainPostprocessor([POSTPROCESSORS.make(p) for p in parts])
