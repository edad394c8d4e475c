"""Query decomposition and Adaptive-RAG, wrapped as retrievers.

- :class:`LLMQueryDecomposer` (``RAGSPINE_QUERY_DECOMPOSE=llm``): ``decompose(question)`` →
  at most four sub-questions (a JSON array, else numbered/bulleted lines); a provider error
  or an unusable answer → ``[question]``.
- :func:`make_adaptive_decomposer` (``RAGSPINE_ADAPTIVE``: ``none`` | ``heuristic`` | ``llm``):
  a complexity classifier (``simple`` / ``single`` / ``multi``) in front of the decomposer,
  so only ``multi`` questions are decomposed.
- :class:`DecompositionRetriever`: decompose → retrieve the question and each sub-question
  that passes the query gate → fuse with ``rrf_fuse`` keyed by chunk id (deterministic).

The LLM sees only the question. A decomposer that keeps the question whole leaves the
plain retrieval of the question, byte for byte.

>>> HeuristicComplexityClassifier().classify("Compare ACME HK and ACME China revenue")
'multi'
>>> HeuristicComplexityClassifier().classify("ACME Hong Kong revenue in 2024")
'single'
"""

from __future__ import annotations

import logging
import re
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.common.glossary import DEFAULT_GLOSSARY, Glossary, TermMatch, find_terms
from ragspine_lite.common.llm import LLMProvider
from ragspine_lite.common.registry import Registry
from ragspine_lite.link.narrative_link import NarrativeRetriever
from ragspine_lite.query.gate import QueryGate
from ragspine_lite.query.transform import (
    GeneratingRetriever,
    ask_llm,
    parse_query_list,
)

__all__ = [
    "ADAPTIVE_ENV",
    "COMPLEXITY_LEVELS",
    "DEFAULT_MAX_SUBQUESTIONS",
    "QUERY_DECOMPOSE_ENV",
    "AdaptiveDecomposer",
    "ComplexityClassifier",
    "DecompositionRetriever",
    "HeuristicComplexityClassifier",
    "LLMComplexityClassifier",
    "LLMQueryDecomposer",
    "QueryDecomposer",
    "make_adaptive_decomposer",
    "make_decomposer",
]

QUERY_DECOMPOSE_ENV = "RAGSPINE_QUERY_DECOMPOSE"
ADAPTIVE_ENV = "RAGSPINE_ADAPTIVE"
DEFAULT_MAX_SUBQUESTIONS = 4
COMPLEXITY_LEVELS = ("simple", "single", "multi")

_LOGGER = logging.getLogger("ragspine_lite.query")
_COMPARISON = re.compile(
    r"\b(?:compare[sd]?|comparison|versus|vs\.?|difference between|differences between|"
    r"respectively)\b|比较|对比|相比|分别|差异|区别|相較|比較"
)
_YEAR = re.compile(r"(?<!\d)(?:19|20)\d{2}(?!\d)")
_WORD = re.compile(r"[a-z0-9]+|[一-鿿]")
_LEVEL = re.compile(r"\b(simple|single|multi)")


@runtime_checkable
class QueryDecomposer(Protocol):
    """A question → the sub-questions to retrieve (``[question]``: keep it whole)."""

    def decompose(self, question: str) -> list[str]: ...


@runtime_checkable
class ComplexityClassifier(Protocol):
    """A question → ``"simple"``, ``"single"`` or ``"multi"``."""

    def classify(self, question: str) -> str: ...


class LLMQueryDecomposer:
    """Asks the LLM for at most ``max_subquestions`` self-contained sub-questions."""

    instruction = (
        "Split the question below into at most {n} simpler, self-contained sub-questions, in "
        "the same language as the question. If it is already simple, return it alone. Output "
        "only a JSON array of strings.\n\nQuestion: {query}"
    )

    def __init__(
        self, provider: LLMProvider, *, max_subquestions: int = DEFAULT_MAX_SUBQUESTIONS
    ) -> None:
        if isinstance(max_subquestions, bool) or not isinstance(max_subquestions, int) or not (
            1 <= max_subquestions <= 16
        ):
            raise ValueError(
                f"max_subquestions must be an integer from 1 to 16, got {max_subquestions!r}"
            )
        self.provider = provider
        self.max_subquestions = max_subquestions

    def decompose(self, question: str) -> list[str]:
        prompt = self.instruction.format(n=self.max_subquestions, query=question)
        try:
            answer = ask_llm(self.provider, prompt)
        except Exception as exc:  # degrade: keep the question whole
            _LOGGER.warning("query decomposition failed (%s); keeping the question whole",
                            " ".join(str(exc).split()) or type(exc).__name__)
            return [question]
        subs = parse_query_list(answer, self.max_subquestions)
        if not subs:
            _LOGGER.warning("query decomposition answer unusable; keeping the question whole")
        return subs or [question]


def _longest_matches(text: str, synonyms: Any) -> list[TermMatch]:
    """Glossary matches without overlaps, longest first ("acme hong kong" over "acme")."""
    found = sorted(find_terms(text, synonyms), key=lambda m: (m.start, -(m.end - m.start)))
    kept: list[TermMatch] = []
    for m in found:
        if not kept or m.start >= kept[-1].end:
            kept.append(m)
    return kept


