"""Tests for the Ray backend (``backend="ray"`` / ``--backend ray``).

Against a real local Ray started by this module (``ray.init(num_cpus=2, include_dashboard=False)``),
not a mock: each script is a Ray task running jaxrun's single-script executor on a Ray worker, and
the driver writes the same result files as a local batch. The CLI tests start their own Ray in a
subprocess (jaxrun's own ``ray.init``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import child_env, interrupt_and_resume, load, write
from helpers import run_batch as batch

ray = pytest.importorskip("ray")

REPO_ROOT = Path(__file__).resolve().parents[2]

GOOD = """\
import jax
import jax.numpy as jnp
import jaxrun

value = float(jax.jit(lambda x: (x * x).sum())(jnp.arange(4.0)))
print("value", value)
jaxrun.record(value=value)
"""
FAILS = """\
import jax
raise RuntimeError("this script fails on purpose")
"""
# Kills the Ray worker that runs it (its parent: the probe runs the script in its own process,
# started by the task), so the task is lost as if the worker had crashed. It checks first that
# the parent really is a Ray worker, and does nothing otherwise.
KILLS_ITS_WORKER = """\
import os, signal
import jax
import psutil

parent = " ".join(psutil.Process(os.getppid()).cmdline())
if "ray::" in parent or "default_worker" in parent:
    os.kill(os.getppid(), signal.SIGKILL)
raise SystemExit("not running under a Ray worker")
"""


def file_set(results: Path) -> dict[str, set[str]]:
    """The names of a results folder's files, by sub-folder (outputs/ excluded: scripts decide)."""
    return {
        ".": {p.name for p in results.iterdir() if p.is_file()},
        "script_results": {p.name for p in (results / "script_results").iterdir()},
        "logs": {p.name for p in (results / "logs").iterdir()},
    }


def assert_same_result_files(local: Path, on_ray: Path) -> None:
    assert file_set(local) == file_set(on_ray)
    for name in file_set(local)["script_results"]:
        assert set(load(local / "script_results" / name)) == set(load(on_ray / "script_results" / name)), name
    for name in ("jax_execution_results.json", "jax_performance_metrics.json"):
        assert set(load(local / name)) == set(load(on_ray / name)), name


def cli_env() -> dict[str, str]:
    return child_env(without=("JAX_PLATFORMS",))


# --------------------------------------------------------------------------- CLI (its own Ray)
# First in the file: they run before this module's Ray instance is started.


def test_ray_address_without_the_ray_backend_is_a_usage_error(tmp_path: Path) -> None:
    write(tmp_path / "s", "good.py", GOOD)
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrun", "run", str(tmp_path / "s"), "--ray-address", "127.0.0.1:6379",
         "--results-dir", str(tmp_path / "r")],
        capture_output=True, text=True, env=cli_env(), timeout=120,
    )
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "--backend ray" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_cli_backend_ray_starts_a_local_ray_and_writes_the_results(tmp_path: Path) -> None:
    write(tmp_path / "s", "a_good.py", GOOD)
    write(tmp_path / "s", "b_good.py", GOOD)
    out = tmp_path / "r"
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrun", "run", str(tmp_path / "s"), "--backend", "ray", "--jobs", "2",
         "--results-dir", str(out), "--device", "cpu", "--no-compile-cache", "--no-history"],
        capture_output=True, text=True, env=cli_env(), timeout=300,
    )
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    doc = load(out / "jax_execution_results.json")
    assert doc["metadata"]["complete"] is True
    assert [(r["script_name"], r["success"]) for r in doc["script_results"]] == [("a_good", True), ("b_good", True)]
    assert {p.name for p in (out / "script_results").iterdir()} == {"a_good_result.json", "b_good_result.json"}
    assert "on the ray backend" in (out / "jax_execution_log.txt").read_text()


# --------------------------------------------------------------------------- against a module Ray


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def small_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("small")
    write(root, "a_good.py", GOOD)
    write(root, "b_fails.py", FAILS)
    write(root, "c_good.py", GOOD)
    return root


@pytest.mark.slow
def test_ray_gives_the_same_results_and_files_as_a_local_run(local_ray, small_folder: Path, tmp_path: Path) -> None:
    local = batch(small_folder, tmp_path / "local", jobs=1)
    finished: list[str] = []
    on_ray = batch(small_folder, tmp_path / "ray", backend="ray", jobs=2,
                   on_result=lambda i, n, r: finished.append(r.script_name))
    assert local_ray.is_initialized(), "jaxrun must not shut down a Ray it did not start"
    for result in (local, on_ray):
        assert [r.script_name for r in result.script_results] == ["a_good", "b_fails", "c_good"]
        assert [r.success for r in result.script_results] == [True, False, True]
        assert [r.error_class for r in result.script_results] == [None, "script_error", None]
        assert result.metadata.complete is True
    assert sorted(finished) == ["a_good", "b_fails", "c_good"]
    assert on_ray.script_results[0].results == local.script_results[0].results == {"value": 14.0}
    assert on_ray.script_results[0].device_used == "cpu"
    assert "this script fails on purpose" in on_ray.script_results[1].error_message
    assert_same_result_files(tmp_path / "local", tmp_path / "ray")
    doc = load(tmp_path / "ray" / "jax_execution_results.json")
    assert doc["metadata"]["complete"] is True and doc["metadata"]["scripts_executed"] == 3
    # The worker streamed the script's output to the driver's results folder.
    assert "value 14.0" in (tmp_path / "ray" / "logs" / "a_good.stdout.log").read_text()


