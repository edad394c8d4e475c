"""The agent link: a :class:`NarrativeIndex` behind the agent's ``NarrativeRetriever`` contract.

This is RESTRICTED exit #2: RESTRICTED chunks are dropped before any snippet dict is
built, so nothing downstream (postprocessors, prompts, the agent) ever sees them. By default
they are not even ranked (:class:`OpenOnlyIndex`): scores, top-k slots and the decision
to retry without filters are what a store without them would give.

>>> import pathlib, tempfile
>>> from ragspine_lite.chunking.chunking import DocumentMeta
>>> with tempfile.TemporaryDirectory() as d:
...     retriever, store = build_narrative_retriever(pathlib.Path(d) / "chunks.db")
...     _ = retriever.index.ingest("Revenue grew in Hong Kong.", DocumentMeta(doc_id="d1"))
...     hits = retriever.retrieve("revenue")
...     store.close()
>>> [(h["chunk_id"], h["source_locator"]) for h in hits]
[('d1#c0', 'd1#para1')]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.common.glossary import Glossary
from ragspine_lite.common.llm import LLMProvider, completion_text
from ragspine_lite.common.sensitivity import RESTRICTED, is_restricted
from ragspine_lite.filtering.automatic import extract_filter
from ragspine_lite.filtering.metadata_filter import MetadataFilter
from ragspine_lite.pipeline.retrievers import (
    EmbeddingBackend,
    GlossaryQueryRewriter,
    NarrativeIndex,
    RetrievableIndex,
    RetrievalResult,
)
from ragspine_lite.postprocess import NodePostprocessor
from ragspine_lite.rerank.listwise_rerank import (
    ListwiseJudge,
    build_listwise_prompt,
    parse_listwise_response,
)
from ragspine_lite.vector.persistence_policy import PersistencePolicy
from ragspine_lite.vector.store import VectorStore

__all__ = [
    "JUDGE_SYSTEM_PROMPT",
    "NarrativeIndexRetriever",
    "NarrativeRetriever",
    "OpenOnlyIndex",
    "ProviderListwiseJudge",
    "VisibleFilter",
    "build_narrative_retriever",
]

JUDGE_SYSTEM_PROMPT = "你是检索精排员，严格按用户指令输出，不输出任何额外内容。"

# Agent filter keys that map onto index equality filters; anything else is ignored.
_FILTER_KEYS = ("topic", "entity", "geography", "period", "language")


@runtime_checkable
class NarrativeRetriever(Protocol):
    """The agent contract: a query (+ optional filters) → snippet dicts."""

    def retrieve(
        self, query: str, *, filters: dict[str, str] | None = None, top_k: int = 50
    ) -> list[dict[str, object]]: ...


class ProviderListwiseJudge:
    """A :class:`ListwiseJudge` that asks an LLM provider for a listwise ranking.

    One chat call with the fixed system prompt and the listwise prompt, no tools; the
    reply (``content or ""``) is parsed into a permutation. Provider exceptions
    propagate (``listwise_rerank`` then keeps the RRF order).
    """

    def __init__(self, provider: LLMProvider) -> None:
        self.provider = provider

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": JUDGE_SYSTEM_PROMPT},
            {"role": "user", "content": build_listwise_prompt(query, candidates)},
        ]
        response = self.provider.chat(messages)
        return parse_listwise_response(completion_text(response), len(candidates))


def _to_snippet(result: RetrievalResult) -> dict[str, object]:
    """The agent-facing dict with full lineage; ``prompt_text``/``parent_locator`` only if set."""
    chunk = result.chunk
    snippet: dict[str, object] = {
        "text": chunk.text,
        "doc_id": chunk.doc_id,
        "title": chunk.title,
        "source_locator": chunk.source_locator,
        "chunk_id": chunk.chunk_id,
        "topic": chunk.topic,
        "entity": chunk.entity,
        "geography": chunk.geography,
        "period": chunk.period,
        "language": chunk.language,
        "sensitivity": chunk.sensitivity,
        "scores": {
            "bm25": result.bm25_score,
            "vector": result.vector_score,
            "fused": result.fused_score,
        },
    }
    window_text = getattr(chunk, "window_text", "")
    if window_text:
        snippet["prompt_text"] = window_text
    parent_locator = getattr(chunk, "parent_locator", "")
    if parent_locator:
        snippet["parent_locator"] = parent_locator
    return snippet


@dataclass(frozen=True)
class VisibleFilter:
    """A metadata filter passing what ``inner`` passes (everything when ``None``) minus the
    chunks labelled RESTRICTED (:func:`is_restricted`; no label at all counts as RESTRICTED)."""

    inner: MetadataFilter | None = None

    def matches(self, obj: Any) -> bool:
        if isinstance(obj, Mapping):
            label = obj.get("sensitivity", RESTRICTED)
        else:
            label = getattr(obj, "sensitivity", RESTRICTED)
        return not is_restricted(label) and (self.inner is None or self.inner.matches(obj))

    def apply(self, objs: Iterable[Any]) -> list[Any]:
        """The visible matching objects themselves, in input order."""
        return [obj for obj in objs if self.matches(obj)]


class OpenOnlyIndex:
    """A :class:`RetrievableIndex` for an exit (the CLI, the endpoint, the agent link) that
    ranks as if RESTRICTED chunks were absent.

    Every search gets a :class:`VisibleFilter` over ``metadata_filter`` (fixed here), else
    the caller's, else what ``index.filter_extractor`` makes of the query (what the index
    would apply itself): BM25 statistics, dense candidates and top-k slots then come from the
    visible chunks only, so nothing about a RESTRICTED chunk leaves, not even its number.
    """

    def __init__(self, index: RetrievableIndex, metadata_filter: MetadataFilter | None = None):
        self.index = index
        self.metadata_filter = metadata_filter

    def retrieve(self, query: str, **kwargs: Any) -> list[RetrievalResult]:
        chosen = self.metadata_filter or kwargs.get("metadata_filter")
        if chosen is None:
            chosen = extract_filter(getattr(self.index, "filter_extractor", None), query)
        kwargs["metadata_filter"] = VisibleFilter(chosen)
        return self.index.retrieve(query, **kwargs)


def _visible(results: list[RetrievalResult]) -> list[RetrievalResult]:
    return [r for r in results if not is_restricted(r.chunk.sensitivity)]


class NarrativeIndexRetriever:
    """Adapts a :class:`RetrievableIndex` to the agent's ``NarrativeRetriever`` contract.

    Only truthy ``topic/entity/geography/period/language`` filters are passed on. The index
    is searched through :class:`OpenOnlyIndex` (unless it is one already): it ranks as if
    RESTRICTED chunks were absent. ``visible_only=False`` ranks every chunk — only for an
    index known to hold none (a built site's bundle: its export leaves them out and checks
    it), as a RESTRICTED chunk then takes scores and slots. Either way RESTRICTED results are
    dropped before snippets are built, before the optional ``postprocessor`` runs and before
    an empty filtered result is retried once without filters (unless
    ``retry_without_filters`` is off), so the retry says nothing about hidden chunks.
    """

    def __init__(
        self,
        index: RetrievableIndex,
        *,
        retry_without_filters: bool = True,
        postprocessor: NodePostprocessor | None = None,
        visible_only: bool = True,
    ) -> None:
        self.index = index
        self.retry_without_filters = retry_without_filters
        self.postprocessor = postprocessor
        wrap = visible_only and not isinstance(index, OpenOnlyIndex)
        self._ranked: RetrievableIndex = OpenOnlyIndex(index) if wrap else index

    def retrieve(
        self, query: str, *, filters: dict[str, str] | None = None, top_k: int = 50
    ) -> list[dict[str, object]]:
        kept: dict[str, Any] = {k: filters[k] for k in _FILTER_KEYS if filters and filters.get(k)}
        visible = _visible(self._ranked.retrieve(query, top_k=top_k, **kept))
        if not visible and kept and self.retry_without_filters:
            visible = _visible(self._ranked.retrieve(query, top_k=top_k))
        snippets = [_to_snippet(r) for r in visible]
        if self.postprocessor is not None:
            snippets = self.postprocessor.postprocess(query, snippets)
        return snippets


def build_narrative_retriever(
    chunk_db: str | Path,
    provider: LLMProvider | None = None,
    *,
    embedding_backend: EmbeddingBackend | None = None,
    vector_store: VectorStore | None = None,
    persistence_policy: PersistencePolicy | None = None,
    reranker: ListwiseJudge | None = None,
    postprocessor: NodePostprocessor | None = None,
    index_text_fn: Callable[[Any], str] | None = None,
    filter_extractor: Any | None = None,
    glossary: Glossary | None = None,
    read_only: bool = False,
) -> tuple[NarrativeIndexRetriever, ChunkStore]:
    """Open (and initialise) the chunk store and wire the agent-facing retriever.

    ``read_only`` opens an existing store that nothing may write to (a read-only file is
    fine): no schema set-up, and a missing BM25 index is scored in memory instead of built.

    The judge is ``reranker`` if given, else a :class:`ProviderListwiseJudge` over
    ``provider``, else none. The glossary rewriter is always on. ``index_text_fn`` (e.g.
    ``make_index_text_fn("contextual")``) changes what is indexed and embedded, never the
    cited text. ``filter_extractor`` (e.g. ``make_filter_extractor("keyword")``) turns glossary
    terms of a query into metadata filters when no explicit filter is given; ``glossary`` (a
    company profile, ``load_glossary(path)``) replaces the built-in one for the rewriter.
    The caller closes the returned store.
    """
    store = ChunkStore(chunk_db, read_only=read_only)
    if not read_only:
        store.init_schema()
    judge: ListwiseJudge | None
    if reranker is not None:
        judge = reranker
    elif provider is not None:
        judge = ProviderListwiseJudge(provider)
    else:
        judge = None
    index = NarrativeIndex(
        store,
        embedding_backend=embedding_backend,
        query_rewriter=GlossaryQueryRewriter(glossary=glossary),
        judge=judge,
        vector_store=vector_store,
        persistence_policy=persistence_policy,
        index_text_fn=index_text_fn,
        filter_extractor=filter_extractor,
    )
    return NarrativeIndexRetriever(index, postprocessor=postprocessor), store
