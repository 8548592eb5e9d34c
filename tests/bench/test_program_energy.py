"""A program's energy per call (``jaxrun.bench.measure``'s ``energy_per_call``, bench/_energy.py).

No counter can be read on this machine (no NVIDIA GPU, no RAPL), so the GPU path runs on a
stand-in for pynvml whose total-energy counter is that of a GPU drawing a known power (the real
counter cannot be shown on a CPU machine), and the CPU path on a powercap folder in Linux's
layout that the calls themselves advance. A real ``measure`` here says why the figure is null and
makes no extra calls for it."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_gpu import RecordedNvml

from jaxrun.bench._energy import program_energy


def _run(call, n: int) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    for _ in range(n):
        call()
    return time.perf_counter() - started


def test_a_gpu_calls_energy_is_its_counters_difference_over_the_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    gpu = SimpleNamespace(platform="gpu", id=1)
    started = time.monotonic()
    used = program_energy(lambda: time.sleep(0.01), 0.01, gpu, run=_run, nvml=RecordedNvml(watts={0: 400.0, 1: 200.0}))
    took = time.monotonic() - started
    assert used.source == "nvml" and used.reason is None and used.calls == 50  # 0.5 s of 10 ms calls asked for
    assert used.watts == pytest.approx(200.0, rel=0.05)  # GPU 1's, not GPU 0's
    # The calls' joules are the power over the seconds they took: at least the 50 sleeps, at most
    # the whole call (a loaded machine stretches the sleeps: the figure follows, never assumes 0.5 s).
    seconds = used.joules_per_call * used.calls / used.watts
    assert 0.5 <= seconds <= took
    # The process sees only NVML's GPU 0 as its device 0 (CUDA_VISIBLE_DEVICES): that one's counter.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    first = program_energy(lambda: time.sleep(0.01), 0.01, SimpleNamespace(platform="gpu", id=0), run=_run,
                           nvml=RecordedNvml(watts={0: 400.0, 1: 200.0}))
    assert first.watts == pytest.approx(400.0, rel=0.05)


def test_a_gpu_without_the_counter_and_another_platform_are_null_with_the_reason() -> None:
    none = program_energy(lambda: None, 0.01, SimpleNamespace(platform="gpu", id=0), run=_run,
                          nvml=RecordedNvml(watts={0: 300.0}, counters=False))
    assert (none.joules_per_call, none.calls, none.reason) == (
        None, 0, "this GPU has no total-energy counter in NVML (Volta or newer has one)")
    tpu = program_energy(lambda: None, 0.01, SimpleNamespace(platform="tpu", id=0), run=_run)
    assert tpu.joules_per_call is None and tpu.reason == "no energy counter jaxrun reads on tpu"


def test_on_the_cpu_the_host_packages_counter_gives_joules_a_call(tmp_path: Path) -> None:
    package = tmp_path / "intel-rapl:0"
    package.mkdir()
    (package / "energy_uj").write_text("1000\n")
    (package / "max_energy_range_uj").write_text("262143328850\n")

    def call() -> None:  # each call uses 3 J of the package, as the counter says
        (package / "energy_uj").write_text(f"{int((package / 'energy_uj').read_text()) + 3_000_000}\n")
        time.sleep(0.02)

    used = program_energy(call, 0.02, SimpleNamespace(platform="cpu", id=0), run=_run, rapl_root=tmp_path)
    assert (used.source, used.calls, used.reason) == ("rapl", 25, None)
    assert used.joules_per_call == pytest.approx(3.0)
    assert used.watts == pytest.approx(3.0 / 0.02, rel=0.3)  # 3 J every ~20 ms


def test_measure_here_says_why_and_makes_no_calls_for_it() -> None:
    import jax.numpy as jnp

    from jaxrun.bench import measure

    m = measure(lambda a: a @ a, jnp.ones((64, 64)), peaks=False, time_budget=0.2)
    assert (m.energy_per_call, m.power, m.energy_calls, m.energy_source) == (None, None, 0, None)
    assert m.energy_reason.startswith("no RAPL counters")  # this machine has none
    assert "energy" not in str(m)  # the text shows a figure it has, never a dash for one it has not
    off = measure(lambda a: a @ a, jnp.ones((64, 64)), peaks=False, time_budget=0.2, energy=False)
    assert off.energy_reason == "not asked for (energy=False)"
