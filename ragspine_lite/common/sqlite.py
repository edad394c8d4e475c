"""The one write-transaction helper shared by the SQLite-backed stores."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator

__all__ = ["immediate_transaction"]


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
