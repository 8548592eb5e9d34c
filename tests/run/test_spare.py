"""Spare probe processes (run/process/spare.py): started before their script is known, they must run the
script exactly as a new process would, keep their waiting time out of execution_time, be used
only when the job's start-up variables match, and never outlive jaxrun."""

from __future__ import annotations

import ast
import os
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers import jaxrun, load, write

from jaxrun.config.options import RunOptions
from jaxrun.run.process import cgroups
from jaxrun.run.process.environment import probe_command
from jaxrun.run.batch_pool import BatchPool
from jaxrun.run.process.prestart import StartPlan
from jaxrun.run.process.process_watch import Limits, launch
from jaxrun.run.process.spare import spare_environment


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


def _launch(tmp_path: Path, env: dict[str, str], pool: BatchPool):  # type: ignore[no-untyped-def]
    script = write(tmp_path / "s", "sleeps.py", SLEEPS)
    events = tmp_path / "events.jsonl"
    command = probe_command(script, events, RunOptions.build("api", args=["--flag", "x y"]))
    return launch(command, cwd=script.parent, env={**env, "JAXRUN_EVENTS_FILE": str(events)},
                  stdout_log=tmp_path / "out.log", stderr_log=tmp_path / "err.log", events_path=events,
                  limits=Limits(timeout=60, log_cap=2**20), pool=pool)


