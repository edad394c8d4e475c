"""Visual page retrieval, ColPali style: multi-vector page embeddings scored by MaxSim.

Pure Python except the model loader: :class:`VisualEmbedder` is the seam (a local ColPali
via fastembed behind the ``[vision]`` extra, or ``RemoteVisualEmbedder`` on the endpoint);
:class:`ColPaliVisualRetriever` drops RESTRICTED pages when they are added — so they are
never embedded, never sent anywhere, never returned — and ranks the rest by ``maxsim``.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.common.registry import lazy_extra_import, normalize_spec
from ragspine_lite.common.sensitivity import is_restricted
from ragspine_lite.common.settings import env_value
from ragspine_lite.rerank.colbert import maxsim

__all__ = [
    "COLPALI_MODEL_ENV",
    "DEFAULT_COLPALI_BATCH_SIZE",
    "DEFAULT_COLPALI_MODEL",
    "RENDER_DPI",
    "VISUAL_EMBEDDER_ENV",
    "ColPaliVisualEmbedder",
    "ColPaliVisualRetriever",
    "VisualEmbedder",
    "VisualPage",
    "make_visual_embedder",
    "render_pdf_pages",
]

DEFAULT_COLPALI_MODEL = "Qdrant/colpali-v1.3-fp16"
COLPALI_MODEL_ENV = "RAGSPINE_COLPALI_MODEL"
VISUAL_EMBEDDER_ENV = "RAGSPINE_VISUAL_EMBEDDER"
DEFAULT_COLPALI_BATCH_SIZE = 8
RENDER_DPI = 200
VISION_EXTRA = "vision"
_LOCAL_NAMES = ("colpali", "colqwen2", "visual")


@dataclass(frozen=True)
class VisualPage:
    """One page image with its lineage; ``locator`` = ``source_locator`` or ``doc#pageN``."""

    doc_id: str
    page_no: int
    image: bytes
    sensitivity: str = "INTERNAL"
    title: str | None = None
    source_locator: str | None = None

    @property
    def locator(self) -> str:
        return self.source_locator or f"{self.doc_id}#page{self.page_no}"


@runtime_checkable
class VisualEmbedder(Protocol):
    """Query → one vector per query token; images → patch vectors per image."""

    def embed_query(self, query: str) -> list[list[float]]: ...

    def embed_images(self, images: list[bytes]) -> list[list[list[float]]]: ...


Scorer = Callable[[Any, Any], float]


class ColPaliVisualRetriever:
    """MaxSim search over page embeddings; RESTRICTED pages are dropped when added.

    ``scorer(query_vectors, page_vectors)`` defaults to the pure ``maxsim`` (the endpoint
    passes a numpy one). Results are stable: score descending, ties in insertion order.
    """

    def __init__(
        self,
        embedder: VisualEmbedder,
        pages: Iterable[VisualPage] | None = None,
        *,
        scorer: Scorer | None = None,
    ) -> None:
        self.embedder = embedder
        self.scorer: Scorer = scorer or maxsim
        self.pages: list[VisualPage] = []
        self._vectors: list[Any] = []
        self.dropped = 0
        if pages is not None:
            self.add_pages(pages)

    def add_pages(self, pages: Iterable[VisualPage]) -> int:
        """Embed and keep the non-RESTRICTED pages → how many were added."""
        kept = []
        for page in pages:
            if is_restricted(page.sensitivity):
                self.dropped += 1
                continue
            kept.append(page)
        if not kept:
            return 0
        vectors = list(self.embedder.embed_images([p.image for p in kept]))
        if len(vectors) != len(kept):
            raise ValueError(
                f"visual embedder returned {len(vectors)} embeddings for {len(kept)} pages"
            )
        self.pages.extend(kept)
        self._vectors.extend(vectors)
        return len(kept)

    def __len__(self) -> int:
        return len(self.pages)

    def search(self, query: str, *, top_k: int = 10) -> list[tuple[VisualPage, float]]:
        """``(page, score)`` pairs, best first (at most ``top_k``)."""
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
            raise ValueError(f"top_k must be an int >= 0, got {top_k!r}")
        if not self.pages or top_k == 0:
            return []
        q = self.embedder.embed_query(query)
        scored = [(self.scorer(q, v), i) for i, v in enumerate(self._vectors)]
        scored.sort(key=lambda si: (-si[0], si[1]))
        return [(self.pages[i], float(s)) for s, i in scored[:top_k]]

    def retrieve(self, query: str, *, top_k: int = 10) -> list[dict[str, object]]:
        """Snippet dicts: ``text=""``, ``is_visual=True``, ``page_no``, ``scores.visual_maxsim``."""
        return [
            {
                "text": "",
                "doc_id": page.doc_id,
                "title": page.title or "",
                "source_locator": page.locator,
                "chunk_id": page.locator,
                "sensitivity": page.sensitivity,
                "is_visual": True,
                "page_no": page.page_no,
                "scores": {"visual_maxsim": score},
            }
            for page, score in self.search(query, top_k=top_k)
        ]


