"""LLM query transforms over a ``NarrativeRetriever``: HyDE, RAG-Fusion and step-back.

Each wraps a retriever (``retrieve(query, *, filters=None, top_k=50) -> list[dict]``) and is
one, so they stack with the link, corrective retrieval and rerank. The LLM sees only the
user's query — never a chunk — so no RESTRICTED text can reach a prompt. Every generated
query passes a :class:`~ragspine_lite.query.gate.QueryGate` first (refused → dropped, never
searched). A provider error or an empty/garbled answer gives exactly the plain retrieval
of the original query, with a warning on the ``ragspine_lite.query`` logger.

- ``hyde``: the LLM writes a hypothetical answer passage; the probe searched is the query
  followed by that passage. The passage is a retrieval probe only: the snippets returned
  are the base retriever's real chunks, never the passage.
- ``rag_fusion`` (``fusion``): the LLM writes a JSON array of up to ``max_variants`` query
  variants; the original query and each variant are retrieved and fused with ``rrf_fuse``
  keyed by chunk id.
- ``step_back`` (``stepback``): the LLM writes one more general question; both result
  lists are fused the same way.

>>> from ragspine_lite.common.llm import EchoProvider
>>> class Base:
...     def retrieve(self, query, *, filters=None, top_k=50):
...         return [{"chunk_id": w, "text": w} for w in query.split()][:top_k]
>>> fusion = make_query_transform(Base(), "RAG-Fusion", provider=EchoProvider('["b c"]'))
>>> [s["chunk_id"] for s in fusion.retrieve("a b")]
['b', 'a', 'c']
>>> make_query_transform(Base(), "hyde").__class__.__name__  # no provider: the base itself
'Base'
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragspine_lite.common.llm import LLMProvider, completion_text
from ragspine_lite.common.registry import Registry
from ragspine_lite.lexical.scoring import DEFAULT_RRF_K, rrf_fuse
from ragspine_lite.link.narrative_link import NarrativeRetriever
from ragspine_lite.query.gate import QueryGate, default_query_gate

__all__ = [
    "DEFAULT_MAX_VARIANTS",
    "QUERY_TRANSFORMS",
    "QUERY_TRANSFORM_ENV",
    "HyDERetriever",
    "RAGFusionRetriever",
    "StepBackRetriever",
    "TransformOutcome",
    "ask_llm",
    "fuse_snippet_lists",
    "make_query_transform",
    "parse_query_list",
    "parse_single_text",
]

QUERY_TRANSFORM_ENV = "RAGSPINE_QUERY_TRANSFORM"
DEFAULT_MAX_VARIANTS = 4
MAX_GENERATED_CHARS = 1000  # a longer generated query is cut here (HyDE passages)

_LOGGER = logging.getLogger("ragspine_lite.query")
_SYSTEM_PROMPT = (
    "You help a search engine. Follow the instruction exactly and output nothing else."
)
_FENCE = re.compile(r"^```[A-Za-z]*\s*|\s*```$")
_LABEL = re.compile(
    r"^(?:passage|answer|question|query|general question|step-back question|段落|答案|问题)"
    r"\s*[:：]\s*",
    re.IGNORECASE,
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d{1,2}\s*[.)、:]|[(（]\d{1,2}[)）])\s*(.+)$")
_QUOTES = "\"'“”‘’「」`"


@dataclass(frozen=True)
class TransformOutcome:
    """What the last ``retrieve`` did: ``status`` is ``applied``, ``provider_error``,
    ``unparsed`` (empty/garbled answer), ``refused`` (the gate dropped every generated
    query) or ``not_decomposed``; ``generated`` holds the queries actually searched."""

    transform: str
    status: str
    generated: tuple[str, ...] = ()
    refused: int = 0
    error: str = ""


def ask_llm(provider: LLMProvider, instruction: str) -> str:
    """One chat call (fixed system prompt, ``instruction`` as the user turn) → its text."""
    messages = [
        {"role": "system", "content": _SYSTEM_PROMPT},
        {"role": "user", "content": instruction},
    ]
    return completion_text(provider.chat(messages))


def _strip_fences(text: str) -> str:
    return _FENCE.sub("", str(text).strip()).strip()


def _clean_query(text: str) -> str:
    out = " ".join(_LABEL.sub("", text.strip()).split())
    return out.strip(_QUOTES).strip()


def _json_strings(body: str) -> list[str] | None:
    start, end = body.find("["), body.rfind("]")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(body[start : end + 1])
    except ValueError:
        return None
    if not isinstance(value, list):
        return None
    out = []
    for item in value:
        if isinstance(item, dict):  # [{"query": "..."}] from chattier models
            item = item.get("query") or item.get("question") or item.get("text")
        if isinstance(item, str):
            out.append(item)
    return out


def parse_query_list(text: str, limit: int, *, exclude: str = "") -> list[str]:
    """Queries from an LLM answer: a JSON array of strings, else numbered/bulleted lines.

    Items are cleaned (labels, quotes, whitespace), deduplicated case-insensitively, those
    equal to ``exclude`` or longer than ``MAX_GENERATED_CHARS`` dropped, at most ``limit``
    kept. Anything unusable → ``[]``.
    """
    body = _strip_fences(text)
    items = _json_strings(body)
    if items is None:
        matches = (_LIST_ITEM.match(line) for line in body.splitlines())
        items = [m.group(1) for m in matches if m]
    seen = {exclude.strip().lower()} if exclude.strip() else set()
    out: list[str] = []
    for raw in items:
        query = _clean_query(raw)
        key = query.lower()
        if not query or key in seen or len(query) > MAX_GENERATED_CHARS:
            continue
        seen.add(key)
        out.append(query)
        if len(out) >= limit:
            break
    return out


def parse_single_text(text: str, *, first_line: bool = False) -> str:
    """One generated text (a passage, a question): fences, labels and quotes removed, cut to
    ``MAX_GENERATED_CHARS``; ``first_line`` keeps only the first non-blank line."""
    body = _strip_fences(text)
    if first_line:
        body = next((line for line in body.splitlines() if line.strip()), "")
    return _clean_query(body)[:MAX_GENERATED_CHARS].strip()


def _snippet_key(snippet: dict[str, Any], position: int) -> str:
    chunk_id = snippet.get("chunk_id")
    if chunk_id:  # a multi-library search tags its snippets with library_id
        library = snippet.get("library_id")
        return f"{library}\x1f{chunk_id}" if library else str(chunk_id)
    doc, loc = snippet.get("doc_id"), snippet.get("source_locator")
    return f"{doc}\x1f{loc}" if doc and loc else f"\x1f#{position}"


def fuse_snippet_lists(
    lists: Sequence[Sequence[dict[str, Any]]], top_k: int, *, k: float = DEFAULT_RRF_K
) -> list[dict[str, Any]]:
    """RRF over snippet lists keyed by chunk id → the ``top_k`` best snippets.

    Ties go to the snippet met first (lists in order, ranks within), so the first list —
    the original query's — wins them. The snippet dict kept is the first one met.
    """
    first: dict[str, tuple[int, dict[str, Any]]] = {}
    rankings: list[list[str]] = []
    for snippets in lists:
        keys: list[str] = []
        for snippet in snippets:
            key = _snippet_key(snippet, len(first))
            if key not in keys:
                first.setdefault(key, (len(first), snippet))
                keys.append(key)
        rankings.append(keys)
    fused = rrf_fuse(rankings, k)
    order = sorted(fused, key=lambda key: (-fused[key], first[key][0]))
    return [first[key][1] for key in order[:top_k]]


def _one_line(exc: BaseException) -> str:
    return " ".join((str(exc) or type(exc).__name__).split())


class GeneratingRetriever:
    """A retriever that searches LLM-generated queries (subclasses say which and how).

    ``_generate(query)`` returns the generated queries (``[]``: nothing usable; it may
    raise); each must pass ``gate``; ``_probes`` turns the kept ones into the queries
    searched. ``last_outcome`` records what the latest ``retrieve`` did.
    """

    name = ""
    empty_status = "unparsed"

    def __init__(self, base: NarrativeRetriever, *, gate: QueryGate | None = None) -> None:
        self.base = base
        self.gate = gate if gate is not None else default_query_gate()
        self.last_outcome: TransformOutcome | None = None

    def _generate(self, query: str) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _probes(self, query: str, generated: list[str]) -> list[str]:
        return [query, *generated]

    def _plain(
        self, query: str, filters: Any, top_k: int, outcome: TransformOutcome
    ) -> list[dict[str, Any]]:
        self.last_outcome = outcome
        if outcome.status in ("provider_error", "unparsed"):
            detail = f": {outcome.error}" if outcome.error else ""
            _LOGGER.warning(
                "query transform %s failed (%s%s); plain retrieval of the original query",
                self.name, outcome.status, detail,
            )
        elif outcome.status == "refused":
            _LOGGER.info("query transform %s: the gate refused every generated query", self.name)
        return self.base.retrieve(query, filters=filters, top_k=top_k)

    def retrieve(
        self, query: str, *, filters: dict[str, str] | None = None, top_k: int = 50
    ) -> list[dict[str, Any]]:
        try:
            generated = self._generate(query)
        except Exception as exc:  # any provider failure degrades, never crashes
            outcome = TransformOutcome(self.name, "provider_error", error=_one_line(exc))
            return self._plain(query, filters, top_k, outcome)
        if not generated:
            outcome = TransformOutcome(self.name, self.empty_status)
            return self._plain(query, filters, top_k, outcome)
        kept = [g for g in generated if self.gate.allows(g)]
        refused = len(generated) - len(kept)
        if not kept:
            outcome = TransformOutcome(self.name, "refused", refused=refused)
            return self._plain(query, filters, top_k, outcome)
        self.last_outcome = TransformOutcome(self.name, "applied", tuple(kept), refused)
        lists = [
            self.base.retrieve(probe, filters=filters, top_k=top_k)
            for probe in self._probes(query, kept)
        ]
        return list(lists[0][:top_k]) if len(lists) == 1 else fuse_snippet_lists(lists, top_k)


class _LLMTransform(GeneratingRetriever):
    def __init__(
        self, base: NarrativeRetriever, provider: LLMProvider, *, gate: QueryGate | None = None
    ) -> None:
        super().__init__(base, gate=gate)
        self.provider = provider

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base!r}, provider={self.provider!r})"


class HyDERetriever(_LLMTransform):
    """HyDE: search ``query + "\\n" + hypothetical passage`` (the passage is only a probe)."""

    name = "hyde"
    instruction = (
        "Write one short passage (two to four sentences) that answers the question below, "
        "in the same language as the question. Output only the passage.\n\nQuestion: {query}"
    )

    def _generate(self, query: str) -> list[str]:
        passage = parse_single_text(ask_llm(self.provider, self.instruction.format(query=query)))
        return [passage] if passage else []

    def _probes(self, query: str, generated: list[str]) -> list[str]:
        return [f"{query}\n{generated[0]}"]


class RAGFusionRetriever(_LLMTransform):
    """RAG-Fusion: the original query plus up to ``max_variants`` LLM variants, RRF-fused."""

    name = "rag_fusion"
    instruction = (
        "Write {n} different search queries that would find documents answering the question "
        "below, in the same language as the question. Output only a JSON array of strings."
        "\n\nQuestion: {query}"
    )

    def __init__(
        self,
        base: NarrativeRetriever,
        provider: LLMProvider,
        *,
        max_variants: int = DEFAULT_MAX_VARIANTS,
        gate: QueryGate | None = None,
    ) -> None:
        if isinstance(max_variants, bool) or not isinstance(max_variants, int) or not (
            1 <= max_variants <= 16
        ):
            raise ValueError(f"max_variants must be an integer from 1 to 16, got {max_variants!r}")
        super().__init__(base, provider, gate=gate)
        self.max_variants = max_variants

    def _generate(self, query: str) -> list[str]:
        prompt = self.instruction.format(n=self.max_variants, query=query)
        return parse_query_list(ask_llm(self.provider, prompt), self.max_variants, exclude=query)


class StepBackRetriever(_LLMTransform):
    """Step-back: the original query and one more general question, RRF-fused."""

    name = "step_back"
    instruction = (
        "Rewrite the question below as one more general question about the broader topic it "
        "belongs to, in the same language. Output only that question.\n\nQuestion: {query}"
    )

    def _generate(self, query: str) -> list[str]:
        answer = ask_llm(self.provider, self.instruction.format(query=query))
        general = parse_single_text(answer, first_line=True)
        return [general] if general and general.lower() != query.strip().lower() else []


TRANSFORMS = Registry("query_transforms", env=QUERY_TRANSFORM_ENV)
TRANSFORMS.register("hyde", lambda: HyDERetriever)
TRANSFORMS.register("rag_fusion", lambda: RAGFusionRetriever, "ragfusion", "fusion")
TRANSFORMS.register("step_back", lambda: StepBackRetriever, "stepback")
QUERY_TRANSFORMS = ("none", "hyde", "rag_fusion", "fusion", "step_back", "stepback")


def make_query_transform(
    base: NarrativeRetriever,
    spec: str | None = None,
    *,
    provider: LLMProvider | None = None,
    **kw: Any,
) -> NarrativeRetriever:
    """``base`` wrapped in the transform named by ``spec`` (``RAGSPINE_QUERY_TRANSFORM`` when
    ``None``; default ``none``).

    Case, spaces, hyphens and underscores are ignored. ``none`` (or blank) → ``base`` itself;
    ``hyde`` → :class:`HyDERetriever`; ``rag_fusion``/``fusion`` → :class:`RAGFusionRetriever`
    (``max_variants=4``); ``step_back``/``stepback`` → :class:`StepBackRetriever`; anything
    else → ``ValueError`` listing the choices. A transform without a ``provider`` → ``base``
    (with a warning: it never pretends to transform). ``kw`` go to the class (``gate``,
    ``max_variants``).
    """
    key = TRANSFORMS.resolve(spec)
    if key is None:
        return base
    cls: type[_LLMTransform] = TRANSFORMS.make(key)
    if provider is None:
        _LOGGER.warning(
            "query transform %s needs an LLM provider and none is configured; "
            "searching without it", cls.name,
        )
        return base
    return cls(base, provider, **kw)
