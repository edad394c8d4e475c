"""What the SQLite-backed stores share: opening (optionally read-only) and write transactions."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from ragspine_lite.common.sensitivity import register_sql_predicate

__all__ = ["connect", "immediate_transaction"]


def connect(
    db_path: str | Path, what: str, error: type[Exception], *, read_only: bool = False
) -> sqlite3.Connection:
    """An autocommit connection to ``db_path`` (the stores open and end transactions).

    ``read_only`` needs an existing file (``FileNotFoundError`` otherwise: SQLite would
    create it) and switches ``PRAGMA query_only`` on, so SQLite itself refuses every write.
    Failures raise ``error(f"cannot open {what} at …")``. The connection knows the RESTRICTED
    predicate as an SQL function (:data:`~ragspine_lite.common.sensitivity.NOT_RESTRICTED_SQL`).
    """
    path = str(db_path)
    if read_only and (path == ":memory:" or not os.path.isfile(path)):
        raise FileNotFoundError(f"{what} not found at {path!r} (read-only opens need a file)")
    try:
        conn = sqlite3.connect(path, isolation_level=None)
        register_sql_predicate(conn)
        if read_only:
            conn.execute("PRAGMA query_only = ON")
    except sqlite3.Error as exc:
        raise error(f"cannot open {what} at {path!r}: {exc}") from exc
    return conn


@contextlib.contextmanager
def immediate_transaction(
    conn: sqlite3.Connection,
    action: str,
    db_path: object,
    error: type[Exception],
    on_rollback: Callable[[], None] | None = None,
) -> Iterator[sqlite3.Connection]:
    """One ``BEGIN IMMEDIATE`` … ``COMMIT``; any failure rolls everything back.

    sqlite3 errors are re-raised as ``error(f"{action} failed on {db_path!r}: …")``;
    ``on_rollback`` lets a store drop caches that the rolled-back writes touched.
    """
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        raise error(f"{action} failed on {db_path!r}: {exc}") from exc
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if on_rollback is not None:
            on_rollback()
        if isinstance(exc, sqlite3.Error):
            raise error(f"{action} failed on {db_path!r}: {exc}") from exc
        raise