class ColPaliVisualEmbedder:
    """A real ColPali checkpoint through fastembed (``[vision]`` extra), loaded on first use.

    ``model_name`` is a fastembed late-interaction multimodal model id (default
    ``Qdrant/colpali-v1.3-fp16``); fastembed finds it in ``cache_dir``. Untested offline:
    no ColPali weights ship in any registry package.
    """

    def __init__(
        self,
        model_name: str = DEFAULT_COLPALI_MODEL,
        *,
        cache_dir: str | None = None,
        batch_size: int = DEFAULT_COLPALI_BATCH_SIZE,
        threads: int | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        self.model_name = model_name
        self.model_id = model_name
        self.description = f"ColPali {model_name} (fastembed)"
        self.cache_dir = cache_dir
        self.batch_size = batch_size
        self.threads = threads
        self._model: Any = None

    def _ensure(self) -> Any:
        if self._model is None:
            fastembed = lazy_extra_import("fastembed", extra=VISION_EXTRA)
            self._model = fastembed.LateInteractionMultimodalEmbedding(
                self.model_name, cache_dir=self.cache_dir, threads=self.threads
            )
        return self._model

    def embed_query(self, query: str) -> list[list[float]]:
        (vectors,) = list(self._ensure().embed_text([query]))
        return [list(map(float, v)) for v in vectors]

    def embed_images(self, images: list[bytes]) -> list[list[list[float]]]:
        if not images:
            return []
        pil = lazy_extra_import("PIL.Image", extra=VISION_EXTRA)
        opened = [pil.open(io.BytesIO(img)) for img in images]
        out = self._ensure().embed_image(opened, batch_size=self.batch_size)
        return [[list(map(float, v)) for v in page] for page in out]


def render_pdf_pages(path: str | os.PathLike[str], *, dpi: int = RENDER_DPI) -> list[bytes]:
    """PNG bytes per page of a PDF (``pypdfium2``, ``[vision]`` extra); never raises → ``[]``."""
    try:
        pdfium = lazy_extra_import("pypdfium2", extra=VISION_EXTRA)
        pdf = pdfium.PdfDocument(str(path))
        out = []
        for page in pdf:
            image = page.render(scale=dpi / 72).to_pil()
            buf = io.BytesIO()
            image.save(buf, format="PNG")
            out.append(buf.getvalue())
        return out
    except Exception:
        return []


def make_visual_embedder(spec: str | None = None, **kwargs: Any) -> VisualEmbedder | None:
    """``none`` → ``None``; ``colpali``/``colqwen2``/``visual`` → :class:`ColPaliVisualEmbedder`
    (``RAGSPINE_COLPALI_MODEL`` fills ``model_name`` when the spec comes from the env);
    ``remote`` → ``RemoteVisualEmbedder`` (``url=`` required). ``spec=None`` reads
    ``RAGSPINE_VISUAL_EMBEDDER`` (default ``none``)."""
    from_env = spec is None
    if spec is None:
        spec = env_value(VISUAL_EMBEDDER_ENV, "none")
    key = normalize_spec(spec)
    if key == "none" or not key:
        return None
    if key in _LOCAL_NAMES:
        if from_env and env_value(COLPALI_MODEL_ENV) and "model_name" not in kwargs:
            kwargs["model_name"] = env_value(COLPALI_MODEL_ENV)
        return ColPaliVisualEmbedder(**kwargs)
    if key == "remote":
        if from_env:
            for name, env in (("url", "RAGSPINE_REMOTE_URL"), ("token", "RAGSPINE_REMOTE_TOKEN")):
                if env_value(env) and name not in kwargs:
                    kwargs[name] = env_value(env)
        url = kwargs.pop("url", None)
        if not url:
            raise ValueError("the remote visual embedder needs url='http://host:port'")
        from ragspine_lite.remote.client import RemoteVisualEmbedder

        return RemoteVisualEmbedder(url, **kwargs)
    valid = sorted({"none", "remote", *_LOCAL_NAMES})
    raise ValueError(f"unknown visual embedder {spec!r}; valid names: {', '.join(valid)}")