@pytest.mark.slow
def test_a_task_that_fails_on_the_worker_is_a_failed_result(local_ray, tmp_path: Path) -> None:
    write(tmp_path / "s", "a_vanishes.py", GOOD)
    write(tmp_path / "s", "b_good.py", GOOD)

    def delete_before_its_task_runs(index: int, total: int, name: str) -> None:
        if name == "a_vanishes":
            (tmp_path / "s" / "a_vanishes.py").unlink()

    result = batch(tmp_path / "s", tmp_path / "r", backend="ray", jobs=1, on_start=delete_before_its_task_runs)
    lost, good = result.script_results
    assert good.success
    assert not lost.success and lost.error_class == "script_error"
    assert "ScriptNotFoundError" in lost.error_message and "no such script" in lost.error_message
    assert lost.hint and "Ray" in lost.hint
    assert len(lost.attempts) == 1 and lost.attempts[0].error_class == "script_error"
    doc = load(tmp_path / "r" / "jax_execution_results.json")
    assert doc["metadata"]["complete"] is True
    assert [r["error_class"] for r in doc["script_results"]] == ["script_error", None]
    # As in a local batch, every script has its result file, written by the driver here.
    assert load(tmp_path / "r" / "script_results" / "a_vanishes_result.json")["error_class"] == "script_error"


@pytest.mark.slow
def test_a_lost_worker_is_a_crashed_result_not_a_crash(local_ray, tmp_path: Path) -> None:
    write(tmp_path / "s", "a_kills_its_worker.py", KILLS_ITS_WORKER)
    write(tmp_path / "s", "b_good.py", GOOD)
    result = batch(tmp_path / "s", tmp_path / "r", backend="ray", jobs=2, timeout=120)
    lost, good = result.script_results
    assert good.success
    assert not lost.success and lost.error_class == "crashed", lost.error_message
    # Its node (the only one) is still alive: the script killed its worker; it is not run again.
    assert "worker running this script died" in lost.error_message and "not run again" in lost.error_message
    assert "WorkerCrashedError" in lost.error_message
    assert [(a.number, a.error_class) for a in lost.attempts] == [(1, "crashed")]
    assert lost.warnings == []
    assert result.metadata.complete is True
    assert load(tmp_path / "r" / "jax_execution_results.json")["script_results"][0]["error_class"] == "crashed"
    assert load(tmp_path / "r" / "script_results" / "a_kills_its_worker_result.json")["error_class"] == "crashed"


@pytest.mark.slow
def test_ray_runs_the_examples_like_a_local_batch(local_ray, tmp_path: Path) -> None:
    # The same files as a local batch: test_ray_gives_the_same_results_and_files_as_a_local_run;
    # here the real examples, against what they record when run locally (tests/project/test_examples_math.py).
    examples = REPO_ROOT / "examples" / "gnn_rendered_simulators"
    on_ray = batch(examples, tmp_path / "ray", backend="ray", jobs=2, timeout=120)
    assert [r.script_name for r in on_ray.script_results] == ["jax__combined_model", "jax__general_model", "jax__pomdp_solver"]
    assert on_ray.success, [(r.script_name, r.error_message) for r in on_ray.script_results]
    for result in on_ray.script_results:
        assert result.results and result.compile_count >= 1 and result.device_used == "cpu"


@pytest.mark.slow
def test_an_interrupted_ray_batch_resumes_like_one_uninterrupted_run(local_ray, tmp_path: Path) -> None:
    """SIGTERM stops the Ray batch (exit 130, the running task's script stopped), and --resume
    finishes it; the CLI joins this module's Ray rather than starting its own."""
    interrupt_and_resume(tmp_path, signal.SIGTERM, "--backend", "ray",
                         "--ray-address", local_ray.get_runtime_context().gcs_address)


@pytest.mark.slow
def test_the_processes_of_a_multi_process_job_run_together_in_one_task(local_ray, tmp_path: Path) -> None:
    """--processes 2 under Ray: one task runs the whole job, so both processes are on the node
    that task got, and their collective meets (each records its host and its parent's pid: the
    worker that ran the task)."""
    write(tmp_path / "s", "psum.py", (
        "import os, socket, jax, jax.numpy as jnp, jaxrun\n"
        "jax.distributed.initialize()\n"
        "me = jax.process_index()\n"
        "total = jax.pmap(lambda x: jax.lax.psum(x, 'i'), axis_name='i')(jnp.array([me + 1.0]))\n"
        "import psutil\n"
        "jaxrun.record(total=float(total[0]), host=socket.gethostname(), worker=psutil.Process().parent().pid)\n"
        "jax.distributed.shutdown()\n"))
    result = batch(tmp_path / "s", tmp_path / "r", backend="ray", processes=2).script_results[0]
    assert result.success, (result.error_message, result.traceback)
    assert result.node is not None and result.ray_node_id is not None
    assert [p.results["total"] for p in result.processes] == [3.0, 3.0]
    assert len({(p.results["host"], p.results["worker"]) for p in result.processes}) == 1
    assert result.processes[0].results["worker"] != os.getpid()  # a Ray worker, not this driver
