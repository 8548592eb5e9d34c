"""How close does jaxrun's history come to its database's own floor? (DESIGN §10: appending 10,000
runs and reading a 1,000-point series within x2 of the store's floor, SQLite and PostgreSQL.)

For each store (an SQLite file in a temporary folder; a fresh database of a private PostgreSQL
cluster, tests/postgres_cluster.py, started here and removed afterwards):

- append: ``--runs`` runs, each as a real benchmark records it (1 warm-up + 5 counted samples, the
  numerics, the machine, the run's key), recorded one at a time through ``HistoryStore.record``,
  round-robin over ``--runs / --series`` scripts so that one script gets ``--series`` runs; its
  floor: the same rows, prepared beforehand, written with the raw driver (``sqlite3``, psycopg 3)
  into the same schema (made by opening a ``HistoryStore`` on the floor's own fresh database), one
  transaction a run (SQLite: WAL, foreign keys on, ``BEGIN IMMEDIATE``, as the store's): an INSERT
  into ``runs`` giving its id, then one executemany into ``samples``. No jaxrun code in the floor's
  loop (nor the store's look-up of the run's key before writing it);
- read a ``--series``-point series of one script: ``HistoryStore.trend(script)`` (its points:
  the budget's read), ``HistoryStore.runs(script)`` (every run's model with its samples) and
  ``HistoryStore.series(script, metric="run_time")`` (what ``--changes`` and the page read: the
  runs and their change points), each against the floor: one SELECT of the script's runs joined
  with their counted successful samples, the median a run taken in Python (the least work that
  gives one point a run), and for series() the change points of those points too (at ALPHA and
  at the candidates' bar: judge/change_points.py, whose own budget is DESIGN §10's 50 ms). The
  floor's points are checked equal to jaxrun's.

Each append is repeated ``--repeats`` times, on fresh databases, jaxrun's and the floor's in 20
alternating turns of ``--runs / 20`` runs; each read ``--reads`` times a repeat, jaxrun and its
floor interleaved (which goes first alternates); the figures are medians.
SQLite's files are in the system's temporary folder (``TMPDIR=/dev/shm`` takes the disk's fsyncs,
which swing with whatever else writes to it, out of the append). The reads are timed on the history
the same repeat's append wrote (PostgreSQL's after an ``ANALYZE``, as autovacuum would have made
it), after one untimed call of each (the imports: numpy, scipy). Printed below the table, outside
the ratios: the part of series() that is its change points (judge/change_points.py), and the time
to open a store. Run::

    PYTHONPATH=src python benchmarks/bench_history.py [--runs 10000] [--series 1000] [--repeats 3]
        [--reads 5] [--stores sqlite,postgresql] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from itertools import groupby
from pathlib import Path
from typing import Any, NamedTuple

from jaxrun.judge.history import HistoryStore
from jaxrun.judge.history_schema import RUN_COLUMNS, SAMPLE_COLUMNS
from jaxrun.results.machine import Machine
from jaxrun.results.models import HistoryRun, Numerics, RunSample

BUDGET = 2.0
COUNTED = 5
BLOCKS = 20  # turns of each append, jaxrun's and the floor's alternating
READS = ("trend", "runs", "series")
READ_METRIC = {"series": "run_time", "trend": "wall_time", "runs": "run_time"}
TESTS = Path(__file__).resolve().parent.parent / "tests"


class Rows(NamedTuple):
    """One run as the floor writes it: the values of ``runs``' columns, and its samples' rows
    (without the run's id, which the floor learns from the INSERT)."""

    run: tuple[Any, ...]
    samples: list[tuple[Any, ...]]


def script_path(k: int) -> str:
    return f"/proj/examples/model_{k:02d}.py"


def make_runs(n: int, scripts: int, seed: int = 20261130) -> list[HistoryRun]:
    """``n`` runs round-robin over ``scripts`` scripts, each as a real benchmark: one warm-up (its
    compile) and COUNTED runs with every phase, a new commit a run, the numerics, this machine and
    the run's own key (so the store looks it up before writing, as for every measured run).
    A level step halfway gives the series' change points something to find."""
    rng = random.Random(seed)
    machine = Machine(cpu_model="Intel(R) Xeon(R) CPU @ 2.20GHz", cpus=2, memory_gib=23.5)
    numerics = Numerics()
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    runs = []
    for i in range(n):
        k = i % scripts
        level = (1.0 + 0.1 * k) * (1.1 if i >= n // 2 else 1.0)
        samples = [RunSample(index=0, warmup=True, success=True, wall_time=level + 2.0, body_time=level + 1.4,
                             import_time=0.45, compile_time=0.9, run_time=level, memory_peak=310.0)]
        for j in range(1, COUNTED + 1):
            run_time = level * (1.0 + rng.gauss(0.0, 0.01))
            samples.append(RunSample(index=j, warmup=False, success=True, wall_time=run_time + 0.6,
                                     body_time=run_time + 0.5, import_time=0.45 + rng.gauss(0.0, 0.005),
                                     compile_time=0.05, run_time=run_time, memory_peak=300.0 + rng.random()))
        runs.append(HistoryRun(
            recorded_at=(start + timedelta(minutes=i)).isoformat(timespec="seconds"),
            script_name=f"examples/model_{k:02d}.py", script_path=script_path(k), content_hash=f"{k:064x}",
            git_commit=f"{i:040x}", git_dirty=False, git_commit_time=(start + timedelta(minutes=i - 1)).isoformat(),
            host="bench-host", device_requested="auto", device_used="cpu", jax_version="0.4.35",
            jaxlib_version="0.4.35", jaxrun_version="0.1.0", samples=samples, numerics=numerics, machine=machine,
            run_key=f"{rng.getrandbits(128):032x}",
        ))
    return runs


def floor_rows(runs: list[HistoryRun]) -> tuple[list[str], list[Rows]]:
    """The rows jaxrun's ``record`` writes for ``runs``, made before the floor's clock starts (the
    floor is the database's work alone): ``runs``' columns in order, and each run's rows."""
    columns = [c for c in RUN_COLUMNS if c != "id"]
    made = []
    for run in runs:
        counted = sorted(s.wall_time for s in run.samples if not s.warmup and s.success)
        values = {c: getattr(run, c) for c in columns if c not in ("git_dirty", "numerics", "machine", "machine_id")}
        values.update(
            git_dirty=int(run.git_dirty), numerics=run.numerics.model_dump_json(),
            machine=run.machine.model_dump_json(), machine_id=run.machine.fingerprint,
            median_wall_time=statistics.median(counted),
        )
        samples = [tuple(s.index if c == "idx" else int(getattr(s, c)) if c in ("warmup", "success") else getattr(s, c)
                         for c in SAMPLE_COLUMNS) for s in run.samples]
        made.append(Rows(tuple(values[c] for c in columns), samples))
    return columns, made


# --- the stores --------------------------------------------------------------------------------


class Store:
    """Where one store's fresh databases come from, and its raw driver's dialect."""

    name: str
    marker: str  # the raw driver's placeholder

    def fresh(self, label: str) -> str:
        raise NotImplementedError

    def connect(self, location: str) -> Any:
        raise NotImplementedError

    def begin(self, connection: Any) -> None:
        raise NotImplementedError

    def insert_run(self, connection: Any, sql: str, values: tuple[Any, ...]) -> int:
        raise NotImplementedError

    def insert_samples(self, connection: Any, sql: str, rows: list[tuple[Any, ...]]) -> None:
        raise NotImplementedError

    def settle(self, connection: Any) -> None:
        """Bring a just-written database to the state a long-lived one is in before reading it."""

    def discard(self, location: str) -> None:
        pass


class SqliteStore(Store):
    name, marker = "sqlite", "?"

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def fresh(self, label: str) -> str:
        path = self.folder / f"{label}.sqlite"
        self.discard(str(path))
        return str(path)

    def connect(self, location: str) -> sqlite3.Connection:
        connection = sqlite3.connect(location, timeout=30.0, isolation_level=None)
        # The store's own settings (judge/history.py's _setup): a floor without them would be
        # a different database, not a cheaper way to write this one.
        connection.execute("PRAGMA busy_timeout = 30000")
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute("PRAGMA journal_mode = WAL")
        return connection

    def begin(self, connection: sqlite3.Connection) -> None:
        connection.execute("BEGIN IMMEDIATE")

    def insert_run(self, connection: sqlite3.Connection, sql: str, values: tuple[Any, ...]) -> int:
        return connection.execute(sql, values).lastrowid  # type: ignore[return-value]

    def insert_samples(self, connection: sqlite3.Connection, sql: str, rows: list[tuple[Any, ...]]) -> None:
        connection.executemany(sql, rows)

    def discard(self, location: str) -> None:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(location + suffix)


class PostgresStore(Store):
    name, marker = "postgresql", "%s"

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster

    def fresh(self, label: str) -> str:
        return str(self.cluster.database(f"bench_{label}"))

    def connect(self, location: str) -> Any:
        import psycopg

        # Autocommit with explicit BEGIN/COMMIT, as the store's connection (judge/history_db.py).
        return psycopg.connect(location, autocommit=True, connect_timeout=10)

    def begin(self, connection: Any) -> None:
        connection.execute("BEGIN")

    def insert_run(self, connection: Any, sql: str, values: tuple[Any, ...]) -> int:
        return int(connection.execute(sql + " RETURNING id", values).fetchone()[0])

    def insert_samples(self, connection: Any, sql: str, rows: list[tuple[Any, ...]]) -> None:
        with connection.cursor() as cursor:
            cursor.executemany(sql, rows)

    def settle(self, connection: Any) -> None:
        # Autovacuum analyses a table within a minute of this many rows; read sooner, the planner
        # has no statistics and joins the floor's SELECT by a nested loop over every sample (x4).
        connection.execute("ANALYZE")


# --- what is timed -----------------------------------------------------------------------------


def append_jaxrun(store: HistoryStore, runs: list[HistoryRun]) -> float:
    started = time.perf_counter()
    for run in runs:
        store.record(run)
    return time.perf_counter() - started


def append_floor(store: Store, connection: Any, columns: list[str], rows: list[Rows]) -> float:
    mark = store.marker
    run_sql = f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join([mark] * len(columns))})"
    sample_sql = (f"INSERT INTO samples (run_id, {', '.join(SAMPLE_COLUMNS)})"
                  f" VALUES ({', '.join([mark] * (len(SAMPLE_COLUMNS) + 1))})")
    started = time.perf_counter()
    for row in rows:
        store.begin(connection)
        run_id = store.insert_run(connection, run_sql, row.run)
        store.insert_samples(connection, sample_sql, [(run_id, *s) for s in row.samples])
        connection.execute("COMMIT")
    return time.perf_counter() - started