class HeuristicComplexityClassifier:
    """Deterministic: ``multi`` for comparisons, two question marks, or two or more distinct
    entities, metrics or years (glossary codes); ``simple`` for three words or fewer;
    ``single`` otherwise."""

    def __init__(self, glossary: Glossary = DEFAULT_GLOSSARY) -> None:
        self.glossary = glossary

    def classify(self, question: str) -> str:
        text = str(question).lower()
        if _COMPARISON.search(text) or len(re.findall(r"[?？]", text)) >= 2:
            return "multi"
        entities = {m.code for m in _longest_matches(text, self.glossary.entity_synonyms)}
        metrics = {m.code for m in _longest_matches(text, self.glossary.metric_synonyms)}
        years = set(_YEAR.findall(text))
        if max(len(entities), len(metrics), len(years)) >= 2:
            return "multi"
        return "simple" if len(_WORD.findall(text)) <= 3 else "single"


class LLMComplexityClassifier:
    """Asks the LLM for one word; an error or an unusable answer → ``"single"`` (no
    decomposition: the plain retrieval)."""

    instruction = (
        "Classify the question below by the retrieval it needs. Answer with one word: simple "
        "(answerable without documents), single (one lookup) or multi (several lookups, e.g. "
        "a comparison or several entities, periods or metrics).\n\nQuestion: {query}"
    )

    def __init__(self, provider: LLMProvider) -> None:
        self.provider = provider

    def classify(self, question: str) -> str:
        try:
            answer = ask_llm(self.provider, self.instruction.format(query=question))
        except Exception as exc:
            _LOGGER.warning("complexity classification failed (%s); treating it as single",
                            " ".join(str(exc).split()) or type(exc).__name__)
            return "single"
        match = _LEVEL.search(answer.lower())
        return match.group(1) if match else "single"


class AdaptiveDecomposer:
    """Decomposes only what ``classifier`` calls ``multi``; ``last_level`` keeps its verdict."""

    def __init__(self, classifier: ComplexityClassifier, decomposer: QueryDecomposer) -> None:
        self.classifier = classifier
        self.decomposer = decomposer
        self.last_level = ""

    def decompose(self, question: str) -> list[str]:
        self.last_level = self.classifier.classify(question)
        if self.last_level != "multi":
            return [question]
        return self.decomposer.decompose(question)


class DecompositionRetriever(GeneratingRetriever):
    """Retrieves the question and its gated sub-questions, RRF-fused by chunk id."""

    name = "decompose"
    empty_status = "not_decomposed"

    def __init__(
        self,
        base: NarrativeRetriever,
        decomposer: QueryDecomposer,
        *,
        gate: QueryGate | None = None,
    ) -> None:
        super().__init__(base, gate=gate)
        self.decomposer = decomposer

    def __repr__(self) -> str:
        return f"DecompositionRetriever({self.base!r}, {self.decomposer!r})"

    def _generate(self, query: str) -> list[str]:
        whole = query.strip().lower()
        return [s for s in self.decomposer.decompose(query) if s.strip().lower() != whole]


#: The specs of the two decomposition seams (the factories build; these only name).
DECOMPOSERS = Registry("query_decomposers", env=QUERY_DECOMPOSE_ENV,
                       label="query decomposition")
DECOMPOSERS.register("llm", lambda provider: LLMQueryDecomposer(provider))
ADAPTIVE_MODES = Registry("adaptive_modes", env=ADAPTIVE_ENV, label="adaptive mode")
ADAPTIVE_MODES.register("heuristic", lambda provider, glossary: HeuristicComplexityClassifier(
    glossary))
ADAPTIVE_MODES.register("llm", lambda provider, glossary: LLMComplexityClassifier(provider))


def _provided_key(
    registry: Registry, spec: str | None, provider: LLMProvider | None
) -> str | None:
    """``registry``'s key for ``spec``; ``None`` when off, or (logged) when no provider."""
    key = registry.resolve(spec)
    if key is not None and provider is None:
        _LOGGER.warning(
            "%s %s needs an LLM provider and none is configured; off", registry.label, key
        )
        return None
    return key


def make_decomposer(
    spec: str | None = None, *, provider: LLMProvider | None = None
) -> LLMQueryDecomposer | None:
    """``RAGSPINE_QUERY_DECOMPOSE`` when ``spec`` is None: ``none`` → ``None``; ``llm`` →
    :class:`LLMQueryDecomposer` (``None`` without a provider); else ``ValueError``."""
    key = _provided_key(DECOMPOSERS, spec, provider)
    if key is None:
        return None
    decomposer: LLMQueryDecomposer = DECOMPOSERS.make(key, provider=provider)
    return decomposer


def make_adaptive_decomposer(
    spec: str | None = None,
    *,
    provider: LLMProvider | None = None,
    glossary: Glossary = DEFAULT_GLOSSARY,
) -> AdaptiveDecomposer | None:
    """``RAGSPINE_ADAPTIVE`` when ``spec`` is None: ``none`` → ``None``; ``heuristic`` /
    ``llm`` → an :class:`AdaptiveDecomposer` with that classifier in front of an
    :class:`LLMQueryDecomposer` (``None`` without a provider: decomposing needs the LLM)."""
    key = _provided_key(ADAPTIVE_MODES, spec, provider)
    if key is None or provider is None:
        return None
    classifier: ComplexityClassifier = ADAPTIVE_MODES.make(
        key, provider=provider, glossary=glossary
    )
    return AdaptiveDecomposer(classifier, LLMQueryDecomposer(provider))
