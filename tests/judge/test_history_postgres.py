"""The history on a real PostgreSQL (tests/postgres_cluster.py: a private cluster made with initdb,
on a free port, with a password), against the same history on SQLite: one store's code, two
dialects (judge/history_db.py). Many writers at once, a migration taken once, a newer schema
refused, a wrong password and a host that does not answer said in one line without the password,
a server restarted under an open store."""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import make_run

from jaxrun.errors import UsageError
from jaxrun.judge.history import SCHEMA_VERSION, HistoryStore
from jaxrun.judge.history_db import CONNECT_SECONDS, shown_location
from jaxrun.results.models import ChangeCheck

pytest.importorskip("psycopg")


def _fill(store: HistoryStore) -> None:
    """12 runs of one script (a 20 % step at c06), 4 of another on a second host, one check kept;
    each run's key given (else a new one each: the two stores' answers would differ by it)."""
    rng = np.random.default_rng(3)
    for i in range(12):
        walls = [float(w) for w in rng.normal(1.2 if i >= 6 else 1.0, 0.01, 5)]
        store.record(make_run(walls, commit=f"c{i:02d}", at=f"2026-11-{1 + i:02d}T00:00:00+00:00")
                     .model_copy(update={"run_key": f"a{i:031x}"}))
    for i in range(4):
        store.record(make_run([2.0, 2.01, 1.99], path="/proj/b.py", name="b.py", host="hostB", commit=None,
                              at=f"2026-11-{1 + i:02d}T06:00:00+00:00").model_copy(update={"run_key": f"b{i:031x}"}))
    (change,) = [c for c in store.changes(metric="wall_time") if not c.candidate]
    store.record_check(change, ChangeCheck(script_path=change.script_path, metric="wall_time", before_commit="c05",
                                           after_commit="c06", verdict="confirmed", ratio=1.2, pairs=9))


def _answers(store: HistoryStore) -> dict:
    return {
        "runs": [r.model_dump() for r in store.runs()],
        "scripts": store.scripts(),
        "checks": [c.model_dump() for c in store.check_latest()],
        "series": [(s.points, [c.model_dump() for c in s.changes], s.summary.model_dump())
                   for s in store.series(metric="wall_time")],
        "trend": store.trend("model.py"),
        "limited": [r.id for r in store.runs("b.py", limit=2)],
        "comparable": store.earlier_comparable(store.get(12), 5, "same"),
    }


def test_the_store_answers_on_postgresql_as_on_sqlite(tmp_path: Path, postgres) -> None:  # type: ignore[no-untyped-def]
    url = postgres.database("same_answers")
    with HistoryStore(tmp_path / "h.sqlite") as lite, HistoryStore(url) as server:
        assert (lite.dialect, server.dialect) == ("sqlite", "postgresql")
        assert lite.schema_version == server.schema_version == SCHEMA_VERSION
        _fill(lite)
        _fill(server)
        on_sqlite, on_postgres = _answers(lite), _answers(server)
    assert on_postgres == on_sqlite
    assert on_postgres["series"][0][1][0]["check"]["verdict"] == "confirmed"  # the check kept, and found again
    assert str(server.path) == shown_location(url) and "***" in str(server.path)
    assert "s3cret" not in str(server.path)


def _writer(url: str, worker: int, count: int) -> None:
    with HistoryStore(url) as store:  # every worker may be the one that makes the schema
        for i in range(count):
            store.record(make_run([1.0 + i / 100, 1.1], name=f"w{worker}.py", path=f"/proj/w{worker}.py",
                                  commit=f"{worker}-{i}"))


@pytest.mark.slow
def test_eight_writers_at_once_each_row_once_and_the_schema_made_once(postgres) -> None:  # type: ignore[no-untyped-def]
    url = postgres.database("eight_writers")  # empty: the eight race to make the schema too
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(url, w, 50)) for w in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(300)
    assert [w.exitcode for w in workers] == [0] * 8
    with HistoryStore(url) as store:
        runs = store.runs()
        assert len(runs) == 400 and len({r.id for r in runs}) == 400
        assert sorted(r.git_commit for r in runs) == sorted(f"{w}-{i}" for w in range(8) for i in range(50))
        assert all(len(r.samples) == 3 for r in runs)  # a warm-up and two counted, each once
        assert store._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall() == [(str(SCHEMA_VERSION),)]


