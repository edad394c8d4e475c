"""Corrective retrieval (CRAG): grade the retrieved context, then act on a weak grade.

:class:`CorrectiveRetriever` wraps any agent-facing retriever (``retrieve(query, *,
filters, top_k) -> snippets``). It grades each attempt with a deterministic
:class:`RelevanceGrader` against the *original* query and, while the grade stays below
``min_grade``, tries at most two corrective actions in a fixed order: ``drop_filters``
(when filters were given) then ``rewrite_query`` (when a rewriter is set). If no attempt
passes it refuses: it returns ``[]`` and records ``refuse`` — weak context is not handed to
the agent. ``last_actions`` and one privacy-safe trace record per call (action names and
grades, never text) make every step visible.

It reads only its base retriever's output, which is already past the link's RESTRICTED
exit; RESTRICTED snippets a custom base might still return are dropped before grading, so
the output is always a subset of the base output. Synthesised snippets (``is_synthesis``)
are passed through but never graded: a summary cannot vouch for weak evidence.

>>> class Base:
...     def retrieve(self, query, *, filters=None, top_k=50):
...         return [{"text": "revenue grew"}] if filters is None else []
>>> crag = CorrectiveRetriever(Base(), emit=False)
>>> crag.retrieve("revenue", filters={"entity": "ACME_HK"})
[{'text': 'revenue grew'}]
>>> [a.action for a in crag.last_actions]
['retrieve', 'drop_filters']
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.common.groundedness import check_unit_interval, overlap_tokens
from ragspine_lite.common.observability import emit_trace
from ragspine_lite.common.registry import Registry
from ragspine_lite.common.sensitivity import RESTRICTED, is_restricted

__all__ = [
    "CORRECTIVE_ENV",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MIN_GRADE",
    "RESTRICTED_SENSITIVITY",
    "CorrectiveRetriever",
    "GradeAction",
    "LexicalOverlapGrader",
    "NarrativeRetriever",
    "RelevanceGrader",
    "make_corrective_retriever",
]

logger = logging.getLogger(__name__)

CORRECTIVE_ENV = "RAGSPINE_CORRECTIVE"
RESTRICTED_SENSITIVITY = RESTRICTED
DEFAULT_MIN_GRADE = 0.5
DEFAULT_MAX_RETRIES = 2

Snippet = dict[str, object]


@runtime_checkable
class NarrativeRetriever(Protocol):
    """The agent contract (as in :mod:`ragspine_lite.link`)."""

    def retrieve(
        self, query: str, *, filters: dict[str, str] | None = None, top_k: int = 50
    ) -> list[dict[str, object]]: ...


@runtime_checkable
class RelevanceGrader(Protocol):
    """How well a set of snippets answers a query, in ``[0, 1]``."""

    def grade(self, query: str, snippets: list[Snippet]) -> float: ...


@dataclass
class LexicalOverlapGrader:
    """Share of the query's tokens found anywhere in the snippets (``text or content``).

    A query without tokens grades 1.0 (nothing to miss); no snippets grade 0.0.
    """

    def grade(self, query: str, snippets: list[Snippet]) -> float:
        tokens = overlap_tokens(query)
        if not tokens:
            return 1.0
        if not snippets:
            return 0.0
        found: set[str] = set()
        for s in snippets:
            found.update(overlap_tokens(str(s.get("text") or s.get("content") or "")))
        return sum(1 for t in tokens if t in found) / len(tokens)


@dataclass
class GradeAction:
    """One step of a corrective run: what was done, its grade, how many snippets it gave."""

    action: str
    grade: float
    snippet_count: int


def _clamp_retries(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"max_retries must be an int, got {value!r}")
    return max(0, min(DEFAULT_MAX_RETRIES, value))


class CorrectiveRetriever:
    """A bounded, deterministic grade → act loop over a base retriever.

    ``max_retries`` is clamped to ``0..2``. ``query_rewriter(query) -> str`` enables the
    ``rewrite_query`` action. ``last_actions`` holds the steps of the last call: the
    initial ``retrieve``, then ``drop_filters`` / ``rewrite_query``, and ``refuse`` (with
    the best grade seen and 0 snippets) when nothing passed.
    """

    def __init__(
        self,
        base: NarrativeRetriever,
        *,
        grader: RelevanceGrader | None = None,
        min_grade: float = DEFAULT_MIN_GRADE,
        max_retries: int = DEFAULT_MAX_RETRIES,
        query_rewriter: Callable[[str], str] | None = None,
        emit: bool = True,
    ) -> None:
        self.base = base
        self.grader = grader if grader is not None else LexicalOverlapGrader()
        self.min_grade = check_unit_interval(min_grade, "min_grade")
        self.max_retries = _clamp_retries(max_retries)
        self.query_rewriter = query_rewriter
        self.emit = emit
        self.last_actions: list[GradeAction] = []

    def _plan(self, filters: dict[str, str] | None) -> list[str]:
        """The corrective actions to try, in order, capped at ``max_retries``."""
        plan = ["drop_filters"] if filters else []
        if self.query_rewriter is not None:
            plan.append("rewrite_query")
        return plan[: self.max_retries]

    def _rewrite(self, query: str) -> str | None:
        """The rewritten query, or ``None`` (logged) when the rewriter fails."""
        try:
            return str(self.query_rewriter(query)) if self.query_rewriter else None
        except Exception:  # a model failure skips the action, never crashes the call
            logger.warning("corrective query rewriter failed; skipping rewrite_query",
                           exc_info=True)
            return None

    def _attempt(
        self, action: str, query: str, original: str, filters: dict[str, str] | None, top_k: int
    ) -> tuple[list[Snippet], float]:
        found = self.base.retrieve(query, filters=filters, top_k=top_k)
        snippets = [s for s in found if not is_restricted(s.get("sensitivity", ""))]
        # Synthesised text (a RAPTOR theme) is not evidence: only citable snippets are graded.
        evidence = [s for s in snippets if not s.get("is_synthesis")]
        grade = float(self.grader.grade(original, evidence))
        self.last_actions.append(GradeAction(action, grade, len(snippets)))
        return snippets, grade

    def retrieve(
        self, query: str, *, filters: dict[str, str] | None = None, top_k: int = 50
    ) -> list[Snippet]:
        self.last_actions = []
        try:
            snippets, grade = self._attempt("retrieve", query, query, filters, top_k)
            if grade >= self.min_grade:
                return snippets
            best = grade
            for action in self._plan(filters):
                q = self._rewrite(query) if action == "rewrite_query" else query
                if q is None:
                    continue
                snippets, grade = self._attempt(action, q, query, None, top_k)
                if grade >= self.min_grade:
                    return snippets
                best = max(best, grade)
            self.last_actions.append(GradeAction("refuse", best, 0))
            return []
        finally:
            if self.emit:
                emit_trace(
                    corrective_actions=[a.action for a in self.last_actions],
                    corrective_grades=[round(a.grade, 6) for a in self.last_actions],
                )

    @property
    def refused(self) -> bool:
        """Whether the last call refused (returned ``[]`` because every grade was weak)."""
        return bool(self.last_actions) and self.last_actions[-1].action == "refuse"


CORRECTIVE = Registry("corrective_retrievers", env=CORRECTIVE_ENV, spaces=False, label="corrective")
CORRECTIVE.register("crag", CorrectiveRetriever, "corrective", "on")


def make_corrective_retriever(
    base: NarrativeRetriever,
    spec: str | None = None,
    *,
    grader: RelevanceGrader | None = None,
    **kwargs: Any,
) -> NarrativeRetriever:
    """``base`` wrapped per ``spec`` (``None`` → ``$RAGSPINE_CORRECTIVE``, default ``none``).

    ``none`` → ``base`` itself; ``crag``/``corrective``/``on`` → a
    :class:`CorrectiveRetriever` (``kwargs`` go to it); anything else → ``ValueError``.
    """
    wrapped: NarrativeRetriever | None = CORRECTIVE.build(spec, base=base, grader=grader, **kwargs)
    return base if wrapped is None else wrapped
