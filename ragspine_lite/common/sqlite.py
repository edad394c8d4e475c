"""What the SQLite-backed stores share: opening (optionally read-only), write transactions
and the lifecycle of one connection (:class:`SqliteFile`)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Self

from ragspine_lite.common.sensitivity import register_sql_predicate

__all__ = ["SqliteFile", "connect", "immediate_transaction"]


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


class SqliteFile:
    """One store's connection to a SQLite file, closed once (also when garbage-collected).

    A subclass names itself in ``_what`` (``"chunk store"``) and its error class in ``_error``,
    and calls :meth:`_open` from ``__init__``. Usable as a context manager; a closed store
    refuses reads, a read-only one refuses every write (both raise ``_error``).
    """

    _what = "store"
    _error: type[Exception] = sqlite3.Error
    db_path: str
    read_only: bool

    def _open(self, db_path: str | Path, read_only: bool = False) -> sqlite3.Connection:
        """Connect (see :func:`connect`) and arrange for the connection to be closed."""
        self.db_path = str(db_path)
        self.read_only = bool(read_only)
        conn = connect(self.db_path, self._what, self._error, read_only=self.read_only)
        self._conn = conn
        self._finalizer = weakref.finalize(self, conn.close)
        return conn

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return not self._finalizer.alive

    def close(self) -> None:
        """Close the connection; calling it again does nothing."""
        self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _connection(self) -> sqlite3.Connection:
        if self.closed:
            raise self._error(f"{self._what} {self.db_path!r} is closed")
        return self._conn

    def _transaction(self, action: str) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` … ``COMMIT``; any failure rolls everything back and calls
        :meth:`_rolled_back`."""
        if self.read_only:
            raise self._error(f"{action} refused: {self._what} {self.db_path!r} is read-only")
        return immediate_transaction(
            self._connection(), action, self.db_path, self._error, self._rolled_back
        )

    def _rolled_back(self) -> None:
        """Drop what a rolled-back write may have left in memory (default: nothing)."""
