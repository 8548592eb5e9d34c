"""Device memory from ``memory_stats()`` readings. No GPU here: the readings below are recorded
stand-ins shaped like XLA's PjRt statistics of a CUDA device (the keys jax documents for
``Device.memory_stats()``); the CPU path is the real one."""

from __future__ import annotations

from pathlib import Path

import pytest

import jaxrun
from jaxrun.probe import events
from jaxrun.probe.jax_hooks import peak_bytes_in_use
from jaxrun.run.reading.probe_reading import device_memory, read_probe_events

GIB = 2**30
GPU_READING = {  # one H100 after a training step (recorded shape; values chosen for the test)
    "bytes_in_use": 3 * GIB, "peak_bytes_in_use": 5 * GIB + 512 * 2**20, "bytes_limit": 60 * GIB,
    "largest_alloc_size": GIB, "num_allocs": 1234, "bytes_reserved": 0, "peak_bytes_reserved": 0,
    "largest_free_block_bytes": 0, "pool_bytes": 60 * GIB, "peak_pool_bytes": 60 * GIB,
}


def end_event(device: dict | None) -> list[events.Event]:
    end = events.End(type=events.END, body_start=0.0, body_time=1.0, import_time=0.1, compile_wall_time=0.0,
                     run_time=0.9, phases_notes=[], drain_time=0.0, ended_by="return", cpu_time=1.0, peak_rss_kb=None,
                     device=device, compile_cache=None, exit_code=0)
    assert not events.problems(end)
    return [events.JaxLoaded(type=events.JAX_LOADED), end]


def test_the_peak_of_the_busiest_device_in_mb() -> None:
    peaks = [peak_bytes_in_use(GPU_READING), peak_bytes_in_use({**GPU_READING, "peak_bytes_in_use": GIB})]
    reading = read_probe_events(end_event({"initialized": True, "backend": "cuda", "peak_bytes_per_device": peaks}))
    assert device_memory(reading) == (5 * 1024 + 512, None)  # MiB of the device that used the most


def test_unknown_is_null_with_the_reason() -> None:
    assert peak_bytes_in_use(None) is None  # CPU devices return no statistics
    assert peak_bytes_in_use({"bytes_in_use": 1}) is None  # a backend that does not track the peak
    no_stats = read_probe_events(end_event({"initialized": True, "backend": "cpu", "peak_bytes_per_device": [None]}))
    assert device_memory(no_stats) == (None, "the cpu backend does not report memory statistics")
    unused = read_probe_events(end_event({"initialized": False}))
    assert device_memory(unused)[0] is None and "never used a device" in device_memory(unused)[1]
    assert device_memory(read_probe_events([]))[1] == "the script did not import jax"


@pytest.mark.slow
def test_a_real_cpu_run_reports_null_device_memory_with_a_reason(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("import jax.numpy as jnp\nprint(float(jnp.ones(3).sum()))\n")
    result = jaxrun.execute_jax_script(script, "cpu", results_dir=tmp_path / "r", compile_cache=False)
    assert result.success and result.device_memory_peak is None
    assert result.device_memory_reason == "the cpu backend does not report memory statistics"
