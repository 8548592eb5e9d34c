"""The tests' own Slurm (the ``slurm`` fixture, tests/slurm_cluster.py): a real single-node cluster
that runs jobs, arrays and steps, and ends them the way a site's Slurm does (time limit, memory
limit, scancel, a failing task), as ``scontrol show job`` then reports them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import slurm_cluster
from slurm_cluster import SlurmCluster

UNFINISHED = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}


def slurm_run(slurm: SlurmCluster, *args: str, cwd: Path | None = None, timeout: float = 60) -> str:
    done = subprocess.run(list(args), check=False, env={**os.environ, **slurm.env}, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def submit(slurm: SlurmCluster, tmp_path: Path, *args: str) -> str:
    return slurm_run(slurm, "sbatch", "--parsable", *args, cwd=tmp_path).strip().split(";")[0]


def jobs(slurm: SlurmCluster, job_id: str) -> list[dict[str, str]]:
    """``scontrol show job -o``: one dict a job (an array's tasks each have theirs)."""
    out = slurm_run(slurm, "scontrol", "show", "job", "-o", job_id)
    return [dict(f.split("=", 1) for f in re.split(r" (?=[A-Za-z][\w/:]*=)", line.strip()) if "=" in f)
            for line in out.splitlines() if line.strip()]


def finished(slurm: SlurmCluster, job_id: str, timeout: float) -> list[dict[str, str]]:
    deadline = time.monotonic() + timeout
    while True:
        found = jobs(slurm, job_id)
        if all(j["JobState"] not in UNFINISHED for j in found):
            return found
        assert time.monotonic() < deadline, f"job {job_id} unfinished after {timeout} s: {found}"
        time.sleep(0.5)


def running(slurm: SlurmCluster, job_id: str, timeout: float = 30) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        (job,) = jobs(slurm, job_id)
        if job["JobState"] == "RUNNING":
            return job
        assert time.monotonic() < deadline, f"job {job_id} not running after {timeout} s: {job}"
        time.sleep(0.2)


def when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def test_the_node_is_this_machine_and_idle(slurm: SlurmCluster) -> None:
    out = slurm_run(slurm, "sinfo", "-h", "-N", "-o", "%N %P %c %m")
    node, partition, cpus, memory = out.split()
    assert (node, partition.rstrip("*")) == (slurm.node, slurm.partition)
    assert int(cpus) == os.cpu_count()
    mem_total_mib = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0]) // 1024
    assert int(memory) == mem_total_mib - 1024
    assert Path(slurm.env["SLURM_CONF"]) == slurm.conf and slurm.conf.is_relative_to(slurm.state_dir)


@pytest.mark.slow  # sbatch --wait polls at growing intervals: ~10 s for an array of two 0-s tasks
def test_an_array_of_two_tasks_writes_both_outputs(slurm: SlurmCluster, tmp_path: Path) -> None:
    job = submit(slurm, tmp_path, "--wait", "--array=0-1", "-o", "out-%a.txt",
                 "--wrap", "echo task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID")
    assert [(tmp_path / f"out-{i}.txt").read_text() for i in (0, 1)] == [f"task {i} of {job}\n" for i in (0, 1)]
    tasks = sorted(jobs(slurm, job), key=lambda j: j["ArrayTaskId"])
    assert [(j["ArrayJobId"], j["ArrayTaskId"], j["JobState"], j["ExitCode"]) for j in tasks] == [
        (job, "0", "COMPLETED", "0:0"), (job, "1", "COMPLETED", "0:0")]


def test_srun_starts_one_process_a_rank(slurm: SlurmCluster, tmp_path: Path) -> None:
    out = slurm_run(slurm, "srun", "-n2", "bash", "-c", "echo rank $SLURM_PROCID of $SLURM_NTASKS",
                    cwd=tmp_path)
    assert sorted(out.splitlines()) == ["rank 0 of 2", "rank 1 of 2"]


