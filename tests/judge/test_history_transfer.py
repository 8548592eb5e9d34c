"""``jaxrun history --export FILE`` / ``--import FILE`` (judge/history_transfer.py): a history moved
from SQLite to PostgreSQL and back is the same, row for row, to the byte of its export; importing
twice adds once; a history that holds runs takes the file's under new ids with their references
followed; a file that is no export is one line and adds nothing; an export never writes over a
file."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest
from helpers import jaxrun, make_run

from jaxrun.judge.compile_history import CompileRun
from jaxrun.judge.history import HistoryStore
from jaxrun.results.models import ChangeCheck, CompileStats


def _fill(location: Path | str) -> None:
    """Every table holds rows: 12 runs with a step at c06, what two of them compiled, one compile
    record of a run never benchmarked, one kept confirmation."""
    rng = np.random.default_rng(5)
    with HistoryStore(location) as store:
        ids = [store.record(make_run([float(w) for w in rng.normal(1.2 if i >= 6 else 1.0, 0.01, 4)],
                                     commit=f"c{i:02d}", at=f"2026-11-{1 + i:02d}T00:00:00+00:00"))
               for i in range(12)]
        for n, run_id in enumerate([ids[3], ids[9], None]):
            store.record_compiles(CompileRun(
                recorded_at=f"2026-11-2{n}T00:00:00.000+00:00", script_name="model.py", script_path="/proj/examples/model.py",
                content_hash="h" * 64, host="hostA", device_requested="auto", device_used="cpu", environment=None,
                programs={"jit(step)": CompileStats(count=1 + n, compile_time=0.25 * (n + 1)),
                          "jit(loss)": CompileStats(count=1, cache_hits=n)}, history_run_id=run_id))
        (change,) = [c for c in store.changes(metric="wall_time") if not c.candidate]
        store.record_check(change, ChangeCheck(script_path=change.script_path, metric="wall_time", before_commit="c05",
                                               after_commit="c06", verdict="confirmed", ratio=1.2, pairs=9,
                                               checked_at="2026-11-28T00:00:00+00:00"))


def _export(location: Path | str, file: Path) -> str:
    done = jaxrun("history", "--history", location, "--export", file)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
    # The mode of any file the user writes (0666 less the umask), not that of its temporary file.
    umask = os.umask(0o077)
    os.umask(umask)
    assert stat.S_IMODE(file.stat().st_mode) == 0o666 & ~umask, oct(file.stat().st_mode)
    return file.read_text()


def _import(location: Path | str, file: Path) -> str:
    done = jaxrun("history", "--history", location, "--import", file)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stderr


def test_sqlite_to_postgresql_and_back_is_the_same_history(tmp_path: Path, postgres) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("psycopg")
    first = tmp_path / "first.sqlite"
    _fill(first)
    server = postgres.database("moved")
    exported = _export(first, tmp_path / "a.jsonl")
    said = _import(server, tmp_path / "a.jsonl")
    assert "added 12 runs, 60 samples, 3 compile records, 6 compiled programs, 1 kept confirmation" in said, said
    assert "s3cret-Pa55word" not in said
    assert _export(server, tmp_path / "b.jsonl") == exported
    _import(tmp_path / "back.sqlite", tmp_path / "b.jsonl")
    assert _export(tmp_path / "back.sqlite", tmp_path / "c.jsonl") == exported
    # The same answers from each: runs, compiled programs, change points and their confirmation.
    answers = []
    for location in (first, server, tmp_path / "back.sqlite"):
        with HistoryStore(location) as store:
            runs = store.runs()
            answers.append(([r.model_dump() for r in runs], store.programs_of_runs([int(r.id) for r in runs]),
                            [c.model_dump() for c in store.changes(metric="wall_time")]))
    assert answers[0] == answers[1] == answers[2]
    assert answers[0][2][0]["check"]["verdict"] == "confirmed"
    # A run recorded after the import gets the next id on PostgreSQL too (its sequence moved on).
    with HistoryStore(server) as store:
        assert store.record(make_run([1.0])) == 13


def test_importing_twice_adds_once_and_a_history_with_runs_takes_them_under_new_ids(history_at, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "source.sqlite"
    _fill(source)
    _export(source, tmp_path / "a.jsonl")
    with HistoryStore(history_at) as store:
        mine = store.record(make_run([5.0, 5.1], path="/other/mine.py", name="mine.py"))
    _import(history_at, tmp_path / "a.jsonl")
    again = _import(history_at, tmp_path / "a.jsonl")
    assert "added nothing; already held, not added: 12 runs, 60 samples, 3 compile records, 6 compiled programs, " \
           "1 kept confirmation" in again, again
    with HistoryStore(source) as store:
        theirs = store.runs()
        their_programs = store.programs_of_runs([int(r.id) for r in theirs])
    with HistoryStore(history_at) as store:
        runs = store.runs()
        assert [r.id for r in runs][0] == mine and len(runs) == 13
        moved = runs[1:]
        # New ids, the same runs (samples and keys), what they compiled still theirs.
        assert [r.id for r in moved] == list(range(mine + 1, mine + 13))
        assert [r.model_dump(exclude={"id"}) for r in moved] == [r.model_dump(exclude={"id"}) for r in theirs]
        programs = store.programs_of_runs([int(r.id) for r in moved])
        assert sorted(map(str, programs.values())) == sorted(map(str, their_programs.values())) and len(programs) == 2
        (change,) = [c for c in store.changes(metric="wall_time") if not c.candidate]
        assert change.check is not None and change.check.verdict == "confirmed"


def test_a_file_that_is_no_export_is_one_line_and_adds_nothing(history_at, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "source.sqlite"
    _fill(source)
    good = _export(source, tmp_path / "a.jsonl").splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(good[:20] + ['{"table": "samples", "row": {"run_id": 999, "idx": 0}}']) + "\n")
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"jaxrun_history": 1, "schema_version": 99}) + "\n" + "\n".join(good[1:]) + "\n")
    garbled = tmp_path / "garbled.jsonl"
    garbled.write_text("\n".join(good[:5]) + "\n{not json\n")
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": 1}\n')
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    cases = {cut: "names runs 999, which the file does not hold before it", newer: "exported by a newer jaxrun",
             garbled: "line 6 is not JSON", other: "is not a history export of jaxrun",
             binary: "is not UTF-8 text", tmp_path / "none.jsonl": "cannot read"}
    for file, said in cases.items():
        done = jaxrun("history", "--history", history_at, "--import", file)
        (line,) = done.stderr.strip().splitlines()
        assert done.returncode == 2 and said in line and "Traceback" not in line, (file.name, done.stderr)
    with HistoryStore(history_at) as store:
        assert store.runs() == []  # every import was one transaction: nothing of the cut file was kept


def test_an_export_writes_a_new_file_and_never_over_one(tmp_path: Path) -> None:
    source = tmp_path / "source.sqlite"
    _fill(source)
    mine = tmp_path / "mine.jsonl"
    mine.write_text("a user's own file\n")
    for target, said in ((mine, "exists; --export writes a new file, never over one"),
                         (tmp_path / "no" / "such" / "folder.jsonl", "does not exist"),
                         (tmp_path, "it is a folder")):
        done = jaxrun("history", "--history", source, "--export", target)
        assert done.returncode == 2 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert mine.read_text() == "a user's own file\n"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("source.sqlite")) == ["mine.jsonl"]
    shown = jaxrun("history", "--history", source, "--export", "-")
    lines = shown.stdout.splitlines()
    assert shown.returncode == 0 and json.loads(lines[0]) == {"jaxrun_history": 1, "schema_version": 9}
    assert sum(json.loads(line)["table"] == "runs" for line in lines[1:]) == 12


def test_rows_the_history_refuses_are_one_line_naming_the_line(tmp_path: Path) -> None:
    source = tmp_path / "source.sqlite"
    _fill(source)
    good = _export(source, tmp_path / "a.jsonl").splitlines()
    run = json.loads(good[1])
    no_id = {**run, "row": {k: v for k, v in run["row"].items() if k != "id"}}
    no_name = {**run, "row": {k: v for k, v in run["row"].items() if k != "script_name"}}
    for name, lines, said in (("no_id", [good[0], json.dumps(no_id)], "line 2: a row of runs without its id"),
                              ("no_name", [good[0], json.dumps(no_name)], "line 2: the history refused the row of runs"),
                              ("headless", good[1:], "is not a history export of jaxrun"),
                              ("blank_first", ["", *good], None)):
        file = tmp_path / f"{name}.jsonl"
        file.write_text("\n".join(lines) + "\n")
        target = tmp_path / f"{name}.sqlite"
        done = jaxrun("history", "--history", target, "--import", file)
        if said is None:  # a blank line before the first is no harm
            assert done.returncode == 0 and "added 12 runs" in done.stderr, done.stderr
            continue
        (line,) = done.stderr.strip().splitlines()
        assert done.returncode == 2 and said in line and "Traceback" not in line, (name, done.stderr)
        with HistoryStore(target) as store:
            assert store.runs() == []


def test_export_and_import_go_alone(tmp_path: Path) -> None:
    source = tmp_path / "source.sqlite"
    _fill(source)
    for args in (("--export", tmp_path / "a.jsonl", "--import", tmp_path / "a.jsonl"),
                 ("model.py", "--export", tmp_path / "a.jsonl"), ("--changes", "--import", tmp_path / "a.jsonl"),
                 ("--json", "--export", "-")):
        done = jaxrun("history", "--history", source, *args)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, \
            (args, done.stderr)
    assert not (tmp_path / "a.jsonl").exists()
