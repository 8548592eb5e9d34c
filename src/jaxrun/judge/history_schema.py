"""The history database's schema: its tables as each version made them, and the migrations that
bring an older database up to :data:`SCHEMA_VERSION` in order, inside one transaction, keeping its
rows (``meta.schema_version`` says where a database stands; a newer one is refused, not guessed
at). A sample metric declared since a database was made is a column added as it opens
(:func:`add_declared_columns`), not a new version."""

from __future__ import annotations

import statistics
import uuid
from typing import Callable

from jaxrun.judge import compile_history
from jaxrun.judge.history_db import Database
from jaxrun.results.models import SAMPLE_METRICS

SCHEMA_VERSION = 9


RUN_COLUMNS = (
    "id", "recorded_at", "script_name", "script_path", "content_hash", "git_commit", "git_dirty", "host",
    "device_requested", "device_used", "jax_version", "jaxlib_version", "jaxrun_version", "median_wall_time",
    "mode", "numerics", "git_commit_time", "machine", "machine_id", "run_key",
)


SAMPLE_COLUMNS = ("idx", "warmup", "success", "error_class", *SAMPLE_METRICS)


def _v1(db: Database) -> None:
    db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute(
        "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, recorded_at TEXT NOT NULL,"
        " script_name TEXT NOT NULL, script_path TEXT NOT NULL, content_hash TEXT NOT NULL,"
        " git_commit TEXT, git_dirty INTEGER, host TEXT NOT NULL, device_requested TEXT NOT NULL,"
        " device_used TEXT, jax_version TEXT, jaxlib_version TEXT, jaxrun_version TEXT NOT NULL)"
    )
    db.execute(
        "CREATE TABLE samples (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
        " idx INTEGER NOT NULL, warmup INTEGER NOT NULL, success INTEGER NOT NULL, error_class TEXT,"
        " wall_time REAL, body_time REAL, compile_time REAL, steady_time REAL, memory_peak REAL)"
    )
    db.execute("CREATE INDEX runs_comparable ON runs (script_path, device_used, host)")
    db.execute("CREATE INDEX samples_run ON samples (run_id)")


def _v2(db: Database) -> None:
    """Store each run's median wall time (backfilled for old rows) and index script names."""
    db.execute("ALTER TABLE runs ADD COLUMN median_wall_time REAL")
    db.execute("CREATE INDEX runs_name ON runs (script_name)")
    rows = db.execute(
        "SELECT run_id, wall_time FROM samples WHERE warmup = 0 AND success = 1 AND wall_time IS NOT NULL"
    ).fetchall()
    per_run: dict[int, list[float]] = {}
    for run_id, wall in rows:
        per_run.setdefault(run_id, []).append(wall)
    db.executemany(
        "UPDATE runs SET median_wall_time = ? WHERE id = ?",
        [(statistics.median(walls), run_id) for run_id, walls in per_run.items()],
    )


def _v3(db: Database) -> None:
    """Record how a run was measured: a warm-mode run's wall time (one process calling main() R
    times) is not comparable with an ordinary run's. Older rows were all ordinary runs."""
    db.execute("ALTER TABLE runs ADD COLUMN mode TEXT NOT NULL DEFAULT 'process'")
    db.execute("DROP INDEX runs_comparable")
    db.execute("CREATE INDEX runs_comparable ON runs (script_path, device_used, host, mode)")


def _v4(db: Database) -> None:
    """The phases of a run: import_time, and run_time (the script's own work), which replaces
    steady_time (body minus compile, imports included). Old rows keep their steady_time as their
    run_time, the closest figure they have; their import_time is unknown (NULL)."""
    db.execute("ALTER TABLE samples ADD COLUMN import_time REAL")
    db.execute("ALTER TABLE samples ADD COLUMN run_time REAL")
    db.execute("UPDATE samples SET run_time = steady_time")


def _v5(db: Database) -> None:
    """The numerics a run started with (Numerics as JSON): runs with other numerics are not a
    baseline unless asked. Older rows' numerics are unknown (NULL)."""
    db.execute("ALTER TABLE runs ADD COLUMN numerics TEXT")


def _v6(db: Database) -> None:
    """What each run of a script that used JAX compiled (benchmarked or not): its compile
    environment and, per program, its compilations, cache loads, compile time, fingerprints,
    device kind and count (:mod:`jaxrun.judge.compile_history`). Older runs have none."""
    compile_history.create_tables(db)


def _v7(db: Database) -> None:
    """When each run's commit was made, and the machine it ran on (its facts as JSON and their
    fingerprint: results/machine.py): a series over commits is one machine's. Older rows' are
    unknown (NULL): their series are by host, as before."""
    db.execute("ALTER TABLE runs ADD COLUMN git_commit_time TEXT")
    db.execute("ALTER TABLE runs ADD COLUMN machine TEXT")
    db.execute("ALTER TABLE runs ADD COLUMN machine_id TEXT")


def _v8(db: Database) -> None:
    """The confirmations of change points (``--changes --confirm``): each duet of a change's two
    commits, its verdict and figures (a ChangeCheck as JSON), so that a refuted change never alarms
    again and a confirmed one is not run again."""
    db.execute(
        "CREATE TABLE change_checks (id INTEGER PRIMARY KEY AUTOINCREMENT, checked_at TEXT NOT NULL,"
        " script_path TEXT NOT NULL, metric TEXT NOT NULL, device TEXT, series_machine TEXT NOT NULL,"
        " mode TEXT NOT NULL, before_commit TEXT NOT NULL, after_commit TEXT NOT NULL, verdict TEXT NOT NULL,"
        " detail TEXT NOT NULL)"
    )
    db.execute("CREATE INDEX change_checks_key ON change_checks (script_path, metric, before_commit, after_commit)")


def _v9(db: Database) -> None:
    """Each run's own key (HistoryRun.run_key), unique: a run written again (``--resume`` after a
    lost connection, the import of a history holding it) is kept once. Older rows get a key each
    now, so that a history moved elsewhere and imported back keeps them once too."""
    db.execute("ALTER TABLE runs ADD COLUMN run_key TEXT")
    ids = [row[0] for row in db.execute("SELECT id FROM runs").fetchall()]
    db.executemany("UPDATE runs SET run_key = ? WHERE id = ?", [(uuid.uuid4().hex, run_id) for run_id in ids])
    db.execute("CREATE UNIQUE INDEX runs_key ON runs (run_key)")


# MIGRATIONS[i] takes a database at schema version i to version i + 1.
MIGRATIONS: list[Callable[[Database], None]] = [_v1, _v2, _v3, _v4, _v5, _v6, _v7, _v8, _v9]
assert len(MIGRATIONS) == SCHEMA_VERSION


def add_declared_columns(db: Database) -> None:
    """A column of ``samples`` for each sample metric declared since the database was made
    (results/figures.py): added, not migrated, so a new figure needs no schema version. Rows
    recorded before it hold NULL there (unknown, never 0); an older jaxrun names the columns it
    reads and writes, and leaves the new ones NULL."""
    have = db.columns("samples")
    for metric in SAMPLE_METRICS:
        if metric not in have:
            db.execute(f"ALTER TABLE samples ADD COLUMN {metric} REAL")
