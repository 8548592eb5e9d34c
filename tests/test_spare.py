"""Spare probe processes (run/spare.py): started before their script is known, they must run the
script exactly as a new process would, keep their waiting time out of execution_time, be used
only when the job's start-up variables match, and never outlive jaxrun."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
from helpers import jaxrun, load, write

from jaxrun.run.launch import launch
from jaxrun.run.spare import POOL, spare_environment
from jaxrun.run.environment import probe_command
from jaxrun.options import RunOptions

def spares_of(token: str) -> list[int]:
    """Spare processes still alive that were started for this test (their environment says so:
    another test, or another pytest worker, may have spares of its own)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if "--spare" in (proc.info["cmdline"] or ()) and proc.environ().get("SPARE_TEST_TOKEN") == token \
                    and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


SLEEPS = "import os, sys, time\ntime.sleep(0.3)\nprint(os.getcwd(), os.environ.get('ONLY_FOR_THE_JOB'), sys.argv[1:])\n"


def _launch(tmp_path: Path, env: dict[str, str]):  # type: ignore[no-untyped-def]
    script = write(tmp_path / "s", "sleeps.py", SLEEPS)
    events = tmp_path / "events.jsonl"
    command = probe_command(script, events, RunOptions.build("api", args=["--flag", "x y"]))
    return launch(command, cwd=script.parent, env={**env, "JAXRUN_EVENTS_FILE": str(events)},
                  stdout_log=tmp_path / "out.log", stderr_log=tmp_path / "err.log", events_path=events,
                  timeout=60, log_cap=2**20)


def test_a_spare_runs_the_job_as_a_new_process_would_without_its_waiting_time(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SPARE_TEST_TOKEN", str(tmp_path))
    env = {**spare_environment(), "ONLY_FOR_THE_JOB": "yes"}
    POOL.open(spare_environment())
    try:
        time.sleep(1.0)  # the spare waits, ready, for a second: not the script's time
        assert len(spares_of(str(tmp_path))) == 1  # the check below sees a spare when there is one
        outcome = _launch(tmp_path, env)
    finally:
        POOL.close()
    assert outcome.prestarted and outcome.exit_code == 0, (tmp_path / "err.log").read_text()
    # the job's folder, environment and arguments, as for a process started for it
    assert (tmp_path / "out.log").read_text().strip().split(maxsplit=2) == [str(tmp_path / "s"), "yes", "['--flag', 'x y']"]
    # ground truth: a 0.3 s sleep plus Python's start-up, never the second it waited
    assert 0.3 <= outcome.wall_time < 0.9, outcome.wall_time
    assert not spares_of(str(tmp_path))


def test_a_spare_is_not_used_when_a_start_up_variable_differs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SPARE_TEST_TOKEN", str(tmp_path))
    POOL.open(spare_environment())
    try:
        outcome = _launch(tmp_path, {**spare_environment(), "PYTHONHASHSEED": "123", "ONLY_FOR_THE_JOB": "no"})
    finally:
        POOL.close()
    assert not outcome.prestarted and outcome.exit_code == 0
    assert (tmp_path / "out.log").read_text().split()[1] == "no"
    assert not spares_of(str(tmp_path))


def test_jaxrun_run_uses_spares_and_leaves_none(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        write(tmp_path / "s", f"{name}.py", "import time\nif False:\n    import jax\ntime.sleep(0.1)\n")
    token = {"SPARE_TEST_TOKEN": str(tmp_path)}
    done = jaxrun("run", tmp_path / "s", "--results-dir", tmp_path / "r", "--no-history", "--no-config", env=token)
    assert done.returncode == 0, done.stderr
    rows = load(tmp_path / "r" / "jax_execution_results.json")["script_results"]
    assert all(r["prestarted"] for r in rows)
    assert all(0.1 <= r["execution_time"] < 1.0 for r in rows)
    assert not spares_of(str(tmp_path))
    # a usage error after the spare was started leaves nothing behind either
    assert jaxrun("run", tmp_path / "s", "--device", "gpux", env=token).returncode == 2
    assert not spares_of(str(tmp_path))
