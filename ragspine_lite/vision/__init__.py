"""Visual page retrieval (ColPali-style multi-vector MaxSim) with RESTRICTED page exclusion."""

from __future__ import annotations

from ragspine_lite.vision.colpali import (
    COLPALI_MODEL_ENV,
    DEFAULT_COLPALI_BATCH_SIZE,
    DEFAULT_COLPALI_MODEL,
    RENDER_DPI,
    VISUAL_EMBEDDER_ENV,
    ColPaliVisualEmbedder,
    ColPaliVisualRetriever,
    VisualEmbedder,
    VisualPage,
    make_visual_embedder,
    render_pdf_pages,
)

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
