"""Keep a vector store in line with a chunk set: embed what is missing or changed, drop the rest.

One function, :func:`sync_chunk_vectors`, shared by ``ragspine-lite ingest``/``search`` (the
vectors next to a chunk database) and the static-bundle export (the vectors inside the bundle's
chunk store). Every record carries the five filter dimensions, ``doc_id``, ``sensitivity`` and
the SHA-256 of the embedded text (:data:`CONTENT_HASH_KEY`), so a later sync re-embeds only the
chunks whose text changed. Chunks the persistence policy holds back (RESTRICTED, by default)
never get a vector, and a backend that sends text off host (a remote or OpenAI-compatible
one) never gets RESTRICTED text whatever the policy (the network exit). Stdlib only: it runs
under Pyodide with any backend.

>>> from types import SimpleNamespace
>>> from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend
>>> from ragspine_lite.vector.sqlite_store import SqliteVectorStore
>>> chunk = SimpleNamespace(chunk_id="d#c0", doc_id="d", text="revenue grew", sensitivity="PUBLIC",
...                         topic="", entity="", geography="", period="", language="en")
>>> store = SqliteVectorStore(":memory:", model_id="demo")
>>> sync_chunk_vectors([chunk], DeterministicEmbeddingBackend(dim=8), store)
(1, 0)
>>> sync_chunk_vectors([chunk], DeterministicEmbeddingBackend(dim=8), store)
(0, 0)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any

from ragspine_lite.common.sensitivity import canonical_sensitivity
from ragspine_lite.vector.persistence_policy import (
    IsolationFirstPolicy,
    PersistencePolicy,
    withheld_from_vectors,
)
from ragspine_lite.vector.store import VectorRecord, VectorStore

__all__ = [
    "CONTENT_HASH_KEY",
    "DEFAULT_SYNC_BATCH_SIZE",
    "chunk_vector_metadata",
    "sync_chunk_vectors",
]

#: Vector metadata key holding the SHA-256 (hex) of the text the vector was made from.
CONTENT_HASH_KEY = "content_sha256"
#: Texts handed to the backend per call (the backend may batch further inside).
DEFAULT_SYNC_BATCH_SIZE = 256

_METADATA_FIELDS = ("topic", "entity", "geography", "period", "language", "doc_id", "sensitivity")

Progress = Callable[[int, int, str], None]


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunk_vector_metadata(chunk: Any, text: str, *, digest: str | None = None) -> dict[str, str]:
    """A chunk's vector metadata: filter dimensions, ``doc_id``, ``sensitivity`` and the hash
    of ``text`` (``digest`` when already computed)."""
    meta = {name: _as_str(getattr(chunk, name, None)) for name in _METADATA_FIELDS}
    meta["sensitivity"] = canonical_sensitivity(meta["sensitivity"]) or meta["sensitivity"]
    meta[CONTENT_HASH_KEY] = digest if digest is not None else _text_hash(text)
    return meta


def _as_str(value: Any) -> str:
    return "" if value is None else str(value)


def sync_chunk_vectors(
    chunks: Iterable[Any],
    backend: Any,
    vector_store: VectorStore,
    *,
    persistence_policy: PersistencePolicy | None = None,
    index_text_fn: Callable[[Any], str] | None = None,
    batch_size: int = DEFAULT_SYNC_BATCH_SIZE,
    progress: Progress | None = None,
) -> tuple[int, int]:
    """Bring ``vector_store`` in line with ``chunks`` → ``(embedded, removed)``.

    ``chunks`` are the wanted set (e.g. a store's active chunks). Chunks the
    ``persistence_policy`` (default :class:`IsolationFirstPolicy`) holds back are skipped,
    and so are RESTRICTED chunks (or ones without a readable label) when the backend
    ``sends_text_off_host`` or the store is external (:func:`withheld_from_vectors`), even
    under a persist-everything policy;
    the text embedded is ``index_text_fn(chunk)`` or ``chunk.text``. Stored vectors whose id
    is not wanted, or whose text hash differs, are removed; then every chunk without a fresh
    vector is embedded and upserted, ``batch_size`` texts at a time, calling
    ``progress(done, total, last_chunk_id)`` after each batch. A store without
    ``metadata_by_id`` (e.g. the in-process one) counts as empty: everything is embedded.
    Raises ``ValueError`` for a bad ``batch_size`` or when the backend returns the wrong
    number of vectors.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    policy = persistence_policy if persistence_policy is not None else IsolationFirstPolicy()
    wanted: dict[str, tuple[Any, str, str]] = {}
    for chunk in chunks:
        if not policy.persistable(chunk) or withheld_from_vectors(chunk, backend, vector_store):
            continue
        text = index_text_fn(chunk) if index_text_fn is not None else chunk.text
        wanted[chunk.chunk_id] = (chunk, text, _text_hash(text))
    removed, fresh = _drop_stale(vector_store, wanted)
    todo = [entry for cid, entry in wanted.items() if cid not in fresh]
    for start in range(0, len(todo), batch_size):
        batch = todo[start : start + batch_size]
        vector_store.upsert(_embedded_records(batch, backend))
        if progress is not None:
            progress(start + len(batch), len(todo), batch[-1][0].chunk_id)
    return len(todo), removed


def _drop_stale(
    vector_store: VectorStore, wanted: dict[str, tuple[Any, str, str]]
) -> tuple[int, set[str]]:
    """Delete the stored vectors not wanted or of changed text → ``(removed, fresh ids)``."""
    known = getattr(vector_store, "metadata_by_id", None)
    have: dict[str, dict[str, str]] = known() if known is not None else {}
    stale = [
        rid
        for rid, md in have.items()
        if rid not in wanted or md.get(CONTENT_HASH_KEY) != wanted[rid][2]
    ]
    # Only a store with metadata_by_id has stale rows, and such stores have delete_ids.
    removed = vector_store.delete_ids(stale) if stale else 0  # type: ignore[attr-defined]
    return removed, set(have) - set(stale)


def _embedded_records(batch: list[tuple[Any, str, str]], backend: Any) -> list[VectorRecord]:
    """``(chunk, text, digest)`` entries embedded in one call, as records to upsert."""
    vectors = list(backend.embed_texts([text for _c, text, _h in batch]))
    if len(vectors) != len(batch):
        raise ValueError(
            f"embedding backend returned {len(vectors)} vectors for {len(batch)} texts"
        )
    return [
        VectorRecord(
            id=chunk.chunk_id,
            vector=tuple(float(x) for x in vec),
            metadata=chunk_vector_metadata(chunk, text, digest=digest),
        )
        for (chunk, text, digest), vec in zip(batch, vectors, strict=True)
    ]