def append_both(store: Store, mine: str, floor: str, runs: list[HistoryRun], rows: tuple[list[str], list[Rows]],
                first: str) -> dict[str, float]:
    """Seconds of jaxrun's append of ``runs`` into ``mine`` and of the floor's into ``floor``,
    in BLOCKS turns each (``first`` begins, then they alternate): the disk's fsyncs swing by x10
    from one minute to the next here, and turns of seconds put both through the same minutes."""
    columns, made = rows
    HistoryStore(floor).close()  # the floor's schema, as jaxrun makes it
    took = {"jaxrun": 0.0, "floor": 0.0}
    with HistoryStore(mine) as history:
        connection = store.connect(floor)
        try:
            size = -(-len(runs) // BLOCKS)
            for turn, at in enumerate(range(0, len(runs), size)):
                order = ("jaxrun", "floor") if (first == "jaxrun") == (turn % 2 == 0) else ("floor", "jaxrun")
                for who in order:
                    took[who] += (append_jaxrun(history, runs[at:at + size]) if who == "jaxrun" else
                                  append_floor(store, connection, columns, made[at:at + size]))
        finally:
            connection.close()
    return took


def read_jaxrun(store: HistoryStore, operation: str, script: str) -> tuple[float, list[float | None]]:
    """Seconds of one call, and the points it gave (a run's median of the metric)."""
    started = time.perf_counter()
    if operation == "series":
        (found,) = store.series(script, metric="run_time")
        took = time.perf_counter() - started
        return took, list(found.points)
    if operation == "trend":
        points = store.trend(script)
        return time.perf_counter() - started, [p.median for p in points]
    runs = store.runs(script)
    took = time.perf_counter() - started
    return took, [statistics.median(s.run_time for s in r.samples if not s.warmup and s.success) for r in runs]


def read_floor(store: Store, connection: Any, operation: str, script: str) -> tuple[float, list[float]]:
    """The floor of a read: the points in one query; for series(), also the change points it must
    find in them (at ALPHA and at the candidates' bar), which no read can do without."""
    from jaxrun.judge.change_points import ALPHA, CANDIDATE_ALPHA, change_points

    # The metric's name is this script's own constant: the one thing not passed as a parameter.
    metric = READ_METRIC[operation]
    sql = (f"SELECT r.id, s.{metric} FROM runs r JOIN samples s ON s.run_id = r.id WHERE r.script_path = {store.marker}"
           f" AND s.warmup = 0 AND s.success = 1 AND s.{metric} IS NOT NULL ORDER BY r.id")
    started = time.perf_counter()
    rows = connection.execute(sql, (script,)).fetchall()
    points = [statistics.median(v for _, v in group) for _, group in groupby(rows, key=lambda row: row[0])]
    if operation == "series":
        change_points(points, alpha=ALPHA)
        change_points(points, alpha=CANDIDATE_ALPHA)
    return time.perf_counter() - started, points


def same_points(mine: list[float | None], floor: list[float]) -> bool:
    return len(mine) == len(floor) and all(a is not None and abs(a - b) <= 1e-9 * abs(b) for a, b in zip(mine, floor))


def measure(store: Store, runs: list[HistoryRun], rows: tuple[list[str], list[Rows]], series: int,
            repeats: int, reads: int) -> tuple[dict[str, dict[str, list[float]]], dict[str, float]]:
    """Every operation's seconds, jaxrun's and the floor's: an append a repeat, ``reads`` calls
    of each read a repeat; and the seconds to open the last history written (jaxrun's store; the
    raw driver's connect)."""
    took: dict[str, dict[str, list[float]]] = {op: {"jaxrun": [], "floor": []} for op in ("append", *READS)}
    script = script_path(0)
    opened: dict[str, float] = {}
    for repeat in range(repeats):
        mine, floor = store.fresh("jaxrun"), store.fresh("floor")
        appended = append_both(store, mine, floor, runs, rows, "jaxrun" if repeat % 2 == 0 else "floor")
        for who, seconds in appended.items():
            took["append"][who].append(seconds)
        started = time.perf_counter()
        history = HistoryStore(mine)
        opened["jaxrun"] = time.perf_counter() - started
        started = time.perf_counter()
        connection = store.connect(mine)
        opened["floor"] = time.perf_counter() - started
        store.settle(connection)
        try:
            for operation in READS:
                _, points = read_jaxrun(history, operation, script)  # its imports (numpy, scipy) are not the read's
                _, expected = read_floor(store, connection, operation, script)
                if len(points) != series or not same_points(points, expected):
                    raise SystemExit(f"{store.name} {operation}: jaxrun's {len(points)} points are not the "
                                     f"floor's {len(expected)} (expected {series})")
                for call in range(reads):
                    for who in ("jaxrun", "floor")[::1 if (repeat + call) % 2 == 0 else -1]:
                        took[operation][who].append(read_jaxrun(history, operation, script)[0] if who == "jaxrun"
                                                    else read_floor(store, connection, operation, script)[0])
        finally:
            history.close()
            connection.close()
        store.discard(mine)
        store.discard(floor)
        print(f"  {store.name}: repeat {repeat + 1} of {repeats} done (append {took['append']['jaxrun'][-1]:.1f} s "
              f"vs floor {took['append']['floor'][-1]:.1f} s)", flush=True)
    return took, opened


def note_change_points(runs: list[HistoryRun], series: int) -> None:
    """What of series() is its change points (judge/change_points.py, twice: at ALPHA, then at the
    candidates' lower bar), on the measured script's points: the part no floor of reading has."""
    from jaxrun.judge.change_points import ALPHA, CANDIDATE_ALPHA, change_points

    script = script_path(0)
    points = [statistics.median(s.run_time for s in run.samples if not s.warmup and s.success)
              for run in runs if run.script_path == script]
    assert len(points) == series
    change_points(points)  # scipy's import is not the search's
    said = []
    for alpha in (ALPHA, CANDIDATE_ALPHA):
        took = []
        for _ in range(3):
            started = time.perf_counter()
            found = change_points(points, alpha=alpha)
            took.append(time.perf_counter() - started)
        said.append(f"at alpha {alpha:g} {statistics.median(took):.4f} s ({len(found)} found)")
    print(f"of series(): change_points of its {series:,} points, median of 3: {'; '.join(said)}")


@contextlib.contextmanager
def postgres() -> Iterator[Any]:
    """A private cluster (tests/postgres_cluster.py), or None with the reason printed."""
    sys.path.insert(0, str(TESTS))
    try:
        import postgres_cluster
    except ImportError as exc:
        print(f"PostgreSQL not measured: cannot import tests/postgres_cluster.py ({exc})")
        yield None
        return
    try:
        entered = postgres_cluster.private()
        cluster = entered.__enter__()
    except (postgres_cluster.Unavailable, RuntimeError, OSError, KeyError, ImportError) as exc:
        print(f"PostgreSQL not measured: {' '.join(str(exc).split())[:500]}")
        yield None
        return
    try:
        yield cluster
    finally:
        entered.__exit__(None, None, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10000, help="runs appended to each history")
    parser.add_argument("--series", type=int, default=1000, help="runs of the script whose series is read")
    parser.add_argument("--repeats", type=int, default=3,
                        help="fresh histories of each store: an append each (the median is shown)")
    parser.add_argument("--reads", type=int, default=5, help="timed calls of each read a repeat (the median of all)")
    parser.add_argument("--stores", default="sqlite,postgresql", help="sqlite, postgresql or both")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures here")
    args = parser.parse_args()
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    if not stores or set(stores) - {"sqlite", "postgresql"}:
        parser.error(f"--stores: sqlite, postgresql or both, got {args.stores!r}")
    if args.series < 1 or args.runs < args.series or args.runs % args.series or args.repeats < 1 or args.reads < 1:
        parser.error("--runs must be a whole multiple of --series (>= 1); --repeats and --reads >= 1")
    scripts = args.runs // args.series

    runs = make_runs(args.runs, scripts)
    rows = floor_rows(runs)
    # The inputs (tens of thousands of models and rows) live to the end: out of the collector's
    # sight, else every collection the timed code triggers walks them too, which a real `jaxrun
    # history` process never holds.
    gc.collect()
    gc.freeze()
    print(f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, {platform.machine()}, "
          f"{os.cpu_count()} CPUs; {args.runs:,} runs ({1 + COUNTED} samples each) over {scripts} scripts, "
          f"a series of {args.series:,} points; medians of {args.repeats} appends and {args.repeats * args.reads} calls "
          "of each read, jaxrun and floor interleaved", flush=True)

    figures: dict[str, Any] = {}
    opened: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="jaxrun-bench-history-") as tmp, contextlib.ExitStack() as stack:
        for name in stores:
            if name == "sqlite":
                store: Store = SqliteStore(Path(tmp))
            else:
                cluster = stack.enter_context(postgres())
                if cluster is None:
                    continue
                store = PostgresStore(cluster)
            figures[name], opened[name] = measure(store, runs, rows, args.series, args.repeats, args.reads)

    table = []
    for name, took in figures.items():
        for operation, seconds in took.items():
            mine, floor = statistics.median(seconds["jaxrun"]), statistics.median(seconds["floor"])
            count = args.runs if operation == "append" else args.series
            # runs() builds every run's model and samples: what a caller of the API asks for, not a
            # series' read, so the budget does not judge it (its ratio is shown all the same).
            judged = operation != "runs"
            table.append({"store": name, "operation": operation, "count": count, "jaxrun_s": mine, "floor_s": floor,
                          "ratio": mine / floor, "within_budget": mine / floor <= BUDGET if judged else None,
                          "jaxrun_all_s": seconds["jaxrun"], "floor_all_s": seconds["floor"]})
    print(f"\n| store | operation | jaxrun s | floor s | jaxrun / floor | budget x{BUDGET:g} |\n|---|---|---|---|---|---|")
    for row in table:
        what = (f"append {row['count']:,} runs" if row["operation"] == "append"
                else f"{row['operation']}() of {row['count']:,} runs")
        print(f"| {row['store']} | {what} | {row['jaxrun_s']:.4f} | {row['floor_s']:.4f} | x{row['ratio']:.2f} | "
              f"{'-' if row['within_budget'] is None else 'PASS' if row['within_budget'] else 'FAIL'} |")
    if figures:
        note_change_points(runs, args.series)
    for name, seconds in opened.items():
        print(f"opening the {name} history of {args.runs:,} runs: HistoryStore {seconds['jaxrun'] * 1000:.1f} ms, "
              f"the raw driver's connect {seconds['floor'] * 1000:.1f} ms (once; not in the budget)")
    if args.json:
        args.json.write_text(json.dumps({
            "python": sys.version.split()[0], "sqlite": sqlite3.sqlite_version, "cpus": os.cpu_count(),
            "runs": args.runs, "series": args.series, "scripts": scripts, "repeats": args.repeats,
            "reads": args.reads, "budget": BUDGET,
            "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "figures": table,
            "opening_s": opened,
        }, indent=1))
        print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
