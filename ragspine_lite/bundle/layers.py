"""The opt-in layers a :class:`~ragspine_lite.bundle.runtime.BundleSearcher` applies around
its search: a reranker after fusion (:class:`RerankSetting`) and the LLM query layers
(:class:`QueryLayerSetting`), each configured from the page's specs and described back."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ragspine_lite.rerank.listwise_rerank import listwise_rerank

__all__ = ["QueryLayerSetting", "RerankSetting", "layer_report", "with_models"]


@dataclass(frozen=True)
class _SnippetChunk:
    text: str
    sensitivity: str


@dataclass(frozen=True)
class _SnippetItem:
    """A fused snippet seen the way ``listwise_rerank`` reads results (``.chunk``)."""

    snippet: dict[str, Any]
    chunk: _SnippetChunk


@dataclass(frozen=True)
class RerankSetting:
    """The reranker a :class:`BundleSearcher` applies after fusion (``judge`` ``None``: off)."""

    spec: str = "none"
    judge: Any = None
    url: str | None = None

    @classmethod
    def from_spec(
        cls,
        spec: str | None,
        *,
        url: str | None = None,
        token: str | None = None,
        timeout: float | None = None,
    ) -> RerankSetting:
        """The setting of ``spec`` (:func:`~ragspine_lite.rerank.factory.make_reranker`)."""
        from ragspine_lite.rerank.factory import make_reranker

        name = "none" if spec is None else str(spec).strip()
        kwargs: dict[str, Any] = {}
        if url:
            kwargs["url"] = url
        if token:
            kwargs["token"] = token
        if timeout is not None:
            kwargs["timeout"] = timeout
        judge = make_reranker(name, **kwargs)
        return cls(name if judge is not None else "none", judge, url or None)

    def describe(self) -> dict[str, Any]:
        return {"spec": self.spec, "url": self.url, "enabled": self.judge is not None}

    def rerank(self, query: str, snippets: list[dict[str, Any]]) -> tuple[list, dict]:
        """The snippets in the judge's order, and a report (the fused order on failure)."""
        judge = self.judge
        client = getattr(judge, "client", None)
        failures = getattr(client, "failures", 0)
        started = time.perf_counter()
        items = [
            _SnippetItem(s, _SnippetChunk(str(s["text"]), str(s.get("sensitivity", ""))))
            for s in snippets
        ]
        ranked = listwise_rerank(query, items, judge, top_n=len(items))
        report: dict[str, Any] = {"spec": self.spec, "applied": True, "error": None}
        if client is not None and client.failures != failures:
            report["applied"] = False
            report["error"] = str(client.last_error)
        report["ms"] = round((time.perf_counter() - started) * 1000, 3)
        return [item.snippet for item in ranked], report


@dataclass(frozen=True)
class QueryLayerSetting:
    """The LLM query layers a :class:`BundleSearcher` applies (``provider`` ``None``: off)."""

    transform: str = "none"
    decompose: str = "none"
    adaptive: str = "none"
    provider: Any = None
    url: str | None = None

    @classmethod
    def from_specs(
        cls,
        url: str | None = None,
        *,
        token: str | None = None,
        timeout: float | None = None,
        transform: str = "none",
        decompose: str = "none",
        adaptive: str = "none",
        provider: Any = None,
    ) -> QueryLayerSetting:
        """The layers of these specs over ``provider`` (else the endpoint at ``url``'s
        ``/v1/chat``), validated before anything changes."""
        if provider is None and url:
            from ragspine_lite.remote.client import RemoteChatProvider

            provider = RemoteChatProvider(url, token=token or None, timeout=timeout or 60.0)
        specs = {"transform": transform or "none", "decompose": decompose or "none",
                 "adaptive": adaptive or "none"}
        setting = cls(**specs, provider=provider, url=url or None)
        setting.wrap(None)  # building the layers validates the specs
        return setting

    def describe(self) -> dict[str, Any]:
        return {"transform": self.transform, "decompose": self.decompose,
                "adaptive": self.adaptive, "url": self.url, "enabled": self.provider is not None}

    def wrap(self, retriever: Any) -> Any:
        from ragspine_lite.query import apply_query_layers

        return apply_query_layers(
            retriever, transform=self.transform, decompose=self.decompose,
            adaptive=self.adaptive, provider=self.provider,
        )


def layer_report(top: Any, base: Any) -> dict[str, Any]:
    """``{"applied": [names], "outcomes": [{transform, status, generated, refused, error}]}``."""
    outcomes: list[dict[str, Any]] = []
    layer = top
    while layer is not base:
        outcome = getattr(layer, "last_outcome", None)
        if outcome is not None:
            outcomes.insert(0, {"transform": outcome.transform, "status": outcome.status,
                                "generated": list(outcome.generated), "refused": outcome.refused,
                                "error": outcome.error or None})
        layer = layer.base
    return {"applied": [o["transform"] for o in outcomes if o["status"] == "applied"],
            "outcomes": outcomes}


def with_models(info: dict[str, Any], client: Any, check: bool) -> dict[str, Any]:
    """``info`` plus the endpoint's ``/v1/models`` (or why asking failed) when ``check``."""
    if check and client is not None:
        from ragspine_lite.remote.errors import RemoteError

        try:
            info["models"] = client.models()
        except RemoteError as exc:
            info["error"] = str(exc)
    return info
