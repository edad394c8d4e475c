"""Query transformation (opt-in, LLM-backed): HyDE, RAG-Fusion, step-back, decomposition and
Adaptive-RAG, each a ``NarrativeRetriever`` wrapping another one.

:func:`apply_query_layers` is the entry point: ``DecompositionRetriever(transform(base))``
as configured (arguments, else ``RAGSPINE_QUERY_TRANSFORM``, ``RAGSPINE_ADAPTIVE``,
``RAGSPINE_QUERY_DECOMPOSE``). With everything off it returns ``base`` itself.
"""

from __future__ import annotations

from ragspine_lite.common.glossary import DEFAULT_GLOSSARY, Glossary
from ragspine_lite.common.llm import LLMProvider
from ragspine_lite.link.narrative_link import NarrativeRetriever
from ragspine_lite.query.decompose import (
    ADAPTIVE_ENV,
    QUERY_DECOMPOSE_ENV,
    AdaptiveDecomposer,
    ComplexityClassifier,
    DecompositionRetriever,
    HeuristicComplexityClassifier,
    LLMComplexityClassifier,
    LLMQueryDecomposer,
    QueryDecomposer,
    make_adaptive_decomposer,
    make_decomposer,
)
from ragspine_lite.query.gate import ExternalEntityGate, QueryGate, default_query_gate
from ragspine_lite.query.transform import (
    QUERY_TRANSFORM_ENV,
    HyDERetriever,
    RAGFusionRetriever,
    StepBackRetriever,
    TransformOutcome,
    make_query_transform,
)

__all__ = [
    "ADAPTIVE_ENV",
    "QUERY_DECOMPOSE_ENV",
    "QUERY_TRANSFORM_ENV",
    "AdaptiveDecomposer",
    "ComplexityClassifier",
    "DecompositionRetriever",
    "ExternalEntityGate",
    "HeuristicComplexityClassifier",
    "HyDERetriever",
    "LLMComplexityClassifier",
    "LLMQueryDecomposer",
    "QueryDecomposer",
    "QueryGate",
    "RAGFusionRetriever",
    "StepBackRetriever",
    "TransformOutcome",
    "apply_query_layers",
    "default_query_gate",
    "make_adaptive_decomposer",
    "make_decomposer",
    "make_query_transform",
]


def apply_query_layers(
    base: NarrativeRetriever,
    *,
    transform: str | None = None,
    decompose: str | None = None,
    adaptive: str | None = None,
    provider: LLMProvider | None = None,
    glossary: Glossary = DEFAULT_GLOSSARY,
    gate: QueryGate | None = None,
) -> NarrativeRetriever:
    """``base`` under the configured query layers (each spec ``None`` → its env variable).

    The transform wraps ``base``; decomposition wraps that, so every sub-question runs
    the transformed retrieval. An adaptive mode other than ``none`` takes precedence over
    ``decompose``. Without a provider every layer is off and ``base`` comes back itself.
    ``glossary`` (a company profile) feeds the default gate and the heuristic classifier.
    """
    gate = gate if gate is not None else default_query_gate(glossary)
    retriever = make_query_transform(base, transform, provider=provider, gate=gate)
    decomposer: QueryDecomposer | None = make_adaptive_decomposer(
        adaptive, provider=provider, glossary=glossary
    )
    if decomposer is None:
        decomposer = make_decomposer(decompose, provider=provider)
    if decomposer is None:
        return retriever
    return DecompositionRetriever(retriever, decomposer, gate=gate)
