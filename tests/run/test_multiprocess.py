"""--processes N: a multi-process JAX program (jax.distributed.initialize() with no arguments, gloo
collectives across processes on CPU) runs as one job with one result (run/process/process_group.py,
run/reading/job_run.py, probe/cluster.py). Real subprocesses, real JAX."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import jaxrun as jaxrun_cli
from helpers import load, run_batch, write

import jaxrun
from jaxrun.errors import UsageError

# Each process contributes its id + 1 to a psum over every device of both processes: 1 + 2 = 3.
PSUM = """\
{header}import jax
import jax.numpy as jnp
import jaxrun

jax.distributed.initialize()
me = jax.process_index()
total = jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")(jnp.array([me + 1.0]))
jaxrun.record(total=float(total[0]), process=me, processes=jax.process_count())
print("process", me, "total", float(total[0]))
jax.distributed.shutdown()
"""

# Each process leaves its pid in the job's output folder: the test checks that none outlives the job.
PID = """\
import os
with open(os.path.join(os.environ["JAXRUN_OUTPUT_DIR"], "pid%s" % os.environ["JAXRUN_PROCESS_ID"]), "w") as f:
    f.write(str(os.getpid()))
"""

FAILS = PID + """\
import jax
import jax.numpy as jnp

jax.distributed.initialize()
if jax.process_index() == 1:
    raise ValueError("process one gave up")
jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")(jnp.array([1.0]))  # waits for process 1
"""

HANGS = PID + """\
import time
import jax
import jax.numpy as jnp

jax.distributed.initialize()
if jax.process_index() == 1:
    time.sleep(600)
jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")(jnp.array([1.0]))
"""


def assert_gone(outputs: Path) -> None:
    """Both processes of the job wrote their pid there, and neither runs any more."""
    import psutil

    pids = [int((outputs / f"pid{k}").read_text()) for k in (0, 1)]
    alive = [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert alive == [], f"processes of the job still running: {alive}"


@pytest.mark.slow
def test_a_two_process_psum_is_one_job_with_each_process_recorded(tmp_path: Path) -> None:
    write(tmp_path / "s", "psum.py", PSUM.format(header=""))
    batch = run_batch(tmp_path / "s", tmp_path / "r", processes=2)
    result = batch.script_results[0]
    assert result.success, (result.error_message, result.traceback)
    assert result.results == {"total": 3.0, "process": 0, "processes": 2}  # process 0's record
    assert result.device_count == 2  # both processes' devices, as jax.device_count() says
    processes = result.processes
    assert processes is not None and [p.process_id for p in processes] == [0, 1]
    for process in processes:
        assert process.success and process.exit_code == 0 and process.error_class is None
        assert process.results == {"total": 3.0, "process": process.process_id, "processes": 2}
        assert process.body_time is not None and process.import_time is not None and process.run_time is not None
        assert process.cpu_time and process.memory_peak and process.execution_time
        assert f"process {process.process_id} total 3.0" in Path(process.stdout_log).read_text()
    assert processes[1].stdout_log.endswith("logs/psum.p1.stdout.log")
    assert result.stdout_log == processes[0].stdout_log == str(tmp_path / "r" / "logs" / "psum.stdout.log")
    # The job's figures: its wall time spans every process; CPU and memory are the sums.
    assert result.execution_time >= max(p.execution_time for p in processes)
    assert result.cpu_time == pytest.approx(sum(p.cpu_time for p in processes))
    assert result.memory_peak == pytest.approx(sum(p.memory_peak for p in processes))
    assert result.body_time == processes[0].body_time  # the lead's phases: process 0 when all succeed
    on_disk = load(tmp_path / "r" / "script_results" / "psum_result.json")
    assert [p["process_id"] for p in on_disk["processes"]] == [0, 1]


@pytest.mark.slow
def test_a_process_that_raises_fails_the_job_with_its_error_and_the_others_are_stopped(tmp_path: Path) -> None:
    write(tmp_path / "s", "fails.py", FAILS)
    done = jaxrun_cli("run", tmp_path / "s", "--device", "cpu", "--processes", "2", "--results-dir",
                      tmp_path / "r", "--no-history", "--no-compile-cache", "--timeout", "120")
    assert done.returncode == 1, done.stderr
    result = load(tmp_path / "r" / "script_results" / "fails_result.json")
    assert result["error_class"] == "script_error"
    assert result["error_message"] == "process 1 of 2: ValueError: process one gave up"
    assert result["stderr_log"].endswith("fails.p1.stderr.log")  # the failing process's log
    assert "ValueError: process one gave up" in Path(result["stderr_log"]).read_text()
    first, second = result["processes"]
    assert second["error_class"] == "script_error" and second["exit_code"] == 1 and second["stopped"] is None
    # Process 0 waited in the psum for process 1: jaxrun stopped it, far sooner than gloo's timeouts.
    assert not first["success"] and first["error_class"] is None
    assert first["stopped"] == "stopped by jaxrun: process 1 failed first"
    assert result["execution_time"] < 60
    assert_gone(tmp_path / "r" / "outputs" / "fails")


@pytest.mark.slow
def test_a_process_that_hangs_is_stopped_with_the_job_by_its_timeout(tmp_path: Path) -> None:
    write(tmp_path / "s", "hangs.py", HANGS)
    batch = run_batch(tmp_path / "s", tmp_path / "r", processes=2, timeout=5)
    result = batch.script_results[0]
    assert result.error_class == "timeout"
    assert result.error_message.endswith("stopped after the 5 s time limit")
    assert result.processes is not None and all(not p.success for p in result.processes)
    assert all(p.exit_code is None for p in result.processes)  # both ended by jaxrun
    assert result.execution_time < 30
    assert_gone(tmp_path / "r" / "outputs" / "hangs")


# A Slurm allocation's variables (JAX's SlurmCluster would read 7 processes, this one the 6th):
# jaxrun's job is the one jax.distributed.initialize() finds, its cluster environment being first.
SLURM = {"SLURM_JOB_ID": "4242", "SLURM_STEP_NODELIST": "node1", "SLURM_NTASKS": "7", "SLURM_PROCID": "5",
         "SLURM_LOCALID": "5"}


@pytest.mark.slow
def test_a_header_comment_asks_for_processes_as_the_flag_does_and_one_process_is_as_before(tmp_path: Path) -> None:
    write(tmp_path / "s", "psum.py", PSUM.format(header="# jaxrun: processes=2\n"))
    write(tmp_path / "s", "plain.py", "import jax\nimport jaxrun\njaxrun.record(value=1)\n")
    batch = run_batch(tmp_path / "s", tmp_path / "r", env=SLURM, timeout=60)
    by_name = {r.script_name: r for r in batch.script_results}
    psum, plain = by_name["psum"], by_name["plain"]
    assert psum.success and psum.results["total"] == 3.0 and psum.processes is not None and len(psum.processes) == 2
    assert psum.settings == {"processes": f"{tmp_path / 's' / 'psum.py'}:1"}
    # One process: no per-process list, the logs and the options' key as without the option.
    assert plain.success and plain.processes is None
    assert sorted(p.name for p in (tmp_path / "r" / "logs").iterdir() if p.name.startswith("plain")) == [
        "plain.stderr.log", "plain.stdout.log"]
    assert jaxrun.RunOptions(processes=1).key == jaxrun.RunOptions().key  # earlier results stay --resume-able


@pytest.mark.parametrize("value", ["0", "-1"])
def test_processes_below_one_is_one_usage_error(tmp_path: Path, value: str) -> None:
    write(tmp_path / "s", "a.py", "import jax\n")
    done = jaxrun_cli("run", tmp_path / "s", "--processes", value, "--results-dir", tmp_path / "r")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "processes must be a whole number >= 1" in lines[0] and value in lines[0], done.stderr
    with pytest.raises(UsageError, match="processes must be a whole number >= 1"):
        jaxrun.execute_jax_script(tmp_path / "s" / "a.py", processes=int(value))


def test_processes_on_one_chosen_gpu_is_one_usage_error(tmp_path: Path) -> None:
    """Each process takes the GPU of its own id: one chosen GPU cannot hold two (checked before
    any device is looked at, so this machine without a GPU shows it as well)."""
    write(tmp_path / "s", "a.py", "import jax\n")
    done = jaxrun_cli("run", tmp_path / "s", "--processes", "2", "--device", "gpu:1", "--results-dir", tmp_path / "r")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--device gpu:1 is one device: ask for its platform, --device gpu" in done.stderr
    assert not (tmp_path / "r" / "script_results").exists()


def test_resume_keeps_every_process_log_of_a_kept_job(tmp_path: Path) -> None:
    """--resume keeps a kept job's files: process k's logs (and their earlier attempts') as well as
    process 0's; another script's go."""
    from jaxrun.results.ownership import ResultsFolder

    logs = tmp_path / "logs"
    kept = ["psum.stdout.log", "psum.p1.stdout.log", "psum.p1.stderr.log", "psum.p1.attempt1.stderr.log"]
    gone = ["other.p1.stdout.log", "psum2.p1.stdout.log"]
    ResultsFolder(tmp_path).claim_scripts(["psum", "other", "psum2"])  # as the earlier run did
    for name in kept + gone:
        write(logs, name, "x\n")
    folder = ResultsFolder(tmp_path)
    folder.check()
    folder.clear(keep=["psum"])
    assert sorted(p.name for p in logs.iterdir()) == sorted(kept)
