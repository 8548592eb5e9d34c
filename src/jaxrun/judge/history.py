"""The benchmark history: every benchmarked run of a script, kept in an embedded SQLite database.

Where: ``$JAXRUN_HISTORY`` when set, else ``<working folder>/.jaxrun/history.sqlite`` (the CLI's
``--history PATH`` wins over both). One row of ``runs`` per benchmarked run of one script, with the
script's identity (resolved path and sha256 of its content), the git commit and dirty flag of the
repository holding it, host, device, versions; its samples (warm-ups and counted runs) are rows of
``samples``.

Safety: the database is in WAL mode with a 30 s busy timeout, and every write is one
``BEGIN IMMEDIATE`` transaction, so several jaxrun processes can record into one file at once.
The schema is versioned (``meta.schema_version``); :data:`MIGRATIONS` bring an older database up
to :data:`SCHEMA_VERSION` in order, inside one transaction, keeping its rows; a sample metric declared
since (results/figures.py) adds its column of ``samples`` there. A database written by a newer jaxrun
is refused rather than guessed at.

Regression: the newest run of a script is compared phase by phase (:mod:`jaxrun.judge.verdicts`) with the
counted, successful samples of up to ``window`` (5) earlier runs of the same script path on the same
device, host, mode and numerics; it is a regression when the verdict of its gate (run and compile
time by default) is "slower". With fewer than :data:`~jaxrun.core.defaults.MIN_HISTORY_RUNS` (3) such
earlier runs it is not judged ("not judged: 1 earlier run, needs 3"), never a regression.
"""

from __future__ import annotations

import math
import os
import sqlite3
import statistics
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence

from jaxrun.config.options import VerdictOptions, verdict_options
from jaxrun.core.defaults import HISTORY_ENV, HISTORY_WINDOW, MIN_HISTORY_RUNS
from jaxrun.core.paths import default_history_path, history_path
from jaxrun.errors import UsageError
from jaxrun.judge import compile_history
from jaxrun.judge.compile_history import CachedBefore, CompileRun
from jaxrun.results.comparison_report import JUDGED_VERDICTS, TOO_FEW
from jaxrun.results.models import (
    SAMPLE_METRICS,
    CompileStats,
    HistoryRun,
    Numerics,
    RegressionCheck,
    RunSample,
)
from jaxrun.results.provenance import (
    git_state,
    history_run_from_benchmark,
    script_identity,
)

__all__ = [
    "HistoryStore", "default_history_path", "history_path", "git_state", "history_run_from_benchmark",
    "script_identity", "ScriptSummary", "TrendPoint", "MIGRATIONS", "SCHEMA_VERSION", "HISTORY_ENV",
    "HistoryUnreadable", "integrity_check", "repair", "Repaired",
]

SCHEMA_VERSION = 6
BUSY_TIMEOUT_SECONDS = 30.0

_RUN_COLUMNS = (
    "id", "recorded_at", "script_name", "script_path", "content_hash", "git_commit", "git_dirty", "host",
    "device_requested", "device_used", "jax_version", "jaxlib_version", "jaxrun_version", "median_wall_time",
    "mode", "numerics",
)
_SAMPLE_COLUMNS = ("idx", "warmup", "success", "error_class", *SAMPLE_METRICS)


class HistoryUnreadable(UsageError):
    """The history database opened, but SQLite could not read or write it (a damaged page, an I/O
    error). A batch notes it once and goes on without the history; ``jaxrun history`` says it in
    one line. ``problem`` is ``<path>: <SQLite's message>``."""

    def __init__(self, path: str | os.PathLike[str], detail: object) -> None:
        self.path, self.detail = Path(path), str(detail)
        super().__init__(
            f"cannot read the history database {str(self.path)!r}: {self.detail}; "
            "`jaxrun history --check` says what is damaged, `jaxrun history --repair` saves what can be read"
        )

    @property
    def problem(self) -> str:
        return f"{self.path}: {self.detail}"


class ScriptSummary(NamedTuple):
    script_path: str
    script_name: str
    n_runs: int
    last_recorded_at: str


class TrendPoint(NamedTuple):
    run_id: int
    recorded_at: str
    git_commit: str | None
    median: float | None
    n: int


