"""The history database: a real SQLite file, real git, real concurrent processes. The store's own
behaviour is tested on both stores (the ``history_at`` fixture, tests/judge/conftest.py: an SQLite
file, then a database of a real PostgreSQL); what only an SQLite file has (damaged pages, --check
and --repair, files and folders, a file an older jaxrun made by hand, SQLite's own concurrency) on
SQLite alone."""

from __future__ import annotations

import multiprocessing
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from helpers import make_run

from jaxrun.core.paths import is_history_url
from jaxrun.errors import UsageError
from jaxrun.judge.history import (
    SCHEMA_VERSION,
    HistoryStore,
    HistoryUnreadable,
    default_history_path,
    git_state,
    history_run_from_benchmark,
    script_identity,
)
from jaxrun.judge.history_db import Database, connect_postgres
from jaxrun.results.models import RunSample, ScriptBenchmark


def normal(seed: int, mean: float, n: int = 10) -> list[float]:
    return [float(x) for x in np.random.default_rng(seed).normal(mean, mean * 0.01, n)]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """An SQLite file's path in a folder not made yet (the SQLite-only tests')."""
    return tmp_path / "nested" / "history.sqlite"


def test_round_trip_keeps_every_field_and_sample(history_at: Path | str) -> None:
    run = make_run([1.0, 1.2, 1.1])
    run.samples.append(RunSample(index=3, warmup=False, success=False, error_class="out_of_memory"))
    run.samples.append(RunSample(index=4, warmup=False, success=True, wall_time=float("nan"), memory_peak=None))
    with HistoryStore(history_at) as store:
        assert store.schema_version == SCHEMA_VERSION
        run_id = store.record(run)
        (back,) = store.runs()
        # NaN is stored as NULL (PostgreSQL would keep a NaN, and find it equal to itself).
        stored = store._db.execute("SELECT COUNT(*) FROM samples WHERE wall_time IS NULL").fetchone()
    assert back.id == run_id
    assert back.model_dump(exclude={"id", "median_wall_time", "samples", "run_key"}) == run.model_dump(
        exclude={"id", "median_wall_time", "samples", "run_key"}
    )
    assert run.run_key is None and len(back.run_key or "") == 32  # a run recorded without a key is given one
    assert back.median_wall_time == pytest.approx(1.1)  # counted, successful, finite wall times only
    assert [s.warmup for s in back.samples] == [True, False, False, False, False, False]
    assert back.samples[1] == run.samples[1]
    assert back.samples[4].error_class == "out_of_memory" and back.samples[4].wall_time is None
    assert back.samples[5].wall_time is None  # NaN is stored as NULL
    assert tuple(stored) == (2,)  # the failed sample's and the NaN


def test_a_run_written_again_under_its_key_is_kept_once(history_at: Path | str) -> None:
    """--resume writes a run the history missed; one it had after all (its write landed, the
    result file never heard) is not written twice, whichever store."""
    run = make_run([1.0, 1.2]).model_copy(update={"run_key": "k" * 32})
    with HistoryStore(history_at) as store:
        first = store.record(run)
        other = store.record(make_run([2.0]))
        assert store.record(run) == first and store.record(run.model_copy(update={"samples": []})) == first
        assert [r.id for r in store.runs()] == [first, other]
        assert [len(r.samples) for r in store.runs()] == [3, 2]


def test_filters_by_path_name_suffix_device_and_host(history_at: Path | str) -> None:
    with HistoryStore(history_at) as store:
        store.record(make_run([1.0], path="/proj/examples/model.py", name="examples/model.py"))
        store.record(make_run([1.0], path="/proj/examples/model.py", name="examples/model.py", device="gpu"))
        store.record(make_run([1.0], path="/proj/examples/model.py", name="examples/model.py", host="hostB"))
        store.record(make_run([1.0], path="/proj/other/model.py", name="other/model.py"))
        store.record(make_run([1.0], path="/proj/other/mymodel.py", name="mymodel.py"))

        assert len(store.runs("/proj/examples/model.py")) == 3
        assert len(store.runs("examples/model.py")) == 3  # the script name
        assert {r.script_path for r in store.runs("model.py")} == {"/proj/examples/model.py", "/proj/other/model.py"}
        assert [r.script_path for r in store.runs("other/model.py")] == ["/proj/other/model.py"]
        assert store.runs("odel.py") == [] and store.runs("/elsewhere/model.py") == []
        assert [r.device_used for r in store.runs("examples/model.py", device="gpu")] == ["gpu"]
        assert [r.host for r in store.runs("examples/model.py", host="hostB")] == ["hostB"]
        assert len(store.runs()) == 5
        newest_two = store.runs(limit=2)
        assert [r.id for r in newest_two] == [4, 5]  # the newest, still oldest first

        summary = {s.script_path: s for s in store.scripts()}
        assert summary["/proj/examples/model.py"].n_runs == 3
        assert summary["/proj/other/mymodel.py"].script_name == "mymodel.py"


