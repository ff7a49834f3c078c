"""`Store`: one workspace's SQLite database and object store, behind a small typed API.

A workspace is a directory (default `.kernelevolve/` under the current directory) holding
`kernelevolve.db` and `objects/`. Everything a run produces goes through here, so a run killed at
any point (SIGKILL included) can be resumed from what was committed: each method is one
transaction, and the multi-row ones (a node and its source artifact; an evaluation and the node's
verdict) commit together or not at all.

Threads: one connection shared by all threads and guarded by a lock. SQLite serialises writers
anyway, and the store's work is tiny next to an evaluation (milliseconds against seconds), so
per-thread connections would buy read parallelism nobody needs, at the price of SQLITE_BUSY
handling between our own threads. The lock also makes "next id = max + 1, then insert" atomic in
process; `BEGIN IMMEDIATE` (write lock taken up front) plus `busy_timeout` makes it atomic across
processes too.
"""
from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from kernelevolve.store.connect import open_connection
from kernelevolve.store.errors import StoreError
from kernelevolve.store.handle import DatabaseHandle
from kernelevolve.store.nodes import NodesMixin
from kernelevolve.store.objects import ObjectStore
from kernelevolve.store.records import (
    RUN_STATUSES, EventRecord, RunRecord, event_from_row, run_from_row, to_json)

DEFAULT_WORKSPACE = ".kernelevolve"
DB_NAME = "kernelevolve.db"
OBJECTS_DIR = "objects"


def default_workspace() -> Path:
    return Path.cwd() / DEFAULT_WORKSPACE


