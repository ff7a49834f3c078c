"""`DatabaseHandle`: one SQLite connection shared by a process's threads, behind a lock.

The run store (`store/db.py`) and the kernel registry (`registry/db.py`) are both a folder with
one database; both need the same plumbing: close once, refuse use after close, and write in
`BEGIN IMMEDIATE` transactions (the write lock taken up front, so "read, then insert" is atomic
across threads and processes) that roll back on any exception.
"""
from __future__ import annotations

import sqlite3
import threading
from contextlib import contextmanager
from typing import Iterator

from kernelevolve.store.errors import StoreError


class DatabaseHandle:
    def __init__(self, conn: sqlite3.Connection):
        self._conn_or_none: sqlite3.Connection | None = conn
        self._lock = threading.RLock()

    def _closed_error(self) -> StoreError:
        return StoreError("the database is closed")

    def _before_commit(self, conn: sqlite3.Connection) -> None:
        """Statements every write transaction ends with (none here)."""

    def close(self) -> None:
        with self._lock:
            if self._conn_or_none is not None:
                self._conn_or_none.close()
                self._conn_or_none = None

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._conn_or_none is None:
            raise self._closed_error()
        return self._conn_or_none

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; the write lock is taken at BEGIN so read-then-insert is atomic."""
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                self._before_commit(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _query(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()
