"""The store's SQL schema, as an ordered list of migrations.

Why migrations rather than one CREATE script: runs last hours and workspaces outlive releases, so
a newer kernelevolve must upgrade an old `kernelevolve.db` in place (and keep its runs resumable),
while an older kernelevolve must refuse a database written by a newer one instead of misreading
it. Each migration is `(version, [sql statements])`; `Store.open` applies the ones above the
database's `meta.schema_version`, all in one transaction, so an upgrade either completes or leaves
the file as it was. Never edit a released migration: append a new one.

JSON columns hold UTF-8 JSON text; REAL timestamps are Unix seconds.
"""
from __future__ import annotations

Migration = tuple[int, list[str]]

_V1: list[str] = [
    # Key/value facts about the database itself: schema_version, created_by.
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        created REAL NOT NULL,
        updated REAL NOT NULL,
        status TEXT NOT NULL,               -- running | completed | failed | interrupted
        problem_path TEXT,
        problem_hash TEXT,
        platform TEXT,
        config TEXT NOT NULL DEFAULT '{}',  -- JSON
        fingerprint TEXT NOT NULL DEFAULT '{}',  -- JSON
        outcome TEXT,                       -- JSON or NULL while running
        elapsed_s REAL NOT NULL DEFAULT 0   -- wall seconds of search so far, across resumes
    )""",
    "CREATE INDEX runs_by_created ON runs(created)",
    """CREATE TABLE nodes (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        id INTEGER NOT NULL,
        parents TEXT NOT NULL DEFAULT '[]', -- JSON list of node ids
        operator TEXT NOT NULL,
        rationale TEXT NOT NULL DEFAULT '',
        source_hash TEXT NOT NULL,
        status TEXT NOT NULL,               -- pending | done | infra_failed | root
        stage TEXT,                         -- gate stage reached; 'accepted' when all passed
        fitness REAL,
        speedup REAL,
        cost REAL NOT NULL DEFAULT 0,
        meta TEXT NOT NULL DEFAULT '{}',    -- JSON
        created REAL NOT NULL,
        PRIMARY KEY (run_id, id)
    )""",
    # Dedup looks a source up by hash before evaluating it ("identical sources evaluated once").
    "CREATE INDEX nodes_by_source ON nodes(run_id, source_hash)",
    # One row per node, enforced by the primary key: resume's proof that nothing was re-evaluated.
    """CREATE TABLE evaluations (
        run_id TEXT NOT NULL,
        node_id INTEGER NOT NULL,
        created REAL NOT NULL,
        wall_s REAL,
        result TEXT NOT NULL,               -- full EvalResult JSON
        PRIMARY KEY (run_id, node_id),
        FOREIGN KEY (run_id, node_id) REFERENCES nodes(run_id, id) ON DELETE CASCADE
    )""",
    """CREATE TABLE events (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        ts REAL NOT NULL,
        kind TEXT NOT NULL,
        data TEXT NOT NULL DEFAULT '{}',    -- JSON
        PRIMARY KEY (run_id, seq)
    )""",
    "CREATE INDEX events_by_kind ON events(run_id, kind)",
    """CREATE TABLE artifacts (
        run_id TEXT NOT NULL,
        node_id INTEGER NOT NULL,
        kind TEXT NOT NULL,                 -- source | library | log | ...
        name TEXT NOT NULL,
        object_hash TEXT NOT NULL,          -- objects/<2 hex>/<62 hex>
        PRIMARY KEY (run_id, node_id, kind, name),
        FOREIGN KEY (run_id, node_id) REFERENCES nodes(run_id, id) ON DELETE CASCADE
    )""",
]

# Ordered by version, starting at 1, no gaps. Read through the module attribute (not a copy) so
# tests can append a fake future migration with monkeypatch.
MIGRATIONS: list[Migration] = [
    (1, _V1),
]

SCHEMA_VERSION: int = MIGRATIONS[-1][0]


def latest_version(migrations: list[Migration] | None = None) -> int:
    """The newest schema version this code can write (the last migration's number)."""
    migrations = MIGRATIONS if migrations is None else migrations
    return migrations[-1][0] if migrations else 0


def pending(current: int, migrations: list[Migration] | None = None) -> list[Migration]:
    """Migrations to apply to a database at `current`, in order; checks the list is well formed."""
    migrations = MIGRATIONS if migrations is None else migrations
    versions = [v for v, _ in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"store migrations must be numbered 1, 2, 3, ... in order; got {versions}")
    return [(v, stmts) for v, stmts in migrations if v > current]