class Store(NodesMixin, DatabaseHandle):
    """Open with `Store.open(path)`; use as a context manager or call `close()`."""

    def __init__(self, workspace: Path, conn: sqlite3.Connection):
        self.workspace = workspace
        self.db_path = workspace / DB_NAME
        self.objects = ObjectStore(workspace / OBJECTS_DIR)
        DatabaseHandle.__init__(self, conn)

    @classmethod
    def open(cls, workspace: str | Path | None = None) -> "Store":
        """Open (creating if needed) the store in `workspace`, upgrading an older schema."""
        ws = Path(workspace) if workspace is not None else default_workspace()
        if ws.exists() and not ws.is_dir():
            raise StoreError(f"{ws}: the workspace must be a directory, and this is a file")
        fresh = not ws.exists()
        try:
            ws.mkdir(parents=True, exist_ok=True)
            if fresh:
                # Runs hold generated code and logs, not project sources: keep them out of git.
                (ws / ".gitignore").write_text("*\n")
        except OSError as e:
            raise StoreError(f"{ws}: cannot create the workspace ({e.strerror})") from None
        return cls(ws, open_connection(ws / DB_NAME))

    def __repr__(self) -> str:
        return f"Store({str(self.workspace)!r})"

    # -- plumbing (the connection, transactions: store/handle.py) ----------------------------

    def _closed_error(self) -> StoreError:
        return StoreError(f"the store at {self.workspace} is closed")

    def _missing_run(self, run_id: str) -> StoreError:
        return StoreError(f"no run {run_id} in {self.workspace}; `kernelevolve runs` lists them")

    def _require_run(self, conn: sqlite3.Connection, run_id: str) -> None:
        if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            raise self._missing_run(run_id)

    def _touch(self, conn: sqlite3.Connection, run_id: str, **columns: Any) -> None:
        sets = ", ".join(["updated = ?", *(f"{k} = ?" for k in columns)])
        cur = conn.execute(f"UPDATE runs SET {sets} WHERE id = ?",
                           (time.time(), *columns.values(), run_id))
        if cur.rowcount == 0:
            raise self._missing_run(run_id)

    @property
    def schema_version(self) -> int:
        return int(self._query("SELECT value FROM meta WHERE key = 'schema_version'")[0][0])

    def meta(self) -> dict[str, str]:
        return {r["key"]: r["value"] for r in self._query("SELECT key, value FROM meta")}

    # -- runs --------------------------------------------------------------------------------

    def create_run(self, run_id: str, *, problem_path: str | Path | None, problem_hash: str | None,
                   platform: str | None, config: dict[str, Any],
                   fingerprint: dict[str, Any]) -> RunRecord:
        now = time.time()
        row = (run_id, now, now, "running", None if problem_path is None else str(problem_path),
               problem_hash, platform, to_json(config, "run config"),
               to_json(fingerprint, "platform fingerprint"))
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
                raise StoreError(f"run {run_id} already exists in {self.workspace}")
            conn.execute("INSERT INTO runs(id, created, updated, status, problem_path, "
                         "problem_hash, platform, config, fingerprint) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
        return self.get_run(run_id)

    def get_run(self, run_id: str) -> RunRecord:
        """The run with this id, or the only run whose id starts with it; `last`: last_run()."""
        if run_id == "last":  # never an id's prefix: ids start with r and a date
            return self.last_run()
        rows = self._query("SELECT * FROM runs WHERE id = ?", (run_id,))
        if not rows and run_id:
            rows = self._query("SELECT * FROM runs WHERE substr(id, 1, ?) = ? ORDER BY id",
                               (len(run_id), run_id))
        if not rows:
            raise self._missing_run(run_id)
        if len(rows) > 1:
            ids = ", ".join(r["id"] for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
            raise StoreError(f"run id prefix {run_id!r} is ambiguous in {self.workspace}: "
                             f"it matches {ids}; give more characters")
        return run_from_row(rows[0])

    def last_run(self) -> RunRecord:
        """The newest run that evaluated something: one that failed before its first evaluation
        (no worker could start, Ctrl-C at once) has nothing to promote, resume or show, and
        would otherwise hide the run the user means."""
        rows = self._query("SELECT * FROM runs r WHERE EXISTS (SELECT 1 FROM evaluations e "
                           "WHERE e.run_id = r.id) ORDER BY created DESC, id DESC LIMIT 1")
        if not rows:
            none = "no runs" if not self._query("SELECT 1 FROM runs LIMIT 1") else \
                "no run that evaluated anything"
            raise StoreError(f"`last`: {none} in {self.workspace}; run `kernelevolve optimize` "
                             "first (`kernelevolve runs` lists the runs)")
        return run_from_row(rows[0])

    def list_runs(self) -> list[RunRecord]:
        """All runs, newest first."""
        return [run_from_row(r) for r in
                self._query("SELECT * FROM runs ORDER BY created DESC, id DESC")]

    def delete_run(self, run_id: str) -> int:
        """Delete a run with its nodes, evaluations, events and artifacts, then the objects no
        other run refers to; returns how many objects were removed. The run's folder under
        runs/ is the caller's (it holds files the user may have opened)."""
        with self._write() as conn:
            self._require_run(conn, run_id)
            mine = {r[0] for r in conn.execute(
                "SELECT source_hash FROM nodes WHERE run_id = ? UNION "
                "SELECT object_hash FROM artifacts WHERE run_id = ?", (run_id, run_id))}
            for table in ("artifacts", "evaluations", "events", "nodes"):
                conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))
            shared = {r[0] for r in conn.execute(
                "SELECT source_hash FROM nodes UNION SELECT object_hash FROM artifacts")}
        removed = 0
        for digest in mine - shared:  # after the commit: a crash here leaves orphans, not holes
            try:
                self.objects.path(digest).unlink()
                removed += 1
            except (FileNotFoundError, StoreError):
                pass
        return removed

    def set_run_status(self, run_id: str, status: str,
                       outcome: dict[str, Any] | None = None) -> None:
        """Set the status; `outcome` replaces the stored one when given, else it is kept."""
        if status not in RUN_STATUSES:
            raise StoreError(f"unknown run status {status!r}; expected one of {RUN_STATUSES}")
        with self._write() as conn:
            if outcome is None:
                self._touch(conn, run_id, status=status)
            else:
                self._touch(conn, run_id, status=status, outcome=to_json(outcome, "run outcome"))

    def add_elapsed(self, run_id: str, seconds: float) -> float:
        """Add search wall time (budgets count across resumes); returns the new total."""
        with self._write() as conn:
            self._require_run(conn, run_id)
            conn.execute("UPDATE runs SET elapsed_s = elapsed_s + ?, updated = ? WHERE id = ?",
                         (float(seconds), time.time(), run_id))
            return conn.execute("SELECT elapsed_s FROM runs WHERE id = ?", (run_id,)).fetchone()[0]

    def update_fingerprint(self, run_id: str, fingerprint: dict[str, Any]) -> None:
        """Replace the platform fingerprint (a forced resume on a changed machine)."""
        with self._write() as conn:
            self._touch(conn, run_id, fingerprint=to_json(fingerprint, "platform fingerprint"))

    # -- events ------------------------------------------------------------------------------

    def add_event(self, run_id: str, kind: str, data: dict[str, Any] | None = None) -> int:
        """Append an event; returns its sequence number (0, 1, 2, ... per run)."""
        payload = to_json(data or {}, f"{kind} event data")
        with self._write() as conn:
            self._require_run(conn, run_id)
            seq = conn.execute("SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE run_id = ?",
                               (run_id,)).fetchone()[0]
            conn.execute("INSERT INTO events(run_id, seq, ts, kind, data) VALUES (?, ?, ?, ?, ?)",
                         (run_id, seq, time.time(), kind, payload))
        return seq

    def events(self, run_id: str, kind: str | None = None) -> list[EventRecord]:
        if kind is None:
            rows = self._query("SELECT * FROM events WHERE run_id = ? ORDER BY seq", (run_id,))
        else:
            rows = self._query("SELECT * FROM events WHERE run_id = ? AND kind = ? ORDER BY seq",
                               (run_id, kind))
        return [event_from_row(r) for r in rows]