def test_exact_path_resolved_against_the_working_folder(history_at: Path | str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "proj" / "x.py"
    script.parent.mkdir()
    script.write_text("print(1)\n")
    monkeypatch.chdir(script.parent)
    with HistoryStore(history_at) as store:
        store.record(make_run([1.0], path=str(script.resolve()), name="renamed"))
        assert len(store.runs("./x.py")) == 1


def test_injected_regression_is_flagged(history_at: Path | str) -> None:
    with HistoryStore(history_at) as store:
        for k in range(3):
            store.record(make_run(normal(k, 1.0), at=f"2025-01-0{k + 1}T00:00:00+00:00"))
        same = store.record(make_run(normal(10, 1.0)))
        check = store.check_regression(same)
        assert check.previous_runs == 3 and not check.regression
        assert check.comparison is not None and check.comparison.verdict == "no significant change"

        slow = store.record(make_run(normal(11, 1.3)))
        check = store.check_regression(slow)
        assert check.regression and check.previous_runs == 4
        comparison = check.comparison
        assert comparison is not None and comparison.verdict == "slower"
        assert check.gate == comparison.gate == ["run_time", "compile_time"]
        # run_time = 0.8 wall - 0.1 grew by (1.04 - 0.1) / 0.7; compile_time stayed 0.1 s.
        assert comparison.slower == ["wall_time", "run_time"]
        run = comparison.phase("run_time")
        assert run.p_value is not None and run.p_value < 0.01
        assert run.ratio == pytest.approx(0.94 / 0.7, rel=0.03)
        assert comparison.phase("wall_time").ratio == pytest.approx(1.3, rel=0.03)
        assert comparison.phase("compile_time").verdict == "no significant change"
        assert run.base_n == 40 and run.new_n == 10
        assert check.script_path == "/proj/examples/model.py" and check.device == "cpu" and check.host == "hostA"

        assert check.judged and check.reason is None and check.min_previous_runs == 3

        window = store.check_regression(slow, window=3)  # the newest 3 of the 4 earlier runs
        assert window.previous_runs == 3 and window.comparison and window.comparison.phase("run_time").base_n == 30
        assert window.regression
        # Gated on memory, which did not change, the same run is no regression.
        assert not store.check_regression(slow, metric="memory_peak").regression

        trend = store.trend("model.py")
        assert [t.run_id for t in trend] == [1, 2, 3, 4, 5]
        assert trend[-1].median == pytest.approx(1.3, rel=0.03) and trend[-1].n == 10
        assert trend[0].git_commit == "abc123"
        (latest,) = store.check_latest("model.py")
        assert latest.newest_run_id == slow and latest.regression


def test_other_device_or_host_is_not_comparable(history_at: Path | str) -> None:
    with HistoryStore(history_at) as store:
        for k in range(3):
            store.record(make_run(normal(k, 1.0)))
        for run in (make_run(normal(20, 1.3), device="gpu"), make_run(normal(21, 1.3), host="hostB")):
            check = store.check_regression(store.record(run))
            assert check.previous_runs == 0 and check.comparison is None and not check.regression
        first = store.check_regression(1)
        assert first.previous_runs == 0 and not first.regression
        assert len(store.check_latest()) == 3
        with pytest.raises(UsageError, match="wall_time"):
            store.check_regression(1, metric="speed")
        with pytest.raises(UsageError, match="no run with id 99"):
            store.check_regression(99)


def test_failed_runs_do_not_fill_the_window(history_at: Path | str) -> None:
    with HistoryStore(history_at) as store:
        for k in range(3):
            store.record(make_run(normal(k + 1, 1.0)))
        failed = make_run([])
        failed.samples = [RunSample(index=0, warmup=False, success=False, error_class="script_error")]
        store.record(failed)
        check = store.check_regression(store.record(make_run(normal(5, 1.3))), window=3)
        assert check.previous_runs == 3 and check.regression and check.judged
        check = store.check_regression(store.record(failed))
        assert check.comparison is not None and check.comparison.verdict == "not comparable"
        assert not check.regression and not check.judged and check.reason == "not judged: not comparable"


def test_fewer_than_three_earlier_runs_are_not_judged(history_at: Path | str) -> None:
    """Issue 23 item 18: one earlier run was a baseline, so a machine's slow minute was a regression.
    Now a check needs MIN_HISTORY_RUNS (3) earlier runs of the same numerics; until then it is not
    judged (and never a regression), and says why."""
    from jaxrun.core.defaults import MIN_HISTORY_RUNS
    from jaxrun.interfaces.cli.tables import history_cell
    from jaxrun.results.models import RegressionCheck

    assert MIN_HISTORY_RUNS == 3
    with HistoryStore(history_at) as store:
        first = store.check_regression(store.record(make_run(normal(1, 1.0))))
        assert (first.judged, first.regression, first.reason) == (False, False, "not judged: no earlier run, needs 3")
        slow = store.check_regression(store.record(make_run(normal(2, 2.7))))  # 2.7x slower than the one run
        assert (slow.previous_runs, slow.judged, slow.regression) == (1, False, False)
        assert slow.reason == "not judged: 1 earlier run, needs 3" and slow.comparison is None
        assert history_cell(slow) == "not judged: 1 earlier run, needs 3"
        two = store.check_regression(store.record(make_run(normal(3, 1.0))))
        assert (two.previous_runs, two.judged, two.reason) == (2, False, "not judged: 2 earlier runs, needs 3")
        three = store.check_regression(store.record(make_run(normal(4, 2.7))))
        assert three.regression and three.judged and three.reason is None  # 3 earlier runs: judged
        assert history_cell(three).startswith("slower than 3 earlier runs: run_time x")
        with pytest.raises(UsageError, match="window"):
            store.check_regression(1, window=2)
        # Asked for 5 earlier runs, the 3 there are not enough.
        assert store.check_regression(three.newest_run_id, min_runs=5).reason == "not judged: 3 earlier runs, needs 5"
    # A check written before `judged` existed reads as judged when its comparison had a verdict.
    old = {"script_path": "/s.py", "device": "cpu", "host": "h", "gate": ["run_time"], "newest_run_id": 2,
           "previous_runs": 1, "regression": False}
    assert RegressionCheck.model_validate(old).judged is False
    assert RegressionCheck.model_validate(old | {"comparison": three.comparison.model_dump()}).judged is True


V1_DDL = [
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, recorded_at TEXT NOT NULL,"
    " script_name TEXT NOT NULL, script_path TEXT NOT NULL, content_hash TEXT NOT NULL,"
    " git_commit TEXT, git_dirty INTEGER, host TEXT NOT NULL, device_requested TEXT NOT NULL,"
    " device_used TEXT, jax_version TEXT, jaxlib_version TEXT, jaxrun_version TEXT NOT NULL)",
    "CREATE TABLE samples (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    " idx INTEGER NOT NULL, warmup INTEGER NOT NULL, success INTEGER NOT NULL, error_class TEXT,"
    " wall_time REAL, body_time REAL, compile_time REAL, steady_time REAL, memory_peak REAL)",
    "CREATE INDEX runs_comparable ON runs (script_path, device_used, host)",
    "CREATE INDEX samples_run ON samples (run_id)",
    "INSERT INTO meta VALUES ('schema_version', '1')",
]


def test_v1_database_is_migrated_and_keeps_its_rows(db: Path) -> None:
    # SQLite alone: the file an early jaxrun made (its DDL as it was, written with sqlite3 itself).
    db.parent.mkdir()
    con = sqlite3.connect(db)
    for statement in V1_DDL:
        con.execute(statement)
    con.execute(
        "INSERT INTO runs VALUES (1, '2024-12-31T00:00:00+00:00', 'old.py', '/proj/old.py', 'ff', 'c0', 1,"
        " 'hostA', 'cpu', 'cpu', '0.4.30', '0.4.30', '0.0.9')"
    )
    con.executemany(
        "INSERT INTO samples VALUES (1, ?, 0, 1, NULL, ?, NULL, NULL, ?, NULL)",
        [(0, 1.0, 0.5), (1, 3.0, 1.5), (2, 2.0, 1.0)],
    )
    con.commit()
    con.close()

    with HistoryStore(db) as store:
        assert store.schema_version == SCHEMA_VERSION == 9
        (old,) = store.runs("old.py")
        assert old.git_dirty is True and old.jaxrun_version == "0.0.9" and len(old.samples) == 3
        assert old.median_wall_time == 2.0  # backfilled by the v2 migration
        assert old.mode == "process"  # v3: every run before it was an ordinary process run
        assert len(old.run_key or "") == 32  # v9: every run has a key, older ones too
        new_id = store.record(make_run([1.0, 2.0], path="/proj/old.py", name="old.py"))
        assert new_id == 2 and len(store.runs("old.py")) == 2
    with HistoryStore(db) as store:  # reopening an up-to-date database changes nothing
        assert store.schema_version == 9 and len(store.runs()) == 2


def _raw(location: Path | str) -> Database:
    """A connection to a history's database as jaxrun's store makes it, without the store's setup
    (no migration): to write what another jaxrun, or another program, would have written."""
    if is_history_url(location):
        return connect_postgres(str(location))
    return Database(sqlite3.connect(location, isolation_level=None))


def test_newer_schema_is_refused(history_at: Path | str) -> None:
    with HistoryStore(history_at) as store:
        store.record(make_run([1.0]))
    raw = _raw(history_at)
    raw.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    raw.close()
    with pytest.raises(UsageError, match=r"newer jaxrun \(schema 99 > 9\).*--history"):
        HistoryStore(history_at)


def test_a_database_with_other_tables_is_refused(history_at: Path | str) -> None:
    raw = _raw(history_at)
    raw.execute("CREATE TABLE t (x INTEGER)")
    raw.close()
    with pytest.raises(UsageError, match="is a database but not a jaxrun history"):
        HistoryStore(history_at)


def test_a_file_that_is_not_a_history_is_refused(tmp_path: Path) -> None:
    # SQLite alone, as the next tests: files and folders (a PostgreSQL history is the server's).
    text = tmp_path / "notes.sqlite"
    text.write_text("these are not the rows you are looking for\n" * 100)
    with pytest.raises(UsageError, match="not a jaxrun history database"):
        HistoryStore(text)
    with pytest.raises(UsageError, match="is a folder"):
        HistoryStore(tmp_path)
    with pytest.raises(UsageError, match="no history database"):
        HistoryStore(tmp_path / "missing.sqlite", create=False)
    nested = tmp_path / "nested" / "history.sqlite"  # a folder not made yet is made
    with HistoryStore(nested) as store:
        assert nested.exists() and store.schema_version == SCHEMA_VERSION


def _writer(path: str, worker: int, count: int) -> None:
    with HistoryStore(path) as store:
        for i in range(count):
            store.record(make_run([1.0 + i / 100, 1.1], name=f"w{worker}.py", path=f"/proj/w{worker}.py"))


@pytest.mark.slow
def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    # SQLite's busy timeout and WAL (PostgreSQL's writers: test_history_postgres.py).
    path = str(tmp_path / "shared.sqlite")  # a fresh file: the processes also race to create the schema
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_writer, args=(path, w, 25)) for w in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(120)
    assert [p.exitcode for p in workers] == [0, 0, 0, 0]
    with HistoryStore(path) as store:
        runs = store.runs()
        assert len(runs) == 100
        assert sorted({r.id for r in runs}) == list(range(1, 101))
        assert all(len(r.samples) == 3 for r in runs)
        assert {s.n_runs for s in store.scripts()} == {25}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True, capture_output=True,
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_state_inside_and_outside_a_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    script = repo / "s.py"
    script.write_text("x = 1\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "s.py")
    _git(repo, "commit", "-q", "-m", "first")
    commit, dirty = git_state(script)
    assert commit is not None and len(commit) == 40 and dirty is False
    script.write_text("x = 2\n")
    assert git_state(script) == (commit, True)

    outside = tmp_path / "plain"
    outside.mkdir()
    (outside / "t.py").write_text("y = 1\n")
    assert git_state(outside / "t.py") == (None, None)


def test_script_identity_follows_the_content(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("a = 1\n")
    path, first = script_identity(script)
    assert path == str(script.resolve()) and len(first) == 64
    assert script_identity(script) == (path, first)
    script.write_text("a = 2\n")
    assert script_identity(script)[1] != first
    with pytest.raises(UsageError, match="missing.py"):
        script_identity(tmp_path / "missing.py")


def test_history_run_from_benchmark(tmp_path: Path) -> None:
    script = tmp_path / "b.py"
    script.write_text("pass\n")
    bench = ScriptBenchmark(
        script_name="b.py", script_path=str(script), device_requested="auto", device_used="cpu",
        benchmark_runs=2, warmup_runs=1, runs_completed=2,
        warmups=[RunSample(index=0, warmup=True, success=True, wall_time=3.0)],
        samples=[RunSample(index=i, warmup=False, success=True, wall_time=1.0 + i) for i in range(2)],
    )
    run = history_run_from_benchmark(bench, jax_version="0.4.35", host="h")
    assert run.script_path == str(script.resolve()) and run.host == "h" and len(run.samples) == 3
    with HistoryStore(tmp_path / "h.sqlite") as store:
        assert store.get(store.record(run)).median_wall_time == 1.5


def test_default_history_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAXRUN_HISTORY", raising=False)
    assert default_history_path(tmp_path) == tmp_path / ".jaxrun" / "history.sqlite"
    monkeypatch.chdir(tmp_path)
    assert default_history_path() == tmp_path / ".jaxrun" / "history.sqlite"
    monkeypatch.setenv("JAXRUN_HISTORY", str(tmp_path / "elsewhere.db"))
    assert default_history_path(tmp_path / "x") == tmp_path / "elsewhere.db"
    monkeypatch.setenv("JAXRUN_HISTORY", "rel.db")
    assert default_history_path(tmp_path) == tmp_path / "rel.db"


def test_warm_mode_runs_are_compared_only_with_warm_mode_runs(history_at: Path | str) -> None:
    rng = np.random.default_rng(7)
    with HistoryStore(history_at) as store:
        for _ in range(2):
            store.record(make_run(list(1.0 + 0.01 * rng.standard_normal(6))))
        warm = make_run(list(1.3 + 0.01 * rng.standard_normal(6))).model_copy(update={"mode": "warm:mainx10"})
        warm_id = store.record(warm)
        check = store.check_regression(warm_id)
        # Slower than the ordinary runs, but a different measurement: nothing earlier to compare.
        assert check.previous_runs == 0 and check.regression is False
        assert store.get(warm_id).mode == "warm:mainx10"


# --- a damaged page: the file opens, SQLite cannot read part of it ----------------------------------

TINY = "if False:\n    import jax\nprint(1)\n"


def damaged_history(path: Path, *, runs: int = 40, page: str = "samples-leaf",
                    also: Callable[[HistoryStore], object] | None = None) -> int:
    """A real history of ``runs`` runs (30 samples each) with 4 KiB of noise written over one page:
    ``samples-leaf`` a leaf of the samples table in the middle, ``samples-root`` its root page,
    ``meta`` the meta table's page, ``runs_name`` a page of that index (no query of ``jaxrun
    history`` or of a batch reads it), ``middle`` the page in the middle of the file, whatever it
    holds. Returns how many samples it held."""
    import random

    with HistoryStore(path) as store:
        for k in range(runs):
            store.record(make_run(normal(k, 1.0, 30), path=f"/proj/s{k % 4}.py", name=f"s{k % 4}.py"))
        if also is not None:
            also(store)
    con = sqlite3.connect(path)
    size = con.execute("PRAGMA page_size").fetchone()[0]
    if page == "samples-leaf":
        leaves = [r[0] for r in con.execute(
            "SELECT pageno FROM dbstat WHERE name = 'samples' AND pagetype = 'leaf' ORDER BY pageno")]
        assert len(leaves) > 4
        number = leaves[len(leaves) // 2]
    elif page == "middle":
        number = con.execute("PRAGMA page_count").fetchone()[0] // 2
    else:
        table = {"samples-root": "samples", "compile_runs-root": "compile_runs"}.get(page, page)
        number = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    total = con.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
    con.close()
    assert not Path(f"{path}-wal").exists()  # every write is in the file itself
    with open(path, "r+b") as f:
        f.seek((number - 1) * size)
        f.write(random.Random(number).randbytes(size))
    from jaxrun.judge.history_repair import integrity_check

    assert integrity_check(path)  # SQLite's full check finds it (the file is "malformed")
    return total


@pytest.mark.slow
def test_a_damaged_page_is_one_line_and_check_and_repair_save_what_can_be_read(tmp_path: Path) -> None:
    from helpers import jaxrun

    db = tmp_path / "history.sqlite"
    total = damaged_history(db)
    raw = sqlite3.connect(db)
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):  # the damage is real: SQLite cannot read it
        raw.execute("SELECT * FROM samples").fetchall()
    raw.close()
    with pytest.raises(HistoryUnreadable, match="is damaged"):  # and seen when the store opens
        HistoryStore(db)

    shown = jaxrun("history", "--history", db)
    assert shown.returncode == 2 and "Traceback" not in shown.stderr
    (line,) = shown.stderr.strip().splitlines()
    assert str(db) in line and "is damaged (SQLite's quick check: Page " in line
    assert "jaxrun history --check" in line and "jaxrun history --repair" in line

    checked = jaxrun("history", "--history", db, "--check")
    assert checked.returncode == 1, checked.stderr
    assert "is damaged" in checked.stdout and "--repair" in checked.stdout
    assert "btreeInitPage() returns error code 11" in checked.stdout  # SQLite's own findings, one a line

    repaired = jaxrun("history", "--history", db, "--repair")
    assert repaired.returncode == 0, repaired.stderr
    (damaged,) = tmp_path.glob("history.sqlite.damaged-*")
    assert damaged.is_file()  # the old file is kept
    with HistoryStore(db) as store:
        runs = store.runs()
        saved = sum(len(r.samples) for r in runs)
    assert len(runs) == 40 and 0 < saved < total  # every run; the samples of one page are lost
    assert f"saved 40 runs with {saved} samples" in repaired.stdout and str(damaged) in repaired.stdout
    assert jaxrun("history", "--history", db, "--check").returncode == 0
    assert jaxrun("history", "--history", db).returncode == 0
    assert jaxrun("history", "--history", damaged, "--check").returncode == 1  # kept as it was


def sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
@pytest.mark.parametrize("page", ["middle", "runs_name", "compile_runs-root", "samples-root", "meta"])
def test_a_damaged_history_is_refused_before_anything_runs_and_never_written(tmp_path: Path, page: str) -> None:
    """A page no query reads (an index, the compile tables) as well as one the first record or
    the opening hits: `jaxrun run --benchmark-runs` refuses the history before the first script
    (one line, exit 2, nothing run, no results folder) and `jaxrun history` in the same line;
    neither writes a byte into the file nor judges against it."""
    from helpers import jaxrun

    db = tmp_path / "history.sqlite"
    damaged_history(db, runs=12, page=page)
    before = sha256(db)
    (tmp_path / "s").mkdir()
    for name in ("a", "b"):
        (tmp_path / "s" / f"{name}.py").write_text(TINY)
    done = jaxrun("run", tmp_path / "s", "--benchmark-runs", "2", "--device", "cpu", "--history", db,
                  "--results-dir", tmp_path / "r")
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("jaxrun: error: ") and str(db) in line and "is damaged" in line, line
    assert "jaxrun history --repair" in line and "--no-history" in line, line
    assert done.stdout == "" and not (tmp_path / "r").exists()  # no script ran, nothing was written
    shown = jaxrun("history", "--history", db)
    assert shown.returncode == 2 and shown.stdout == "", shown.stdout + shown.stderr
    (line,) = shown.stderr.strip().splitlines()
    assert str(db) in line and "is damaged" in line and "jaxrun history --repair" in line, line
    assert sha256(db) == before and not Path(f"{db}-wal").exists()
    # Without the history, the batch runs.
    done = jaxrun("run", tmp_path / "s", "--benchmark-runs", "2", "--device", "cpu", "--no-history",
                  "--results-dir", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    assert sha256(db) == before


# --- what each run compiled (schema 6) -----------------------------------------------------------


def compile_run(at: str, programs: dict, *, path: str = "/proj/m.py", host: str = "hostA", flags=(), device="cpu",
                run_id: int | None = None, cache_dir: str | None = "/cache"):
    from jaxrun.judge.compile_history import CompileRun
    from jaxrun.results.models import CompileEnvironment, CompileStats

    env = CompileEnvironment(jax_version="0.7", jaxlib_version="0.7", backend="cpu", xla_flags=list(flags),
                             cache_dir=cache_dir)
    return CompileRun(at, "m.py", path, "h" * 64, host, "cpu", device, env,
                      {name: CompileStats(**stats) for name, stats in programs.items()}, run_id)


def test_compiles_are_kept_and_the_last_cache_load_found(history_at: Path | str) -> None:
    loaded = dict(count=0, cache_hits=1, fingerprint="f", input_fingerprint="i", device_kind="cpu", device_count=1)
    with HistoryStore(history_at) as store:
        first, before = store.record_compiles(compile_run("t1", {"jit(f)": loaded}), ["jit(f)"])
        assert before == {}
        store.record_compiles(compile_run("t2", {"jit(f)": loaded}, host="hostB"))  # another host
        store.record_compiles(compile_run("t2", {"jit(f)": loaded}, device="gpu"))  # another platform
        store.record_compiles(compile_run("t3", {"jit(f)": loaded}, path="/proj/other.py"))  # another script
        compiled = dict(loaded, count=1, cache_hits=0)
        wrote, _ = store.record_compiles(compile_run("t4", {"jit(f)": compiled}))  # compiled: wrote it to /cache
        store.record_compiles(compile_run("t4b", {"jit(f)": compiled}, cache_dir="/tmp/cold"))  # into another folder
        store.record_compiles(compile_run("t4c", {"jit(f)": compiled}, cache_dir=None))  # with the cache off
        _, before = store.record_compiles(
            compile_run("t5", {"jit(f)": compiled}, flags=["--x=1"]), ["jit(f)", "jit(g)"])
    assert list(before) == ["jit(f)"]
    newest, oldest = before["jit(f)"]  # newest first: the runs after which /cache held it
    assert (newest.compile_run_id, newest.recorded_at, newest.loaded) == (wrote, "t4", False)
    assert (oldest.compile_run_id, oldest.recorded_at, oldest.loaded) == (first, "t1", True)
    assert oldest.environment.cache_dir == "/cache" and oldest.environment.xla_flags == []
    assert oldest.stats.cache_hits == 1 and oldest.stats.input_fingerprint == "i" and oldest.stats.device_count == 1


def test_a_benchmarked_run_gets_its_programs(history_at: Path | str) -> None:
    with HistoryStore(history_at) as store:
        run_id = store.record(make_run([1.0, 1.1]))
        store.record_compiles(compile_run("t1", {"jit(f)": dict(count=1, compile_time=0.5, fingerprint="f"),
                                                 "jit(g)": dict(count=2)}, run_id=run_id))
        other = store.record(make_run([1.0, 1.1]))
        programs = store.programs_of_runs([run_id, other])
    assert list(programs) == [run_id] and list(programs[run_id]) == ["jit(f)", "jit(g)"]
    assert programs[run_id]["jit(f)"].compile_time == 0.5 and programs[run_id]["jit(f)"].fingerprint == "f"
    assert programs[run_id]["jit(g)"].count == 2 and programs[run_id]["jit(g)"].fingerprint is None


def _database_at(location: Path | str, version: int) -> None:
    """A history database as jaxrun of schema ``version`` made it (its migrations up to it)."""
    from jaxrun.judge.history_schema import MIGRATIONS

    raw = _raw(location)
    raw.begin(write=True)
    for migration in MIGRATIONS[:version]:
        migration(raw)
    raw.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(version),))
    raw.commit()
    raw.close()


def test_v5_database_gains_the_compile_tables(history_at: Path | str) -> None:
    _database_at(history_at, 5)
    with HistoryStore(history_at) as store:
        assert store.schema_version == SCHEMA_VERSION
        run_id = store.record(make_run([1.0]))
        assert store.programs_of_runs([run_id]) == {}
        store.record_compiles(compile_run("t", {"jit(f)": dict(count=1)}, run_id=run_id))
        assert list(store.programs_of_runs([run_id])[run_id]) == ["jit(f)"]


def test_repair_keeps_the_compile_records(tmp_path: Path) -> None:
    # SQLite alone, as every test of a damaged file: --repair reads SQLite's pages.
    from jaxrun.judge.history_repair import repair

    db = tmp_path / "history.sqlite"
    damaged_history(db, runs=12, also=lambda store: store.record_compiles(  # the damage is in the samples
        compile_run("t", {"jit(f)": dict(count=0, cache_hits=1)}, run_id=1)))
    saved = repair(db)
    with HistoryStore(saved.path) as store:
        assert list(store.programs_of_runs([1])[1]) == ["jit(f)"]
        _, before = store.record_compiles(compile_run("u", {"jit(f)": dict(count=1)}), ["jit(f)"])
        assert before["jit(f)"][0].recorded_at == "t"


@pytest.mark.slow
@pytest.mark.parametrize("page", ["compile_runs-root", "meta", "runs_name"])
def test_a_damaged_history_never_costs_a_batch_of_unbenchmarked_jax_scripts(tmp_path: Path, page: str) -> None:
    """What a run compiled is history too, kept by every run that used JAX, the history opened
    while the first script runs (not before: a plain run starts at once). A damaged page, one its
    write would hit (compile_runs-root), one that opening reads (meta) or one no query reads
    (runs_name), is then one note; every
    script still runs and is written, exit 0, and nothing is written into the file."""
    import json

    from helpers import jaxrun

    db = tmp_path / "history.sqlite"
    damaged_history(db, runs=4, page=page)
    before = sha256(db)
    (tmp_path / "s").mkdir()
    for name in ("a", "b"):
        (tmp_path / "s" / f"{name}.py").write_text("import jax.numpy as jnp\nprint(jnp.ones(3).sum())\n")
    done = jaxrun("run", tmp_path / "s", "--device", "cpu", "--history", db, "--results-dir", tmp_path / "r")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    notes = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("note: history unreadable")]
    assert len(notes) == 1 and f"{db}: it is damaged (SQLite's quick check: Page " in notes[0], notes
    doc = json.loads((tmp_path / "r" / "jax_execution_results.json").read_text())
    assert str(db) in doc["metadata"]["history_problem"]
    assert [r["success"] for r in doc["script_results"]] == [True, True]
    assert sha256(db) == before  # nothing written into it


