"""Listwise rerank by a judge (an LLM or a model), with RESTRICTED exit #1.

RESTRICTED items are never sent to the judge and keep their positions; the judge only
reorders the open items among the open slots. Any judge failure falls back to input order.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from ragspine_lite.common.sensitivity import RESTRICTED, is_restricted

__all__ = [
    "DEFAULT_TOP_N",
    "RESTRICTED_SENSITIVITY",
    "ListwiseJudge",
    "build_listwise_prompt",
    "listwise_rerank",
    "parse_listwise_response",
]

DEFAULT_TOP_N = 10
RESTRICTED_SENSITIVITY = RESTRICTED

_LOGGER = logging.getLogger(__name__)
_INT_RE = re.compile(r"\d+")

R = TypeVar("R")


@runtime_checkable
class ListwiseJudge(Protocol):
    """Ranks candidate texts for a query: returns 0-based indices, best first."""

    def judge(self, query: str, candidates: list[str]) -> list[int]: ...


def build_listwise_prompt(query: str, candidates: Sequence[str]) -> str:
    """The deterministic (Chinese) listwise ranking prompt for ``candidates``."""
    lines = [
        "请根据与查询的相关性，将下列候选文本从最相关到最不相关排序。",
        "只输出候选的下标（从 0 开始），用英文逗号分隔，不要输出任何其他内容。",
        "",
        f"查询：{query}",
        "",
        "候选：",
    ]
    lines.extend(f"[{i}] {candidate}" for i, candidate in enumerate(candidates))
    lines.extend(["", "排序结果（仅下标，逗号分隔）："])
    return "\n".join(lines)


def parse_listwise_response(text: str, n_candidates: int) -> list[int]:
    """Read a ranking out of free text; always a permutation of ``range(n_candidates)``.

    Every integer in order; in-range first occurrences are kept, the missing indices are
    appended ascending. ``n_candidates <= 0`` → ``[]``.

    >>> parse_listwise_response("[2] > [0] > [1]", 3), parse_listwise_response("7, 2, 0", 3)
    ([2, 0, 1], [2, 0, 1])
    """
    if n_candidates <= 0:
        return []
    order: list[int] = []
    seen: set[int] = set()
    for match in _INT_RE.findall(text or ""):
        i = int(match)
        if i < n_candidates and i not in seen:
            seen.add(i)
            order.append(i)
    order.extend(i for i in range(n_candidates) if i not in seen)
    return order


def _held_back(result: Any) -> bool:
    """RESTRICTED (case-insensitive) — or unreadable sensitivity, which fails closed."""
    try:
        return is_restricted(result.chunk.sensitivity)
    except Exception:
        return True


def _clean_ranking(raw: Any, n: int) -> list[int]:
    """Judge output → permutation of ``range(n)``: junk ignored, missing appended in order."""
    order: list[int] = []
    seen: set[int] = set()
    for i in raw:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n or i in seen:
            continue
        seen.add(i)
        order.append(i)
    order.extend(i for i in range(n) if i not in seen)
    return order


def _clamp_top_n(top_n: Any) -> int:
    if isinstance(top_n, bool) or not isinstance(top_n, int):
        _LOGGER.warning("listwise_rerank: top_n %r is not an int; using %d", top_n, DEFAULT_TOP_N)
        return DEFAULT_TOP_N
    return max(top_n, 0)


def listwise_rerank(
    query: str,
    results: Sequence[R],
    judge: ListwiseJudge | None,
    *,
    top_n: int = DEFAULT_TOP_N,
) -> list[R]:
    """Reorder ``results`` by ``judge`` and return the first ``top_n``; never raises on failure.

    Results are duck-typed on ``.chunk.text`` and ``.chunk.sensitivity``. RESTRICTED items
    (case-insensitive) are never sent and keep their positions; if every item is RESTRICTED
    the judge is not called. The judge sees all open items; truncation happens after merging.
    Returned indices that are bools, non-ints, out of range or repeated are ignored and the
    missing ones appended in input order. Any exception from the judge → input order (one
    warning logged with the exception type only). Never raises: a ``top_n`` that is not an
    int (or is a bool) counts as :data:`DEFAULT_TOP_N`, a negative one as ``0`` (callers
    that take ``top_n`` from users reject bad values when they are built, e.g.
    ``NarrativeIndex(rerank_top_n=...)``).
    """
    top_n = _clamp_top_n(top_n)
    items: list[Any] = list(results)  # duck-typed on .chunk
    if not items or judge is None:
        return items[:top_n]
    open_slots = [i for i, item in enumerate(items) if not _held_back(item)]
    if not open_slots:
        return items[:top_n]
    try:
        texts = [str(items[i].chunk.text) for i in open_slots]
        ranking = _clean_ranking(judge.judge(query, texts), len(open_slots))
    except Exception as exc:
        _LOGGER.warning("listwise judge failed (%s); keeping input order", type(exc).__name__)
        return items[:top_n]
    merged = list(items)
    for slot, j in zip(open_slots, ranking, strict=True):
        merged[slot] = items[open_slots[j]]
    return merged[:top_n]
