"""sentence-transformers models (torch): :class:`SentenceTransformerEmbeddingBackend`.

The ``[st]`` extra (``sentence-transformers``, which pulls torch). Checkpoints that plug in
by name or local directory: ``Qwen/Qwen3-Embedding-0.6B`` (the default; multilingual),
``BAAI/bge-m3``, ``intfloat/multilingual-e5-large``, ``sentence-transformers/all-MiniLM-L6-v2``.
sentence-transformers loads them from its cache or a directory; on a machine without network
only what is already there can load. A model that ships a ``"query"`` prompt (Qwen3, e5
configs) embeds queries with it through :meth:`~SentenceTransformerEmbeddingBackend.embed_queries`.
"""

from __future__ import annotations

from typing import Any

from ragspine_lite.common.registry import lazy_extra_import
from ragspine_lite.common.settings import env_value

__all__ = [
    "ST_EXTRA",
    "TORCH_DEVICES",
    "SentenceTransformerEmbeddingBackend",
    "select_torch_device",
]

ST_EXTRA = "st"
TORCH_DEVICES = ("cuda", "mps", "cpu")
_DEVICE_ENV = "RAGSPINE_EMBEDDING_DEVICE"


def _probe(flag: bool | None, check: str) -> bool:
    if flag is not None:
        return flag
    torch = lazy_extra_import("torch", extra=ST_EXTRA)
    if check == "cuda":
        return bool(torch.cuda.is_available())
    mps = getattr(getattr(torch, "backends", None), "mps", None)
    return bool(mps is not None and mps.is_available())


def select_torch_device(
    override: str | None = None,
    *,
    cuda_available: bool | None = None,
    mps_available: bool | None = None,
) -> str:
    """``override``, else ``RAGSPINE_EMBEDDING_DEVICE``, else the first of cuda → mps → cpu
    that torch reports available (probes skipped when ``*_available`` is given). A device
    that is not ``cuda``/``cuda:N``/``mps``/``cpu`` → ``ValueError``.
    """
    chosen = override if override is not None else env_value(_DEVICE_ENV, "").strip()
    if chosen:
        name = chosen.strip().lower()
        base, _, index = name.partition(":")
        if base not in TORCH_DEVICES or (index and (base != "cuda" or not index.isdigit())):
            raise ValueError(
                f"unknown torch device {chosen!r}; valid: cuda, cuda:N, mps, cpu "
                f"(from {'device=' if override is not None else _DEVICE_ENV})"
            )
        return name
    if _probe(cuda_available, "cuda"):
        return "cuda"
    if _probe(mps_available, "mps"):
        return "mps"
    return "cpu"


class SentenceTransformerEmbeddingBackend:
    """``EmbeddingBackend`` over ``sentence_transformers.SentenceTransformer``.

    The model loads in the constructor (sentence-transformers imported then; missing →
    ``ImportError`` naming ``ragspine-lite[st]``) on :func:`select_torch_device`'s device.
    ``embed_texts`` / ``embed_queries`` encode in batches of ``batch_size``, L2-normalised
    when ``normalize``; a wrong vector count → ``RuntimeError``.
    """

    def __init__(
        self,
        model_name: str = "Qwen/Qwen3-Embedding-0.6B",
        device: str | None = None,
        normalize: bool = True,
        batch_size: int = 64,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        st = lazy_extra_import("sentence_transformers", extra=ST_EXTRA)
        self.device = select_torch_device(device)
        self.model_name = model_name
        self.normalize = bool(normalize)
        self.batch_size = batch_size
        self.model = st.SentenceTransformer(model_name, device=self.device)

    @property
    def model_id(self) -> str:
        return f"st:{self.model_name}"

    def __repr__(self) -> str:
        return (f"SentenceTransformerEmbeddingBackend(model_name={self.model_name!r}, "
                f"device={self.device!r})")

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        return self._encode(texts, {})

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Query vectors: with the model's ``"query"`` prompt when it ships one."""
        prompts = getattr(self.model, "prompts", None) or {}
        return self._encode(texts, {"prompt_name": "query"} if "query" in prompts else {})

    def _encode(self, texts: list[str], extra: dict[str, Any]) -> list[list[float]]:
        texts = list(texts)
        if not texts:
            return []
        raw = self.model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=self.normalize,
            convert_to_numpy=True, show_progress_bar=False, **extra,
        )
        vectors = [[float(x) for x in row] for row in raw]
        if len(vectors) != len(texts):
            raise RuntimeError(f"model returned {len(vectors)} vectors for {len(texts)} texts")
        return vectors
