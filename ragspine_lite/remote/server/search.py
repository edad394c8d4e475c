"""``/v1/search``: hybrid search over one chunk database, what every replica serves alike.

A replica keeps the chunk database (opened read-only, with its BM25 index) and the query
embedder; the vectors live where ``RAGSPINE_VECTOR_STORE`` says: the database's own table
(``sqlite``), or one table shared by every replica (``pgvector`` over ``RAGSPINE_PG_URL``;
``sqlite_vec`` next to the file). Nothing is written: an ingest job fills the store
(``ragspine-lite ingest`` with the same settings). ``in_process`` embeds the chunks in each
worker thread when it first searches (small databases only). Qdrant's local mode admits one
client per directory, so it is refused here.

This is an exit: RESTRICTED chunks are filtered out before ranking and dropped again from the
snippets (:class:`~ragspine_lite.link.narrative_link.OpenOnlyIndex`).
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ragspine_lite.common.settings import env_value
from ragspine_lite.remote.server.config import ServerConfig
from ragspine_lite.remote.server.models import ModelUnavailable
from ragspine_lite.remote.wire import WireError, read_int, read_str

__all__ = ["SEARCH_FILTERS", "SearchService"]

#: The equality filters a request may pass.
SEARCH_FILTERS = ("topic", "entity", "geography", "period", "language")


def _read_filters(payload: dict[str, Any]) -> dict[str, str]:
    value = payload.get("filters", {})
    if not isinstance(value, dict):
        raise WireError(f"field 'filters' must be an object, got {type(value).__name__}")
    for key, item in value.items():
        if key not in SEARCH_FILTERS or not isinstance(item, str):
            raise WireError(
                f"filters take string values for {', '.join(SEARCH_FILTERS)}; got {key!r}"
            )
    return dict(value)


class SearchService:
    """The search of one endpoint process: settings checked once, then one retriever on one
    thread of its own (SQLite connections belong to the thread that opened them), so a
    process answers one search at a time; replicas and workers scale it out."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.kind: str | None = None
        self.backend: Any = None
        self._link: Any = None
        self._closers: list[Any] = []
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="search")
        if config.search_db:
            self._check()

    def _check(self) -> None:
        """Store kind and embedder, or ``ValueError`` at start-up naming the setting."""
        from ragspine_lite.vector.embedding_backends import make_embedding_backend
        from ragspine_lite.vector.store import VECTOR_STORE_ENV
        from ragspine_lite.vector.store_env import PG_URL_ENV, store_kind

        if not os.path.isfile(str(self.config.search_db)):
            raise ValueError(f"the search database {self.config.search_db!r} does not exist")
        environ = {VECTOR_STORE_ENV: self.config.vector_store or "",
                   PG_URL_ENV: env_value(PG_URL_ENV, "")}
        self.kind = store_kind(environ)
        if self.kind == "qdrant":
            raise ValueError(
                f"{VECTOR_STORE_ENV}=qdrant: the local mode admits one client per directory; "
                "serve search from pgvector, sqlite_vec or sqlite"
            )
        self.backend = make_embedding_backend(self.config.search_embedding or "none")

    def _open_store(self) -> Any:
        from ragspine_lite.vector.sqlite_store import SqliteVectorStore, embedding_model_id
        from ragspine_lite.vector.store import InProcessVectorStore
        from ragspine_lite.vector.store_env import open_external_store

        db, model_id = str(self.config.search_db), embedding_model_id(self.backend)
        if self.kind == "in_process":
            return InProcessVectorStore()
        if self.kind == "sqlite":
            return SqliteVectorStore(db, model_id=model_id, read_only=True)
        return open_external_store(str(self.kind), db, model_id)

    def _retriever(self) -> Any:
        """The retriever, built on the first search (on the search thread)."""
        if self._link is not None:
            return self._link
        from ragspine_lite.link.narrative_link import (
            NarrativeIndexRetriever,
            OpenOnlyIndex,
            build_narrative_retriever,
        )

        store = self._open_store() if self.backend is not None else None
        retriever, chunks = build_narrative_retriever(
            str(self.config.search_db), embedding_backend=self.backend, vector_store=store,
            read_only=True,
        )
        self._closers = [c for c in (getattr(store, "close", None), chunks.close) if c]
        if self.kind == "in_process" and store is not None:
            from ragspine_lite.vector.chunk_vectors import sync_chunk_vectors

            index: Any = retriever.index  # the NarrativeIndex build_narrative_retriever made
            sync_chunk_vectors(index.store.iter_chunks(), self.backend, store)
        self._link = NarrativeIndexRetriever(OpenOnlyIndex(retriever.index),
                                             retry_without_filters=False)
        return self._link

    def search(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``{"query", "top_k"?, "filters"?}`` → ``{"hits": [snippet], "channel"}``."""
        if not self.config.search_db:
            raise ModelUnavailable("search", "no chunk database (set RAGSPINE_REMOTE_DB)")
        query = read_str(payload, "query")
        top_k = read_int(payload, "top_k", default=10, minimum=1,
                         maximum=self.config.max_candidates)
        filters = _read_filters(payload)
        return self._thread.submit(self._search, query, filters, top_k).result()

    def _search(self, query: str, filters: dict[str, str], top_k: int) -> dict[str, Any]:
        link = self._retriever()
        hits = link.retrieve(query, filters=filters, top_k=top_k)
        return {"hits": hits, "channel": link.index.index.last_channel}

    def close(self) -> None:
        """Close the database and the store (on their thread) and stop it; idempotent."""
        def close_all() -> None:
            for close in self._closers:
                close()
            self._closers, self._link = [], None

        with contextlib.suppress(RuntimeError):  # already shut down
            self._thread.submit(close_all).result()
        self._thread.shutdown()
