"""RAPTOR: a multi-granularity tree of chunk clusters and their (non-citable) summaries.

:func:`build_raptor_tree` embeds the chunks (leaves, level 0), links every pair whose
cosine reaches ``threshold``, takes connected components as clusters and writes one
summary node per cluster of at least ``min_cluster_size``; it repeats on the new level
(summaries plus the unclustered nodes carried up) up to ``max_levels`` times, while the
level keeps shrinking. Everything is deterministic: sorted ids, sorted clusters, a
deterministic extractive summariser unless an LLM one is given.

Honest provenance: a summary node ``is_synthesis``, has no ``doc_id``/``source_locator``
of its own and carries the sorted union of its members' documents and locators — it
points at facts, it is never one. RESTRICTED chunks are dropped before anything else, so
they are never embedded, clustered or shown to a summariser.

:class:`RaptorRetriever` wraps an agent-facing retriever: its snippets come first,
untouched, followed by the best summary hits marked ``is_synthesis``. ``RaptorTree.retrieve``
reaches any granularity: leaves (detail), summaries (themes) or both.

>>> from ragspine_lite.chunking.chunking import Chunk
>>> from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend
>>> chunks = [Chunk(f"d#c{i}", "d", i, t, f"d#para{i + 1}", i + 1, i + 1)
...           for i, t in enumerate(["revenue grew fast.", "revenue grew.", "storm warning."])]
>>> tree = build_raptor_tree(chunks, embedder=DeterministicEmbeddingBackend(dim=64))
>>> [(n.node_id, n.member_ids) for n in tree.summaries]
[('L1#c0', ('L0#d#c0', 'L0#d#c1'))]
>>> tree.summaries[0].source_locators
('d#para1', 'd#para2')
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.common.errors import ProviderError
from ragspine_lite.common.llm import LLMProvider, completion_text
from ragspine_lite.common.registry import Registry
from ragspine_lite.common.sensitivity import (
    RESTRICTED,
    SENSITIVITY_LABELS,
    effective_sensitivity,
    is_restricted,
)
from ragspine_lite.vector.embedding_backends import EmbeddingBackend, embed_query_texts

__all__ = [
    "DEFAULT_MAX_LEVELS",
    "DEFAULT_MIN_CLUSTER_SIZE",
    "DEFAULT_SIMILARITY_THRESHOLD",
    "DEFAULT_SUMMARY_TOP_K",
    "RAPTOR_ENV",
    "RAPTOR_SUMMARIZER_ENV",
    "RESTRICTED_SENSITIVITY",
    "SUMMARY_SYSTEM_PROMPT",
    "ExtractiveRaptorSummarizer",
    "LLMRaptorSummarizer",
    "RaptorHit",
    "RaptorNode",
    "RaptorRetriever",
    "RaptorSummarizer",
    "RaptorTree",
    "build_raptor_tree",
    "cluster_by_similarity",
    "make_raptor_retriever",
    "make_raptor_summarizer",
]

logger = logging.getLogger(__name__)

RAPTOR_ENV = "RAGSPINE_RAPTOR"
RAPTOR_SUMMARIZER_ENV = "RAGSPINE_RAPTOR_SUMMARIZER"
RESTRICTED_SENSITIVITY = RESTRICTED
DEFAULT_SIMILARITY_THRESHOLD = 0.5
DEFAULT_MAX_LEVELS = 3
DEFAULT_MIN_CLUSTER_SIZE = 2
DEFAULT_SUMMARY_TOP_K = 5
EXCERPT_MAX_CHARS = 240

SUMMARY_SYSTEM_PROMPT = (
    "Summarise the common theme of the passages in one or two sentences. "
    "Use only what the passages say. Do not state any number, amount, percentage or date."
)

# A first sentence: up to a CJK/ASCII ender, where '.' counts only before whitespace or the
# end, so that "RMB 2.1 billion" is never cut into a wrong figure ("RMB 2.").
_FIRST_SENTENCE_RE = re.compile(r"(?s).*?(?:[。！？；!?;]|\.(?=\s|$))")

_GRANULARITIES = ("all", "leaves", "summaries")


@dataclass(frozen=True)
class RaptorNode:
    """A leaf (a chunk, ``level`` 0) or a summary (``is_synthesis``, ``level`` ≥ 1)."""

    node_id: str
    level: int
    text: str
    is_synthesis: bool
    doc_id: str
    source_locator: str
    member_ids: tuple[str, ...]
    source_doc_ids: tuple[str, ...]
    source_locators: tuple[str, ...]
    sensitivity: str
    embedding: tuple[float, ...] = ()


@dataclass(frozen=True)
class RaptorHit:
    node: RaptorNode
    score: float


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = sum(x * x for x in a) ** 0.5
    nb = sum(y * y for y in b) ** 0.5
    return 0.0 if na == 0 or nb == 0 else dot / (na * nb)


def _embed(
    embedder: EmbeddingBackend, texts: list[str], *, queries: bool = False
) -> list[tuple[float, ...]]:
    """Vectors for ``texts``; ``queries`` embeds them in the query role when there is one."""
    vectors = embed_query_texts(embedder, texts) if queries else list(embedder.embed_texts(texts))
    if len(vectors) != len(texts):
        raise ValueError(f"embedder returned {len(vectors)} vectors for {len(texts)} texts")
    return [tuple(float(x) for x in v) for v in vectors]


@dataclass(frozen=True)
class RaptorTree:
    """All nodes of a tree: leaves first, then each level's summaries."""

    nodes: tuple[RaptorNode, ...] = field(default=())

    @property
    def leaves(self) -> list[RaptorNode]:
        return [n for n in self.nodes if not n.is_synthesis]

    @property
    def summaries(self) -> list[RaptorNode]:
        return [n for n in self.nodes if n.is_synthesis]

    @property
    def max_level(self) -> int:
        return max((n.level for n in self.nodes), default=0)

    def retrieve(
        self,
        query: str,
        embedder: EmbeddingBackend,
        *,
        top_k: int = 10,
        granularity: str = "all",
    ) -> tuple[RaptorHit, ...]:
        """The ``top_k`` nodes most similar to ``query``, by ``(-cosine, node_id)``.

        ``granularity``: ``"all"``, ``"leaves"`` (detail) or ``"summaries"`` (themes).
        The query is embedded once; nodes without an embedding are skipped.
        """
        if granularity not in _GRANULARITIES:
            raise ValueError(
                f"granularity must be one of {', '.join(_GRANULARITIES)}, got {granularity!r}"
            )
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k must be an int >= 1, got {top_k!r}")
        nodes = [
            n
            for n in self.nodes
            if n.embedding
            and (granularity == "all" or n.is_synthesis == (granularity == "summaries"))
        ]
        if not nodes:
            return ()
        (qvec,) = _embed(embedder, [query], queries=True)
        hits = [RaptorHit(n, _cosine(qvec, n.embedding)) for n in nodes]
        hits.sort(key=lambda h: (-h.score, h.node.node_id))
        return tuple(hits[:top_k])


