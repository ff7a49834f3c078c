"""Opening `kernelevolve.db`: sanity checks, pragmas, and schema migrations.

Order matters and is chosen so that a database we must refuse is never modified:
1. a read-only SQLite connection must read the file as a database (or it is empty/new), so a
   stray file at the path gets a plain "not a SQLite database" instead of a sqlite3 traceback;
2. the schema version is read inside `BEGIN IMMEDIATE` (which only takes a lock), and a version
   newer than this code knows is refused before anything is written;
3. pending migrations run in that same transaction, so an upgrade is all-or-nothing, and two
   processes opening one workspace at once cannot both apply it;
4. only then is the journal switched to WAL, which lets a reader (`kernelevolve show`) look at a
   run while `optimize` is writing it.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from kernelevolve.store import schema
from kernelevolve.store.errors import StoreError

# How long a writer waits for another process's write to finish before giving up. Writes here
# are single small transactions (ms), so 30 s only trips when something is really stuck.
BUSY_TIMEOUT_MS = 30_000


def open_connection(db_path: Path, migrations: list[schema.Migration] | None = None,
                    place: str = "--workspace") -> sqlite3.Connection:
    """A migrated, WAL-mode connection to `db_path` (created if missing); StoreError if unusable.
    `migrations` (default: the store's) lets another database (the kernel registry) share the
    same checks; `place` is the option its error messages point at."""
    check_header(db_path, place)
    try:
        conn = sqlite3.connect(str(db_path), timeout=BUSY_TIMEOUT_MS / 1000,
                               isolation_level=None, check_same_thread=False)
    except sqlite3.Error as e:
        raise StoreError(f"{db_path}: cannot open the store database ({e})") from None
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys = ON")
        migrate(conn, db_path, migrations, place)
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"{db_path}: SQLite refused WAL mode (journal_mode={mode}); "
                             "put the workspace on a local filesystem")
        # In WAL mode, NORMAL survives an application crash (SIGKILL included) without losing a
        # commit; only a power loss can drop the last transactions, and never corrupts the file.
        conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.DatabaseError as e:
        conn.close()
        raise StoreError(f"{db_path}: not a usable SQLite database ({e}); move it away or use "
                         f"another {place}") from None
    except BaseException:
        conn.close()
        raise
    return conn


def check_header(db_path: Path, place: str = "--workspace") -> None:
    """Refuse, without writing, a file that exists but is not a SQLite database.

    Read through SQLite (a read-only connection), never with a Python file object: closing any
    descriptor of a file drops every POSIX lock this process holds on it, the locks of its
    open SQLite connections included (SQLite's own connections share one lock record per file
    and keep it). Another process closing its last connection could then checkpoint and delete
    the WAL under our writer: "disk I/O error" at its next statement."""
    if db_path.is_dir():
        raise StoreError(f"{db_path}: is a directory, expected the store's SQLite database")
    if not db_path.exists():
        return
    from urllib.parse import quote

    try:
        probe = sqlite3.connect(f"file:{quote(str(db_path))}?mode=ro", uri=True,
                                timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as e:
        raise StoreError(f"{db_path}: cannot read the store database ({e})") from None
    try:
        probe.execute("PRAGMA schema_version").fetchone()
    except sqlite3.DatabaseError as e:
        if "not a database" in str(e):
            raise StoreError(f"{db_path}: not a SQLite database (it does not start with the "
                             f"SQLite header); move it away or use another {place}") from None
        raise StoreError(f"{db_path}: cannot read the store database ({e})") from None
    finally:
        probe.close()


def migrate(conn: sqlite3.Connection, db_path: Path,
            migrations: list[schema.Migration] | None = None, place: str = "--workspace") -> int:
    """Bring the database to the newest schema this code knows; return the version it ends at."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = read_version(conn, db_path, place)
        latest = schema.latest_version(migrations)
        if current > latest:
            raise StoreError(
                f"{db_path}: written by a newer kernelevolve (store schema v{current}); "
                f"this version reads up to v{latest} — upgrade kernelevolve or use another "
                f"{place}")
        for version, statements in schema.pending(current, migrations):
            try:
                for sql in statements:
                    conn.execute(sql)
            except sqlite3.Error as e:
                raise StoreError(f"{db_path}: upgrading the store schema from v{current} to "
                                 f"v{version} failed ({e}); the database was left at "
                                 f"v{current}") from None
            _set_meta(conn, "schema_version", str(version))
            if current == 0 and version == 1:
                _set_meta(conn, "created_by", f"kernelevolve {_version()}")
            elif current > 0:
                _set_meta(conn, "migrated_by", f"kernelevolve {_version()}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return max(current, latest)


def read_version(conn: sqlite3.Connection, db_path: Path, place: str = "--workspace") -> int:
    """0 for an empty database; the meta table's schema_version for a store; StoreError else."""
    tables = {r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
    if "meta" not in tables:
        if tables:
            raise StoreError(f"{db_path}: a SQLite database, but not a kernelevolve store (it has "
                             f"tables {sorted(tables)} and no meta table); use another "
                             f"{place}")
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    try:
        return int(row[0])
    except (TypeError, ValueError):
        raise StoreError(f"{db_path}: the store's meta table has no valid schema_version "
                         f"({None if row is None else row[0]!r}); the file is damaged or not a "
                         "kernelevolve store") from None


def _set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) "
                 "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value))


def _version() -> str:
    from kernelevolve.version import __version__

    return __version__
