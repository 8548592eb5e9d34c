"""``--backend slurm`` when Slurm itself is what fails, against a real Slurm (tests/slurm_cluster.py):
its controller stops answering while an array runs (a test's own cluster, whose slurmctld is
stopped and started again), and someone else cancels the array (``scancel``).

The scripts here wait for a release file (never for a time), so that a test decides when they may
end, and each writes a line to a marks file when it starts and when it ends: how often each ran.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import jaxrun_command, load, write

from jaxrun.core.failures import hint_for

pytest.importorskip("submitit")

pytestmark = pytest.mark.slow

HELD = """\
import os, sys, time
import jax
marks, release = {marks!r}, {release!r}
name = os.path.basename(sys.argv[0])
with open(marks, "a") as f:
    f.write(f"start {{name}}\\n")
deadline = time.monotonic() + 600
while not os.path.exists(release) and time.monotonic() < deadline:
    time.sleep(0.2)
import jaxrun
jaxrun.record(value={value})
with open(marks, "a") as f:
    f.write(f"end {{name}}\\n")
"""


def held(tmp_path: Path, count: int) -> tuple[Path, Path]:
    """``count`` scripts m0.py, m1.py, ... in ``tmp_path/s`` that run until ``release`` exists;
    returns (marks, release)."""
    marks, release = tmp_path / "marks", tmp_path / "release"
    for k in range(count):
        write(tmp_path / "s", f"m{k}.py", HELD.format(marks=str(marks), release=str(release), value=k))
    return marks, release


def marks_of(marks: Path) -> list[str]:
    return marks.read_text().splitlines() if marks.exists() else []


def wait_for_marks(marks: Path, wanted: set[str], proc: subprocess.Popen[str], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not wanted <= set(marks_of(marks)):
        assert proc.poll() is None and time.monotonic() < deadline, (marks_of(marks), proc.communicate(timeout=60))
        time.sleep(0.1)


def record_of(results: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (results / "slurm" / "tasks.jsonl").read_text().splitlines()]


@pytest.fixture
def outage_cluster(slurm, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A private cluster whose controller a test stops (the session's is shared by the others);
    ``slurm`` first: it installs Slurm where it is missing, or skips."""
    import slurm_cluster

    with slurm_cluster.private(Path(os.environ["JR_TESTS_BASE_TMP"]) / f"jr-slurm-o{os.getpid()}") as cluster:
        yield cluster


def test_a_controller_outage_runs_nothing_twice(tmp_path: Path, outage_cluster, jaxrun_cli) -> None:  # type: ignore[no-untyped-def]
    """slurmctld stops while the array runs: jaxrun says once that it waits for it, gives up after
    --slurm-timeout in one line, and reports no task as ended; the tasks run on, and --resume
    (after the controller is back) reattaches to each of them instead of submitting it again."""
    cli = jaxrun_cli.but(env=outage_cluster.env)
    marks, release = held(tmp_path, 3)
    results = tmp_path / "r"
    args = ("run", tmp_path / "s", "--backend", "slurm", "--jobs", "3", "--results-dir", results, "--no-history")
    proc = subprocess.Popen(jaxrun_command(*args, "--slurm-timeout", "8"), cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli.environ())
    wait_for_marks(marks, {"start m0.py", "start m1.py"}, proc)  # (m2 may wait for a free CPU)
    outage_cluster.stop_controller()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, out + err
    said = [line for line in err.splitlines() if line.startswith("jaxrun:")]
    assert len(said) == 2 and said[0].startswith("jaxrun: the Slurm controller does not answer"), err
    assert "waiting for it at most 8 s (--slurm-timeout)" in said[0], err
    assert said[1].startswith("jaxrun: the Slurm controller did not answer for 8 s"), err
    assert "--resume" in said[1] and "may still run" in said[1], err
    rows = {r["script_name"]: r for r in load(results / "jax_execution_results.json")["script_results"]}
    for row in rows.values():
        assert row["error_class"] == "interrupted" and "the Slurm controller stopped answering" in row["error_message"]
        assert "Ctrl-C" not in row["hint"] and "--resume" in row["hint"], row["hint"]
    # No task is recorded as ended: each may still run (they do), so --resume must reattach to it.
    assert not [entry for entry in record_of(results) if "reported" in entry]
    # Nor are their files recorded as final: each task may still write its logs and outputs, which
    # stay jaxrun's by the script's claim (a record of them now would call what they write next a
    # user's file, and --resume would refuse the folder).
    manifest = [json.loads(line) for line in (results / ".jaxrun.manifest").read_text().splitlines() if line.strip()]
    assert {c["script"] for c in manifest if "script" in c} == {"m0", "m1", "m2"}, manifest
    assert not [c for c in manifest if "done" in c], manifest
    array = record_of(results)[1]["array"]

    # While it is down: one line, before anything runs.
    down = cli.run(*args, "--resume", "--slurm-timeout", "20", cwd=tmp_path, timeout=120)
    assert down.returncode == 2 and down.stderr.count("\n") == 1, down.stderr
    assert "the Slurm controller is not reachable" in down.stderr
    outage_cluster.start_controller()
    # A plain run would mix its files with the running array's: refused, naming the array.
    refused = cli.run(*args, cwd=tmp_path, timeout=120)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"Slurm job array {array} still runs" in refused.stderr, refused.stderr
    assert "--resume" in refused.stderr and f"`scancel {array}`" in refused.stderr, refused.stderr
    assert marks_of(marks).count("end m0.py") == 0  # they ran all along

    release.touch()
    for _ in range(2):  # and once more, when every script is done: nothing to run, nothing submitted
        resumed = cli.run(*args, "--resume", cwd=tmp_path, timeout=300)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        # Each script ran once, in the first array: never a second task beside the first.
        assert sorted(marks_of(marks)) == sorted(f"{w} m{k}.py" for k in range(3) for w in ("start", "end"))
        rows = {r["script_name"]: r for r in load(results / "jax_execution_results.json")["script_results"]}
        assert [rows[f"m{k}"]["results"]["value"] for k in range(3)] == [0, 1, 2]
        assert {r["slurm_job_id"].partition("_")[0] for r in rows.values()} == {array}
        assert [entry for entry in record_of(results) if "tasks" in entry] == record_of(results)[:1]


