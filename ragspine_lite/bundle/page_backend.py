"""The bundle's embedding model as the page documents of a
:class:`~ragspine_lite.bundle.runtime.BundleSearcher` see it (:class:`PageBackend`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragspine_lite.pipeline.stages import embed_queries

__all__ = ["PageBackend"]


class PageBackend:
    """The bundle's model as page documents see it: chunk vectors a document was stored with
    are reused (a reload does not re-embed); everything else is the model's."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.known: dict[str, list[float]] = {}

    def __getattr__(self, name: str) -> Any:  # calibration, coverage, plan, model_id, …
        return getattr(self.backend, name)

    def remember(self, vectors: Any) -> None:
        """Take ``{"model_id", "items": [[text, vector], …]}`` from :meth:`page_vectors`;
        vectors of another model (or malformed ones) are ignored: the text is re-embedded."""
        from ragspine_lite.vector.sqlite_store import embedding_model_id

        if not isinstance(vectors, Mapping) or vectors.get("model_id") != embedding_model_id(
            self.backend
        ):
            return
        dim = getattr(self.backend, "dim", None)
        for item in vectors.get("items") or ():
            if isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str):
                vector = [float(x) for x in item[1]]
                if dim is None or len(vector) == dim:
                    self.known[item[0]] = vector

    def forget(self, keep: set[str]) -> None:
        """Drop the vectors of texts no longer indexed."""
        self.known = {t: v for t, v in self.known.items() if t in keep}

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.known]
        if missing:
            vectors = self.backend.embed_texts(missing)
            self.known.update(zip(missing, (list(v) for v in vectors), strict=True))
        return [self.known[t] for t in texts]

    def embed_queries(self, texts: list[str]) -> list[Any]:
        return embed_queries(self.backend, texts)

    def missing(self, texts: Sequence[str]) -> list[str]:
        """The texts without a vector yet."""
        return [t for t in dict.fromkeys(texts) if t not in self.known]
