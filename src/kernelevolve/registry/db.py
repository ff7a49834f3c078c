"""`Registry`: promoted kernels by name and version, their states, and every change as an event.

A registry is a folder (default `registry/` in the workspace) holding `registry.db` and
`objects/` (content-addressed: kernel sources, compiled libraries, problem sources). Per name:

- at most one `default` version: what serving calls when a call is inside its region;
- at most one trial version, in `shadow` (run beside the original, compared, never served) or
  `canary` (served on a share of in-region calls);
- any number of `retired` versions. A version retired because a newer one took its place
  (`superseded`) is what `rollback` restores; one retired for a reason (`demote`: a shadow
  mismatch, a failed revalidation) is never restored automatically.

Every change is one transaction that appends an event (who, when, why) and bumps the
`generation` meta value, which serving processes poll to pick up changes made elsewhere.
"""
from __future__ import annotations

import getpass
import socket
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelevolve.registry.schema import MIGRATIONS, STATES, TRIAL_STATES
from kernelevolve.store.connect import open_connection
from kernelevolve.store.errors import StoreError
from kernelevolve.store.handle import DatabaseHandle
from kernelevolve.store.objects import ObjectStore
from kernelevolve.store.records import from_json, to_json

DB_NAME = "registry.db"
OBJECTS_DIR = "objects"
PLACE = "--registry"


class RegistryError(StoreError):
    """A registry request that names something it does not hold, or breaks its rules."""


@dataclass(frozen=True)
class KernelRecord:
    name: str
    version: int
    state: str
    created: float
    updated: float
    problem_hash: str
    language: str
    platform: str
    entry: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.name} v{self.version}"


@dataclass(frozen=True)
class RegistryEvent:
    seq: int
    ts: float
    name: str
    version: int | None
    kind: str
    from_state: str | None
    to_state: str | None
    who: str
    why: str
    data: dict[str, Any]


def default_who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def default_registry(workspace: str | Path | None = None) -> Path:
    from kernelevolve.store.db import default_workspace

    return (Path(workspace) if workspace is not None else default_workspace()) / "registry"