def test_an_array_cancelled_from_outside_is_interrupted_and_says_by_whom(tmp_path: Path, slurm, jaxrun_cli) -> None:  # type: ignore[no-untyped-def]
    """scancel of the array by someone else: the running task and the waiting ones are
    `interrupted`, each saying it was cancelled outside jaxrun (not a Ctrl-C, not a results folder
    the node cannot see); --resume runs them again."""
    cli = jaxrun_cli.but(env=slurm.env)
    marks, release = held(tmp_path, 3)
    results = tmp_path / "r"
    args = ("run", tmp_path / "s", "--backend", "slurm", "--jobs", "1", "--results-dir", results, "--no-history")
    proc = subprocess.Popen(jaxrun_command(*args), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=cli.environ())
    wait_for_marks(marks, {"start m0.py"}, proc)
    array = record_of(results)[1]["array"]
    slurm.run("scancel", str(array))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, out + err
    rows = {r["script_name"]: r for r in load(results / "jax_execution_results.json")["script_results"]}
    assert sorted(rows) == ["m0", "m1", "m2"]
    for name, row in rows.items():
        assert row["error_class"] == "interrupted", (name, row["error_message"])
        assert "the task was cancelled (scancel)" in row["error_message"], row["error_message"]
        assert "results folder" not in row["error_message"], row["error_message"]
        assert "cancelled outside jaxrun" in row["hint"], row["hint"]
        assert "Ctrl-C" not in row["hint"] and "--results-dir" not in row["hint"], row["hint"]
        assert f"{name}.py: interrupted: the task was cancelled (scancel)" in err, err
    assert rows["m0"]["execution_time"] is not None  # it ran until Slurm's SIGTERM stopped it
    for name in ("m1", "m2"):
        assert "before it started: the script did not run" in rows[name]["error_message"], rows[name]
    assert marks_of(marks) == ["start m0.py"]
    # Their end is known (cancelled): --resume runs them again, in a new array.
    release.touch()
    resumed = cli.run(*args, "--resume", cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    rows = {r["script_name"]: r for r in load(results / "jax_execution_results.json")["script_results"]}
    assert [rows[f"m{k}"]["results"]["value"] for k in range(3)] == [0, 1, 2]
    assert all(r["slurm_job_id"].partition("_")[0] != array for r in rows.values())


def test_resume_never_submits_a_script_whose_earlier_task_still_runs(tmp_path: Path, slurm, jaxrun_cli) -> None:  # type: ignore[no-untyped-def]
    """jaxrun killed while its task runs; --resume with other options cannot follow that task (its
    result would not be this run's) and must not run the script beside it: refused, naming it."""
    cli = jaxrun_cli.but(env=slurm.env)
    marks, release = held(tmp_path, 1)
    results = tmp_path / "r"
    args = ("run", tmp_path / "s", "--backend", "slurm", "--results-dir", results, "--no-history")
    proc = subprocess.Popen(jaxrun_command(*args), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=cli.environ())
    wait_for_marks(marks, {"start m0.py"}, proc)
    proc.kill()  # SIGKILL: the task runs on
    proc.wait(timeout=30)
    task = record_of(results)[1]["array"]
    other = cli.run(*args, "--resume", "--timeout", "555", cwd=tmp_path, timeout=120)
    assert other.returncode == 2 and other.stderr.count("\n") == 1, other.stderr
    assert f"Slurm task {task} (m0) still runs into" in other.stderr and f"`scancel {task}`" in other.stderr, other.stderr
    release.touch()
    resumed = cli.run(*args, "--resume", cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert marks_of(marks) == ["start m0.py", "end m0.py"]
    assert load(results / "script_results" / "m0_result.json")["slurm_job_id"] == task


def test_ctrl_c_while_the_controller_is_down_leaves_the_task_for_resume(tmp_path: Path, outage_cluster,
                                                                         jaxrun_cli) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C whose scancel cannot reach the controller: the task may still run, so it is not taken
    as ended (nor said to have been cancelled); --resume reattaches to it once Slurm answers."""
    cli = jaxrun_cli.but(env=outage_cluster.env)
    marks, release = held(tmp_path, 1)
    results = tmp_path / "r"
    args = ("run", tmp_path / "s", "--backend", "slurm", "--results-dir", results, "--no-history")
    proc = subprocess.Popen(jaxrun_command(*args, "--slurm-timeout", "6", interruptible=True), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli.environ())
    wait_for_marks(marks, {"start m0.py"}, proc)
    outage_cluster.stop_controller()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    task = record_of(results)[1]["array"]
    assert f"jaxrun: could not cancel the Slurm job array {task}: `scancel`" in err, err
    assert "may still run" in err and f"`scancel {task}`" in err, err
    row = load(results / "script_results" / "m0_result.json")
    assert row["error_class"] == "interrupted" and "could not cancel its Slurm task" in row["error_message"], row
    assert row["hint"] == hint_for("interrupted", "controller_gone")
    assert not [entry for entry in record_of(results) if "reported" in entry]
    outage_cluster.start_controller()
    release.touch()
    resumed = cli.run(*args, "--resume", cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert marks_of(marks) == ["start m0.py", "end m0.py"]
    assert load(results / "script_results" / "m0_result.json")["slurm_job_id"] == task