def test_a_newer_schema_is_refused_and_older_ones_brought_up_to_date(postgres) -> None:  # type: ignore[no-untyped-def]
    url = postgres.database("newer")
    with HistoryStore(url) as store:
        store.record(make_run([1.0]))
        store._db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(UsageError, match=r"written by a newer jaxrun \(schema 99 > \d+\)") as refused:
        HistoryStore(url)
    assert "s3cret" not in str(refused.value) and "***@" in str(refused.value)


def test_a_wrong_password_and_a_silent_host_are_one_line_without_the_password(postgres) -> None:  # type: ignore[no-untyped-def]
    url = postgres.database("refusals")
    wrong = url.replace(":s3cret-Pa55word@", ":not-the-one@")
    with pytest.raises(UsageError) as refused:
        HistoryStore(wrong)
    said = str(refused.value)
    assert "password authentication failed" in said and "not-the-one" not in said and "\n" not in said
    # A host that never answers (a blackhole address of TEST-NET-1): bounded by the connect timeout.
    started = time.monotonic()
    with pytest.raises(UsageError, match="cannot reach the history 'postgresql://jaxrun:\\*\\*\\*@192.0.2.1"):
        HistoryStore("postgresql://jaxrun:s3cret-Pa55word@192.0.2.1:5432/x")
    assert time.monotonic() - started < CONNECT_SECONDS + 5


@pytest.mark.slow
def test_a_server_restarted_under_an_open_store_is_an_error_callers_already_handle() -> None:
    import sqlite3

    import postgres_cluster

    with postgres_cluster.private() as cluster:
        url = cluster.database("restarted")
        with HistoryStore(url) as store:
            store.record(make_run([1.0]))
            cluster.restart()
            with pytest.raises(sqlite3.Error) as lost:  # what the history sink and the CLI catch
                store.record(make_run([1.1]))
            assert "PostgreSQL" in str(lost.value) and "s3cret" not in str(lost.value)
        with HistoryStore(url) as again:  # the rows written before are there, the lost one is not
            assert [r.median_wall_time for r in again.runs()] == [1.0]


def test_the_history_commands_read_postgresql_as_sqlite_and_never_show_the_password(tmp_path: Path, postgres) -> None:  # type: ignore[no-untyped-def]
    import json

    from helpers import jaxrun

    url = postgres.database("commands")
    with HistoryStore(tmp_path / "h.sqlite") as lite, HistoryStore(url) as server:
        _fill(lite)
        _fill(server)
    for args in (("--changes", "--metric", "wall_time", "--json"), ("--json",)):
        on_sqlite = jaxrun("history", "--history", tmp_path / "h.sqlite", *args)
        on_postgres = jaxrun("history", "--history", url, *args)
        assert on_postgres.returncode == on_sqlite.returncode == 0, on_postgres.stderr
        assert json.loads(on_postgres.stdout) == json.loads(on_sqlite.stdout)
    table = jaxrun("history", "--history", url, "--changes", "--metric", "wall_time", "--markdown", tmp_path / "c.md")
    page = tmp_path / "page.html"
    drawn = jaxrun("report", "--history", url, "--metric", "wall_time", "-o", page)
    checked = jaxrun("history", "--history", url, "--check")
    assert table.returncode == 0 and drawn.returncode == 0 and checked.returncode == 2
    assert "pg_amcheck" in checked.stderr
    said = table.stdout + table.stderr + drawn.stdout + drawn.stderr + checked.stderr
    written = (tmp_path / "c.md").read_text() + page.read_text()
    assert "jaxrun:***@127.0.0.1" in written and "s3cret-Pa55word" not in said + written


