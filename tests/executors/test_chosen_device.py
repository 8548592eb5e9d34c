"""One chosen device: ``--device gpu:1`` / ``tpu:0`` / ``cpu:K``, the config's
``device_id``, ``# jaxrun: device=cpu:1``, ``execute_jax_script(device="cpu:0")``.

The CPU paths run for real (subprocesses, real JAX, simulated CPU devices). This machine has no
GPU or TPU, so what needs one is checked on the parent's logic with recorded device facts
(tests/fake_gpu.py): the id check, the child's visibility variables, the GPU slot, the policy
that never moves a chosen GPU to another. A real ``gpu:1`` cannot run here; here it must fall
back to the CPU as ``--device gpu`` does.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from fake_gpu import FakeAttempt, GpuFacts
from helpers import Recorder, load, tables, write
from helpers import jaxrun as run_cli

import jaxrun
from jaxrun.config.options import BatchOptions, RunOptions
from jaxrun.core.validate import split_device, validate_device
from jaxrun.discover.devices import check_device_id
from jaxrun.errors import InvalidDeviceError, UsageError
from jaxrun.executors.backends import check_backend
from jaxrun.executors.base import make_executor
from jaxrun.executors.slots import PooledPlacement, SlotPool, gpu_slots
from jaxrun.plan.batch_plan import plan_devices
from jaxrun.plan.job import Job
from jaxrun.run.process.environment import child_env, chosen_device_env
from jaxrun.run.execute import run_job
from jaxrun.run.process.placement import Slot

NO_GPU_HERE = not jaxrun.get_jax_device_info().platforms.get("gpu") or \
    not jaxrun.get_jax_device_info().platforms["gpu"].available

# The script says which device its arrays land on by default.
DEVICES = "import jax, jax.numpy as jnp, jaxrun\njaxrun.record(devices=str(jnp.ones(3).devices()))\n"


# --------------------------------------------------------------------------- the form


def test_the_form_is_platform_and_an_optional_non_negative_id() -> None:
    assert validate_device("GPU:01") == "gpu:1" and validate_device(" cpu ") == "cpu"
    assert split_device("tpu:0") == ("tpu", 0) and split_device("gpu") == ("gpu", None)
    for bad in ("gpu:x", "gpu:-1", "gpu:", "auto:0", "gpu:1.5", "xpu:0"):
        with pytest.raises(InvalidDeviceError, match=r"choose one of auto, cpu, gpu, tpu, or one device of a "
                                                     r"platform: cpu:N, gpu:N, tpu:N"):
            validate_device(bad)
    assert BatchOptions.build("api", paths=["."], device="cpu:0,gpu:1").device == ("cpu:0", "gpu:1")
    assert RunOptions.build("api", device="tpu:0").device == "tpu:0"
    with pytest.raises(UsageError, match="device='gpu:1' chooses a device of this machine; with backend='ray'"):
        check_backend(BatchOptions.build("api", paths=["."], device="gpu:1", backend="ray"))
    assert check_backend(BatchOptions.build("api", paths=["."], device="cpu:1", backend="ray")).name == "ray"


# --------------------------------------------------------------------------- the id check (recorded facts)


def test_an_id_this_machine_lacks_is_a_usage_error_listing_the_ids() -> None:
    two_gpus = GpuFacts(2)()  # recorded facts: the real thing cannot run here
    check_device_id("gpu:1", two_gpus)
    with pytest.raises(InvalidDeviceError) as missing:
        check_device_id("gpu:3", two_gpus)
    assert str(missing.value) == "unknown device gpu:3: this machine has gpu:0, gpu:1 (choose one, or gpu for any)"
    with pytest.raises(InvalidDeviceError, match=r"unknown device cpu:1: this machine has cpu:0 \(choose one"):
        check_device_id("cpu:1", two_gpus)
    check_device_id("cpu:1", two_gpus, cpu_count=2)  # --host-devices 2
    check_device_id("tpu:5", two_gpus)  # no TPU at all: the fallback rule decides, not a usage error
    # In the plan, once before the batch.
    options = BatchOptions.build("api", paths=["."], device="cpu,gpu:3")
    with pytest.raises(UsageError, match="unknown device gpu:3: this machine has gpu:0, gpu:1"):
        plan_devices(options, two_gpus)
    assert plan_devices(BatchOptions.build("api", paths=["."], device="gpu:1"), two_gpus).platforms == {"gpu:1": "gpu"}


# --------------------------------------------------------------------------- what the child sees


def _job(tmp_path: Path, device: str) -> Job:
    return Job(index=0, script=tmp_path / "s.py", name="s", file_name="s", device=device, platform="gpu",
               results_dir=tmp_path / "r")


def test_the_child_sees_the_chosen_gpu_of_those_the_user_made_visible(tmp_path: Path, monkeypatch) -> None:
    # Tested on the function that builds the environment, with recorded facts of two GPUs: there
    # is no GPU here to start a child on. JAX numbers the GPUs the user left visible from 0, so
    # gpu:1 under CUDA_VISIBLE_DEVICES=2,3 is physical GPU 3.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    options = RunOptions.build("api", device="gpu:1")
    env = child_env(_job(tmp_path, "gpu:1"), options, "gpu", GpuFacts(2)(), tmp_path / "events")
    assert env["CUDA_VISIBLE_DEVICES"] == "3" and env["JAX_PLATFORMS"] == "cuda"
    # The same through the GPU slot a --jobs batch gives it (its ids are JAX's too).
    env = child_env(_job(tmp_path, "gpu:1"), options, "gpu", GpuFacts(2)(), tmp_path / "events", Slot(1, gpus=(1,)))
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert chosen_device_env("gpu", 1, "cuda", {}) == {"CUDA_VISIBLE_DEVICES": "1"}
    assert chosen_device_env("gpu", 0, "rocm", {"HIP_VISIBLE_DEVICES": "4,5"}) == {"HIP_VISIBLE_DEVICES": "4"}
    assert chosen_device_env("tpu", 2, "tpu", {}) == {
        "TPU_VISIBLE_CHIPS": "2", "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1", "TPU_PROCESS_BOUNDS": "1,1,1",
        "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
    assert chosen_device_env("cpu", 1, "cpu", {}) == {"JAXRUN_DEFAULT_DEVICE": "1"}
    assert chosen_device_env("cpu", 0, "cpu", {}) == {} and chosen_device_env("gpu", None, "cuda", {}) == {}
    # After a fallback to the CPU nothing of the GPU's choice stays.
    env = child_env(_job(tmp_path, "gpu:1"), options, "cpu", GpuFacts(2)(), tmp_path / "events")
    assert "CUDA_VISIBLE_DEVICES" not in env and "JAXRUN_DEFAULT_DEVICE" not in env


# --------------------------------------------------------------------------- slots and the failure policy


def test_a_chosen_gpu_waits_for_its_own_slot_and_never_moves() -> None:
    pools = {"gpu": SlotPool(gpu_slots([0, 1]))}
    first = PooledPlacement(pools, "gpu", gpu=1)  # GPU 0's slot is free too: not taken
    assert first.slot("gpu").gpus == (1,) and not first.has_other_gpu() and not first.move_to_other_gpu()
    assert pools["gpu"].acquire(gpu=1, timeout=0.1) is None  # a second gpu:1 waits for it
    assert pools["gpu"].acquire(gpu=7) is None  # a GPU no slot holds: no endless wait
    first.close()
    assert pools["gpu"].acquire(gpu=1, timeout=0.1).gpus == (1,)


def test_a_transient_failure_on_a_chosen_gpu_retries_there_then_falls_back(tmp_path: Path) -> None:
    # Recorded facts of two GPUs and a fake attempt (no GPU here): GPU 1 runs out of memory, GPU 0
    # would work. --device gpu would move to GPU 0; gpu:1 retries on GPU 1, then the CPU.
    script = write(tmp_path, "model.py", "import jax\n")
    options = BatchOptions.build("api", paths=[tmp_path], device="gpu:1", jobs=2, retries=1,
                                 results_dir=tmp_path / "r")
    executor = make_executor(options, GpuFacts(2)())
    fake = FakeAttempt({0: None, 1: "out_of_memory"})
    job = Job(index=0, script=script, name="model", file_name="model", device="gpu:1", platform="gpu",
              results_dir=tmp_path / "r")
    sink = Recorder()
    executor.run([job], functools.partial(run_job, attempt=fake, read_facts=GpuFacts(2)), sink)
    (result,) = sink.results.values()
    assert fake.calls == [("gpu", (1,)), ("gpu", (1,)), ("cpu", None)]
    assert [a.device for a in result.attempts] == ["gpu:1", "gpu:1", "cpu"]
    assert result.device_used == "cpu" and result.device_index is None and result.fallback_reason.startswith("gpu:1 ")


# --------------------------------------------------------------------------- real runs on the CPU


@pytest.mark.slow
def test_cpu_0_runs_and_is_recorded_and_shown(tmp_path: Path) -> None:
    write(tmp_path / "s", "probe_devices.py", DEVICES)
    done = run_cli("run", tmp_path / "s", "--device", "cpu:0", "--results-dir", tmp_path / "r", "--no-history",
                   "--markdown", tmp_path / "summary.md")
    assert done.returncode == 0, done.stderr
    result = load(tmp_path / "r" / "script_results" / "probe_devices_result.json")
    assert (result["device_requested"], result["device_used"], result["device_index"]) == ("cpu:0", "cpu", 0)
    assert result["results"]["devices"] == "{CpuDevice(id=0)}"
    row = next(line for line in done.stdout.splitlines() if line.startswith("probe_devices.py"))
    assert row.split()[2] == "cpu:0"
    # The Markdown summary's table as GitHub renders it: the script's row, its device column.

    table = next(rows for rows in tables((tmp_path / "summary.md").read_text()).values() if "device" in rows[0])
    [row] = [r for r in table[1:] if "probe_devices" in r[0]]
    assert row[table[0].index("device")] == "cpu:0"
    assert load(tmp_path / "r" / "jax_execution_results.json")["metadata"]["device_used"] == "cpu:0"


@pytest.mark.slow
def test_cpu_1_of_two_simulated_devices_is_the_scripts_default(tmp_path: Path) -> None:
    write(tmp_path / "s", "probe_devices.py", DEVICES)
    done = run_cli("run", tmp_path / "s", "--host-devices", "2", "--device", "cpu:1", "--results-dir", tmp_path / "r",
                   "--no-history")
    assert done.returncode == 0, done.stderr
    result = load(tmp_path / "r" / "script_results" / "probe_devices_result.json")
    assert result["results"]["devices"] == "{CpuDevice(id=1)}" and result["device_count"] == 2
    assert (result["device_requested"], result["device_index"]) == ("cpu:1", 1)
    assert [a["device"] for a in result["attempts"]] == ["cpu:1"]
    assert " cpu:1 " in done.stdout


@pytest.mark.parametrize(("args", "listed"), [
    (("--host-devices", "2", "--device", "cpu:2"), "this machine has cpu:0, cpu:1 (choose one, or cpu for any"),
    (("--device", "cpu:1"), "this machine has cpu:0 (choose one, or cpu for any"),
    (("--device", "gpu:x"), "choose one of auto, cpu, gpu, tpu, or one device of a platform: cpu:N, gpu:N, tpu:N"),
    (("--device", "cpu,gpu:-1"), "unknown device 'gpu:-1': choose one of auto, cpu, gpu, tpu, or one device"),
])
def test_a_missing_or_malformed_device_is_a_usage_error(tmp_path: Path, args: tuple[str, ...], listed: str) -> None:
    write(tmp_path / "s", "probe_devices.py", DEVICES)
    done = run_cli("run", tmp_path / "s", *args, "--results-dir", tmp_path / "r", "--no-history")
    assert done.returncode == 2 and listed in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r" / "script_results").exists()  # checked before anything ran


@pytest.mark.slow
@pytest.mark.skipif(not NO_GPU_HERE, reason="checks the fallback of a machine without a GPU")
def test_gpu_1_without_a_gpu_falls_back_to_cpu_naming_it(tmp_path: Path) -> None:
    write(tmp_path / "s", "probe_devices.py", DEVICES)
    done = run_cli("run", tmp_path / "s", "--device", "gpu:1", "--results-dir", tmp_path / "r", "--no-history")
    assert done.returncode == 0, done.stderr
    result = load(tmp_path / "r" / "script_results" / "probe_devices_result.json")
    assert (result["device_requested"], result["device_used"], result["device_index"]) == ("gpu:1", "cpu", None)
    assert result["fallback_reason"].startswith("gpu:1 failed with device_unavailable: gpu:1 is not available")
    assert "cpu (fallback from gpu:1)" in done.stdout
    strict = run_cli("run", tmp_path / "s", "--device", "gpu:1", "--no-fallback", "--results-dir", tmp_path / "r2",
                     "--no-history")
    assert strict.returncode == 1
    failed = load(tmp_path / "r2" / "script_results" / "probe_devices_result.json")
    assert failed["error_class"] == "device_unavailable" and "gpu:1 is not available" in failed["error_message"]


@pytest.mark.slow
def test_the_api_the_config_and_a_header_choose_a_device(tmp_path: Path) -> None:
    script = write(tmp_path / "api", "probe_devices.py", DEVICES)
    result = jaxrun.execute_jax_script(script, device="cpu:0", config=False, compile_cache=False)
    assert result.success and (result.device_requested, result.device_index) == ("cpu:0", 0)
    with pytest.raises(InvalidDeviceError, match="unknown device cpu:3: this machine has cpu:0, cpu:1"):
        jaxrun.execute_jax_script(script, device="cpu:3", host_devices=2, config=False)
    # Seed 001's DEVICE_CONFIG: a [devices.<platform>] table's device_id, and a top-level one.
    write(tmp_path / "c1", "probe_devices.py", DEVICES)
    write(tmp_path / "c1", "pyproject.toml", '[tool.jaxrun]\ndevice = "cpu"\n'
          "[tool.jaxrun.devices.cpu]\ndevice_id = 1\nhost_devices = 2\n")
    write(tmp_path / "c2", "probe_devices.py", DEVICES)
    write(tmp_path / "c2", "pyproject.toml", '[tool.jaxrun]\ndevice = "cpu"\ndevice_id = 0\n')
    for folder, expected in (("c1", ("cpu:1", "{CpuDevice(id=1)}")), ("c2", ("cpu:0", "{CpuDevice(id=0)}"))):
        done = run_cli("run", tmp_path / folder, "--results-dir", tmp_path / folder / "r", "--no-history")
        assert done.returncode == 0, done.stderr
        result = load(tmp_path / folder / "r" / "script_results" / "probe_devices_result.json")
        assert (result["device_requested"], result["results"]["devices"]) == expected
    write(tmp_path / "c3", "probe_devices.py", DEVICES)
    write(tmp_path / "c3", "pyproject.toml", "[tool.jaxrun]\ndevice_id = 1\n")
    done = run_cli("run", tmp_path / "c3", "--results-dir", tmp_path / "c3" / "r", "--no-history")
    assert done.returncode == 2 and "device_id = 1 needs a platform" in done.stderr
    # A script's own comment, and JAXRUN_DEVICE.
    write(tmp_path / "h", "own.py", "# jaxrun: device=cpu:1, host_devices=2\n" + DEVICES)
    done = run_cli("run", tmp_path / "h", "--results-dir", tmp_path / "h" / "r", "--no-history")
    assert done.returncode == 0, done.stderr
    assert load(tmp_path / "h" / "r" / "script_results" / "own_result.json")["results"]["devices"] == "{CpuDevice(id=1)}"
    # The command line's cpu:1 on a script whose own comment simulates two CPU devices.
    write(tmp_path / "h2", "own.py", "# jaxrun: host_devices=2\n" + DEVICES)
    done = run_cli("run", tmp_path / "h2", "--device", "cpu:1", "--results-dir", tmp_path / "h2" / "r", "--no-history")
    assert done.returncode == 0, done.stderr
    assert load(tmp_path / "h2" / "r" / "script_results" / "own_result.json")["results"]["devices"] == "{CpuDevice(id=1)}"
    done = run_cli("run", tmp_path / "api", "--results-dir", tmp_path / "e", "--no-history",
                   env={"JAXRUN_DEVICE": "cpu:0"})
    assert done.returncode == 0 and json.loads(
        (tmp_path / "e" / "script_results" / "probe_devices_result.json").read_text())["device_index"] == 0