def test_a_job_inherits_the_submitting_environment(slurm: SlurmCluster, tmp_path: Path) -> None:
    # jaxrun's children submit with their own environment: the job must see the same cluster and
    # the same TMPDIR (by which the suite's end-of-session check knows a job left running).
    job = submit(slurm, tmp_path, "-o", "env.txt", "--wrap", "echo $SLURM_CONF; echo $TMPDIR")
    finished(slurm, job, timeout=30)
    assert (tmp_path / "env.txt").read_text().splitlines() == [str(slurm.conf), os.environ["TMPDIR"]]


def test_a_job_left_running_is_a_leftover_process_of_its_submitter(slurm: SlurmCluster, tmp_path: Path) -> None:
    from conftest import _leftover_processes

    job = submit(slurm, tmp_path, "--wrap", "exec sleep 60")
    running(slurm, job)
    try:
        deadline = time.monotonic() + 10
        while True:
            found = [p for p in _leftover_processes(None) if p.environ().get("SLURM_JOB_ID") == job]
            if found or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert [p.name() for p in found] == ["sleep"]
    finally:
        slurm_run(slurm, "scancel", job)
    (cancelled,) = finished(slurm, job, timeout=30)
    assert cancelled["JobState"] == "CANCELLED"


def test_scancel_ends_a_running_job_cancelled(slurm: SlurmCluster, tmp_path: Path) -> None:
    job = submit(slurm, tmp_path, "-o", "out.txt", "--wrap", "sleep 60")
    running(slurm, job)
    slurm_run(slurm, "scancel", job)
    (ended,) = finished(slurm, job, timeout=30)
    assert (ended["JobState"], ended["Reason"], ended["ExitCode"], ended["NodeList"]) == (
        "CANCELLED", "None", "0:15", slurm.node)
    assert "CANCELLED AT" in (tmp_path / "out.txt").read_text()


def test_a_failing_array_task_is_failed_with_its_exit_code(slurm: SlurmCluster, tmp_path: Path) -> None:
    job = submit(slurm, tmp_path, "--array=0-1", "-o", "out-%a.txt",
                 "--wrap", "exit $((SLURM_ARRAY_TASK_ID * 3))")
    tasks = {j["ArrayTaskId"]: j for j in finished(slurm, job, timeout=60)}
    assert (tasks["0"]["JobState"], tasks["0"]["ExitCode"]) == ("COMPLETED", "0:0")
    failed = tasks["1"]
    assert (failed["JobState"], failed["Reason"], failed["ExitCode"]) == ("FAILED", "NonZeroExitCode", "3:0")


@pytest.mark.slow
def test_a_job_over_its_memory_is_killed(slurm: SlurmCluster, tmp_path: Path) -> None:
    # Without cgroups the limit is kept by sampling the tasks' RSS (jobacct_gather/linux, each
    # second, OverMemoryKill): the step is SIGKILLed and the job ends FAILED with signal 9, not
    # OUT_OF_MEMORY (which only cgroup's OOM notice reports); the job's output says why.
    job = submit(slurm, tmp_path, "--mem=100", "-o", "out.txt", "--wrap",
                 "python3 -c 'import time; b = bytearray(600 << 20); b[::4096] = bytes(len(b) >> 12); "
                 "time.sleep(30); print(\"survived\")'")
    (ended,) = finished(slurm, job, timeout=30)
    assert (ended["JobState"], ended["ExitCode"]) == ("FAILED", "0:9"), ended
    out = (tmp_path / "out.txt").read_text()
    assert "exceeded memory limit" in out and "survived" not in out
    assert (when(ended["EndTime"]) - when(ended["StartTime"])).total_seconds() < 10