# --- where, what and which version -----------------------------------------------------------------


def _v1(db: sqlite3.Connection) -> None:
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


def _v2(db: sqlite3.Connection) -> None:
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


def _v3(db: sqlite3.Connection) -> None:
    """Record how a run was measured: a warm-mode run's wall time (one process calling main() R
    times) is not comparable with an ordinary run's. Older rows were all ordinary runs."""
    db.execute("ALTER TABLE runs ADD COLUMN mode TEXT NOT NULL DEFAULT 'process'")
    db.execute("DROP INDEX runs_comparable")
    db.execute("CREATE INDEX runs_comparable ON runs (script_path, device_used, host, mode)")


def _v4(db: sqlite3.Connection) -> None:
    """The phases of a run: import_time, and run_time (the script's own work), which replaces
    steady_time (body minus compile, imports included). Old rows keep their steady_time as their
    run_time, the closest figure they have; their import_time is unknown (NULL)."""
    db.execute("ALTER TABLE samples ADD COLUMN import_time REAL")
    db.execute("ALTER TABLE samples ADD COLUMN run_time REAL")
    db.execute("UPDATE samples SET run_time = steady_time")


def _v5(db: sqlite3.Connection) -> None:
    """The numerics a run started with (Numerics as JSON): runs with other numerics are not a
    baseline unless asked. Older rows' numerics are unknown (NULL)."""
    db.execute("ALTER TABLE runs ADD COLUMN numerics TEXT")


def _v6(db: sqlite3.Connection) -> None:
    """What each run of a script that used JAX compiled (benchmarked or not): its compile
    environment and, per program, its compilations, cache loads, compile time, fingerprints,
    device kind and count (:mod:`jaxrun.judge.compile_history`). Older runs have none."""
    compile_history.create_tables(db)


# MIGRATIONS[i] takes a database at schema version i to version i + 1.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1, _v2, _v3, _v4, _v5, _v6]
assert len(MIGRATIONS) == SCHEMA_VERSION


def _add_declared_columns(db: sqlite3.Connection) -> None:
    """A column of ``samples`` for each sample metric declared since the database was made
    (results/figures.py): added, not migrated, so a new figure needs no schema version. Rows
    recorded before it hold NULL there (unknown, never 0); an older jaxrun names the columns it
    reads and writes, and leaves the new ones NULL."""
    have = {row[1] for row in db.execute("PRAGMA table_info(samples)")}
    for metric in SAMPLE_METRICS:
        if metric not in have:
            db.execute(f"ALTER TABLE samples ADD COLUMN {metric} REAL")


