"""The deterministic gate every *generated* query passes before it is retrieved.

A query that an LLM wrote (a RAG-Fusion variant, a step-back question, a HyDE probe, a
sub-question) is refused when it names an out-of-scope entity — a peer or competitor
from the glossary's external-entity list — so a model can never steer retrieval towards
them. A refused query is dropped, never searched. The user's own query is not gated here.

>>> gate = ExternalEntityGate(["globex", "环球"])
>>> gate.allows("ACME revenue 2024"), gate.allows("Glo bex revenue 2024"), gate.allows("环 球营收")
(True, False, False)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from ragspine_lite.common.glossary import DEFAULT_GLOSSARY, Glossary
from ragspine_lite.common.security_gate import SecurityGate

__all__ = ["ExternalEntityGate", "QueryGate", "default_query_gate"]


@runtime_checkable
class QueryGate(Protocol):
    """Decides whether a generated query may be retrieved."""

    def allows(self, query: str) -> bool: ...


class ExternalEntityGate:
    """Refuses a query naming any of ``terms``, matched by the
    :class:`~ragspine_lite.common.security_gate.SecurityGate`: longest name first, immune to
    case and whitespace (``"a i a"`` names ``aia``), ASCII edges on word edges."""

    def __init__(self, terms: Iterable[str]) -> None:
        cleaned = [str(t).strip().lower() for t in terms]
        self.terms: tuple[str, ...] = tuple(dict.fromkeys(t for t in cleaned if t))
        self._gate = SecurityGate({t: t for t in self.terms}, "")

    def __repr__(self) -> str:
        return f"ExternalEntityGate({len(self.terms)} terms)"

    def refused_terms(self, query: str) -> list[str]:
        """The external terms ``query`` names, in list order (empty: allowed)."""
        found = set(self._gate.detect_all(query))
        return [t for t in self.terms if t in found]

    def allows(self, query: str) -> bool:
        return not self.refused_terms(query)


def default_query_gate(glossary: Glossary = DEFAULT_GLOSSARY) -> ExternalEntityGate:
    """The gate built from ``glossary.external_entities`` (a company profile may extend it)."""
    return ExternalEntityGate(glossary.external_entities)
