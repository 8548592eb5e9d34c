"""The benchmark history: every benchmarked run of a script, kept in an embedded SQLite database,
or in a team's PostgreSQL database (a ``postgresql://`` URL: judge/history_db.py holds the dialect).

Where: ``$JAXRUN_HISTORY`` when set, else ``<working folder>/.jaxrun/history.sqlite`` (the CLI's
``--history PATH`` wins over both). One row of ``runs`` per benchmarked run of one script, with the
script's identity (resolved path and sha256 of its content), the git commit and dirty flag of the
repository holding it, host, device, versions, and its own key (``run_key``: a run written again is
kept once); its samples (warm-ups and counted runs) are rows of ``samples``.

Safety: an SQLite file is in WAL mode with a 30 s busy timeout, and every write is one
``BEGIN IMMEDIATE`` transaction, so several jaxrun processes can record into one file at once
(PostgreSQL's own transactions do the same for many machines).
The schema is versioned (``meta.schema_version``); :data:`MIGRATIONS` bring an older database up
to :data:`SCHEMA_VERSION` in order, inside one transaction, keeping its rows; a sample metric declared
since (results/figures.py) adds its column of ``samples`` there. A database written by a newer jaxrun
is refused rather than guessed at.
The regression check is judge/regression.py's; the schema and its migrations
judge/history_schema.py's; the repair of a damaged file judge/history_repair.py's.
"""

from __future__ import annotations

import itertools
import math
import os
import sqlite3
import statistics
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Iterable, Iterator, NamedTuple, Sequence

from jaxrun.config.options import VerdictOptions, verdict_options
from jaxrun.core.defaults import HISTORY_ENV, HISTORY_WINDOW, MIN_HISTORY_RUNS
from jaxrun.core.paths import default_history_path, history_path, is_history_url
from jaxrun.errors import UsageError
from jaxrun.judge import compile_history
from jaxrun.judge.compile_history import CachedBefore, CompileRun
from jaxrun.judge.history_db import Database, connect_postgres, shown_location
from jaxrun.judge.history_schema import (
    MIGRATIONS,
    RUN_COLUMNS,
    SAMPLE_COLUMNS,
    SCHEMA_VERSION,
    add_declared_columns,
)
from jaxrun.judge.regression import check_regression
from jaxrun.results.machine import Machine
from jaxrun.results.models import (
    SAMPLE_METRICS,
    ChangeCheck,
    CompileStats,
    HistoryRun,
    Numerics,
    RegressionCheck,
    RunSample,
    SeriesChange,
)
from jaxrun.results.provenance import (
    git_state,
    history_run_from_benchmark,
    script_identity,
)

if TYPE_CHECKING:
    from jaxrun.judge.history_changes import HistorySeries
    from jaxrun.judge.history_transfer import Imported

__all__ = [
    "HistoryStore", "default_history_path", "history_path", "git_state", "history_run_from_benchmark",
    "script_identity", "ScriptSummary", "TrendPoint", "HISTORY_ENV", "HistoryUnreadable",
]

BUSY_TIMEOUT_SECONDS = 30.0
IDS_AT_ONCE = 500  # run ids in one query's IN (...): SQLite takes at most 999 parameters before 3.32


class HistoryUnreadable(UsageError):
    """The history database opened, but SQLite could not read or write it (a damaged page, an I/O
    error). A batch notes it once and goes on without the history; ``jaxrun history`` says it in
    one line. ``problem`` is ``<path>: <SQLite's message>``."""

    def __init__(self, path: str | os.PathLike[str], detail: object) -> None:
        self.path, self.detail = shown_location(path), str(detail)
        super().__init__(
            f"cannot read the history database {str(self.path)!r}: {self.detail}; "
            "`jaxrun history --check` says what is damaged, `jaxrun history --repair` saves what can be read"
        )

    @property
    def problem(self) -> str:
        return f"{self.path}: {self.detail}"