def cluster_by_similarity(
    ids: Sequence[str],
    embeddings: Sequence[Sequence[float]],
    *,
    threshold: float = DEFAULT_SIMILARITY_THRESHOLD,
) -> tuple[tuple[str, ...], ...]:
    """Connected components of the graph with an edge where cosine ≥ ``threshold``.

    Members are sorted, and so are the clusters.
    """
    if len(ids) != len(embeddings):
        raise ValueError(f"{len(ids)} ids but {len(embeddings)} embeddings")
    parent = list(range(len(ids)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(ids)):
        for j in range(i + 1, len(ids)):
            if _cosine(embeddings[i], embeddings[j]) >= threshold:
                parent[root(j)] = root(i)
    groups: dict[int, list[str]] = {}
    for i, node_id in enumerate(ids):
        groups.setdefault(root(i), []).append(node_id)
    return tuple(sorted(tuple(sorted(g)) for g in groups.values()))


@runtime_checkable
class RaptorSummarizer(Protocol):
    """Writes one summary text for a cluster's member texts."""

    def summarize(self, texts: list[str]) -> str: ...


class ExtractiveRaptorSummarizer:
    """Deterministic: the first sentence of each text (cut to ``max_chars``), space-joined.

    A decimal point does not end a sentence, so no figure is cut short.
    """

    def __init__(self, max_chars: int = EXCERPT_MAX_CHARS) -> None:
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            raise ValueError(f"max_chars must be an int >= 1, got {max_chars!r}")
        self.max_chars = max_chars

    def summarize(self, texts: list[str]) -> str:
        firsts = []
        for text in texts:
            stripped = text.strip()
            match = _FIRST_SENTENCE_RE.match(stripped)
            sentence = (match.group(0) if match else stripped).strip()[: self.max_chars]
            if sentence:
                firsts.append(sentence)
        return " ".join(firsts)


class LLMRaptorSummarizer:
    """One chat call per cluster through the :class:`LLMProvider` seam.

    The system prompt forbids numbers (a summary must not become a source of figures);
    the user message is the texts separated by blank lines. A :class:`ProviderError` or a
    blank reply falls back to ``fallback`` (default: extractive) and is logged.
    """

    def __init__(
        self, provider: LLMProvider, *, fallback: RaptorSummarizer | None = None
    ) -> None:
        self.provider = provider
        self.fallback = fallback if fallback is not None else ExtractiveRaptorSummarizer()

    def summarize(self, texts: list[str]) -> str:
        messages = [
            {"role": "system", "content": SUMMARY_SYSTEM_PROMPT},
            {"role": "user", "content": "\n\n".join(texts)},
        ]
        try:
            reply = completion_text(self.provider.chat(messages)).strip()
        except ProviderError as exc:
            logger.warning("raptor summariser provider failed (%s); using the fallback", exc)
            return self.fallback.summarize(texts)
        if not reply:
            logger.warning("raptor summariser got a blank reply; using the fallback")
            return self.fallback.summarize(texts)
        return reply


def _rank(sensitivity: str) -> int:
    """Position in the vocabulary (a label outside it ranks as RESTRICTED: fails closed)."""
    return SENSITIVITY_LABELS.index(effective_sensitivity(sensitivity))


def _leaf(chunk: Any, embedding: tuple[float, ...]) -> RaptorNode:
    return RaptorNode(
        node_id=f"L0#{chunk.chunk_id}",
        level=0,
        text=chunk.text,
        is_synthesis=False,
        doc_id=chunk.doc_id,
        source_locator=chunk.source_locator,
        member_ids=(chunk.chunk_id,),
        source_doc_ids=(chunk.doc_id,),
        source_locators=(chunk.source_locator,),
        sensitivity=chunk.sensitivity,
        embedding=embedding,
    )


def _summary(
    node_id: str, level: int, members: list[RaptorNode], text: str, embedding: tuple[float, ...]
) -> RaptorNode:
    return RaptorNode(
        node_id=node_id,
        level=level,
        text=text,
        is_synthesis=True,
        doc_id="",
        source_locator="",
        member_ids=tuple(m.node_id for m in members),
        source_doc_ids=tuple(sorted({d for m in members for d in m.source_doc_ids})),
        source_locators=tuple(sorted({loc for m in members for loc in m.source_locators})),
        sensitivity=max((m.sensitivity for m in members), key=_rank),
        embedding=embedding,
    )


def _check_build_args(threshold: Any, max_levels: Any, min_cluster_size: Any) -> None:
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not (
        -1 <= threshold <= 1
    ):
        raise ValueError(f"threshold must be a cosine in [-1, 1], got {threshold!r}")
    for name, value, low in (
        ("max_levels", max_levels, 0),
        ("min_cluster_size", min_cluster_size, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")


def build_raptor_tree(
    chunks: Sequence[Any],
    *,
    embedder: EmbeddingBackend | None,
    summarizer: RaptorSummarizer | None = None,
    threshold: float = DEFAULT_SIMILARITY_THRESHOLD,
    max_levels: int = DEFAULT_MAX_LEVELS,
    min_cluster_size: int = DEFAULT_MIN_CLUSTER_SIZE,
) -> RaptorTree:
    """The RAPTOR tree of ``chunks`` (RESTRICTED ones dropped first).

    Without an ``embedder`` the tree is the leaves alone. Summaries are written by
    ``summarizer`` (default :class:`ExtractiveRaptorSummarizer`) and embedded with
    ``embedder``; summary ``i`` of level ``L`` is ``L{L}#c{i}``.
    """
    _check_build_args(threshold, max_levels, min_cluster_size)
    visible = [c for c in chunks if not is_restricted(c.sensitivity)]
    if not visible:
        return RaptorTree()
    if embedder is None:
        return RaptorTree(tuple(_leaf(c, ()) for c in visible))
    vectors = _embed(embedder, [c.text for c in visible])
    leaves = [_leaf(c, v) for c, v in zip(visible, vectors, strict=True)]
    summarizer = summarizer if summarizer is not None else ExtractiveRaptorSummarizer()
    nodes = list(leaves)
    current = leaves
    for level in range(1, max_levels + 1):
        if len(current) <= 1:
            break
        by_id = {n.node_id: n for n in current}
        clusters = cluster_by_similarity(
            [n.node_id for n in current], [n.embedding for n in current], threshold=threshold
        )
        big = [c for c in clusters if len(c) >= min_cluster_size]
        carried = [by_id[i] for c in clusters if len(c) < min_cluster_size for i in c]
        if not big or len(big) + len(carried) >= len(current):
            break
        members = [[by_id[i] for i in c] for c in big]
        texts = [summarizer.summarize([m.text for m in group]) for group in members]
        vectors = _embed(embedder, texts)
        new = [
            _summary(f"L{level}#c{i}", level, group, text, vec)
            for i, (group, text, vec) in enumerate(zip(members, texts, vectors, strict=True))
        ]
        nodes.extend(new)
        current = sorted(new + carried, key=lambda n: n.node_id)
    return RaptorTree(tuple(nodes))


def _to_snippet(hit: RaptorHit) -> dict[str, object]:
    node = hit.node
    return {
        "text": node.text,
        "is_synthesis": True,
        "doc_id": ",".join(node.source_doc_ids),
        "source_locator": ",".join(node.source_locators),
        "sensitivity": node.sensitivity,
        "raptor_level": node.level,
        "scores": {"raptor": hit.score},
    }


class RaptorRetriever:
    """Base snippets first, untouched; then up to ``summary_top_k`` summary snippets.

    A summary snippet has ``is_synthesis: True``, ``raptor_level``, ``scores.raptor`` and
    the comma-joined documents and locators of its members, and no ``chunk_id``: it is
    context for the prompt, never a citation.
    """

    def __init__(
        self,
        base: Any,
        tree: RaptorTree,
        *,
        embedder: EmbeddingBackend,
        summary_top_k: int = DEFAULT_SUMMARY_TOP_K,
    ) -> None:
        if isinstance(summary_top_k, bool) or not isinstance(summary_top_k, int) or (
            summary_top_k < 0
        ):
            raise ValueError(f"summary_top_k must be an int >= 0, got {summary_top_k!r}")
        self.base = base
        self.tree = tree
        self.embedder = embedder
        self.summary_top_k = summary_top_k

    def retrieve(
        self, query: str, *, filters: dict[str, str] | None = None, top_k: int = 50
    ) -> list[dict[str, object]]:
        snippets = list(self.base.retrieve(query, filters=filters, top_k=top_k))
        if self.summary_top_k == 0 or not self.tree.summaries:
            return snippets
        hits = self.tree.retrieve(
            query, self.embedder, top_k=self.summary_top_k, granularity="summaries"
        )
        return snippets + [_to_snippet(h) for h in hits if not is_restricted(h.node.sensitivity)]


SUMMARIZERS = Registry("raptor_summarizers", env=RAPTOR_SUMMARIZER_ENV, spaces=False,
                       label="raptor summarizer")
SUMMARIZERS.register("extractive", lambda provider, **kw: ExtractiveRaptorSummarizer(**kw),
                     "deterministic")
SUMMARIZERS.register("llm", LLMRaptorSummarizer, "on")


def make_raptor_summarizer(
    spec: str | None = None, *, provider: LLMProvider | None = None, **kwargs: Any
) -> RaptorSummarizer | None:
    """``none`` → ``None``; ``extractive``/``deterministic`` → extractive; ``llm``/``on`` →
    :class:`LLMRaptorSummarizer` over ``provider`` (``None`` without one). ``spec=None``
    reads ``$RAGSPINE_RAPTOR_SUMMARIZER``."""
    key = SUMMARIZERS.resolve(spec)
    if key is None or (key in ("llm", "on") and provider is None):
        return None
    summarizer: RaptorSummarizer = SUMMARIZERS.make(key, provider=provider, **kwargs)
    return summarizer


RETRIEVERS = Registry("raptor_retrievers", env=RAPTOR_ENV, spaces=False, label="raptor")
RETRIEVERS.register("raptor", RaptorRetriever, "on")


def make_raptor_retriever(
    base: Any,
    spec: str | None = None,
    *,
    tree: RaptorTree | None = None,
    embedder: EmbeddingBackend | None = None,
    **kwargs: Any,
) -> Any:
    """``none`` → ``base``; ``raptor``/``on`` → :class:`RaptorRetriever` when both ``tree``
    and ``embedder`` are given, else ``base``. ``spec=None`` reads ``$RAGSPINE_RAPTOR``."""
    key = RETRIEVERS.resolve(spec)
    if key is None or tree is None or embedder is None:
        return base
    return RETRIEVERS.make(key, base=base, tree=tree, embedder=embedder, **kwargs)