class Registry(DatabaseHandle):
    """Open with `Registry.open(folder)`; use as a context manager or call `close()`."""

    def __init__(self, root: Path, conn: sqlite3.Connection):
        self.root = root
        self.objects = ObjectStore(root / OBJECTS_DIR)
        DatabaseHandle.__init__(self, conn)

    @classmethod
    def open(cls, folder: str | Path | None = None, *, create: bool = True) -> "Registry":
        root = Path(folder) if folder is not None else default_registry()
        if root.exists() and not root.is_dir():
            raise RegistryError(f"{root}: the registry must be a directory, and this is a file")
        if not (root / DB_NAME).exists() and not create:
            raise RegistryError(f"{root}: no kernel registry here; promote a kernel first "
                                "(`kernelevolve promote RUN_ID`) or pass --registry")
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RegistryError(f"{root}: cannot create the registry ({e.strerror})") from None
        return cls(root, open_connection(root / DB_NAME, MIGRATIONS, PLACE))

    def __repr__(self) -> str:
        return f"Registry({str(self.root)!r})"

    # ---- plumbing (the connection, transactions: store/handle.py) ------------------------

    def _closed_error(self) -> RegistryError:
        return RegistryError(f"the registry at {self.root} is closed")

    def _before_commit(self, conn: sqlite3.Connection) -> None:
        """Every write bumps the generation serving processes poll."""
        conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 "
                     "WHERE key = 'generation'")
        conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('generation', '1')")

    def generation(self) -> int:
        """Bumped by every write; equal values mean nothing changed in between."""
        rows = self._query("SELECT value FROM meta WHERE key = 'generation'")
        return int(rows[0][0]) if rows else 0

    # ---- reading -------------------------------------------------------------------------

    def names(self) -> list[str]:
        return [r[0] for r in self._query("SELECT DISTINCT name FROM kernels ORDER BY name")]

    def versions(self, name: str) -> list[KernelRecord]:
        return [_record(r) for r in self._query(
            "SELECT * FROM kernels WHERE name = ? ORDER BY version", (name,))]

    def all(self) -> list[KernelRecord]:
        return [_record(r) for r in self._query("SELECT * FROM kernels ORDER BY name, version")]

    def get(self, name: str, version: int | None = None) -> KernelRecord:
        """A version of `name` (the newest when `version` is None); RegistryError naming what
        the registry holds when there is none."""
        found = self.versions(name)
        if not found:
            names = self.names()
            raise RegistryError(f"no kernel named {name!r} in {self.root}; "
                                + (f"registered: {', '.join(names)}" if names else
                                   "the registry is empty (kernelevolve promote RUN_ID)"))
        if version is None:
            return found[-1]
        for rec in found:
            if rec.version == version:
                return rec
        raise RegistryError(f"{name} has no version {version}; versions: "
                            + ", ".join(f"v{r.version} ({r.state})" for r in found))

    def serving(self, name: str) -> tuple[KernelRecord | None, KernelRecord | None]:
        """(the default version, the trial version in shadow or canary), either may be None."""
        recs = self.versions(name)
        default = next((r for r in reversed(recs) if r.state == "default"), None)
        trial = next((r for r in reversed(recs) if r.state in TRIAL_STATES), None)
        return default, trial

    def events(self, name: str | None = None) -> list[RegistryEvent]:
        sql, params = "SELECT * FROM events ORDER BY seq", ()
        if name is not None:
            sql, params = "SELECT * FROM events WHERE name = ? ORDER BY seq", (name,)
        return [RegistryEvent(seq=r["seq"], ts=r["ts"], name=r["name"], version=r["version"],
                              kind=r["kind"], from_state=r["from_state"], to_state=r["to_state"],
                              who=r["who"], why=r["why"], data=from_json(r["data"]) or {})
                for r in self._query(sql, params)]

    # ---- writing -------------------------------------------------------------------------

    def add(self, name: str, entry: dict[str, Any], *, state: str = "shadow",
            who: str | None = None, why: str = "") -> KernelRecord:
        """Register a new version of `name` (1 + the newest) in `state`."""
        _check_name(name)
        _check_state(state)
        who = who or default_who()
        with self._write() as conn:
            row = conn.execute("SELECT MAX(version) FROM kernels WHERE name = ?",
                               (name,)).fetchone()
            version = (row[0] or 0) + 1
            now = time.time()
            entry = {**entry, "name": name, "version": version}
            conn.execute("INSERT INTO kernels(name, version, state, created, updated, "
                         "problem_hash, language, platform, entry) VALUES (?,?,?,?,?,?,?,?,?)",
                         (name, version, "retired", now, now, entry["problem"]["sha256"],
                          entry.get("language", "unknown"), entry.get("platform", "cpu"),
                          to_json(entry, "registry entry")))
            self._move(conn, name, version, state, who, why or "promoted", "promote",
                       fresh=True)
        return self.get(name, version)

    def set_state(self, name: str, version: int | None, state: str, *, who: str | None = None,
                  why: str = "", kind: str = "state") -> KernelRecord:
        """Move a version to `state`; the version it displaces (the old default, or the old
        trial) is retired as superseded."""
        _check_state(state)
        rec = self.get(name, version)
        with self._write() as conn:
            self._move(conn, name, rec.version, state, who or default_who(), why, kind)
        return self.get(name, rec.version)

    def demote(self, name: str, version: int, why: str, *, who: str | None = None,
               data: dict[str, Any] | None = None) -> KernelRecord:
        """Retire a version for a reason; `rollback` never brings it back."""
        rec = self.get(name, version)
        with self._write() as conn:
            if rec.state != "retired":
                self._update(conn, name, version, "retired")
            self._event(conn, name, version, "demote", rec.state, "retired",
                        who or default_who(), why, data or {})
        return self.get(name, version)

    def rollback(self, name: str, *, who: str | None = None, why: str = ""
                 ) -> tuple[KernelRecord, KernelRecord | None]:
        """Retire the default version and restore the one it superseded (None when there is
        none: calls then go to the original module). Returns (retired, restored)."""
        default, _ = self.serving(name)
        if default is None:
            raise RegistryError(f"{name} has no default version to roll back; "
                                f"`kernelevolve registry show {name}` lists its versions")
        who = who or default_who()
        previous = self._superseded_by(name, default.version)
        with self._write() as conn:
            self._update(conn, name, default.version, "retired")
            self._event(conn, name, default.version, "rollback", "default", "retired", who,
                        why or "rolled back")
            if previous is not None:
                self._update(conn, name, previous, "default")
                self._event(conn, name, previous, "rollback", "retired", "default", who,
                            why or f"restored by the rollback of v{default.version}")
        return self.get(name, default.version), (self.get(name, previous)
                                                 if previous is not None else None)

    def add_stats(self, name: str, version: int, counters: dict[str, Any],
                  host: str | None = None) -> None:
        """Record a serving process's coverage counters (one flush; `stats` sums them)."""
        with self._lock:
            self._conn.execute("INSERT INTO stats(ts, name, version, host, counters) "
                               "VALUES (?,?,?,?,?)", (time.time(), name, version,
                                                      host or socket.gethostname(),
                                                      to_json(counters, "coverage counters")))

    def stats(self, name: str | None = None) -> dict[tuple[str, int], dict[str, Any]]:
        """Flushed counters summed per (name, version)."""
        sql, params = "SELECT * FROM stats ORDER BY seq", ()
        if name is not None:
            sql, params = "SELECT * FROM stats WHERE name = ? ORDER BY seq", (name,)
        out: dict[tuple[str, int], dict[str, Any]] = {}
        for r in self._query(sql, params):
            _add_counters(out.setdefault((r["name"], r["version"]), {}),
                          from_json(r["counters"]) or {})
        return out

    # ---- internals -----------------------------------------------------------------------

    def _move(self, conn: sqlite3.Connection, name: str, version: int, state: str, who: str,
              why: str, kind: str, fresh: bool = False) -> None:
        current = conn.execute("SELECT state FROM kernels WHERE name = ? AND version = ?",
                               (name, version)).fetchone()[0]
        slot = ("default",) if state == "default" else TRIAL_STATES if state in TRIAL_STATES \
            else ()
        for other, other_state in conn.execute(
                "SELECT version, state FROM kernels WHERE name = ? AND version != ?",
                (name, version)).fetchall():
            if other_state in slot:
                self._update(conn, name, other, "retired")
                self._event(conn, name, other, "superseded", other_state, "retired", who,
                            f"superseded by v{version} ({state})")
        if current != state:
            self._update(conn, name, version, state)
        self._event(conn, name, version, kind, None if fresh else current, state, who, why)

    def _superseded_by(self, name: str, version: int) -> int | None:
        """The newest version that was default before `version` and was retired only because
        another took its place (so restoring it is what the user had before)."""
        events = self.events(name)
        last_kind: dict[int, str] = {}
        for ev in events:
            if ev.version is not None and ev.to_state == "retired":
                last_kind[ev.version] = ev.kind
        was_default = [ev.version for ev in events
                       if ev.to_state == "default" and ev.version not in (None, version)]
        states = {r.version: r.state for r in self.versions(name)}
        for v in reversed(was_default):
            if states.get(v) == "retired" and last_kind.get(v) == "superseded":
                return v
        return None

    @staticmethod
    def _update(conn: sqlite3.Connection, name: str, version: int, state: str) -> None:
        conn.execute("UPDATE kernels SET state = ?, updated = ? WHERE name = ? AND version = ?",
                     (state, time.time(), name, version))

    @staticmethod
    def _event(conn: sqlite3.Connection, name: str, version: int | None, kind: str,
               from_state: str | None, to_state: str | None, who: str, why: str,
               data: dict[str, Any] | None = None) -> None:
        conn.execute("INSERT INTO events(ts, name, version, kind, from_state, to_state, who, "
                     "why, data) VALUES (?,?,?,?,?,?,?,?,?)",
                     (time.time(), name, version, kind, from_state, to_state, who, why or "",
                      to_json(data or {}, "registry event")))

    def record_event(self, name: str, version: int | None, kind: str, why: str, *,
                     who: str | None = None, data: dict[str, Any] | None = None) -> None:
        """An event that changes no state (a revalidation that kept a kernel, a drift report)."""
        with self._write() as conn:
            self._event(conn, name, version, kind, None, None, who or default_who(), why, data)


def _record(row: sqlite3.Row) -> KernelRecord:
    return KernelRecord(name=row["name"], version=row["version"], state=row["state"],
                        created=row["created"], updated=row["updated"],
                        problem_hash=row["problem_hash"], language=row["language"],
                        platform=row["platform"], entry=from_json(row["entry"]) or {})


def _add_counters(total: dict[str, Any], more: dict[str, Any]) -> None:
    for key, value in more.items():
        if isinstance(value, dict):
            _add_counters(total.setdefault(key, {}), value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            total[key] = total.get(key, 0) + value
        elif isinstance(value, list):
            kept = total.setdefault(key, [])
            kept.extend(value[:max(0, 5 - len(kept))])


def _check_state(state: str) -> None:
    if state not in STATES:
        raise RegistryError(f"unknown state {state!r}; states: {', '.join(STATES)}")


def _check_name(name: str) -> None:
    import re

    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]{0,63}", name):
        raise RegistryError(f"kernel name {name!r} is not usable; use letters, digits, _ . - "
                            "(starting with a letter, at most 64 characters)")