def _quick_check(db: sqlite3.Connection) -> str | None:
    """What SQLite's quick check finds wrong first in an opened file (a page of noise: ``Page 9:
    btreeInitPage() returns error code 11``), or None when it is sound. It reads every page
    (O(size), no index-against-table matching): the price of never judging against, or writing
    into, a damaged file, where a damaged page no query happens to read would pass unseen."""
    (found,) = db.execute("PRAGMA quick_check(1)").fetchone()
    if str(found) == "ok":
        return None
    lines = [line for line in str(found).splitlines() if line.strip() and not line.startswith("*** in database")]
    return "; ".join(lines) or str(found)


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
        if is_history_url(path):
            # PostgreSQL (judge/history_db.py): the server keeps the file; nothing to create here.
            self.location = str(path)
            self.path: Path | str = shown_location(self.location)  # what messages say: the password as ***
            self._existed = True
            self._db: Database = connect_postgres(self.location)
            try:
                self._setup()
            except BaseException:
                self._db.close()
                raise
            return
        self.path = Path(path).expanduser()
        self.location = str(self.path)
        self._existed = self.path.exists()  # a file being made (or empty) has nothing to check
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
            self._db = Database(sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None))
        except sqlite3.Error as exc:
            raise UsageError(f"cannot open history database {str(self.path)!r}: {exc}") from None
        try:
            self._setup()
        except BaseException:
            self._db.close()
            raise

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self._db.dialect

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
        if self._db.dialect != "sqlite":
            self._migrate()
            return
        db = self._db.connection
        deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
        while True:  # several processes may open a fresh file at once: retry what the busy handler misses
            try:
                db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
                # Before anything is written (WAL mode, a migration, a run): a damaged file is
                # refused whole, never written into nor judged against.
                damage = _quick_check(db) if self._existed else None
                if damage is not None:
                    raise HistoryUnreadable(self.path, f"it is damaged (SQLite's quick check: {damage})")
                db.execute("PRAGMA foreign_keys = ON")
                if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    db.execute("PRAGMA journal_mode = WAL")
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
        tables = self._db.tables()
        if "meta" not in tables:
            if tables:
                raise UsageError(
                    f"{str(self.path)!r} is a database but not a jaxrun history (no meta table); "
                    "pass --history with another path"
                )
            return 0
        row = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        with self._write():
            self._db.lock_migration()  # PostgreSQL: the first process migrates, the others wait and see it done
            version = self._stored_version()
            if version > SCHEMA_VERSION:
                raise UsageError(
                    f"history database {str(self.path)!r} was written by a newer jaxrun (schema "
                    f"{version} > {SCHEMA_VERSION}); upgrade jaxrun or pass --history NEW_PATH"
                )
            for migration in MIGRATIONS[version:]:
                migration(self._db)
            add_declared_columns(self._db)
            if version < SCHEMA_VERSION:
                self._db.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(SCHEMA_VERSION),)
                )

    @contextmanager
    def _write(self) -> Iterator[None]:
        self._db.begin(write=True)
        try:
            yield
        except BaseException:
            self._db.rollback()
            raise
        self._db.commit()

    @contextmanager
    def _read(self) -> Iterator[None]:
        self._db.begin(write=False)  # one snapshot for the several queries of one answer
        try:
            yield
        finally:
            self._db.commit()

    @property
    def schema_version(self) -> int:
        return self._stored_version()

    # -- writing ----------------------------------------------------------------------------------

    def record(self, run: HistoryRun) -> int:
        """Store one run with its samples; returns its id. A run whose key the history already
        holds (``run_key``: written before, by ``--resume`` or an import) is not stored again: the id
        is the stored one's."""
        median = _clean(run.median_wall_time)
        if median is None:
            from jaxrun.judge.benchmark_runs import (
                metric_values,  # numpy: only for a benchmark (recording compiles needs none)
            )

            walls = metric_values(run.samples, "wall_time")
            median = statistics.median(walls) if walls else None
        values = run.model_dump(include=set(RUN_COLUMNS) - {"id", "median_wall_time"})
        values["git_dirty"] = None if run.git_dirty is None else int(run.git_dirty)
        values["numerics"] = None if run.numerics is None else run.numerics.model_dump_json()
        values["machine"] = None if run.machine is None else run.machine.model_dump_json()
        if run.machine is not None and run.machine_id is None:
            values["machine_id"] = run.machine.fingerprint
        values["median_wall_time"] = median
        values["run_key"] = run.run_key or uuid.uuid4().hex  # every row has one: a moved history keeps it once
        columns = list(values)
        with self._write():
            if run.run_key is not None:
                held = self._db.execute("SELECT id FROM runs WHERE run_key = ?", (run.run_key,)).fetchone()
                if held is not None:
                    return int(held[0])  # written before: --resume after a lost connection
            run_id = self._db.insert(
                f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                [values[c] for c in columns],
            )
            self._db.executemany(
                f"INSERT INTO samples (run_id, {', '.join(SAMPLE_COLUMNS)}) VALUES (?{', ?' * len(SAMPLE_COLUMNS)})",
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
        exact = [path for path in dict.fromkeys((text, str(Path(text).expanduser().resolve())))
                 if self._db.execute("SELECT 1 FROM runs WHERE script_path = ? LIMIT 1", (path,)).fetchone()]
        if exact:  # found through the index, without reading every run's path
            return sorted(exact)
        known = self._db.execute("SELECT DISTINCT script_path, script_name FROM runs").fetchall()
        paths = {p for p, _ in known}
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
            sql = f"SELECT {', '.join(RUN_COLUMNS)} FROM runs"
            if where:
                sql += " WHERE " + " AND ".join(where)
            sql += " ORDER BY id DESC"
            if limit is not None:
                sql += " LIMIT ?"
                params.append(int(limit))
            rows = self._db.execute(sql, params).fetchall()[::-1]
            return self._runs_from_rows(rows)

    def _runs_from_rows(self, rows: Sequence[Sequence[object]]) -> list[HistoryRun]:
        """The runs of ``rows`` (RUN_COLUMNS), with their samples read in one query, not one a run
        (a round trip each to a PostgreSQL server)."""
        samples: dict[int, list[RunSample]] = {int(row[0]): [] for row in rows}  # type: ignore[call-overload]
        ids = list(samples)
        for start in range(0, len(ids), IDS_AT_ONCE):
            for run_id, sample in self._samples_rows(ids[start:start + IDS_AT_ONCE]):
                samples[run_id].append(sample)
        decoded: dict[tuple[str, str], object] = {}  # the runs of a series share their numerics and machine

        def decode(kind: type, text: object) -> object:
            key = (kind.__name__, str(text))
            if key not in decoded:
                decoded[key] = kind.model_validate_json(str(text))  # type: ignore[attr-defined]
            return decoded[key]

        runs = []
        for row in rows:
            data = dict(zip(RUN_COLUMNS, row))
            if data["git_dirty"] is not None:
                data["git_dirty"] = bool(data["git_dirty"])
            if data["numerics"] is not None:
                data["numerics"] = decode(Numerics, data["numerics"])
            if data["machine"] is not None:
                data["machine"] = decode(Machine, data["machine"])
            runs.append(HistoryRun(**data, samples=samples[int(data["id"])]))
        return runs

    def _samples_rows(self, run_ids: Sequence[int]) -> Iterator[tuple[int, RunSample]]:
        rows = self._db.execute(
            f"SELECT run_id, {', '.join(SAMPLE_COLUMNS)} FROM samples WHERE run_id IN ({', '.join('?' * len(run_ids))})"
            " ORDER BY rowid", list(run_ids),
        ).fetchall()
        for row in rows:
            data = dict(zip(SAMPLE_COLUMNS, row[1:]))
            yield int(row[0]), RunSample(index=data.pop("idx"), **{**data, "warmup": bool(data["warmup"]),
                                                                   "success": bool(data["success"])})

    def samples_of(self, run_ids: Sequence[int]) -> list[RunSample]:
        """The samples of the runs ``run_ids``, pooled in the order they were recorded."""
        return [sample for _, sample in self._samples_rows(run_ids)]

    def get(self, run_id: int) -> HistoryRun:
        with self._read():
            row = self._db.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise UsageError(f"no run with id {run_id} in history {str(self.path)!r}")
            return self._runs_from_rows([row])[0]

    def scripts(self) -> list[ScriptSummary]:
        """One line per script path: latest name, number of runs, time of the latest run."""
        rows = self._db.execute(
            "SELECT r.script_path, r.script_name, g.n, r.recorded_at FROM runs r JOIN "
            "(SELECT script_path, COUNT(*) AS n, MAX(id) AS newest FROM runs GROUP BY script_path) g "
            "ON r.id = g.newest ORDER BY r.script_path"
        ).fetchall()
        return [ScriptSummary(path, name, n, at) for path, name, n, at in rows]

    def trend(
        self, script: str | os.PathLike[str], *, metric: str = "wall_time", device: str | None = None,
        host: str | None = None,
    ) -> list[TrendPoint]:
        """Per run of ``script`` (oldest first): the median of its counted successful samples of
        ``metric`` (one query: the points of a series without its runs' models)."""
        from jaxrun.results.benchmark_result import resolve_metric

        metric = resolve_metric(metric)  # a declared column's name: never a caller's text in the SQL
        with self._read():
            paths = self.match_scripts(script)
            if not paths:
                return []
            where, params = [f"r.script_path IN ({', '.join('?' * len(paths))})"], list(paths)
            for column, value in (("device_used", device), ("host", host)):
                if value is not None:
                    where.append(f"r.{column} = ?")
                    params.append(value)
            rows = self._db.execute(
                f"SELECT r.id, r.recorded_at, r.git_commit, s.{metric} FROM runs r LEFT JOIN samples s"
                f" ON s.run_id = r.id AND s.warmup = 0 AND s.success = 1 AND s.{metric} IS NOT NULL"
                f" WHERE {' AND '.join(where)} ORDER BY r.id, s.rowid", params).fetchall()
        points = []
        for (run_id, recorded_at, commit), group in itertools.groupby(rows, key=lambda row: row[:3]):
            values = [float(row[3]) for row in group if row[3] is not None and math.isfinite(row[3])]
            points.append(TrendPoint(int(run_id), recorded_at, commit, statistics.median(values) if values else None,
                                     len(values)))
        return points

    # -- what the regression check reads (judge/regression.py) ----------------------------------

    def earlier_comparable(self, run: HistoryRun, window: int, numerics: str, machine: str = "same") -> list[int]:
        """Ids of up to ``window`` runs before ``run`` of the same script path, device, host and
        mode that have counted successful samples, newest first; ``numerics``: "same" (started
        with ``run``'s numerics), "other" (with others) or "any"; ``machine``: "same" (the same
        machine fingerprint, or one of the two unknown: recorded before jaxrun kept it) or
        "other" (both known, and different)."""
        mine = None if run.numerics is None else run.numerics.model_dump_json()
        same = {"same": " AND r.numerics IS ?", "other": " AND r.numerics IS NOT ?", "any": ""}[numerics]
        # CAST: PostgreSQL must know a bare parameter's type to test it for NULL.
        where_machine = {"same": " AND (r.machine_id IS NULL OR CAST(? AS TEXT) IS NULL OR r.machine_id = ?)",
                         "other": " AND r.machine_id IS NOT NULL AND CAST(? AS TEXT) IS NOT NULL AND r.machine_id != ?"}[machine]
        query = (
            "SELECT r.id FROM runs r WHERE r.script_path = ? AND r.device_used IS ? AND r.host = ?"
            f" AND r.mode = ? AND r.id < ?{same}{where_machine}"
            " AND EXISTS (SELECT 1 FROM samples s WHERE s.run_id = r.id AND s.warmup = 0 AND s.success = 1)"
            " ORDER BY r.id DESC LIMIT ?"
        )
        params = (run.script_path, run.device_used, run.host, run.mode, run.id, *([mine] if same else []),
                  run.machine_id, run.machine_id, window)
        return [row[0] for row in self._db.execute(query, params).fetchall()]

    def newest_runs(self, script: str | os.PathLike[str] | None = None) -> list[int]:
        """The newest run of every (script, device, host, mode) group (of ``script``'s paths)."""
        where, params = "", []
        if script is not None:
            paths = self.match_scripts(script)
            if not paths:
                return []
            where, params = f"WHERE script_path IN ({', '.join('?' * len(paths))})", paths
        return [r[0] for r in self._db.execute(
            f"SELECT MAX(id) FROM runs {where} GROUP BY script_path, device_used, host, mode ORDER BY script_path, MAX(id)",
            params,
        ).fetchall()]

    def changes(self, script: str | os.PathLike[str] | None = None, *, metric: str = "run_time",
                since: str | None = None) -> "list[SeriesChange]":
        """Where each series of ``script`` (every script when None) changed level, as ``jaxrun
        history --changes`` says (judge/history_changes.py)."""
        return [change for series in self.series(script, metric=metric, since=since) for change in series.changes]

    def series(self, script: str | os.PathLike[str] | None = None, *, metric: str = "run_time",
               since: str | None = None) -> "list[HistorySeries]":
        """Each series of ``script`` (every script when None): its runs, their points and its change
        points, each with the confirmation the history keeps (judge/history_changes.py)."""
        from jaxrun.judge.history_changes import history_series

        return [series._replace(changes=[c.model_copy(update={"check": self.check_of(c)}) for c in series.changes])
                for series in history_series(self, script, metric=metric, since=since)]

    # -- moving a history (judge/history_transfer.py) ------------------------------------------

    def export(self, out: IO[str]) -> dict[str, int]:
        """Every row, as JSON lines into ``out``, from one snapshot; the rows written per table."""
        from jaxrun.judge.history_transfer import export_rows

        with self._read():
            return export_rows(self._db, self._stored_version(), out)

    def import_rows(self, lines: Iterable[str], source: str) -> "Imported":
        """Add the rows of an export (``source`` names it in messages): all of them or, on a line
        that is not one, none."""
        from jaxrun.judge.history_transfer import import_rows

        with self._write():
            return import_rows(self._db, lines, source, SCHEMA_VERSION)

    # -- confirmations of change points ---------------------------------------------------------

    @staticmethod
    def _check_key(change: SeriesChange) -> tuple[object, ...] | None:
        """What a confirmation is kept under: the series (script, metric, device, machine, mode) and
        the two commits; None for a change without both commits (nothing to re-run)."""
        before, after = change.last_before.git_commit, change.first_after.git_commit
        if before is None or after is None:
            return None
        machine = change.machine_id if change.machine_id is not None else f"host:{change.host}"
        return (change.script_path, change.metric, change.device, machine, change.mode, before, after)

    def record_check(self, change: SeriesChange, check: ChangeCheck) -> None:
        """Keep ``check`` (confirmed or refuted) of ``change``: the newest is the one its change shows."""
        key = self._check_key(change)
        if key is None or check.verdict == "undecided":
            raise ValueError("only a confirmed or refuted check of a change between two commits is kept")
        with self._write():
            self._db.execute(
                "INSERT INTO change_checks (checked_at, script_path, metric, device, series_machine, mode,"
                " before_commit, after_commit, verdict, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (check.checked_at or "", *key, check.verdict, check.model_dump_json()))

    def check_of(self, change: SeriesChange) -> ChangeCheck | None:
        """The newest kept check of ``change`` (None: never confirmed nor refuted)."""
        key = self._check_key(change)
        if key is None:
            return None
        script_path, metric, device, machine, mode, before, after = key
        row = self._db.execute(
            "SELECT detail FROM change_checks WHERE script_path = ? AND metric = ? AND device IS ?"
            " AND series_machine = ? AND mode = ? AND before_commit = ? AND after_commit = ?"
            " ORDER BY id DESC LIMIT 1", (script_path, metric, device, machine, mode, before, after)).fetchone()
        return None if row is None else ChangeCheck.model_validate_json(row[0])

    def check_regression(
        self, run_id: int, options: VerdictOptions | None = None, *, window: int = HISTORY_WINDOW,
        min_runs: int = MIN_HISTORY_RUNS, **given: Any,
    ) -> RegressionCheck:
        """Run ``run_id`` judged against the earlier comparable runs (judge/regression.py)."""
        return check_regression(self, run_id, options, window=window, min_runs=min_runs, **given)

    def check_latest(self, script: str | os.PathLike[str] | None = None, options: VerdictOptions | None = None,
                     **given: Any) -> list[RegressionCheck]:
        """:meth:`check_regression` of the newest run of every (script, device, host) group."""
        options = verdict_options(options, given)
        return [self.check_regression(run_id, options) for run_id in self.newest_runs(script)]


def expected_durations(history: str | os.PathLike[str] | bool | None, scripts: Sequence[Path]) -> dict[str, float]:
    """Median wall time of each script's recent history runs, to schedule the longest first.

    Reads an existing database only (``history`` as for ``run_jax_scripts``); an unreadable or
    missing history just means no durations are known.
    """
    path = history_path(history)
    # A PostgreSQL history is not read for this: a slow server would delay the first script.
    if path is None or not isinstance(path, Path) or not path.is_file():
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


