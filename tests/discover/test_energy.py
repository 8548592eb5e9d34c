"""Energy from the hardware's counters (discover/energy.py, discover/nvml.py's sampler).

This machine has neither counter: no NVIDIA GPU (so no NVML total-energy counter) and no RAPL
under /sys/class/powercap. The arithmetic is tested on recorded readings instead: a stand-in
for pynvml whose counter and power readings are those of a GPU drawing a known power, and a
powercap folder written here in the layout Linux gives it (the real counter cannot be shown on a
CPU machine). What a run on this machine says, null with both reasons, is tested for real."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from fake_gpu import RecordedNvml
from helpers import jaxrun, write

from jaxrun.discover.energy import (
    HostEnergy,
    counter_delta,
    energy_between,
    rapl_packages,
    read_rapl,
)
from jaxrun.discover.nvml import NO_ENERGY_COUNTER, UtilizationSampler


def test_a_counter_that_wrapped_is_counted_once_past_its_range() -> None:
    assert counter_delta(100, 350, 1000) == 250
    assert counter_delta(900, 150, 1000) == 250  # past 1000 it starts again from 0
    assert counter_delta(900, 150, None) is None  # went back, range unknown: never a negative energy
    both = energy_between([900, 10], [150, 60], 2.0, scale=1e-6, wraps=[1000, 1000])
    assert both.joules == pytest.approx(300e-6) and both.watts == pytest.approx(150e-6) and both.reason is None
    assert energy_between([5], [1], 1.0, scale=1e-3).reason == "an energy counter went back between its two readings (it was reset)"


def _package(root: Path, name: str, energy: int, wrap: int = 262143328850) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "energy_uj").write_text(f"{energy}\n")
    (folder / "max_energy_range_uj").write_text(f"{wrap}\n")
    (folder / "name").write_text("package-0\n" if name.endswith(":0") else "core\n")
    return folder


def test_rapl_adds_the_packages_not_their_subzones_and_crosses_a_wrap(tmp_path: Path) -> None:
    _package(tmp_path, "intel-rapl:0", 1_000_000)
    _package(tmp_path, "intel-rapl:0:0", 900_000)  # the cores of package 0: part of it, never added again
    _package(tmp_path, "intel-rapl:1", 4_999_000, wrap=5_000_000)
    assert [p.name for p in rapl_packages(tmp_path)] == ["intel-rapl:0", "intel-rapl:1"]
    before_start = time.monotonic()
    meter = HostEnergy(tmp_path).start()
    after_start = time.monotonic()
    time.sleep(0.2)
    _package(tmp_path, "intel-rapl:0", 31_000_000)  # +30 J
    _package(tmp_path, "intel-rapl:0:0", 29_000_000)
    _package(tmp_path, "intel-rapl:1", 1_000, wrap=5_000_000)  # +2,000 uJ across the wrap
    before_stop = time.monotonic()
    used = meter.stop()
    after_stop = time.monotonic()
    assert used.reason is None and used.joules == pytest.approx(30.002)
    # Mean power: the joules over the seconds between the two readings, which lie between these stamps.
    assert used.joules / (after_stop - before_start) <= used.watts <= used.joules / (before_stop - after_start)


def test_rapl_missing_or_unreadable_is_null_with_the_reason(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    assert HostEnergy(tmp_path / "none").start().stop().reason.startswith("no RAPL counters")
    folder = _package(tmp_path, "intel-rapl:0", 5)
    (folder / "energy_uj").unlink()
    (folder / "energy_uj").mkdir()  # not a number to read
    said = HostEnergy(tmp_path).start().stop()
    assert said.joules is None and "could not be read" in said.reason
    # Linux lets only root read energy_uj (0400): a process of another user is told so.
    if os.geteuid() != 0:
        pytest.skip("needs root, to read the counter as root and as another user")
    # In a folder any user can pass through (a test's tmp_path is 0700, under root's).
    shared = Path(tempfile.mkdtemp(prefix="jr-rapl-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    shared.chmod(0o755)
    readable = _package(shared, "intel-rapl:0", 5)
    (readable / "energy_uj").chmod(0o400)
    readable.chmod(0o755)
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # the child becomes nobody, reads, says what it got, and ends
        try:
            os.setgid(65534)
            os.setuid(65534)
            os.write(writer, repr(read_rapl(rapl_packages(shared))).encode())
        finally:
            os._exit(0)
    os.close(writer)
    said = os.read(reader, 4096).decode()
    os.waitpid(child, 0)
    os.close(reader)
    assert "permission denied; Linux lets only root read them" in said, said
    assert read_rapl(rapl_packages(shared)) == ([5], [262143328850])  # root reads it


def _sampled(nvml: RecordedNvml, gpus: list[str] | None, seconds: float) -> UtilizationSampler:
    """A sampler over ``seconds`` of the recording's own time (a counter and its time one reading,
    whatever the machine's load puts between a real read and its clock)."""
    nvml.now = 0.0
    sampler = UtilizationSampler(gpus, interval=0.01, nvml=nvml, clock=nvml.clock).start()
    assert nvml.sampling.wait(30)
    nvml.now += seconds
    time.sleep(0.05)  # a few power readings
    sampler.stop()
    return sampler