def test_a_batch_writes_its_benchmarks_to_postgresql_named_every_way_and_no_file_holds_the_password(
        tmp_path: Path, postgres) -> None:  # type: ignore[no-untyped-def]
    import os
    import subprocess

    from helpers import jaxrun, write

    url = postgres.database("batches")
    write(tmp_path / "s", "a.py", "if False:\n    import jax\nimport time\ntime.sleep(0.01)\n")
    # --history, then JAXRUN_HISTORY, then a config file's history (a URL: never made relative to its folder).
    done = jaxrun("run", tmp_path / "s", "--benchmark-runs", "2", "--warmup-runs", "0", "--history", url,
                  "--results-dir", tmp_path / "r1", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    done = jaxrun("run", tmp_path / "s", "--benchmark-runs", "2", "--warmup-runs", "0", "--results-dir", tmp_path / "r2",
                  cwd=tmp_path, env={"JAXRUN_HISTORY": url})
    assert done.returncode == 0, done.stdout + done.stderr
    write(tmp_path / "s", "jaxrun.toml", f'history = "{url}"\n')
    done = jaxrun("run", tmp_path / "s", "--benchmark-runs", "2", "--warmup-runs", "0", "--results-dir", tmp_path / "r3",
                  cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = jaxrun("config", tmp_path / "s", "--json", cwd=tmp_path)
    assert shown.returncode == 0 and "jaxrun:***@127.0.0.1" in shown.stdout, shown.stdout + shown.stderr
    with HistoryStore(url) as store:
        runs = store.runs()
    assert len(runs) == 3 and all(len([s for s in r.samples if not s.warmup]) == 2 for r in runs)
    # The password is in no file jaxrun wrote, nor in anything it printed.
    held = subprocess.run(["grep", "-rl", "s3cret-Pa55word", str(tmp_path / "r1"), str(tmp_path / "r2"),
                           str(tmp_path / "r3")], capture_output=True, text=True)
    assert held.stdout == "" and held.returncode == 1, held.stdout
    assert "s3cret-Pa55word" not in shown.stdout + shown.stderr + done.stdout + done.stderr
    # A server that cannot be reached: one line before anything runs, nothing written.
    (tmp_path / "s" / "jaxrun.toml").unlink()
    done = jaxrun("run", tmp_path / "s", "--benchmark-runs", "2", "--history",
                  "postgresql://jaxrun:s3cret-Pa55word@127.0.0.1:1/none", "--results-dir", tmp_path / "r4", cwd=tmp_path)
    (line,) = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "cannot reach the history 'postgresql://jaxrun:***@127.0.0.1:1/none'" in line, line
    assert "s3cret" not in line and not os.path.exists(tmp_path / "r4")


def test_every_way_to_write_a_password_in_a_url_is_shown_as_stars() -> None:
    assert shown_location("postgresql://jaxrun:pw@db:5432/h") == "postgresql://jaxrun:***@db:5432/h"
    assert shown_location("postgres://:pw@db/h") == "postgres://:***@db/h"
    assert shown_location("postgresql://db/h?user=u&password=pw&sslmode=require") == \
        "postgresql://db/h?user=u&password=***&sslmode=require"
    assert shown_location("postgresql://jaxrun@db/h") == "postgresql://jaxrun@db/h"  # none given: PGPASSWORD, .pgpass
    assert shown_location("/a/history.sqlite") == "/a/history.sqlite"


def test_libpq_finds_the_password_where_its_users_keep_it(tmp_path: Path, postgres) -> None:  # type: ignore[no-untyped-def]
    """A URL without a password: PGPASSWORD, ~/.pgpass and a service file each give it, as to any
    libpq program; with none, one line without a traceback."""
    from helpers import jaxrun
    from postgres_cluster import PASSWORD, USER

    url = postgres.database("libpq")
    with HistoryStore(url) as store:
        store.record(make_run([1.0, 1.1]))
    bare = postgres.url("libpq", password=False)
    home = tmp_path / "home"
    home.mkdir()
    pgpass = home / ".pgpass"
    pgpass.write_text(f"127.0.0.1:{postgres.port}:libpq:{USER}:{PASSWORD}\n")
    pgpass.chmod(0o600)
    services = tmp_path / "services.conf"
    services.write_text(f"[team]\nhost=127.0.0.1\nport={postgres.port}\ndbname=libpq\nuser={USER}\npassword={PASSWORD}\n")
    nowhere = {"PGPASSWORD": None, "PGPASSFILE": None, "PGSERVICEFILE": None, "PGSERVICE": None, "HOME": str(tmp_path)}
    ways = {"PGPASSWORD": (bare, {**nowhere, "PGPASSWORD": PASSWORD}),
            ".pgpass": (bare, {**nowhere, "HOME": str(home)}),
            "service file": ("postgresql:///?service=team", {**nowhere, "PGSERVICEFILE": str(services)})}
    for way, (location, env) in ways.items():
        done = jaxrun("history", "--history", location, "--json", env=env)
        runs = json.loads(done.stdout)["runs"] if done.returncode == 0 else {}  # script path -> its runs
        assert [len(r) for r in runs.values()] == [1], (way, done.stdout + done.stderr)
    done = jaxrun("history", "--history", bare, env=nowhere)
    (line,) = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "cannot reach the history" in line and "PGPASSWORD or ~/.pgpass" in line, line
