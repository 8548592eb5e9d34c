"""Tests for parallel batches (``jobs=N`` / ``--jobs N``), thread budgets, simulated devices and
the accelerator-slot OOM retry.

Everything runs for real: scripts are crafted JAX scripts in their own probe processes on the
CPU of this (2-core) machine. The only stand-in is the GPU out-of-memory retry, driven with a fake
attempt and fake device facts (tests/fake_gpu.py) because there is no GPU here. No test asserts a wall-clock budget: the makespan goal
lives in ``benchmarks/bench_makespan.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import psutil
import pytest
from fake_gpu import FakeAttempt, GpuFacts
from helpers import child_env, jaxrun_command, load, write
from helpers import run_batch as batch

import jaxrun
from jaxrun import __version__
from jaxrun.config.options import RunOptions
from jaxrun.executors.local import longest_first
from jaxrun.executors.slots import PooledPlacement, SlotPool, cpu_slots, gpu_slots
from jaxrun.judge.history import HistoryStore
from jaxrun.plan.job import Job
from jaxrun.results.models import HistoryRun
from jaxrun.run.runner import run_attempts

REPO_ROOT = Path(__file__).resolve().parents[2]
CORES = sorted(os.sched_getaffinity(0))
# Variables whose values these tests read from inside the scripts: a developer's own settings
# must not leak into what the slots are expected to set.
_BUDGET_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "XLA_FLAGS")

QUICK = """\
import jax
import jax.numpy as jnp
import jaxrun

value = float(jax.jit(lambda x, y: x + y)(jnp.float32(1.0), jnp.float32(2.0)))
jaxrun.record(value=value)
"""
FAILS = """\
import jax
raise RuntimeError("this script fails on purpose")
"""
SLEEPY = """\
import time
import jax
import jaxrun

time.sleep(1.0)
jaxrun.record(slept=1.0)
"""
# Started while the batch is still running: waits (bounded) until another script's result has
# been persisted, and records what the batch files said at that moment.
WAITS_FOR_OTHERS = """\
import json, os, time
from pathlib import Path
import jax
import jaxrun

results = Path(os.environ["JAXRUN_OUTPUT_DIR"]).parents[1]
deadline = time.monotonic() + 60
executed, complete, seen = 0, None, False
while time.monotonic() < deadline:
    seen = (results / "script_results" / "a_quick_result.json").exists()
    try:
        meta = json.loads((results / "jax_execution_results.json").read_text())["metadata"]
        executed, complete = meta["scripts_executed"], meta["complete"]
    except (OSError, ValueError, KeyError):
        pass
    if seen and executed >= 1:
        break
    time.sleep(0.05)
jaxrun.record(saw_quick_result=seen, executed_when_seen=executed, complete_when_seen=complete)
"""
# Records the thread budget it was given. With BARRIER_N > 1 it first waits (bounded) until that
# many scripts have arrived, so the budgets recorded are those of jobs running at the same time.
BUDGET = """\
import os, time
from pathlib import Path
import jax
import jax.numpy as jnp
import jaxrun

barrier, n = Path(os.environ["BARRIER_DIR"]), int(os.environ["BARRIER_N"])
(barrier / f"{os.getpid()}.here").write_text("")
deadline = time.monotonic() + 60
while len(list(barrier.glob("*.here"))) < n and time.monotonic() < deadline:
    time.sleep(0.02)
met = len(list(barrier.glob("*.here"))) >= n
# A real computation: XLA must accept the flags it was given.
total = float(jax.jit(lambda x: (x @ x).sum())(jnp.ones((64, 64))))
# Every thread of the process by now (XLA's pools included) and the cores each may run on.
threads = [sorted(os.sched_getaffinity(int(tid))) for tid in os.listdir("/proc/self/task")]
jaxrun.record(
    affinity=sorted(os.sched_getaffinity(0)), thread_affinity=threads, omp=os.environ.get("OMP_NUM_THREADS"),
    mkl=os.environ.get("MKL_NUM_THREADS"), openblas=os.environ.get("OPENBLAS_NUM_THREADS"),
    xla_flags=os.environ.get("XLA_FLAGS", ""), barrier_met=met, total=total,
)
"""
SHORT_SLEEP = """\
import time
import jax
time.sleep(0.3)
"""
PID_SLEEPER = """\
import os, pathlib, time
import jax
pathlib.Path(os.environ["PID_DIR"], pathlib.Path(__file__).stem + ".pid").write_text(str(os.getpid()))
time.sleep(60)
"""
DEVICE_COUNT = """\
import os
import jax
import jaxrun

