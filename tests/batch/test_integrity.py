"""Nothing lost, nothing left behind: one batch per results folder, no process outliving its script.
Real `jaxrun run` processes, real daemons."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from helpers import (
    interrupt_and_resume,
    jaxrun,
    jaxrun_command,
    start_batch,
    survivors,
    write,
)

from jaxrun import execute_jax_script, run_jax_scripts
from jaxrun.errors import UsageError
from jaxrun.probe.lifeline import SCRIPTS_LOCK_FILE
from jaxrun.results import result_files
from jaxrun.run.process import cgroups

SLOW = "import time\nimport jax\ntime.sleep(4)\n"
QUICK = "import jax\nprint('quick')\n"
DAEMON = """\
import os, sys, time
import jax

pid_file = sys.argv[1]
if os.fork() == 0:
    os.setsid()  # leave the process group: a timeout's group kill would not reach it
    if os.fork() == 0:
        with open(pid_file, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(120)
        os._exit(0)
    os._exit(0)
os.wait()
while not os.path.exists(pid_file) or not open(pid_file).read():
    time.sleep(0.01)
print("exiting 0 with a daemon behind")
"""


def _run(*args: object, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(jaxrun_command("run", *args), cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_a_second_run_into_a_busy_results_folder_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "a", "slow.py", SLOW)
    write(tmp_path / "b", "quick.py", QUICK)
    first = _run(tmp_path / "a", "--device", "cpu", "--results-dir", tmp_path / "r", "--no-history", cwd=tmp_path)
    lock = tmp_path / "r" / ".jaxrun.lock"
    deadline = time.monotonic() + 60
    while not (lock.exists() and lock.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    second = jaxrun("run", tmp_path / "b", "--device", "cpu", "--results-dir", tmp_path / "r", "--no-history",
                    timeout=60, cwd=tmp_path)
    out, err = first.communicate(timeout=120)
    assert second.returncode == 2, second.stdout + second.stderr
    (line,) = second.stderr.strip().splitlines()
    assert "is in use by another jaxrun run (pid" in line and "--results-dir" in line
    assert first.returncode == 0, out + err
    # The first run's files are its own and complete.
    doc = json.loads((tmp_path / "r" / "jax_execution_results.json").read_text())
    assert [r["script_name"] for r in doc["script_results"]] == ["slow"] and doc["metadata"]["complete"]
    assert sorted(p.name for p in (tmp_path / "r" / "script_results").iterdir()) == ["slow_result.json"]
    # Once it is done, the folder is free again.
    assert run_jax_scripts(tmp_path / "b", device="cpu", results_dir=tmp_path / "r", history=False) is True


def test_a_results_folder_that_is_a_file_is_a_usage_error(tmp_path: Path) -> None:
    write(tmp_path / "s", "quick.py", QUICK)
    (tmp_path / "r").write_text("not a folder")
    with pytest.raises(UsageError, match="is a file"):
        run_jax_scripts(tmp_path / "s", device="cpu", results_dir=tmp_path / "r", history=False)


@pytest.mark.slow
def test_a_daemon_left_by_a_successful_script_is_stopped_and_counted(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    script = write(tmp_path / "s", "daemon.py", DAEMON)
    result = execute_jax_script(script, device="cpu", args=[str(pid_file)], timeout=60)
    assert result.success, result.error_message
    pid = int(pid_file.read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert result.leftover_processes == 1
    assert result.warnings == ["the script left 1 process running when it ended; jaxrun stopped them"]


def _children() -> set[int]:
    return {p.pid for p in psutil.Process(os.getpid()).children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE}


@pytest.mark.slow
def test_a_clean_script_leaves_nothing(tmp_path: Path) -> None:
    before = _children()  # Ray workers of earlier tests may be here
    result = execute_jax_script(write(tmp_path / "s", "quick.py", QUICK), device="cpu")
    assert result.success and result.leftover_processes == 0 and result.warnings == []
    assert _children() <= before


HUNGRY = """\
import time
import numpy as np

blocks = []
for _ in range(40):  # 40 x 50 MiB, slowly enough for a 0.1 s watch
    blocks.append(np.ones(50 * 1024 * 1024 // 8))
    time.sleep(0.05)
print("never reached: 2000 MiB held")
"""


@pytest.mark.slow
def test_a_script_over_its_memory_limit_is_stopped_as_out_of_memory(tmp_path: Path, monkeypatch) -> None:
    # jaxrun's own watch, without the kernel's limit (tests/run/test_fault_injection.py has that one).
    monkeypatch.setenv(cgroups.DISABLE_ENV, "1")
    script = write(tmp_path / "s", "hungry.py", HUNGRY)
    result = execute_jax_script(script, device="cpu", memory_limit="400MiB", timeout=120)
    assert not result.success and result.error_class == "out_of_memory"
    assert result.error_message.startswith("stopped at ") and "over the memory limit of 400 MiB" in result.error_message
    # Stopped within a few samples of crossing it: not the 2000 MiB the script would reach.
    assert 400 < result.memory_peak < 1000, result.memory_peak
    assert len(result.attempts) == 1  # jaxrun's own limit: no retry, no fallback
    assert "never reached" not in Path(result.stdout_log).read_text()
    # Under the limit the same kind of script runs to its end.
    fits = write(tmp_path / "s", "fits.py", "import numpy as np\nx = np.ones(10 * 1024 * 1024 // 8)\nprint('ok')\n")
    assert execute_jax_script(fits, device="cpu", memory_limit="1GiB").success


@pytest.mark.parametrize("value", ["lots", "4 parsecs", "-1GB", "10"])
def test_a_bad_memory_limit_is_a_usage_error(tmp_path: Path, value: str) -> None:
    with pytest.raises(UsageError, match="memory_limit must be"):
        execute_jax_script(write(tmp_path / "s", "quick.py", QUICK), memory_limit=value)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_batch_lists_every_script_and_exits_130(tmp_path: Path, sig: int) -> None:
    """The first script is running when the signal comes; the other two never start."""
    for name in ("a_slow", "b_next", "c_last"):
        write(tmp_path / "s", f"{name}.py", "import time\nimport jax\ntime.sleep(30)\n")
    proc, _ = start_batch(tmp_path, "a_slow")
    time.sleep(1.0)  # the probe is running the script
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    doc = json.loads((tmp_path / "r" / "jax_execution_results.json").read_text())
    assert doc["metadata"]["complete"] is False
    rows = {r["script_name"]: r for r in doc["script_results"]}
    assert list(rows) == ["a_slow", "b_next", "c_last"]
    assert all(r["error_class"] == "interrupted" and not r["success"] for r in rows.values())
    assert rows["a_slow"]["execution_time"] is not None  # it ran, and was stopped
    assert rows["b_next"]["error_message"] == "not run: the batch was interrupted first"
    for name in rows:  # every per-script file too
        assert json.loads(result_files.script_result_path(tmp_path / "r", name).read_text())["error_class"] == "interrupted"


@pytest.mark.slow
def test_resume_finishes_an_interrupted_batch_like_one_uninterrupted_run(tmp_path: Path) -> None:
    # tests/executors/test_ray_backend.py runs the same on the Ray backend.
    interrupt_and_resume(tmp_path, signal.SIGINT)


WRITER = """\
import sys
from jaxrun.judge.history import HistoryStore
from jaxrun.results.models import HistoryRun, RunSample

store = HistoryStore(sys.argv[1])
samples = [RunSample(index=i, warmup=False, success=True, wall_time=1.0 + i, run_time=0.5) for i in range(200)]
for n in range(100000):
    store.record(HistoryRun(recorded_at="2026-01-01T00:00:00+00:00", script_name="m.py", script_path="/m.py",
                            content_hash="h" * 64, host="h", device_requested="cpu", device_used="cpu",
                            jaxrun_version="0", samples=samples))
    if n == 5:
        print("writing", flush=True)
"""


def test_the_history_survives_a_writer_killed_mid_write(tmp_path: Path) -> None:
    """SIGKILL while a process records runs of 200 samples each: the database opens, passes
    SQLite's integrity check, and every run it holds is whole (no run with part of its samples)."""
    from jaxrun.judge.history import HistoryStore

    db = tmp_path / "history.sqlite"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline().strip() == "writing"
    time.sleep(0.3)  # in the middle of some transaction
    writer.kill()
    writer.wait()
    with HistoryStore(db, create=False) as store:
        runs = store.runs()
        assert len(runs) >= 6
        assert all(len(run.samples) == 200 for run in runs)
        import sqlite3

        with sqlite3.connect(db) as raw:
            assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)


@pytest.mark.slow
def test_resume_from_a_damaged_results_file_runs_what_no_script_file_holds(tmp_path: Path, caplog) -> None:
    write(tmp_path / "s", "quick.py", QUICK)
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / ".jaxrun.manifest").write_text("")  # the folder an earlier run made (results/ownership.py)
    (tmp_path / "r" / "jax_execution_results.json").write_text("{ not json")
    with caplog.at_level("WARNING", logger="jaxrun"):
        assert run_jax_scripts(tmp_path / "s", device="cpu", results_dir=tmp_path / "r", history=False, resume=True)
    assert [r.getMessage() for r in caplog.records if "--resume:" in r.getMessage()] == [
        f"--resume: {str(tmp_path / 'r' / 'jax_execution_results.json')!r} is damaged: not valid JSON at line 1 "
        "column 3 (expecting property name enclosed in double quotes); rebuilt the batch from 0 per-script result files"]
    # Into an empty folder, --resume simply runs everything.
    assert run_jax_scripts(tmp_path / "s", device="cpu", results_dir=tmp_path / "new", history=False, resume=True)


def test_batch_files_are_rewritten_at_a_bounded_rate_and_a_killed_batch_loses_no_result(tmp_path: Path,
                                                                                         monkeypatch) -> None:
    # Scripts that finish at once (the run_job seam stands in for running them: what is tested is
    # the writing): 300 results must not mean 300 rewrites of files that list every result.
    from jaxrun.batch.pipeline import run_batch
    from jaxrun.config.options import BatchOptions
    from jaxrun.judge.compare import compare_results
    from jaxrun.results.models import BatchResult, ScriptResult

    for i in range(300):
        write(tmp_path / "s", f"s{i:03d}.py", "import jax\n")
    writes: list[str] = []
    real_write = result_files.atomic_write_chunks  # every write of a file, whole or one result at a time

    def counting(path, chunks, **kw):  # type: ignore[no-untyped-def]
        if Path(path).name == result_files.EXECUTION_RESULTS:
            writes.append(Path(path).name)
        return real_write(path, chunks, **kw)

    def instant(job, options, **_):  # type: ignore[no-untyped-def]
        return ScriptResult(script_name=job.name, script_path=str(job.script), success=True, outcome="passed",
                            device_requested=job.device, device_used="cpu", execution_time=0.5,
                            started_at=f"2026-01-01T00:00:{job.index / 10:06.3f}Z", finished_at="2026-01-01T00:01:00Z")

    monkeypatch.setattr(result_files, "atomic_write_chunks", counting)
    options = BatchOptions.build("api", paths=[tmp_path / "s"], results_dir=tmp_path / "r", history=False, device="cpu")
    batch = run_batch(options, run_job=instant)
    assert len(batch.script_results) == 300 and batch.metadata.complete
    assert 2 <= len(writes) <= 30, len(writes)  # the start, the end, rewrites kept to 5 % of the time
    on_disk = result_files.read_model(tmp_path / "r" / result_files.EXECUTION_RESULTS, BatchResult)
    assert [r.script_name for r in on_disk.script_results] == [f"s{i:03d}" for i in range(300)]

    # A batch killed outright leaves a batch file that lags behind its scripts' own files: the
    # readers (compare, report, --resume) add what only the script files hold.
    stale = on_disk.model_copy(update={
        "metadata": on_disk.metadata.model_copy(update={"complete": False, "scripts_executed": 100}),
        "script_results": on_disk.script_results[:100]})
    result_files.write_model(tmp_path / "r" / result_files.EXECUTION_RESULTS, stale)
    report = compare_results(tmp_path / "r", tmp_path / "r")
    assert len(report.scripts) == 300


KILLED_MID_RUN = """\
if False:
    import jax
import os, pathlib, subprocess, sys, time
marks = pathlib.Path(os.environ["MARKS"])
marks.mkdir(exist_ok=True)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "grandchild-{token}"])
(marks / "started").write_text(str(os.getpid()))
time.sleep(20)
(marks / "finished").write_text("the script outlived jaxrun")
"""


@pytest.mark.slow
def test_scripts_never_outlive_a_killed_jaxrun_and_its_leftovers_go(tmp_path: Path) -> None:
    """Issue 24: after `kill -9` of jaxrun its scripts ran on unsupervised (re-parented to init),
    the folder lock was free at once, so a --resume ran them a second time beside the survivors,
    and each kill left /tmp/jaxrun-events-* folders behind."""
    token = f"k9-{os.getpid()}-{time.time_ns()}"
    marks = tmp_path / "marks"
    write(tmp_path / "s", "sleeper.py", KILLED_MID_RUN.replace("{token}", token))
    env = {**os.environ, "MARKS": str(marks)}
    proc = subprocess.Popen([sys.executable, "-m", "jaxrun", "run", str(tmp_path / "s"), "--results-dir",
                             str(tmp_path / "r"), "--no-history", "-q"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    # write_text creates the file before it writes the pid: wait for the pid itself.
    while not ((marks / "started").exists() and (marks / "started").read_text().strip()):
        assert time.monotonic() < deadline and proc.poll() is None, "the script never started"
        time.sleep(0.05)
    probe = psutil.Process(int((marks / "started").read_text()))
    # While it runs, the script's process holds the scripts' lock of the results folder.
    assert str(tmp_path / "r" / SCRIPTS_LOCK_FILE) in [f.path for f in probe.open_files()]
    jaxrun_pid = proc.pid
    leftovers = [p for p in Path(tempfile.gettempdir()).glob(f"jaxrun-events-{jaxrun_pid}-*")]
    assert leftovers, "the run's channel folder is named after its jaxrun process"
    proc.kill()  # SIGKILL: jaxrun cannot clean up
    proc.wait()
    deadline = time.monotonic() + 10
    while survivors(token) or probe.is_running() and probe.status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"left running after jaxrun died: {survivors(token)}"
        time.sleep(0.05)
    assert not (marks / "finished").exists()
    # The next run (here: the resume) removes what the killed run could not, and runs the script once.
    (marks / "started").unlink()
    done = subprocess.run([sys.executable, "-m", "jaxrun", "run", str(tmp_path / "s"), "--results-dir",
                           str(tmp_path / "r"), "--no-history", "-q", "--resume"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not any(p.exists() for p in leftovers)
    assert (marks / "finished").exists() and survivors(token) == []


def test_a_new_run_waits_for_the_scripts_of_an_earlier_one(tmp_path: Path) -> None:
    """The scripts of a run hold the folder's scripts lock (shared) while they live: a run that
    starts meanwhile waits for them, and refuses after its patience, in one line."""
    import fcntl

    from jaxrun.batch.folder_lock import ResultsFolderLock, _wait_for_earlier_scripts

    folder = tmp_path / "r"
    folder.mkdir()
    fd = os.open(folder / SCRIPTS_LOCK_FILE, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_SH)  # a script of an earlier run, still alive
    try:
        with pytest.raises(UsageError, match="still in use by the scripts of an earlier jaxrun run"):
            _wait_for_earlier_scripts(folder, patience=0.2)
    finally:
        os.close(fd)  # it is gone
    with ResultsFolderLock(folder):  # nothing holds it: the run starts at once
        pass


@pytest.mark.parametrize("during", ["the put-off work", "its last step"])
def test_a_ctrl_c_while_the_parent_sets_up_stops_the_running_script_and_says_so(tmp_path: Path, during: str) -> None:
    """Right after a script's process starts, the parent does the work it put off (importing the
    result models, the summary's tables: up to a second on a loaded machine) before it watches the
    script. A Ctrl-C then must stop the script and say it was interrupted, not leave it running
    unwatched (the batch would call it "not run", or never hear the Ctrl-C at all)."""
    from jaxrun.config.options import RunOptions
    from jaxrun.run.process.environment import probe_command
    from jaxrun.run.batch_pool import BatchPool
    from jaxrun.run.process.process_watch import Interrupted, Limits, launch
    from jaxrun.run.process.spare import spare_environment

    script = write(tmp_path / "s", "long.py", "import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    events = tmp_path / "events.jsonl"
    command = probe_command(script, events, RunOptions.build("api"))
    pool = BatchPool()

    def ctrl_c() -> None:  # as a terminal's Ctrl-C reaches jaxrun: SIGINT to its process
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1.0)  # the interrupt lands here, inside the put-off work

    if during == "the put-off work":
        pool.when_started(ctrl_c)
    else:  # the signal comes as the put-off work ends, the watching about to begin
        pool.when_started(lambda: os.kill(os.getpid(), signal.SIGINT))
    started = time.perf_counter()
    # As an interactive jaxrun has it, even where the tests run with SIGINT ignored (a background job).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        launch(command, cwd=script.parent, env={**spare_environment(), "JAXRUN_EVENTS_FILE": str(events)},
               stdout_log=tmp_path / "out.log", stderr_log=tmp_path / "err.log", events_path=events,
               limits=Limits(timeout=120, log_cap=2**20), pool=pool)
        pytest.fail("the launch returned as if the script had ended by itself")
    except Interrupted as stopped:  # the tree stopped; the script's partial outcome travels with it
        outcome = stopped.outcome
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C escaped the launch: the running script was left unwatched")
    finally:
        signal.signal(signal.SIGINT, previous)
        pool.close()
    assert outcome.interrupted is True
    assert outcome.exit_code != 0 or outcome.signal is not None  # stopped, not run to its end
    assert time.perf_counter() - started < 30  # not the script's 60 s
    assert outcome.wall_time is not None and outcome.wall_time > 0