@pytest.mark.slow
def test_a_job_past_its_time_limit_ends_timeout(slurm: SlurmCluster, tmp_path: Path) -> None:
    # Limits are whole minutes (0:05 is one minute), and slurmctld looks for jobs past theirs
    # every 30 s: the kill comes 60 to ~95 s after the start.
    job = submit(slurm, tmp_path, "--time=0:05", "-o", "out.txt", "--wrap", "sleep 120")
    (ended,) = finished(slurm, job, timeout=150)
    assert (ended["JobState"], ended["Reason"], ended["TimeLimit"]) == ("TIMEOUT", "TimeLimit", "00:01:00")
    # Slurm's SIGTERM reaches the batch shell and its sleep at once: the shell dies of it (0:15), or,
    # on a loaded machine, sees its sleep die of it first and exits 128 + 15 (143:0).
    assert ended["ExitCode"] in ("0:15", "143:0"), ended
    late = (when(ended["EndTime"]) - when(ended["StartTime"])).total_seconds() - 60
    print(f"time-limit kill {late:.0f} s after the limit")
    assert 0 <= late <= 35
    assert "DUE TO TIME LIMIT" in (tmp_path / "out.txt").read_text()


@pytest.mark.slow  # the second cluster's start: ~3 s
def test_a_second_cluster_on_the_machine_is_separate(slurm: SlurmCluster, tmp_path: Path) -> None:
    other = slurm_cluster.SlurmCluster.create(Path(os.environ["JR_TESTS_BASE_TMP"]) / f"jr-slurm-t{os.getpid()}")
    try:
        other.start(idle_timeout=60)
        assert {other.ctld_port, other.slurmd_port}.isdisjoint({slurm.ctld_port, slurm.slurmd_port})
        job = submit(slurm, tmp_path, "--wrap", "sleep 30")
        running(slurm, job)
        try:
            assert other.run("squeue", "-h", "-o", "%i").stdout.strip() == ""
            assert other.run("srun", "echo", "other", timeout=60).stdout == "other\n"
        finally:
            other.stop()
        # Stopping the other leaves this one, and its running job, alone.
        assert jobs(slurm, job)[0]["JobState"] == "RUNNING"
        assert slurm.node_state() in {"mixed", "allocated"}
        slurm_run(slurm, "scancel", job)
    finally:
        other.stop()
        import shutil

        shutil.rmtree(other.state_dir, ignore_errors=True)


@pytest.mark.slow  # a second cluster started and stopped, one job array run on it (~20 s)
def test_the_guides_try_it_on_one_machine_recipe_runs_as_written(slurm: SlurmCluster, tmp_path: Path) -> None:
    """docs/guide/slurm.md's "Try it on one machine" block, from the repository's folder, as a
    reader runs it (its cluster in a fresh folder under TMPDIR): it prints what the page shows, and
    its trap stops every daemon it started."""
    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "guide" / "slurm.md").read_text()
    section = page[page.index("## Try it on one machine"):]
    code = section[section.index("```bash\n") + 8:section.index("\n```\n")]
    output = section[section.index("```output\n") + 10:]
    expected = output[:output.index("```")].splitlines()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "jaxrun").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m jaxrun "$@"\n')
    (bin_dir / "jaxrun").chmod(0o755)
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAXRUN_", "SLURM_"))}
    env.update(TMPDIR=str(temp), PATH=f"{bin_dir}{os.pathsep}{env['PATH']}",
               PYTHONPATH=os.pathsep.join([str(root / "src"), *filter(None, [env.get("PYTHONPATH")])]))
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=root, env=env, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(re.sub(r"\d[\d,.]*", "#", done.stdout + done.stderr).split())
    for line in expected:
        assert " ".join(re.sub(r"\d[\d,.]*", "#", line).split()) in said, (line, done.stdout + done.stderr)
    (state,) = temp.iterdir()
    assert json.loads((state / "results" / "script_results" / "total_result.json").read_text())["results"] == {
        "total": 6.0}
    left = SlurmCluster.load(state / "cluster")
    assert left is not None and left.pids == {}  # stopped by the trap
    assert not slurm_cluster._processes_with_env("SLURM_CONF", str(left.conf))
    shutil.rmtree(state, ignore_errors=True)