def _clean(value: float | None) -> float | None:
    """NaN and infinities are not measurements: they are stored as NULL."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


class HistoryStore:
    """A history database; open with ``with HistoryStore(path) as store: ...``.

    ``create=False`` refuses a missing file instead of creating an empty history.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True) -> None:
        self.path = Path(path).expanduser()
        if self.path.is_dir():
            raise UsageError(f"history path {str(self.path)!r} is a folder; pass a file path with --history")
        if not self.path.exists():
            if not create:
                raise UsageError(
                    f"no history database at {str(self.path)!r}; benchmark a script first "
                    "(jaxrun run SCRIPT --benchmark-runs N) or pass --history PATH"
                )
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UsageError(f"cannot create the folder for history {str(self.path)!r}: {exc.strerror}") from None
        try:
            self._db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
        except sqlite3.Error as exc:
            raise UsageError(f"cannot open history database {str(self.path)!r}: {exc}") from None
        try:
            self._setup()
        except BaseException:
            self._db.close()
            raise

    # -- connection life ------------------------------------------------------------------------

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def _not_a_database(self, exc: sqlite3.Error) -> UsageError:
        return UsageError(
            f"{str(self.path)!r} is not a jaxrun history database ({exc}); pass --history with "
            "another path or remove the file"
        )

    def _setup(self) -> None:
        deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
        while True:  # several processes may open a fresh file at once: retry what the busy handler misses
            try:
                self._db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
                self._db.execute("PRAGMA foreign_keys = ON")
                if self._db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    self._db.execute("PRAGMA journal_mode = WAL")
                self._migrate()
                return
            except sqlite3.OperationalError as exc:
                if ("locked" in str(exc) or "busy" in str(exc)) and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                raise HistoryUnreadable(self.path, exc) from None
            except sqlite3.DatabaseError as exc:
                if "not a database" in str(exc):  # not an SQLite file at all (or its header is gone)
                    raise self._not_a_database(exc) from None
                raise HistoryUnreadable(self.path, exc) from None  # an SQLite file with a damaged page

    def _stored_version(self) -> int:
        has_meta = self._db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
        if not has_meta:
            if self._db.execute("SELECT 1 FROM sqlite_master").fetchone():
                raise UsageError(
                    f"{str(self.path)!r} is an SQLite database but not a jaxrun history (no meta table); "
                    "pass --history with another path"
                )
            return 0
        row = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        with self._write():
            version = self._stored_version()
            if version > SCHEMA_VERSION:
                raise UsageError(
                    f"history database {str(self.path)!r} was written by a newer jaxrun (schema "
                    f"{version} > {SCHEMA_VERSION}); upgrade jaxrun or pass --history NEW_PATH"
                )
            for migration in MIGRATIONS[version:]:
                migration(self._db)
            _add_declared_columns(self._db)
            if version < SCHEMA_VERSION:
                self._db.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )

    @contextmanager
    def _write(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[None]:
        self._db.execute("BEGIN")  # one snapshot for the several queries of one answer
        try:
            yield
        finally:
            self._db.execute("COMMIT")

    @property
    def schema_version(self) -> int:
        return self._stored_version()

    # -- writing ----------------------------------------------------------------------------------

    def record(self, run: HistoryRun) -> int:
        """Store one run with its samples; returns its id."""
        median = _clean(run.median_wall_time)
        if median is None:
            from jaxrun.judge.benchmark_runs import (
                metric_values,  # numpy: only for a benchmark (recording compiles needs none)
            )

            walls = metric_values(run.samples, "wall_time")
            median = statistics.median(walls) if walls else None
        values = run.model_dump(include=set(_RUN_COLUMNS) - {"id", "median_wall_time"})
        values["git_dirty"] = None if run.git_dirty is None else int(run.git_dirty)
        values["numerics"] = None if run.numerics is None else run.numerics.model_dump_json()
        values["median_wall_time"] = median
        columns = list(values)
        with self._write():
            cursor = self._db.execute(
                f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                [values[c] for c in columns],
            )
            run_id = int(cursor.lastrowid)
            self._db.executemany(
                f"INSERT INTO samples (run_id, {', '.join(_SAMPLE_COLUMNS)}) VALUES (?{', ?' * len(_SAMPLE_COLUMNS)})",
                [
                    (run_id, s.index, int(s.warmup), int(s.success), s.error_class,
                     *(_clean(getattr(s, m)) for m in SAMPLE_METRICS))
                    for s in run.samples
                ],
            )
        return run_id

    def record_compiles(self, run: CompileRun, look_back: Iterable[str] = ()) -> tuple[int, dict[str, list[CachedBefore]]]:
        """Store what one run compiled (one transaction); returns its id and, for each program of
        ``look_back``, the latest earlier runs of the same script on the same host and platform
        after which the run's persistent cache held it (they loaded it, or wrote it there)."""
        cache_dir = run.environment.cache_dir if run.environment is not None else None
        with self._write():
            before = compile_history.cached_before(self._db, run.script_path, run.host, run.device_used, look_back,
                                                   cache_dir)
            return compile_history.insert(self._db, run), before

    def programs_of_runs(self, run_ids: Sequence[int]) -> dict[int, dict[str, CompileStats]]:
        """Per benchmarked run id: the programs it compiled (none for runs from before schema 6)."""
        with self._read():
            return compile_history.programs_of_runs(self._db, run_ids)

    # -- reading ----------------------------------------------------------------------------------

    def match_scripts(self, script: str | os.PathLike[str]) -> list[str]:
        """Stored script paths that ``script`` designates, by the first rule that matches any:

        1. the exact stored path (as given, or resolved against the working folder);
        2. the script name (``ScriptResult.script_name``);
        3. for a relative ``script``, a path suffix of whole components: ``x.py`` or
           ``examples/x.py`` match ``/any/examples/x.py`` (``yx.py`` does not match ``x.py``).
        """
        text = os.fspath(script)
        known = self._db.execute("SELECT DISTINCT script_path, script_name FROM runs").fetchall()
        paths = {p for p, _ in known}
        exact = {text, str(Path(text).expanduser().resolve())} & paths
        if exact:
            return sorted(exact)
        by_name = sorted({p for p, name in known if name == text})
        if by_name or Path(text).is_absolute():
            return by_name
        parts = Path(text.replace("\\", "/")).parts
        parts = tuple(p for p in parts if p not in (".", "/"))
        if not parts:
            return []
        return sorted(p for p in paths if Path(p).parts[-len(parts):] == parts)

    def runs(
        self,
        script: str | os.PathLike[str] | None = None,
        *,
        device: str | None = None,
        host: str | None = None,
        limit: int | None = None,
    ) -> list[HistoryRun]:
        """Runs oldest to newest (in recording order), each with its samples.

        ``script`` follows :meth:`match_scripts`; ``device`` filters on the device used; ``limit``
        keeps the newest ``limit`` runs.
        """
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise UsageError(f"limit must be a whole number >= 1 (the newest runs to show), got {limit!r}")
        with self._read():
            where, params = [], []
            if script is not None:
                paths = self.match_scripts(script)
                if not paths:
                    return []
                where.append(f"script_path IN ({', '.join('?' * len(paths))})")
                params += paths
            if device is not None:
                where.append("device_used = ?")
                params.append(device)
            if host is not None:
                where.append("host = ?")
                params.append(host)
            sql = f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs"
            if where:
                sql += " WHERE " + " AND ".join(where)
            sql += " ORDER BY id DESC"
            if limit is not None:
                sql += " LIMIT ?"
                params.append(int(limit))
            rows = self._db.execute(sql, params).fetchall()[::-1]
            return [self._run_from_row(row) for row in rows]

    def _run_from_row(self, row: Sequence[object]) -> HistoryRun:
        data = dict(zip(_RUN_COLUMNS, row))
        if data["git_dirty"] is not None:
            data["git_dirty"] = bool(data["git_dirty"])
        if data["numerics"] is not None:
            data["numerics"] = Numerics.model_validate_json(str(data["numerics"]))
        return HistoryRun(**data, samples=self._samples([int(data["id"])]))

    def _samples(self, run_ids: Sequence[int]) -> list[RunSample]:
        rows = self._db.execute(
            f"SELECT {', '.join(_SAMPLE_COLUMNS)} FROM samples WHERE run_id IN ({', '.join('?' * len(run_ids))})"
            " ORDER BY rowid", list(run_ids),
        ).fetchall()
        samples = []
        for row in rows:
            data = dict(zip(_SAMPLE_COLUMNS, row))
            samples.append(RunSample(index=data.pop("idx"), **{**data, "warmup": bool(data["warmup"]),
                                                                 "success": bool(data["success"])}))
        return samples

    def get(self, run_id: int) -> HistoryRun:
        with self._read():
            row = self._db.execute(f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise UsageError(f"no run with id {run_id} in history {str(self.path)!r}")
            return self._run_from_row(row)

    def scripts(self) -> list[ScriptSummary]:
        """One line per script path: latest name, number of runs, time of the latest run."""
        rows = self._db.execute(
            "SELECT script_path, script_name, COUNT(*), recorded_at, MAX(id) FROM runs "
            "GROUP BY script_path ORDER BY script_path"
        ).fetchall()  # SQLite takes bare columns from the row holding MAX(id)
        return [ScriptSummary(path, name, n, at) for path, name, n, at, _ in rows]

    def trend(
        self, script: str | os.PathLike[str], *, metric: str = "wall_time", device: str | None = None,
        host: str | None = None,
    ) -> list[TrendPoint]:
        """Per run of ``script`` (oldest first): the median of its counted successful samples."""
        from jaxrun.judge.benchmark_runs import metric_values
        from jaxrun.results.benchmark_result import resolve_metric

        metric = resolve_metric(metric)
        points = []
        for run in self.runs(script, device=device, host=host):
            values = metric_values(run.samples, metric)
            points.append(TrendPoint(int(run.id or 0), run.recorded_at, run.git_commit,
                                     statistics.median(values) if values else None, len(values)))
        return points

    # -- regressions --------------------------------------------------------------------------------

    def check_regression(
        self, run_id: int, options: VerdictOptions | None = None, *, window: int = HISTORY_WINDOW,
        min_runs: int = MIN_HISTORY_RUNS, **given: Any,
    ) -> RegressionCheck:
        """Compare run ``run_id`` with up to ``window`` earlier comparable runs (same script path,
        device used, host and mode, and the same numerics unless ``allow_mismatch``) that have
        counted successful samples; pooled, they are the baseline. Every phase is judged; the
        regression is the verdict of the gate (run and compile time, or ``metric``), as in
        :func:`jaxrun.judge.verdicts.judge_script`. Earlier runs left out for their numerics are
        counted in ``other_numerics`` and said in ``note``.

        With fewer than ``min_runs`` earlier comparable runs nothing is compared: ``judged`` is
        false, ``reason`` says so ("not judged: 1 earlier run, needs 3") and ``regression`` is
        false. A comparison that reaches no verdict (too few runs to judge, not comparable) is not
        judged either."""
        for name, value in (("window", window), ("min_runs", min_runs)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{name} must be a whole number >= 1, got {value!r}")
        if window < min_runs:
            raise UsageError(f"window ({window}) must be at least min_runs ({min_runs}): no check could be judged")
        from jaxrun.judge.benchmark_runs import metric_values
        from jaxrun.judge.verdicts import judge_script, metrics_for, too_few_note

        options = verdict_options(options, given)
        allow_mismatch = options.allow_mismatch
        judged, gate = metrics_for(options.metric)
        run = self.get(run_id)
        mine = None if run.numerics is None else run.numerics.model_dump_json()
        same = "" if allow_mismatch else " AND r.numerics IS ?"
        query = (
            "SELECT r.id FROM runs r WHERE r.script_path = ? AND r.device_used IS ? AND r.host = ?"
            " AND r.mode = ? AND r.id < ?{}"
            " AND EXISTS (SELECT 1 FROM samples s WHERE s.run_id = r.id AND s.warmup = 0 AND s.success = 1)"
            " ORDER BY r.id DESC LIMIT ?"
        )
        params = (run.script_path, run.device_used, run.host, run.mode, run_id)
        previous = self._db.execute(query.format(same), (*params, *([mine] if same else []), window)).fetchall()
        other = 0 if allow_mismatch else len(self._db.execute(
            query.format(" AND r.numerics IS NOT ?"), (*params, mine, window)).fetchall())
        check = RegressionCheck(
            script_path=run.script_path, device=run.device_used, host=run.host, gate=list(gate),
            newest_run_id=run_id, previous_runs=len(previous), min_previous_runs=min_runs, regression=False,
            other_numerics=other, judged=False,
        )
        if other:
            check.note = (f"{other} earlier run(s) started with other numerics and are not in the baseline "
                          "(--allow-mismatch to pool them)")
        if len(previous) < min_runs:
            found = {0: "no earlier run", 1: "1 earlier run"}.get(len(previous), f"{len(previous)} earlier runs")
            check.reason = f"not judged: {found}, needs {min_runs}"
            if other:
                check.reason += f" ({other} more with other numerics)"
            if not previous and other:
                check.note = (f"not judged: the {other} earlier run(s) started with other numerics "
                              "(x64, matmul precision, debug or XLA flags); --allow-mismatch to judge against them")
            return check
        ids = sorted(r[0] for r in previous)
        base_samples = self._samples(ids)
        base = {m: metric_values(base_samples, m) for m in judged}
        new = {m: metric_values(run.samples, m) for m in judged}
        comparison = judge_script(run.script_name, run.device_used, base, new, options)
        notes = [f"baseline: {len(base_samples)} samples from runs {ids}"]
        if not any(new.values()):
            notes.append("the newest run has no successful counted sample")
        comparison.note = "; ".join(notes + ([comparison.note] if comparison.note else []))
        check.gate, check.comparison = comparison.gate, comparison
        check.regression = comparison.verdict == "slower"
        check.judged = comparison.verdict in JUDGED_VERDICTS
        if not check.judged:
            check.reason = f"not judged: {comparison.verdict}"
            detail = too_few_note(comparison) if comparison.verdict == TOO_FEW else None
            if detail:
                check.reason += f" ({detail})"
        return check

    def check_latest(self, script: str | os.PathLike[str] | None = None, options: VerdictOptions | None = None,
                     **given: Any) -> list[RegressionCheck]:
        """:meth:`check_regression` of the newest run of every (script, device, host) group."""
        where, params = "", []
        if script is not None:
            paths = self.match_scripts(script)
            if not paths:
                return []
            where, params = f"WHERE script_path IN ({', '.join('?' * len(paths))})", paths
        ids = [r[0] for r in self._db.execute(
            f"SELECT MAX(id) FROM runs {where} GROUP BY script_path, device_used, host, mode ORDER BY script_path, MAX(id)",
            params,
        ).fetchall()]
        options = verdict_options(options, given)
        return [self.check_regression(run_id, options) for run_id in ids]


def expected_durations(history: str | os.PathLike[str] | bool | None, scripts: Sequence[Path]) -> dict[str, float]:
    """Median wall time of each script's recent history runs, to schedule the longest first.

    Reads an existing database only (``history`` as for ``run_jax_scripts``); an unreadable or
    missing history just means no durations are known.
    """
    path = history_path(history)
    if path is None or not path.is_file():
        return {}
    durations: dict[str, float] = {}
    try:
        with HistoryStore(path, create=False) as store:
            for script in scripts:
                key = str(Path(script).resolve())
                runs = store.runs(key, limit=5) if store.match_scripts(key) else []
                medians = [r.median_wall_time for r in runs if r.median_wall_time is not None]
                if medians:
                    durations[key] = statistics.median(medians)
    except (UsageError, sqlite3.Error):
        return {}
    return durations


# --- a damaged database: SQLite's own check, and saving what can be read ---------------------------


def _existing(path: str | os.PathLike[str]) -> Path:
    path = Path(path).expanduser()
    if not path.is_file():
        raise UsageError(f"no history database at {str(path)!r}; pass --history PATH")
    return path


def integrity_check(path: str | os.PathLike[str]) -> list[str]:
    """SQLite's ``PRAGMA integrity_check`` of the history at ``path``: its findings, ``[]`` when
    the file is sound. A file SQLite cannot check at all is one finding (its message)."""
    path = _existing(path)
    try:
        db = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_SECONDS)
    except sqlite3.Error as exc:
        return [str(exc)]
    # SQLite may stop with an error after a finding, and Python's sqlite3 then loses the rows it
    # had: ask for 1, 2, 4, ... findings, keeping the last full answer and the error that ended it.
    rows: list[str] = []
    limit = 1
    try:
        while True:
            try:
                found = [str(r[0]) for r in db.execute(f"PRAGMA integrity_check({limit})").fetchall()]
            except sqlite3.Error as exc:
                rows.append(str(exc))
                break
            rows = found
            if found == ["ok"] or len(found) < limit or limit >= 1024:
                break
            limit *= 2
    finally:
        db.close()
    return [] if rows == ["ok"] else [line for row in rows for line in row.splitlines()]


class Repaired(NamedTuple):
    path: Path  # the new database, where the old one was
    damaged: Path  # the old file, renamed
    runs: int
    samples: int
    unreadable: list[str]  # "table: what could not be read"


def _readable_rows(db: sqlite3.Connection, table: str, lost: list[str]) -> Iterator[tuple[Any, ...]]:
    """Every row of ``table`` SQLite can still read, in rowid order: a damaged page is stepped
    over (the first readable rowid past it found by a doubling then a bisecting search)."""
    quoted = '"' + table.replace('"', '""') + '"'
    after: int | None = None  # the last rowid read (None: from the start)
    while True:
        where, params = ("", []) if after is None else (" WHERE rowid > ?", [after])
        try:
            for row in db.execute(f"SELECT rowid, * FROM {quoted}{where} ORDER BY rowid", params):
                after = row[0]
                yield row
            return
        except sqlite3.DatabaseError as exc:
            start = after if after is not None else -(2 ** 63)

            def readable(low: int) -> bool:
                try:
                    db.execute(f"SELECT rowid, * FROM {quoted} WHERE rowid > ? ORDER BY rowid LIMIT 1", [low]).fetchall()
                    return True
                except sqlite3.DatabaseError:
                    return False

            step, past = 1, None
            while start + step < 2 ** 63:
                if readable(start + step):
                    past = start + step
                    break
                step *= 2
            lost.append(f"{table}: rows after rowid {after if after is not None else 'the start'} ({exc})")
            if past is None:
                return
            low = start + step // 2  # unreadable from here; readable from past: the smallest readable
            while past - low > 1:
                middle = (low + past) // 2
                if readable(middle):
                    past = middle
                else:
                    low = middle
            after = past


def repair(path: str | os.PathLike[str]) -> Repaired:
    """Save what SQLite can still read of the history at ``path`` into a new database at
    ``path``; the old file is kept beside it as ``<name>.damaged-<timestamp>``. Tables and indexes
    are made again from the old file's own schema; every row that can be read is copied; samples
    whose run was lost are left out."""
    path = _existing(path)
    source = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    fresh = path.with_name(f"{path.name}.repairing-{stamp}")
    lost: list[str] = []
    try:
        try:
            schema = source.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'"
                " ORDER BY type = 'index', rowid").fetchall()
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"nothing can be saved from {str(path)!r}: SQLite cannot read its list of tables ({exc})") from None
        names = {name for kind, name, _ in schema if kind == "table"}
        if not {"meta", "runs", "samples"} <= names:
            raise UsageError(f"{str(path)!r} is not a jaxrun history database (tables: {', '.join(sorted(names)) or 'none'})")
        target = sqlite3.connect(str(fresh), isolation_level=None)
        try:
            target.execute("BEGIN")
            for kind, _, sql in schema:
                if kind == "table":
                    target.execute(sql)
            counts: dict[str, int] = {}
            run_ids: set[int] = set()
            compile_run_ids: set[int] = set()
            for table in ("meta", "runs", "samples", "compile_runs", "programs"):
                if table not in names:
                    continue  # a database from before schema 6
                columns = [r[1] for r in source.execute(f"PRAGMA table_info({table})").fetchall()]
                insert = (f"INSERT INTO {table} (rowid, {', '.join(columns)}) "
                          f"VALUES (?{', ?' * len(columns)})")
                n = 0
                run_at = columns.index("run_id") + 1 if table == "samples" else None
                owner_at = columns.index("compile_run_id") + 1 if table == "programs" else None
                for row in _readable_rows(source, table, lost):
                    if run_at is not None and row[run_at] not in run_ids:
                        continue  # its run was lost: a sample of nothing
                    if owner_at is not None and row[owner_at] not in compile_run_ids:
                        continue  # a program of a lost run
                    if table == "compile_runs":
                        linked = columns.index("history_run_id") + 1
                        if row[linked] is not None and row[linked] not in run_ids:
                            row = (*row[:linked], None, *row[linked + 1:])  # its benchmarked run was lost
                        compile_run_ids.add(row[0])
                    target.execute(insert, row)
                    if table == "runs":
                        run_ids.add(row[0])
                    n += 1
                counts[table] = n
            for kind, _, sql in schema:
                if kind != "table":
                    target.execute(sql)
            target.execute("COMMIT")
        finally:
            target.close()
    except BaseException:
        fresh.unlink(missing_ok=True)
        raise
    finally:
        source.close()
    try:
        HistoryStore(fresh).close()  # what jaxrun will open: brought up to this schema, in WAL mode
    except BaseException:
        fresh.unlink(missing_ok=True)
        raise
    damaged = path.with_name(f"{path.name}.damaged-{stamp}")
    os.replace(path, damaged)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, damaged.with_name(damaged.name + suffix))
    os.replace(fresh, path)
    for suffix in ("-wal", "-shm"):
        fresh.with_name(fresh.name + suffix).unlink(missing_ok=True)
    return Repaired(path, damaged, counts["runs"], counts["samples"], lost)
