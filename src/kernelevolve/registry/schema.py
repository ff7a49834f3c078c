"""The kernel registry's SQL schema (its own `registry.db`, migrated like the run store).

Why a database of its own: a registry outlives the workspaces its kernels came from (a team
promotes from many runs, on many machines, into one folder it ships), and serving processes open
it read-mostly while `optimize` writes its workspace. Rows:

- `kernels`: one row per (name, version); `state` is shadow | canary | default | retired and
  `entry` the promoted record as JSON (source and library object hashes, problem, region,
  tolerance, evaluation, fingerprint, provenance; see promote.py);
- `events`: every change of state, with who, when and why (append-only);
- `stats`: coverage counters flushed by serving processes, one row per flush (summed on read);
- `meta`: schema_version, plus `generation`, bumped on every state change so a serving process
  can see with one read that it must reload states.
"""
from __future__ import annotations

from kernelevolve.store.schema import Migration

STATES = ("shadow", "canary", "default", "retired")
TRIAL_STATES = ("shadow", "canary")

_V1: list[str] = [
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE kernels (
        name TEXT NOT NULL,
        version INTEGER NOT NULL,
        state TEXT NOT NULL,
        created REAL NOT NULL,
        updated REAL NOT NULL,
        problem_hash TEXT NOT NULL,
        language TEXT NOT NULL,
        platform TEXT NOT NULL,
        entry TEXT NOT NULL,                -- JSON
        PRIMARY KEY (name, version)
    )""",
    """CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        ts REAL NOT NULL,
        name TEXT NOT NULL,
        version INTEGER,
        kind TEXT NOT NULL,                 -- promote | state | rollback | demote | revalidate
        from_state TEXT,
        to_state TEXT,
        who TEXT NOT NULL,
        why TEXT NOT NULL DEFAULT '',
        data TEXT NOT NULL DEFAULT '{}'     -- JSON
    )""",
    "CREATE INDEX events_by_name ON events(name, seq)",
    """CREATE TABLE stats (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        ts REAL NOT NULL,
        name TEXT NOT NULL,
        version INTEGER NOT NULL,
        host TEXT NOT NULL,
        counters TEXT NOT NULL              -- JSON: served, fallbacks by reason, shadow figures
    )""",
    "CREATE INDEX stats_by_name ON stats(name, version)",
]

MIGRATIONS: list[Migration] = [(1, _V1)]
