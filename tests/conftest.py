"""Shared fixtures. The Pyodide lane runs this same suite with ``-m "not cpython_only"``."""

from __future__ import annotations

import pytest


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


PGVECTOR_HOW_TO = (
    "pgvector cases need a local Postgres from pgserver: "
    "pip install pgserver 'ragspine-lite[vector]' (scripts/test.sh installs both)"
)


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory):
    """The URL of a real PostgreSQL with pgvector, started into a temp dir for the session
    and stopped after it (also when the run is killed with SIGTERM)."""
    import signal
    import sys
    import threading

    pgserver = pytest.importorskip("pgserver", reason=PGVECTOR_HOW_TO)
    pytest.importorskip("pg8000", reason=PGVECTOR_HOW_TO)
    previous = None
    if threading.current_thread() is threading.main_thread():
        # SystemExit unwinds pytest, so pgserver's exit hook stops the server.
        previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    server = pgserver.get_server(tmp_path_factory.mktemp("pg"), cleanup_mode="stop")
    try:
        server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
        yield server.get_uri()
    finally:
        server.cleanup()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
