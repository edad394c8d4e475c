"""Late interaction (ColBERT-style MaxSim): the pure scoring rule and :class:`ColbertReranker`.

:func:`maxsim` is pure Python (shared with the visual ColPali retriever). The reranker scores
with :class:`~ragspine_lite.rerank.models.LateInteractionModel`, the remote endpoint's own.
Offline default (``model_name=None``): late interaction over the packaged all-MiniLM-L6-v2
*token* embeddings — honestly **not a trained ColBERT** (MiniLM was trained for pooled
sentence vectors), though it still reorders BM25 lists usefully. A real ColBERT ONNX export
(output ``[batch, tokens, dim]``, e.g. ``colbert-ir/colbertv2.0``; see
``late_interaction_config.json`` for its ``[unused0]``/``[unused1]`` markers) loads from a
directory.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragspine_lite.common.vectors import plain_cosine
from ragspine_lite.rerank.models import LateInteractionModel, ModelReranker

__all__ = [
    "COLBERT_MODEL_ENV",
    "DEFAULT_COLBERT_BATCH_SIZE",
    "DEFAULT_COLBERT_MODEL",
    "ColbertReranker",
    "maxsim",
]

COLBERT_MODEL_ENV = "RAGSPINE_COLBERT_MODEL"
#: The original's checkpoint: plugs in as an ONNX export directory (never downloaded).
DEFAULT_COLBERT_MODEL = "colbert-ir/colbertv2.0"
DEFAULT_COLBERT_BATCH_SIZE = 32


def maxsim(
    query_vectors: Sequence[Sequence[float]], doc_vectors: Sequence[Sequence[float]]
) -> float:
    """Σ over query vectors of the best cosine to any doc vector; either side empty → 0.0.

    Plain ``sum`` (as the original's ColBERT cosines); zero vectors score 0.0.

    >>> maxsim([[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 1.0]])
    1.7071067811865475
    """
    if not query_vectors or not doc_vectors:
        return 0.0
    return sum(max(plain_cosine(q, d) for d in doc_vectors) for q in query_vectors)


class ColbertReranker(ModelReranker):
    """``ListwiseJudge`` by MaxSim over token vectors: ``model_name=None`` (or ``"minilm"``)
    → MiniLM token embeddings (``[rerank]`` extra; not a trained ColBERT); a directory → that
    late-interaction ONNX model. Arguments ``(model_name, *, cache_dir, batch_size=32,
    threads)`` as :class:`~ragspine_lite.rerank.models.ModelReranker`."""

    family = "colbert"
    model_class = LateInteractionModel
    default_batch_size = DEFAULT_COLBERT_BATCH_SIZE
    packaged_names = ("minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2")
