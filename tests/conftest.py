"""Shared fixtures. The Pyodide lane runs this same suite with ``-m "not cpython_only"``."""

from __future__ import annotations

import pytest


@pytest.fixture
def store():
    """An empty in-memory :class:`ChunkStore` with its schema, closed after the test."""
    from ragspine_lite.chunking.chunk_store import ChunkStore

    s = ChunkStore(":memory:")
    s.init_schema()
    yield s
    s.close()


@pytest.fixture(scope="module")
def bundle_db(tmp_path_factory):
    """A bundle chunk store exported from the bundled samples (BM25 only)."""
    from ragspine_lite.bundle.export import export_store, load_corpus
    from ragspine_lite.cli import samples_dir

    db = tmp_path_factory.mktemp("bundle") / "chunks.db"
    export_store(load_corpus([samples_dir()]), db)
    return db


@pytest.fixture
def searcher(bundle_db):
    """A :class:`BundleSearcher` over :func:`bundle_db`, closed after the test."""
    from ragspine_lite.bundle.runtime import BundleSearcher

    with BundleSearcher(bundle_db) as s:
        yield s


@pytest.fixture(scope="session")
def pg_url():
    """The URL of a real PostgreSQL with pgvector, started into a temp dir for the session
    and stopped after it (also when the run is killed with SIGTERM)."""
    from _pgserver import HOW_TO, running_pgserver

    pytest.importorskip("pgserver", reason=HOW_TO)
    pytest.importorskip("pg8000", reason=HOW_TO)
    with running_pgserver() as url:
        yield url