@pytest.mark.slow
def test_jaxrun_history_gives_every_run_shown_its_own_check(history_at: Path | str) -> None:
    """The check cell of a run stays what it was when that run was the newest (it went blank for
    every run but the newest once a second run existed); the JSON has each run's check too."""
    import json

    from helpers import jaxrun

    with HistoryStore(history_at) as store:
        ids = [store.record(make_run(normal(k, 1.0 if k < 4 else 1.5, 8))) for k in range(5)]
    table = jaxrun("history", "examples/model.py", "--history", history_at, env={"COLUMNS": "300"})
    assert table.returncode == 1, table.stdout + table.stderr  # the fifth run is 50% slower
    import re

    # run, recorded, git, device, host, mode, n, median (a number and its unit), then the check
    row = re.compile(r"^\s*(\d+)\s+2025-\S+(?:\s+\S+){4}\s+\d+\s+\S+ \S+\s+(.*?)\s*$")
    cells = {int(m.group(1)): m.group(2) for m in map(row.match, table.stdout.splitlines()) if m}
    assert sorted(cells) == ids, table.stdout
    assert [cells[i] for i in ids[:3]] == [
        "not judged: no earlier run, needs 3", "not judged: 1 earlier run, needs 3",
        "not judged: 2 earlier runs, needs 3"], cells
    assert cells[ids[3]].startswith("no significant change against 3 earlier runs"), cells
    assert cells[ids[4]].startswith("slower than 4 earlier runs"), cells
    doc = json.loads(jaxrun("history", "examples/model.py", "--history", history_at, "--json").stdout)
    assert sorted(int(i) for i in doc["run_checks"]) == ids
    assert [doc["run_checks"][str(i)]["previous_runs"] for i in ids] == [0, 1, 2, 3, 4]
    assert doc["run_checks"][str(ids[4])] == doc["checks"][0]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_benchmarked_run_keeps_its_commits_time_and_its_machine(tmp_path: Path, history_at: Path | str) -> None:
    """Through `jaxrun run --benchmark-runs` in a real git repository: the run in the history has
    the commit, when it was committed (git's own answer) and this machine's facts (the OS's own)."""
    import os

    import psutil
    from helpers import jaxrun

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "s.py").write_text("print(1)\nif False:\n    import jax\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "s.py")
    _git(repo, "commit", "-q", "-m", "first", "--date", "2026-10-01T12:00:00+02:00")
    done = jaxrun("run", repo / "s.py", "--benchmark-runs", "2", "--device", "cpu", "--history", history_at,
                  "--results-dir", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    with HistoryStore(history_at, create=False) as store:
        (run,) = store.runs()
    shown = subprocess.run(["git", "-C", str(repo), "show", "-s", "--format=%H %cI", "HEAD"], capture_output=True,
                           text=True, check=True).stdout.split()
    assert [run.git_commit, run.git_commit_time] == shown
    machine = run.machine
    assert machine is not None and run.machine_id == machine.fingerprint and len(run.machine_id) == 12
    assert machine.cpus == len(os.sched_getaffinity(0))
    assert machine.memory_gib == round(psutil.virtual_memory().total / 2**30, 1)
    models = {line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
              if line.startswith("model name")}
    assert machine.cpu_model in models | {None}
    assert machine.gpus == [] and machine.gpu_driver is None  # this CPU machine has none


def test_a_machines_gpus_come_from_the_device_facts() -> None:
    """Recorded facts of a GPU machine (a CPU machine cannot show the real ones)."""
    from jaxrun.results.machine import this_machine
    from jaxrun.results.models import AvailableDevice, DeviceInfo

    facts = DeviceInfo(jax_available=True, python_version="3.11", python_executable="python", probed_at="now",
                       available_devices=[
                           AvailableDevice(name="NVIDIA H100 80GB HBM3", platform="gpu", id=i, driver_version="550.54")
                           for i in (1, 0)] + [AvailableDevice(name="cpu", platform="cpu", id=0)])
    machine = this_machine(facts, ["--xla_gpu_autotune_level=0"])
    assert machine.gpus == ["NVIDIA H100 80GB HBM3"] * 2 and machine.gpu_driver == "550.54"
    other = machine.model_copy(update={"gpu_driver": "560.1"})
    assert other.fingerprint != machine.fingerprint
    assert other.differences(machine) == ["gpu_driver: '560.1' vs '550.54'"]


def test_a_version_6_history_gains_commit_times_and_machines_as_unknown(history_at: Path | str) -> None:
    from jaxrun.results.machine import Machine

    _database_at(history_at, 6)
    with HistoryStore(history_at) as store:
        old = store.record(make_run([1.0]))  # as an older jaxrun would: no machine
        machine = Machine(cpu_model="Some CPU", cpus=8, memory_gib=31.2)
        new = store.record(make_run([1.0]).model_copy(update={"machine": machine, "git_commit_time": "2026-10-01T12:00:00+02:00"}))
        first, second = store.get(old), store.get(new)
    assert (first.machine, first.machine_id, first.git_commit_time) == (None, None, None)
    assert second.machine == machine and second.machine_id == machine.fingerprint
    assert second.git_commit_time == "2026-10-01T12:00:00+02:00"


def test_runs_of_another_machine_are_no_baseline_and_what_differs_is_said(history_at: Path | str) -> None:
    from jaxrun.results.machine import Machine

    small, large = Machine(cpu_model="A", cpus=2, memory_gib=8.0), Machine(cpu_model="A", cpus=16, memory_gib=8.0)
    with HistoryStore(history_at) as store:
        unknown = [store.record(make_run(normal(i, 1.0))) for i in range(2)]  # recorded before machines were kept
        on_small = [store.record(make_run(normal(10 + i, 1.0)).model_copy(update={"machine": small})) for i in range(3)]
        newest = store.record(make_run(normal(20, 1.5)).model_copy(update={"machine": large}))
        check = store.check_regression(newest)
        again = store.record(make_run(normal(21, 1.5)).model_copy(update={"machine": small}))
        judged = store.check_regression(again)
    # The large machine's run: only the runs of unknown machines are its baseline (2 < 3: not judged).
    assert check.previous_runs == 2 and check.other_machines == 3 and not check.judged
    assert "3 earlier runs were measured on another machine (cpus: 16 vs 2)" in (check.note or "")
    # The small machine's: its own runs and the unknown ones; the large one's left out, and said.
    assert judged.previous_runs == 5 and judged.other_machines == 1 and judged.regression
    assert judged.comparison is not None and f"runs {sorted(unknown + on_small)}" in (judged.comparison.note or "")
    assert "1 earlier run was measured on another machine (cpus: 2 vs 16)" in (judged.note or "")