def test_gpu_energy_is_the_counters_difference_and_agrees_with_the_power_readings() -> None:
    energy, sampled = _sampled(RecordedNvml(watts={0: 300.0, 1: 120.0}), ["1"], 0.5).energy()
    assert energy.reason is None and sampled == pytest.approx(120.0)  # GPU 0's power is not this job's
    assert energy.joules == pytest.approx(60.0) and energy.watts == pytest.approx(120.0)  # 0.5 s at 120 W
    # GPU.md 18 asks the real counter's mean power to be within 5 % of the sampled power: here, exactly.
    assert energy.watts == pytest.approx(sampled)
    energy, sampled = _sampled(RecordedNvml(watts={0: 300.0, 1: 120.0}), None, 2.0).energy()
    assert (energy.joules, energy.watts, sampled) == (pytest.approx(840.0), pytest.approx(420.0), pytest.approx(420.0))


def test_a_gpu_without_the_counter_is_null_with_the_reason() -> None:
    sampler = _sampled(RecordedNvml(watts={0: 250.0}, counters=False), None, 1.0)
    energy, sampled = sampler.energy()
    assert (energy.joules, energy.watts, energy.reason) == (None, None, NO_ENERGY_COUNTER)
    assert sampled == pytest.approx(250.0)  # the power readings still are
    assert sampler.result()[0] == pytest.approx(0.5)


def test_a_run_here_says_why_each_energy_is_null_and_the_history_keeps_the_columns(tmp_path: Path) -> None:
    write(tmp_path / "s", "a.py", "if False:\n    import jax\nx = sum(range(10000))\n")
    done = jaxrun("run", tmp_path / "s", "--benchmark-runs", "2", "--warmup-runs", "0", "--history",
                  tmp_path / "h.sqlite", "--results-dir", tmp_path / "r")
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = json.loads((tmp_path / "r" / "jax_execution_results.json").read_text())["script_results"]
    assert result["device_energy"] is None and result["device_power"] is None
    assert result["device_energy_reason"] == "GPU energy is measured on NVIDIA GPUs only (the job ran on cpu)"
    assert result["host_energy"] is None and result["host_power"] is None
    assert result["host_energy_reason"].startswith("no RAPL counters")  # this machine has none
    samples = result["benchmark"]["samples"]
    assert all(s["device_energy"] is None and s["host_energy"] is None for s in samples) and len(samples) == 2
    # A declared figure: the history's samples have its column (NULL here), --metric takes it.
    import sqlite3

    with sqlite3.connect(tmp_path / "h.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM samples WHERE host_energy IS NULL AND device_energy IS NULL").fetchone() == (2,)
    compared = jaxrun("compare", tmp_path / "r", tmp_path / "r", "--metric", "device_energy", "--json")
    (script,) = json.loads(compared.stdout)["scripts"]
    phase = script["phases"]["device_energy"]  # unknown on both sides: never a ratio of nothing
    assert (phase["verdict"], phase["note"], phase["ratio"]) == (
        "not comparable", "no device_energy of a successful run on the base and new side", None)