jaxrun.record(count=jax.device_count(), xla_flags=os.environ.get("XLA_FLAGS", ""))
"""


def start_lines(results: Path) -> list[str]:
    """Scripts, by their label, in the order the execution log says they started."""
    lines = (results / "jax_execution_log.txt").read_text().splitlines()
    return [line.split(" start ", 1)[1].split(" ", 1)[0] for line in lines if " start " in line]


def listing(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


@pytest.fixture
def no_budget_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _BUDGET_VARS:
        monkeypatch.delenv(name, raising=False)


# --------------------------------------------------------------------------- same results as jobs=1


@pytest.fixture(scope="module")
def mixed_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mixed")
    write(root, "a_quick.py", QUICK)
    write(root, "b_fails.py", FAILS)
    write(root, "c_sleepy.py", SLEEPY)
    write(root, "d_waits.py", WAITS_FOR_OTHERS)
    return root


@pytest.fixture(scope="module")
def sequential_and_parallel(mixed_folder: Path, tmp_path_factory: pytest.TempPathFactory, jaxrun_cache_dir: Path):
    runs = {}
    with pytest.MonkeyPatch.context() as mp:
        # Module scope runs before conftest's autouse fixture: isolate the device cache here too.
        mp.setenv("JAXRUN_CACHE_DIR", str(jaxrun_cache_dir))
        for jobs in (1, 2):
            out = tmp_path_factory.mktemp(f"jobs{jobs}")
            finished: list[str] = []
            result = batch(mixed_folder, out, jobs=jobs, on_result=lambda i, n, r, f=finished: f.append(r.script_name))
            runs[jobs] = (result, out, finished)
    return runs


@pytest.mark.slow
def test_jobs_2_gives_the_same_results_as_jobs_1(sequential_and_parallel) -> None:
    (seq, seq_out, _), (par, par_out, _) = sequential_and_parallel[1], sequential_and_parallel[2]
    order = ["a_quick", "b_fails", "c_sleepy", "d_waits"]
    for result in (seq, par):
        # Results in discovery order whatever order they finished in.
        assert [r.script_name for r in result.script_results] == order
        assert [r.success for r in result.script_results] == [True, False, True, True]
        assert [r.error_class for r in result.script_results] == [None, "script_error", None, None]
        assert result.metadata.complete is True
        assert (result.metadata.scripts_executed, result.metadata.scripts_failed) == (4, 1)
    for out in (seq_out, par_out):
        doc = load(out / "jax_execution_results.json")
        assert doc["metadata"]["complete"] is True
        assert [r["script_name"] for r in doc["script_results"]] == order
    # The same files, and each result file with the same fields.
    assert listing(seq_out) == listing(par_out)
    assert listing(seq_out / "script_results") == listing(par_out / "script_results") == {f"{n}_result.json" for n in order}
    assert listing(seq_out / "logs") == listing(par_out / "logs")
    for name in listing(seq_out / "script_results"):
        assert set(load(seq_out / "script_results" / name)) == set(load(par_out / "script_results" / name))
    assert set(load(seq_out / "jax_execution_results.json")) == set(load(par_out / "jax_execution_results.json"))
    assert set(load(seq_out / "jax_performance_metrics.json")) == set(load(par_out / "jax_performance_metrics.json"))
    assert par.script_results[0].results == seq.script_results[0].results == {"value": 3.0}


@pytest.mark.slow
def test_each_result_is_persisted_as_it_finishes(sequential_and_parallel) -> None:
    par, out, finished = sequential_and_parallel[2]
    waits = par.script_results[3].results
    # d_waits ran while the batch was still going, and already saw a finished script's files.
    assert waits["saw_quick_result"] is True
    assert waits["executed_when_seen"] >= 1
    assert waits["complete_when_seen"] is False
    # Every result was reported once, as it finished.
    assert sorted(finished) == ["a_quick", "b_fails", "c_sleepy", "d_waits"]
    log = (out / "jax_execution_log.txt").read_text()
    assert "running up to 2 scripts at once on the local backend" in log
    assert sorted(start_lines(out)) == ["a_quick.py", "b_fails.py", "c_sleepy.py", "d_waits.py"]


# --------------------------------------------------------------------------- thread budget


@pytest.mark.slow
@pytest.mark.skipif(len(CORES) < 2, reason="needs at least 2 usable cores")
@pytest.mark.usefixtures("no_budget_env")
def test_two_jobs_each_get_a_disjoint_share_of_the_cores(tmp_path: Path) -> None:
    folder, barrier = tmp_path / "s", tmp_path / "barrier"
    barrier.mkdir()
    write(folder, "x_budget.py", BUDGET)
    write(folder, "y_budget.py", BUDGET)
    result = batch(folder, tmp_path / "r", jobs=2, env={"BARRIER_DIR": str(barrier), "BARRIER_N": "2"})
    assert result.success, [r.error_message for r in result.script_results]
    seen = [r.results for r in result.script_results]
    assert all(s["barrier_met"] for s in seen), "the two jobs did not run at the same time"
    share = len(CORES) // 2
    for s in seen:
        assert len(s["affinity"]) == share
        assert s["omp"] == s["mkl"] == s["openblas"] == str(share)
        # XLA's thread pools are held to the share by the affinity alone: every thread is in it.
        assert len(s["thread_affinity"]) > 1 and all(t == s["affinity"] for t in s["thread_affinity"])
        # No XLA flag: XLA_FLAGS enter JAX's compilation cache key, and a flag only --jobs N adds
        # made every executable a sequential run had cached a miss (test_compile_cache.py).
        assert s["xla_flags"] == ""
    a, b = (set(s["affinity"]) for s in seen)
    assert not a & b, "two running jobs were given the same core"
    assert a | b <= set(CORES)


@pytest.mark.slow
@pytest.mark.usefixtures("no_budget_env")
def test_one_job_sees_every_core_and_no_thread_override(tmp_path: Path) -> None:
    folder, barrier = tmp_path / "s", tmp_path / "barrier"
    barrier.mkdir()
    write(folder, "x_budget.py", BUDGET)
    result = batch(folder, tmp_path / "r", jobs=1, env={"BARRIER_DIR": str(barrier), "BARRIER_N": "1"})
    seen = result.script_results[0].results
    assert result.success and seen["barrier_met"]
    assert seen["affinity"] == CORES
    assert seen["omp"] is None and seen["mkl"] is None
    assert "xla_cpu_multi_thread_eigen" not in seen["xla_flags"]


@pytest.mark.slow
@pytest.mark.usefixtures("no_budget_env")
def test_the_users_thread_settings_win_over_the_budget(tmp_path: Path) -> None:
    folder, barrier = tmp_path / "s", tmp_path / "barrier"
    barrier.mkdir()
    write(folder, "x_budget.py", BUDGET)
    user_env = {
        "BARRIER_DIR": str(barrier), "BARRIER_N": "1", "OMP_NUM_THREADS": "3",
        "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=true",
    }
    result = batch(folder, tmp_path / "r", jobs=2, env=user_env)
    seen = result.script_results[0].results
    assert result.success, result.script_results[0].error_message
    assert seen["omp"] == "3"  # the user's
    assert seen["mkl"] == str(max(1, len(CORES) // 2))  # still the budget's
    assert seen["xla_flags"] == "--xla_cpu_multi_thread_eigen=true"  # the user's, as they are


# --------------------------------------------------------------------------- longest first


def _job(index: int, expected: float | None) -> Job:
    return Job(index=index, script=Path(f"s{index}.py"), name=f"s{index}", file_name=f"s{index}",
               device="cpu", platform="cpu", results_dir=Path("r"), expected_seconds=expected)


def test_longest_first_puts_unknown_then_longest_first_and_keeps_ties_in_order() -> None:
    jobs = [_job(0, 1.0), _job(1, None), _job(2, 10.0), _job(3, 5.0), _job(4, None), _job(5, 5.0)]
    assert [j.index for j in longest_first(jobs)] == [1, 4, 2, 3, 5, 0]
    assert longest_first([]) == []


def _history_run(script: Path, seconds: float) -> HistoryRun:
    return HistoryRun(
        recorded_at=datetime.now(timezone.utc).isoformat(), script_name=script.stem,
        script_path=str(script.resolve()), content_hash="0" * 64, host="test-host",
        device_requested="cpu", device_used="cpu", jaxrun_version=__version__, median_wall_time=seconds,
    )


@pytest.mark.slow
def test_history_durations_start_the_longest_scripts_first(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    scripts = {name: write(folder, f"{name}.py", SHORT_SLEEP) for name in ("a_short", "b_long", "c_mid")}
    db = tmp_path / "history.sqlite"
    with HistoryStore(db) as store:
        for name, seconds in (("a_short", 1.0), ("b_long", 10.0), ("c_mid", 5.0)):
            store.record(_history_run(scripts[name], seconds))

    started: list[str] = []
    result = batch(folder, tmp_path / "r", jobs=2, history=db, on_start=lambda i, n, name: started.append(name))
    assert result.success
    # Two workers take b_long and c_mid (in either order: they start in parallel threads);
    # a_short, the shortest, waits for a free worker although it comes first in the batch.
    assert set(started[:2]) == {"b_long", "c_mid"} and started[2] == "a_short"
    assert start_lines(tmp_path / "r") == [f"{name}.py" for name in started]
    assert [r.script_name for r in result.script_results] == ["a_short", "b_long", "c_mid"]

    # Without history the batch order is kept: the last script starts last.
    started.clear()
    batch(folder, tmp_path / "r2", jobs=2, history=False, on_start=lambda i, n, name: started.append(name))
    assert set(started[:2]) == {"a_short", "b_long"} and started[2] == "c_mid"


# --------------------------------------------------------------------------- Ctrl-C


@pytest.mark.slow
def test_ctrl_c_stops_every_running_job_and_exits_130(tmp_path: Path) -> None:
    folder, pids, out = tmp_path / "s", tmp_path / "pids", tmp_path / "r"
    pids.mkdir()
    write(folder, "a_sleeper.py", PID_SLEEPER)
    write(folder, "b_sleeper.py", PID_SLEEPER)
    env = child_env({"PID_DIR": str(pids)}, without=("JAX_PLATFORMS",))
    proc = subprocess.Popen(
        jaxrun_command("run", folder, "--jobs", "2", "--results-dir", out, "--no-compile-cache", "--device", "cpu",
                       interruptible=True),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 120
        files = [pids / "a_sleeper.pid", pids / "b_sleeper.pid"]
        while not all(f.exists() and f.read_text() for f in files):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the two sleeping scripts never ran at the same time"
            time.sleep(0.05)
        sleepers = [psutil.Process(int(f.read_text())) for f in files]
        assert all(p.is_running() for p in sleepers)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, (stdout, stderr)
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert not any(p.is_running() for p in sleepers)
    doc = load(out / "jax_execution_results.json")
    assert doc["metadata"]["complete"] is False
    assert [r["script_name"] for r in doc["script_results"]] == ["a_sleeper", "b_sleeper"]
    assert [r["error_class"] for r in doc["script_results"]] == ["interrupted", "interrupted"]
    for name in ("a_sleeper", "b_sleeper"):
        assert load(out / "script_results" / f"{name}_result.json")["error_class"] == "interrupted"
    assert "interrupted after 2 of 2 runs" in (out / "jax_execution_log.txt").read_text()


# --------------------------------------------------------------------------- simulated devices


@pytest.mark.slow
@pytest.mark.usefixtures("no_budget_env")
def test_host_devices_api_with_parallel_jobs(tmp_path: Path) -> None:
    write(tmp_path / "s", "count.py", DEVICE_COUNT)
    write(tmp_path / "s", "count_too.py", DEVICE_COUNT)
    result = batch(tmp_path / "s", tmp_path / "r", jobs=2, host_devices=4)
    assert result.success
    for r in result.script_results:
        assert r.device_count == 4 and r.results["count"] == 4
        # The device count and the slot's thread flag are merged into one XLA_FLAGS.
        assert "--xla_force_host_platform_device_count=4" in r.results["xla_flags"].split()
        assert load(tmp_path / "r" / "script_results" / f"{r.script_name}_result.json")["device_count"] == 4


@pytest.mark.slow
def test_host_devices_cli(tmp_path: Path) -> None:
    write(tmp_path / "s", "count.py", DEVICE_COUNT)
    env = dict(os.environ)
    env.pop("JAX_PLATFORMS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrun", "run", str(tmp_path / "s"), "--host-devices", "4",
         "--results-dir", str(tmp_path / "r"), "--no-compile-cache", "--device", "cpu"],
        capture_output=True, text=True, env=env, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    doc = load(tmp_path / "r" / "jax_execution_results.json")
    assert doc["script_results"][0]["device_count"] == 4
    assert doc["script_results"][0]["results"]["count"] == 4
    # Without the option the script sees the machine's one CPU device.
    plain = jaxrun.execute_jax_script(tmp_path / "s" / "count.py", "cpu", results_dir=tmp_path / "r1", compile_cache=False)
    assert plain.device_count == 1 and plain.results["count"] == 1


@pytest.mark.slow
def test_sharded_pomdp_example_sees_four_host_devices(tmp_path: Path) -> None:
    script = REPO_ROOT / "examples" / "gnn_rendered_simulators" / "jax" / "pomdp_solver.py"
    result = jaxrun.execute_jax_script(script, "cpu", results_dir=tmp_path, host_devices=4, compile_cache=False)
    assert result.success, result.error_message
    assert result.device_count == 4
    assert result.results["n_devices"] == 4
    assert "devices: 4 (sharded)" in Path(result.stdout_log).read_text()


# --------------------------------------------------------------------------- GPU OOM retry (no GPU here)


def _gpu_job(tmp_path: Path) -> Job:
    return Job(index=0, script=tmp_path / "model.py", name="model", file_name="model", device="gpu",
               platform="gpu", results_dir=tmp_path / "r")


def _run_gpu_job(tmp_path: Path, pools: dict[str, SlotPool], fake: FakeAttempt, fallback: bool):  # type: ignore[no-untyped-def]
    """The real runner in a real pooled placement; only the attempt and the device facts are fakes."""
    placement = PooledPlacement(pools, "gpu")
    try:
        options = RunOptions.build("api", device="gpu", fallback=fallback)
        return run_attempts(_gpu_job(tmp_path), options, placement=placement, attempt=fake, read_facts=GpuFacts(2))
    finally:
        placement.close()


def test_gpu_oom_is_retried_on_another_gpu_not_the_same(tmp_path: Path) -> None:
    """No GPU on this machine: the attempt is a fake returning crafted results for GPU slots."""
    pools = {"cpu": SlotPool(cpu_slots(1)), "gpu": SlotPool(gpu_slots([0, 1]))}
    fake = FakeAttempt({0: "out_of_memory", 1: None})
    result = _run_gpu_job(tmp_path, pools, fake, True)
    assert fake.calls == [("gpu", (0,)), ("gpu", (1,))]
    assert result.success and result.device_used == "gpu" and result.fallback_reason is None
    assert [(a.device, a.error_class) for a in result.attempts] == [("gpu", "out_of_memory"), ("gpu", None)]
    assert pools["gpu"].free == 2 and pools["cpu"].free == 1  # every slot given back


def test_gpu_oom_everywhere_falls_back_to_cpu(tmp_path: Path) -> None:
    """No GPU on this machine: the attempt is a fake returning crafted results for GPU slots."""
    pools = {"cpu": SlotPool(cpu_slots(1)), "gpu": SlotPool(gpu_slots([0, 1]))}
    fake = FakeAttempt({0: "out_of_memory", 1: "out_of_memory"})
    result = _run_gpu_job(tmp_path, pools, fake, True)
    # The CPU run takes a CPU slot (its share of the cores), like any CPU job.
    assert fake.calls == [("gpu", (0,)), ("gpu", (1,)), ("cpu", None)]
    assert result.success and result.device_used == "cpu" and result.device_requested == "gpu"
    assert result.fallback_reason.startswith("gpu failed with out_of_memory")
    assert [(a.device, a.error_class) for a in result.attempts] == [
        ("gpu", "out_of_memory"), ("gpu", "out_of_memory"), ("cpu", None)
    ]
    assert pools["gpu"].free == 2 and pools["cpu"].free == 1


def test_gpu_oom_without_fallback_stays_a_failure(tmp_path: Path) -> None:
    """No GPU on this machine: the attempt is a fake returning crafted results for GPU slots."""
    pools = {"cpu": SlotPool(cpu_slots(1)), "gpu": SlotPool(gpu_slots([0, 1], jobs_per_gpu=2))}
    fake = FakeAttempt({0: "out_of_memory", 1: "out_of_memory"})
    result = _run_gpu_job(tmp_path, pools, fake, False)
    # A shared GPU's second slot is not "another GPU": after 0 and 1 there is nowhere left to go.
    assert [c[1] for c in fake.calls] == [(0,), (1,)]
    assert not result.success and result.error_class == "out_of_memory" and result.device_used == "gpu"
    assert len(result.attempts) == 2
    assert pools["gpu"].free == 4
