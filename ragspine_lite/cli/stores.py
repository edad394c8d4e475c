"""Chunk databases and their vector tables as the commands open them (never created by a read)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.cli.common import PROG, edge_settings, note, one_line, vector_store_spec
from ragspine_lite.common.settings import Settings

TABLE = "narrative_chunk"


def open_existing_store(db: str) -> ChunkStore:
    """Open a chunk database that must already exist (never creates one)."""
    path = Path(db)
    if not path.exists():
        raise FileNotFoundError(
            f"chunk database {db!r} does not exist; create it with "
            f"'{PROG} ingest PATH --db {db}'"
        )
    if not path.is_file():
        raise ValueError(f"chunk database {db!r} is not a file")
    conn = sqlite3.connect(str(path))
    try:
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)
        ).fetchone()
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"{db!r} is not a readable SQLite database ({exc})") from None
    finally:
        conn.close()
    if found is None:
        raise ValueError(f"{db!r} is not a {PROG} chunk database (no {TABLE!r} table)")
    return ChunkStore(path, read_only=True)


def writable(db: str) -> bool:
    """Whether SQLite could write ``db`` (the file and, for its journal, its directory)."""
    path = Path(db).resolve()
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def open_vector_store(
    db: str, backend: Any, settings: Settings, index_text_fn: Any = None, *,
    read_only: bool = False,
) -> Any:
    """The persistent vector table of ``db`` for ``backend``'s model (created if absent, or
    opened ``read_only``), or that model's table in the external store
    ``RAGSPINE_VECTOR_STORE`` names; an in-process store when it asks for one, or, with a
    warning, when the store cannot be opened. A non-default index text gets its own vector
    set, so the two never mix."""
    from ragspine_lite.vector.sqlite_store import (
        SqliteVectorStore,
        VectorStoreError,
        embedding_model_id,
    )
    from ragspine_lite.vector.store import InProcessVectorStore

    spec = vector_store_spec(settings)
    if spec == "in_process":
        return InProcessVectorStore()
    policy = edge_settings(settings)["persistence_policy"]
    try:
        from ragspine_lite.contextual import index_text_setting

        setting = index_text_setting(index_text_fn)
        model_id = embedding_model_id(backend) + ("" if setting == "none" else f"+{setting}")
        if spec != "sqlite":
            from ragspine_lite.vector.store_env import open_external_store

            return open_external_store(spec, db, model_id, settings.pg_url)
        return SqliteVectorStore(db, model_id=model_id, persistence_policy=policy,
                                 read_only=read_only)
    except VectorStoreError as exc:
        note(f"warning: vectors cannot be persisted ({one_line(exc)}); embedding in memory")
        return InProcessVectorStore()


def close_quietly(vector_store: Any) -> None:
    close = getattr(vector_store, "close", None)
    if close is not None:
        close()


def _sync_vectors(index: Any, vector_store: Any) -> tuple[int, int]:
    """Bring ``vector_store`` in line with the index's active, persistable chunks →
    (embedded, removed): :func:`~ragspine_lite.vector.chunk_vectors.sync_chunk_vectors`."""
    from ragspine_lite.vector.chunk_vectors import sync_chunk_vectors

    return sync_chunk_vectors(
        index.store.iter_chunks(),
        index.embedding_backend,
        vector_store,
        persistence_policy=index.persistence_policy,
        index_text_fn=index.index_text_fn,
    )


def sync_or_fallback(index: Any) -> tuple[int, int]:
    """:func:`_sync_vectors` on the index's store; if the database cannot be written (e.g. a
    read-only file), warn and embed into an in-process store instead."""
    from ragspine_lite.vector.sqlite_store import VectorStoreError
    from ragspine_lite.vector.store import InProcessVectorStore

    try:
        return _sync_vectors(index, index.vector_store)
    except VectorStoreError as exc:
        note(f"warning: vectors cannot be persisted ({one_line(exc)}); embedding in memory")
        index.vector_store = InProcessVectorStore()
        return _sync_vectors(index, index.vector_store)


def model_label(backend: Any) -> str:
    from ragspine_lite.vector.sqlite_store import embedding_model_id

    return embedding_model_id(backend)


def embed_db(
    db: str, backend: Any, settings: Settings, index_text_fn: Any = None
) -> int | None:
    """Persist vectors for ``db``'s active chunks now, so searches embed only the query.

    Returns how many chunks were embedded, or ``None`` (with a warning) when the backend
    fails: the chunks are stored either way and a later search retries.
    """
    from ragspine_lite.link.narrative_link import build_narrative_retriever

    vector_store = open_vector_store(db, backend, settings, index_text_fn)
    try:
        retriever, store = build_narrative_retriever(
            db, embedding_backend=backend, vector_store=vector_store, index_text_fn=index_text_fn,
            **edge_settings(settings),
        )
        try:
            return sync_or_fallback(retriever.index)[0]
        finally:
            store.close()
    except (sqlite3.Error, OSError):
        raise
    except Exception as exc:  # a model/backend failure must not lose the ingest
        note(f"warning: embedding backend failed ({one_line(exc)}); vectors not stored")
        return None
    finally:
        close_quietly(vector_store)