def test_a_spare_runs_the_job_as_a_new_process_would_without_its_waiting_time(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SPARE_TEST_TOKEN", str(tmp_path))
    env = {**spare_environment(), "ONLY_FOR_THE_JOB": "yes"}
    pool = BatchPool()
    opened = time.perf_counter()  # the spare is started after this (one clock for parent and child)
    pool.open_spares(spare_environment())
    try:
        time.sleep(1.0)  # the spare waits, ready, for a second: not the script's time
        assert len(spares_of(str(tmp_path))) == 1  # the check below sees a spare when there is one
        handed = time.perf_counter()  # the job is handed over after this
        outcome = _launch(tmp_path, env, pool)
    finally:
        pool.close()
    assert outcome.prestarted and outcome.exit_code == 0, (tmp_path / "err.log").read_text()
    # the job's folder, environment and arguments, as for a process started for it
    assert (tmp_path / "out.log").read_text().strip().split(maxsplit=2) == [str(tmp_path / "s"), "yes", "['--flag', 'x y']"]
    # The process's time starts at its start-up, moved up to the hand-over by the time it sat
    # ready: at least that late after the spare was started (no bound on how long a loaded
    # machine takes to start Python).
    (start,) = [e for e in outcome.events if e.get("type") == "start"]
    waited = handed - start["spare_ready_at"]
    assert waited > 0 and outcome.started >= opened + waited, (outcome.started - opened, waited)
    assert outcome.wall_time >= 0.3  # its 0.3 s sleep
    assert not spares_of(str(tmp_path))


def test_a_spare_is_not_used_when_a_start_up_variable_differs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SPARE_TEST_TOKEN", str(tmp_path))
    pool = BatchPool()
    pool.open_spares(spare_environment())
    try:
        outcome = _launch(tmp_path, {**spare_environment(), "PYTHONHASHSEED": "123", "ONLY_FOR_THE_JOB": "no"}, pool)
    finally:
        pool.close()
    assert not outcome.prestarted and outcome.exit_code == 0
    assert (tmp_path / "out.log").read_text().split()[1] == "no"
    assert not spares_of(str(tmp_path))


def test_jaxrun_run_uses_spares_and_leaves_none(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        write(tmp_path / "s", f"{name}.py", "import time\nif False:\n    import jax\ntime.sleep(0.1)\n")
    token = {"SPARE_TEST_TOKEN": str(tmp_path)}
    # Spares start the processes of a batch that execs (--prestart none); a forking batch has none.
    done = jaxrun("run", tmp_path / "s", "--results-dir", tmp_path / "r", "--no-history", "--no-config",
                  "--prestart", "none", env=token)
    assert done.returncode == 0, done.stderr
    rows = load(tmp_path / "r" / "jax_execution_results.json")["script_results"]
    assert all(r["prestarted"] for r in rows)
    assert all(0.1 <= r["execution_time"] < 1.0 for r in rows)
    assert not spares_of(str(tmp_path))
    # a usage error after the spare was started leaves nothing behind either
    assert jaxrun("run", tmp_path / "s", "--device", "gpux", env=token).returncode == 2
    assert not spares_of(str(tmp_path))


def test_no_spare_is_started_after_the_last_process_the_batch_expects(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SPARE_TEST_TOKEN", str(tmp_path))
    pool = BatchPool()
    pool.open_spares(spare_environment())
    try:
        pool.expect(2)
        first = _launch(tmp_path, spare_environment(), pool)  # takes the spare; launch starts the next
        assert len(spares_of(str(tmp_path))) == 1
        second = _launch(tmp_path, spare_environment(), pool)
        # the batch expects no more: nothing was started to be stopped again
        assert not spares_of(str(tmp_path))
    finally:
        pool.close()
    assert first.prestarted and second.prestarted


# --- the parent's own set-up, done while the first script runs (run/process/process_pool.py: when_started) -----

def test_deferred_set_up_runs_once_the_script_runs_and_never_counts_in_its_time(tmp_path: Path) -> None:
    seen: list[bool] = []
    pool = BatchPool()

    def slow_set_up() -> None:
        seen.append((tmp_path / "started").exists() or _waits_for(tmp_path / "started"))
        time.sleep(0.8)  # longer than the script

    pool.when_started(slow_set_up)
    script = write(tmp_path, "quick.py", f"open({str(tmp_path / 'started')!r}, 'w').close()\n")
    outcome = launch([sys.executable, str(script)], cwd=tmp_path, env=dict(os.environ), stdout_log=tmp_path / "o",
                     stderr_log=tmp_path / "e", events_path=tmp_path / "events", limits=Limits(timeout=60, log_cap=2**20),
                     pool=pool)
    assert seen == [True]  # it ran while (or after) the script ran, never before it started
    # ground truth: the script is a Python start-up and one file, far below the set-up's 0.8 s
    assert outcome.exit_code == 0 and outcome.wall_time < 0.5, outcome.wall_time
    pool.when_started(lambda: seen.append(False))
    pool.drop_deferred()  # a batch that starts nothing leaves nothing for the next one
    launch([sys.executable, "-c", "pass"], cwd=tmp_path, env=dict(os.environ), stdout_log=tmp_path / "o",
           stderr_log=tmp_path / "e", events_path=tmp_path / "events", limits=Limits(timeout=60, log_cap=2**20),
           pool=pool)
    assert seen == [True]
    # Another process (a Ray worker) gets a pool of its own: no spare, nothing put off.
    import pickle

    pool.when_started(lambda: None)
    elsewhere = pickle.loads(pickle.dumps(pool))
    assert isinstance(elsewhere, BatchPool) and elsewhere is not pool and not elsewhere._deferred


def _waits_for(path: Path) -> bool:
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return path.exists()


def test_the_batch_files_first_version_is_written_while_the_first_script_runs(tmp_path: Path) -> None:
    # The script waits for the batch file: it ends only if jaxrun wrote it while it ran.
    write(tmp_path / "s", "waits.py", "import os, time\nif False:\n    import jax\n"
          f"path = {str(tmp_path / 'r' / 'jax_execution_results.json')!r}\n"
          "deadline = time.monotonic() + 20\n"
          "while not os.path.exists(path) and time.monotonic() < deadline:\n    time.sleep(0.01)\n"
          "print('seen' if os.path.exists(path) else 'missing')\n")
    done = jaxrun("run", tmp_path / "s", "--results-dir", tmp_path / "r", "--no-history", "--no-config")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r" / "logs" / "waits.stdout.log").read_text().strip() == "seen"
    batch = load(tmp_path / "r" / "jax_execution_results.json")
    assert batch["metadata"]["complete"] and batch["script_results"][0]["execution_time"] < 15


READS_ITS_PIDS_GROUP = """\
import jaxrun
groups = dict(line.split(":", 2)[1:] for line in open("/proc/self/cgroup").read().splitlines())
folder = "/sys/fs/cgroup/pids" + groups["pids"].strip()
jaxrun.record(group=folder, pids_max=open(folder + "/pids.max").read().strip())
"""


@pytest.mark.skipif(not Path("/sys/fs/cgroup/pids").is_dir() or cgroups.create() is None,
                    reason="needs a cgroup v1 pids hierarchy that jaxrun may write to")
def test_a_spare_waits_in_the_cgroup_that_becomes_its_jobs_with_the_jobs_limits(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SPARE_TEST_TOKEN", str(tmp_path))
    pool = BatchPool()
    pool.open_spares(spare_environment())
    try:
        spare = pool.spares._spare
        assert spare is not None and spare.group is not None
        deadline = time.monotonic() + 20
        while spare.proc.pid not in spare.group.pids() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert spare.proc.pid in spare.group.pids()  # joined while it waits, before any job
    finally:
        pool.close()
    assert not spare.group.dirs["pids"].exists()  # an unused spare's group goes with it
    script = write(tmp_path / "s", "reads.py", READS_ITS_PIDS_GROUP)
    done = jaxrun("run", script, "--results-dir", tmp_path / "r", "--no-history", "--no-config",
                  "--max-processes", "3", "--prestart", "none")
    assert done.returncode == 0, done.stderr
    [result] = load(tmp_path / "r" / "jax_execution_results.json")["script_results"]
    recorded = result["results"]
    assert result["prestarted"] and result["cgroup"] == recorded["group"]
    assert recorded["pids_max"] == str(3 * cgroups.tasks_per_process()) and result["kernel_limits"] == ["processes"]
    assert not Path(recorded["group"]).exists()  # removed with its job


# Every thread of the script's process and the cores each may run on, read at the script's first line.
THREADS_AT_FIRST_LINE = ("import os\nprint({int(t): sorted(os.sched_getaffinity(int(t))) "
                         "for t in os.listdir('/proc/self/task')})\n")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning to fewer cores needs 2")
@pytest.mark.parametrize("prestarted,forked", [(True, False), (False, False), (False, True)],
                         ids=["spare", "new_process", "forked"])
def test_every_thread_is_on_the_jobs_cores_from_the_scripts_first_line(tmp_path: Path, monkeypatch,
                                                                        prestarted: bool, forked: bool) -> None:
    # A spare has a thread before its job is known (its lifeline's): a mask set on its process
    # after the start held its main thread only. A new process is born with the mask.
    monkeypatch.setenv("SPARE_TEST_TOKEN", str(tmp_path))
    core = sorted(os.sched_getaffinity(0))[-1]
    script = write(tmp_path / "s", "threads.py", THREADS_AT_FIRST_LINE)
    events = tmp_path / "events.jsonl"
    pool = BatchPool()
    if prestarted:
        pool.open_spares(spare_environment())
        deadline = time.monotonic() + 30
        # Read from /proc as psutil finds it: a loaded suite once listed no spare right after its start.
        while not (found := spares_of(str(tmp_path))) and time.monotonic() < deadline:
            time.sleep(0.01)
        (spare,) = found
        while len(os.listdir(f"/proc/{spare}/task")) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)  # until it has its lifeline thread
    try:
        outcome = launch(probe_command(script, events, RunOptions.build("api")), cwd=script.parent,
                         env={**spare_environment(), "JAXRUN_EVENTS_FILE": str(events)},
                         stdout_log=tmp_path / "out.log", stderr_log=tmp_path / "err.log", events_path=events,
                         limits=Limits(timeout=60, log_cap=2**20), cpu_affinity=(core,), pool=pool,
                         start=StartPlan("probe" if forked else "none"))
    finally:
        pool.close()
    assert outcome.exit_code == 0 and outcome.prestarted is prestarted, (tmp_path / "err.log").read_text()
    # A forked process has the server's threads' state, not its mask: it takes the job's at the fork.
    assert outcome.start_mode == ("fork" if forked else "exec"), outcome.prestart_reason
    threads = ast.literal_eval((tmp_path / "out.log").read_text())
    assert len(threads) >= 2 and all(cpus == [core] for cpus in threads.values()), threads
    assert not spares_of(str(tmp_path))


# Each process forks two children, 8 levels deep, a level every 0.1 s: 511 processes unless held.
FORK_BOMB = ("depth = 0\nwhile depth < 8:\n    time.sleep(0.1)\n    forked = 0\n"
             "    for _ in range(2):\n        if os.fork() == 0:\n            depth, forked = depth + 1, -1\n"
             "            break\n        forked += 1\n    if forked != -1:\n        break\ntime.sleep(60)\n")


def _until_gone(pid_file: Path, seconds: float) -> None:
    """Wait until the process whose pid ``pid_file`` holds is gone, ``seconds`` at most."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(int(pid_file.read_text()), 0)
        except ProcessLookupError:
            return
        except (OSError, ValueError):
            pass  # not written yet
        time.sleep(0.01)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["timeout", "max_processes"])
def test_the_limits_hold_while_jaxrun_does_its_put_off_set_up(tmp_path: Path, case: str) -> None:
    # The set-up put off until the first script runs (BatchPool.when_started) lasts here until the
    # script's process is gone (10 s at most), as it can on a loaded machine: the script's limits
    # are held meanwhile, not once it is done. (A bomb unheld is at 511 processes well before.)
    body, limits = {"timeout": ("time.sleep(1)\n", Limits(timeout=0.3)),
                    "max_processes": (FORK_BOMB, Limits(timeout=60, max_processes=20))}[case]
    pid_file = tmp_path / "pid"
    script = write(tmp_path / "s", "limited.py", f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n{body}")
    events = tmp_path / "events.jsonl"
    pool = BatchPool()
    pool.when_started(lambda: _until_gone(pid_file, 10))
    outcome = launch(probe_command(script, events, RunOptions.build("api")), cwd=script.parent,
                     env={**spare_environment(), "JAXRUN_EVENTS_FILE": str(events)},
                     stdout_log=tmp_path / "out.log", stderr_log=tmp_path / "err.log", events_path=events,
                     limits=limits._replace(log_cap=2**20), pool=pool)
    if case == "timeout":
        assert outcome.timed_out and outcome.exit_code is None, outcome
    else:
        # Stopped a level or a few past 20 (31, 63, 127), never at the bomb's last level (511).
        assert outcome.over_process_limit and 20 < outcome.peak_processes < 300, outcome.peak_processes
