"""A real PostgreSQL with pgvector for the tests and the bench, from the pgserver package."""

from __future__ import annotations

import contextlib
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator

HOW_TO = (
    "pgvector cases need a local Postgres from pgserver: "
    "pip install pgserver 'ragspine-lite[vector]' (scripts/test.sh installs both)"
)


@contextlib.contextmanager
def running_pgserver() -> Iterator[str]:
    """Start Postgres into a new temp dir with the ``vector`` extension, yield its URL, stop
    it and remove the dir.

    The dir is not under pytest's base temp: run as root, pgserver runs Postgres as its own
    user, and every pytest session resets that base to mode 0700. SIGTERM becomes
    ``SystemExit`` meanwhile, so a killed run still stops the server.
    """
    import pgserver

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    data_dir = tempfile.mkdtemp(prefix="ragspine-pg-")
    try:
        server = pgserver.get_server(data_dir, cleanup_mode="stop")
        try:
            server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
            yield server.get_uri()
        finally:
            server.cleanup()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
