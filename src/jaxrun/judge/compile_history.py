"""The history's record of what each run of a script compiled (schema version 6).

For every run of a script that used JAX (benchmarked or not), one row of ``compile_runs`` (the
script's identity as the history keys it: resolved path, content hash, host, device; the run's
compile environment as JSON: what JAX's persistent-cache key takes from the process) and one row
of ``programs`` per program (its compilations, persistent-cache loads, compile time, fingerprints,
device kind and count). A benchmarked run's row points at its row of ``runs`` (``history_run_id``).

The functions here take the history's open connection inside the caller's transaction
(:class:`jaxrun.judge.history.HistoryStore` holds it): one transaction per result, reads included.
"""

from __future__ import annotations

from typing import Iterable, Mapping, NamedTuple, Sequence

from jaxrun.judge.history_db import Database
from jaxrun.results.models import CompileEnvironment, CompileStats

__all__ = ["CachedBefore", "CompileRun", "create_tables", "insert", "cached_before", "programs_of_runs"]

_PROGRAM_COLUMNS = ("count", "cache_hits", "compile_time", "fingerprint", "input_fingerprint", "device_kind",
                    "device_count")


class CompileRun(NamedTuple):
    """One run of a script, as the history keeps its compiles."""

    recorded_at: str
    script_name: str
    script_path: str  # resolved, as ``runs.script_path``
    content_hash: str | None
    host: str
    device_requested: str
    device_used: str | None
    environment: CompileEnvironment | None
    programs: Mapping[str, CompileStats]
    history_run_id: int | None = None  # the benchmarked run's row of ``runs``


class CachedBefore(NamedTuple):
    """An earlier run of the same script (same host, same platform) after which the persistent cache
    held a program: it loaded it from there (``loaded``), or compiled it with that same cache folder
    on, which wrote it there (unless JAX declined: a program with host callbacks, one under JAX's
    thresholds, a process other than 0 of a multi-process job)."""

    compile_run_id: int
    recorded_at: str
    environment: CompileEnvironment | None
    stats: CompileStats
    loaded: bool


def create_tables(db: Database) -> None:
    db.execute(
        "CREATE TABLE compile_runs (id INTEGER PRIMARY KEY AUTOINCREMENT, recorded_at TEXT NOT NULL,"
        " script_name TEXT NOT NULL, script_path TEXT NOT NULL, content_hash TEXT, host TEXT NOT NULL,"
        " device_requested TEXT NOT NULL, device_used TEXT, environment TEXT,"
        " history_run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL)"
    )
    db.execute(
        "CREATE TABLE programs (compile_run_id INTEGER NOT NULL REFERENCES compile_runs(id) ON DELETE CASCADE,"
        " program TEXT NOT NULL, count INTEGER NOT NULL, cache_hits INTEGER NOT NULL, compile_time REAL,"
        " fingerprint TEXT, input_fingerprint TEXT, device_kind TEXT, device_count INTEGER)"
    )
    db.execute("CREATE INDEX compile_runs_script ON compile_runs (script_path, host)")
    db.execute("CREATE INDEX compile_runs_run ON compile_runs (history_run_id)")
    db.execute("CREATE INDEX programs_run ON programs (compile_run_id)")
    db.execute("CREATE INDEX programs_loaded ON programs (program, compile_run_id) WHERE cache_hits > 0")


def _environment(text: object) -> CompileEnvironment | None:
    if text is None:
        return None
    try:
        return CompileEnvironment.model_validate_json(str(text))
    except ValueError:  # written by another jaxrun: unknown, not a crash
        return None


def _stats(row: Sequence[object]) -> CompileStats:
    data = {k: v for k, v in zip(_PROGRAM_COLUMNS, row) if v is not None}
    return CompileStats(**data)


LOOK_BACK_RUNS = 20  # earlier runs read per program: the cache's entries a miss is explained against


def cached_before(db: Database, script_path: str, host: str, device_used: str | None,
                  programs: Iterable[str], cache_dir: str | None, before: int | None = None,
                  ) -> dict[str, list[CachedBefore]]:
    """Per program of ``programs``: the latest runs (at most :data:`LOOK_BACK_RUNS`, newest first)
    of ``script_path`` on ``host`` and the platform ``device_used`` (before the ``compile_runs`` row
    ``before``, when given) that loaded it from the persistent cache, or compiled it with the cache
    folder ``cache_dir`` on (and so wrote it there). A run that compiled it into another folder (a
    ``--cold-cache`` run's own) or with the cache off says nothing of this cache. Another
    platform's run is not an earlier run of the same program: its executables are other cache
    entries (a batch on --device cpu,gpu compiles each)."""
    found: dict[str, list[CachedBefore]] = {}
    for program in programs:
        rows = db.execute(
            "SELECT c.id, c.recorded_at, c.environment, " + ", ".join(f"p.{c}" for c in _PROGRAM_COLUMNS) +
            " FROM programs p JOIN compile_runs c ON c.id = p.compile_run_id"
            " WHERE p.program = ? AND (p.cache_hits > 0 OR p.count > 0) AND c.script_path = ? AND c.host = ?"
            " AND c.device_used IS ? AND c.id < ? ORDER BY c.id DESC LIMIT ?",
            (program, script_path, host, device_used, before if before is not None else 2 ** 62, 4 * LOOK_BACK_RUNS),
        ).fetchall()
        runs: list[CachedBefore] = []
        for row in rows:
            environment, stats = _environment(row[2]), _stats(row[3:])
            loaded = stats.cache_hits > 0
            wrote = environment is not None and environment.cache_dir is not None and environment.cache_dir == cache_dir
            if loaded or wrote:
                runs.append(CachedBefore(int(row[0]), str(row[1]), environment, stats, loaded))
            if len(runs) == LOOK_BACK_RUNS:
                break
        if runs:
            found[program] = runs
    return found


def insert(db: Database, run: CompileRun) -> int:
    """Store ``run`` and its programs; returns its id."""
    environment = None if run.environment is None else run.environment.model_dump_json()
    compile_run_id = db.insert(
        "INSERT INTO compile_runs (recorded_at, script_name, script_path, content_hash, host, device_requested,"
        " device_used, environment, history_run_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (run.recorded_at, run.script_name, run.script_path, run.content_hash, run.host, run.device_requested,
         run.device_used, environment, run.history_run_id),
    )
    db.executemany(
        f"INSERT INTO programs (compile_run_id, program, {', '.join(_PROGRAM_COLUMNS)})"
        f" VALUES (?, ?{', ?' * len(_PROGRAM_COLUMNS)})",
        [(compile_run_id, name, *(getattr(stats, c) for c in _PROGRAM_COLUMNS)) for name, stats in run.programs.items()],
    )
    return compile_run_id


def programs_of_runs(db: Database, run_ids: Sequence[int]) -> dict[int, dict[str, CompileStats]]:
    """Per benchmarked run (its ``runs`` id): its programs as the history kept them (a run recorded
    before schema 6, or that used no JAX, has none)."""
    if not run_ids:
        return {}
    rows = db.execute(
        "SELECT c.history_run_id, p.program, " + ", ".join(f"p.{c}" for c in _PROGRAM_COLUMNS) +
        " FROM compile_runs c JOIN programs p ON p.compile_run_id = c.id"
        f" WHERE c.history_run_id IN ({', '.join('?' * len(run_ids))}) ORDER BY p.rowid",
        list(run_ids),
    ).fetchall()
    found: dict[int, dict[str, CompileStats]] = {}
    for run_id, program, *values in rows:
        found.setdefault(int(run_id), {})[str(program)] = _stats(values)
    return found
