"""Cross-encoder reranking in process: :class:`CrossEncoderReranker` and ``make_reranker``.

A cross-encoder reads query and candidate together (``[CLS] query [SEP] doc [SEP]``) and
gives one relevance logit per pair — the strongest and slowest of the local rerankers.
No trained cross-encoder ships in any offline package, so the model is a directory holding a
BERT-family ONNX export (``model.onnx`` + ``vocab.txt`` or ``tokenizer.json``, optionally
``cross_encoder_config.json``), e.g. ``cross-encoder/ms-marco-MiniLM-L-6-v2`` or
``Xenova/ms-marco-MiniLM-L-6-v2`` exported with ``optimum-cli export onnx``. The scoring
code is the remote endpoint's own (:class:`~ragspine_lite.rerank.models.CrossEncoderModel`).

    from ragspine_lite.rerank.cross_encoder import make_reranker
    judge = make_reranker("cross_encoder", model_name="models/ms-marco-MiniLM-L-6-v2")
"""

from __future__ import annotations

from ragspine_lite.rerank.factory import RERANKER_ENV, make_reranker
from ragspine_lite.rerank.models import CrossEncoderModel, ModelReranker

__all__ = [
    "CROSS_ENCODER_MODEL_ENV",
    "DEFAULT_CROSS_ENCODER_MODEL",
    "DEFAULT_RERANK_BATCH_SIZE",
    "RERANKER_ENV",
    "CrossEncoderReranker",
    "make_reranker",
]

CROSS_ENCODER_MODEL_ENV = "RAGSPINE_CROSS_ENCODER_MODEL"
DEFAULT_CROSS_ENCODER_MODEL = "Xenova/ms-marco-MiniLM-L-6-v2"
DEFAULT_RERANK_BATCH_SIZE = 64


class CrossEncoderReranker(ModelReranker):
    """``ListwiseJudge`` over a cross-encoder ONNX directory (``model_name``, default
    :data:`DEFAULT_CROSS_ENCODER_MODEL`, or ``cache_dir/model_name``); arguments
    ``(model_name, *, cache_dir, batch_size=64, threads)`` as
    :class:`~ragspine_lite.rerank.models.ModelReranker`."""

    family = "cross_encoder"
    model_class = CrossEncoderModel
    default_model = DEFAULT_CROSS_ENCODER_MODEL
    default_batch_size = DEFAULT_RERANK_BATCH_SIZE
