"""Which vector store the edges (the CLI, the remote endpoint) keep a chunk database's vectors
in: ``RAGSPINE_VECTOR_STORE`` read as a store kind, and the external store for one model.

Stdlib only: the adapters are resolved by name (:func:`~ragspine_lite.vector.store.
make_vector_store`), so nothing here imports an SDK.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Mapping
from typing import Any

from ragspine_lite.common.settings import env_value
from ragspine_lite.vector.store import VECTOR_STORE_ENV, make_vector_store

__all__ = ["EXTERNAL_KINDS", "PG_URL_ENV", "model_table", "open_external_store", "store_kind"]

PG_URL_ENV = "RAGSPINE_PG_URL"
#: A spelling of ``RAGSPINE_VECTOR_STORE`` (``-`` reads as ``_``) → the store kind.
_KINDS = {
    "none": "sqlite", "sqlite": "sqlite", "in_process": "in_process", "inprocess": "in_process",
    "memory": "in_process", "sqlite_vec": "sqlite_vec", "sqlitevec": "sqlite_vec",
    "pgvector": "pgvector", "pg_vector": "pgvector", "qdrant": "qdrant",
}
#: The external kinds → the SDK module each needs.
EXTERNAL_KINDS = {"sqlite_vec": "sqlite_vec", "pgvector": "pg8000", "qdrant": "qdrant_client"}


def store_kind(environ: Mapping[str, str] | None = None) -> str:
    """``RAGSPINE_VECTOR_STORE`` → ``sqlite`` (unset, ``none``: the chunk database's own vector
    table), ``in_process`` (nothing persisted), or an external kind (``sqlite_vec``,
    ``pgvector``, ``qdrant``) whose SDK is installed (and, for pgvector, with
    ``RAGSPINE_PG_URL`` set). Anything else → ``ValueError`` saying what is wrong."""
    env: Mapping[str, str] = environ if environ is not None else {
        name: env_value(name, "") for name in (VECTOR_STORE_ENV, PG_URL_ENV)
    }
    raw = env.get(VECTOR_STORE_ENV, "")
    kind = _KINDS.get(raw.strip().lower().replace("-", "_") or "sqlite")
    if kind is None:
        raise ValueError(
            "vectors live in the chunk database (sqlite), in memory (in_process/memory) or in "
            f"sqlite_vec, pgvector or qdrant, got {raw!r}"
        )
    if kind in EXTERNAL_KINDS and importlib.util.find_spec(EXTERNAL_KINDS[kind]) is None:
        raise ValueError(f"{kind} needs the [vector] extra: pip install 'ragspine-lite[vector]'")
    if kind == "pgvector" and not env.get(PG_URL_ENV, "").strip():
        raise ValueError(f"pgvector needs {PG_URL_ENV} (postgresql://user@host:port/db)")
    return kind


def model_table(model_id: str) -> str:
    """The table (collection) name of one embedding model's vectors in an external store."""
    return "rv_" + hashlib.sha256(model_id.encode("utf-8")).hexdigest()[:16]


def open_external_store(kind: str, db: str, model_id: str, dsn: str | None = None) -> Any:
    """The external store of ``kind`` for one model: the table :func:`model_table` names, in
    a file (sqlite_vec: ``<db>.sqlite-vec``) or directory (qdrant: ``<db>.qdrant``) next to
    the chunk database ``db``, or in the Postgres of ``dsn`` (default ``RAGSPINE_PG_URL``;
    pgvector)."""
    name = model_table(model_id)
    kwargs: dict[str, Any] = {
        "sqlite_vec": {"db_path": f"{db}.sqlite-vec", "table": name},
        "qdrant": {"path": f"{db}.qdrant", "collection": name},
        "pgvector": {"table": name, **({"dsn": dsn} if dsn else {})},
    }[kind]
    return make_vector_store(kind, **kwargs)
