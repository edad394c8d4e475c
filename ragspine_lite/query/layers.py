"""The LLM query layers built once and run over a retriever chosen per search.

A command line validates the layers' specs before it opens any database, then searches one
or several databases, each through its own link exit: :class:`QueryLayers` is the layers'
base, bound to that link for each search.
"""

from __future__ import annotations

from typing import Any

from ragspine_lite.common.glossary import DEFAULT_GLOSSARY, Glossary
from ragspine_lite.common.llm import LLMProvider
from ragspine_lite.query import apply_query_layers

__all__ = ["QueryLayers"]


class QueryLayers:
    """:func:`~ragspine_lite.query.apply_query_layers` over a base bound at search time.

    Bad specs raise ``ValueError`` when built. :meth:`label` names the layers the last search
    actually applied; a degraded layer (no answer, garbage) is not named, so its output is
    exactly the plain search's.
    """

    def __init__(
        self, *, transform: str, decompose: str, adaptive: str,
        provider: LLMProvider | None, glossary: Glossary = DEFAULT_GLOSSARY,
    ) -> None:
        self.link: Any = None
        self.top = apply_query_layers(
            self, transform=transform, decompose=decompose, adaptive=adaptive,
            provider=provider, glossary=glossary,
        )

    def retrieve(self, query: str, **kwargs: Any) -> list[dict[str, object]]:
        return self.link.retrieve(query, **kwargs)

    def search(self, link: Any, query: str, top_k: int) -> list[dict[str, object]]:
        """The layers over ``link`` (the search's link exit) for ``query``."""
        self.link = link
        return self.top.retrieve(query, top_k=top_k)

    def label(self) -> str:
        """``" + hyde"`` … for each layer the last search applied, innermost first."""
        names: list[str] = []
        layer: Any = self.top
        while layer is not self:
            outcome = getattr(layer, "last_outcome", None)
            if outcome is not None and outcome.status == "applied":
                names.insert(0, outcome.transform)
            layer = layer.base
        return "".join(f" + {name}" for name in names)
