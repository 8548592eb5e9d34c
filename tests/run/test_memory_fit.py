"""Fit before the out-of-memory: XLA's memory analysis of a program against what its
device can still give (probe/memory_fit.py), bench.fits, and an out-of-memory failure's hint.

Real JAX on CPU and real subprocesses; the GPU side only through recorded ``memory_stats()``
dicts (no GPU on this machine: a stand-in device object returns them, nothing else is mocked)."""

from __future__ import annotations

import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import write

from jaxrun import bench, execute_jax_script
from jaxrun.errors import UsageError
from jaxrun.probe import memory_fit
from jaxrun.probe.memory_fit import (
    FIT_MARKER,
    MEMORY_LIMIT_ENV,
    Available,
    available,
    fit_warning,
    memory_of,
)
from jaxrun.run.process import cgroups
from jaxrun.run.reading.classify import classification
from jaxrun.run.reading.result import _hint

MiB, GiB = 2**20, 2**30
SQUARE = jax.ShapeDtypeStruct((1024, 1024), jnp.float32)  # 4 MiB


def chained(x):
    return (x @ x) @ x


# --- memory_of ---------------------------------------------------------------------------------

def test_memory_of_a_program_with_known_buffers() -> None:
    memory = memory_of(jax.jit(chained).lower(SQUARE).compile().memory_analysis())
    assert memory is not None
    assert memory["argument_bytes"] == 4 * MiB and memory["output_bytes"] == 4 * MiB
    assert memory["alias_bytes"] == 0
    # x @ x (4 MiB) is a temporary: the second product reads all of it while it writes the output,
    # so it can share neither the output's buffer nor the (not donated) input's.
    assert memory["temp_bytes"] >= 4 * MiB
    assert memory["total_bytes"] == (memory["argument_bytes"] + memory["output_bytes"] - memory["alias_bytes"]
                                     + memory["temp_bytes"] + memory["generated_code_bytes"])


def test_a_donated_input_is_counted_once() -> None:
    memory = memory_of(jax.jit(lambda x: x + 1, donate_argnums=0).lower(SQUARE).compile().memory_analysis())
    assert memory is not None and memory["alias_bytes"] == 4 * MiB
    assert memory["total_bytes"] - memory["argument_bytes"] == memory["temp_bytes"] + memory["generated_code_bytes"]


def test_memory_of_what_the_backend_does_not_give_is_none() -> None:
    assert memory_of(None) is None
    partial = type("Stats", (), {"argument_size_in_bytes": 4, "output_size_in_bytes": 4})()
    assert memory_of(partial) is None  # a missing figure is unknown, never 0


# --- fit_warning against recorded GPU memory_stats() ------------------------------------------

# Recorded from jax.devices()[0].memory_stats() on a 16 GB GPU (V100) with
# XLA_PYTHON_CLIENT_PREALLOCATE=false, after a model's parameters were placed.
V100_STATS = {
    "num_allocs": 412, "bytes_in_use": 10_307_921_920, "peak_bytes_in_use": 11_811_160_064,
    "largest_alloc_size": 2_147_483_648, "bytes_limit": 16_967_520_256, "bytes_reserved": 0,
    "peak_bytes_reserved": 0, "largest_free_block_bytes": 0, "pool_bytes": 16_967_520_256,
    "peak_pool_bytes": 16_967_520_256,
}


class RecordedGpu:
    """Mock (no GPU here): a jax.Device's platform and memory_stats(), from a recording."""

    platform = "gpu"
    id = 0

    def __init__(self, stats: dict | None) -> None:
        self.stats = stats

    def memory_stats(self) -> dict | None:
        return self.stats


def program(temp: int, output: int, argument: int = 100 * MiB, alias: int = 0) -> dict[str, int]:
    return {"argument_bytes": argument, "output_bytes": output, "alias_bytes": alias, "temp_bytes": temp,
            "generated_code_bytes": 0, "total_bytes": argument + output - alias + temp}


def test_available_on_a_gpu_is_its_allocators_limit_less_what_it_holds() -> None:
    avail = available(RecordedGpu(V100_STATS))
    assert avail == Available(16_967_520_256, 10_307_921_920, 16_967_520_256 - 10_307_921_920,
                              "bytes_limit of memory_stats()")


def test_a_program_beyond_the_free_memory_is_warned_of_with_both_figures() -> None:
    avail = available(RecordedGpu(V100_STATS))
    text = fit_warning("jit(step)", program(temp=8 * GiB, output=1 * GiB), "cuda:0", avail)
    assert text is not None and text.startswith("jit(step) needs 9 GiB on cuda:0") and FIT_MARKER in text
    assert "temporaries 8 GiB, outputs 1 GiB" in text and "beyond its 100 MiB of inputs" in text
    assert "6.2 GiB free" in text and "15.8 GiB - 9.6 GiB in use" in text, text


def test_a_program_that_fits_is_not_warned_of() -> None:
    avail = available(RecordedGpu(V100_STATS))
    assert fit_warning("jit(step)", program(temp=5 * GiB, output=1 * GiB), "cuda:0", avail) is None


def test_a_program_over_the_limit_with_its_inputs_is_warned_of() -> None:
    # Its inputs are not on the device yet (nothing is in use): beyond them it fits, with them not.
    avail = Available(16 * GiB, 0, 16 * GiB, "bytes_limit of memory_stats()")
    text = fit_warning("jit(f)", program(temp=6 * GiB, output=0, argument=12 * GiB), "cuda:0", avail)
    assert text is not None and text.startswith("jit(f) needs 18 GiB on cuda:0 with its 12 GiB of inputs")
    assert FIT_MARKER in text


def test_unknown_memory_or_limit_gives_no_warning() -> None:
    assert available(RecordedGpu({"bytes_in_use": 5})) is None  # no bytes_limit: unknown, not 0
    assert available(RecordedGpu(None)) is None
    avail = available(RecordedGpu(V100_STATS))
    assert fit_warning("jit(f)", None, "cuda:0", avail) is None
    assert fit_warning("jit(f)", program(temp=100 * GiB, output=0), "cuda:0", None) is None


# --- available() on the host ---------------------------------------------------------------------

def fake_host(tmp_path: Path, cgroup_line: str, files: dict[str, str], available_kb: int = 8 * 2**20,
              rss_pages: int = 1000) -> tuple[str, str]:
    proc, root = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text(cgroup_line)
    (proc / "self" / "statm").write_text(f"5000 {rss_pages} 10 10 0 10 0\n")
    (proc / "meminfo").write_text(f"MemTotal: 16000000 kB\nMemAvailable: {available_kb} kB\n")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return str(proc), str(root)


def test_host_available_reads_a_cgroup_v2_limit_and_its_ancestors(tmp_path: Path) -> None:
    proc, root = fake_host(tmp_path, "0::/jobs/run1\n", {
        "cgroup.controllers": "memory pids\n",
        "jobs/memory.max": f"{3 * GiB}\n", "jobs/memory.current": f"{2 * GiB}\n", "jobs/memory.stat": "anon 1\n",
        "jobs/run1/memory.max": "max\n", "jobs/run1/memory.current": f"{GiB}\n",
        "jobs/run1/memory.stat": f"anon 5\ninactive_file {256 * MiB}\n",
    })
    avail = memory_fit.host_available(proc, root, environ={})
    # run1 has no limit of its own; its parent's 3 GiB with 2 GiB in use binds (MemAvailable is 8 GiB).
    assert avail == Available(3 * GiB, 2 * GiB, GiB, f"cgroup v2 memory.max of {root}/jobs")


def test_host_available_reads_a_cgroup_v1_limit_less_its_page_cache(tmp_path: Path) -> None:
    proc, root = fake_host(tmp_path, "4:memory:/jaxrun/run1\n3:pids:/\n", {
        "memory/memory.limit_in_bytes": "9223372036854771712\n", "memory/memory.usage_in_bytes": f"{5 * GiB}\n",
        "memory/jaxrun/run1/memory.limit_in_bytes": f"{700 * MiB}\n",
        "memory/jaxrun/run1/memory.usage_in_bytes": f"{400 * MiB}\n",
        "memory/jaxrun/run1/memory.stat": f"cache 1\ntotal_inactive_file {100 * MiB}\n",
    })
    avail = memory_fit.host_available(proc, root, environ={})
    assert avail == Available(700 * MiB, 300 * MiB, 400 * MiB, f"cgroup v1 memory.limit_in_bytes of {root}/memory/jaxrun/run1")
    # The page cache is read (memory.stat, ~0.1 ms) only where what is needed would not fit without it.
    source = f"cgroup v1 memory.limit_in_bytes of {root}/memory/jaxrun/run1"
    assert memory_fit.host_available(proc, root, environ={}, needed=200 * MiB) == Available(
        700 * MiB, 400 * MiB, 300 * MiB, source)
    assert memory_fit.host_available(proc, root, environ={}, needed=350 * MiB) == avail


def test_host_available_without_cgroup_takes_jaxruns_limit_or_memavailable(tmp_path: Path) -> None:
    proc, root = fake_host(tmp_path, "0::/\n", {}, available_kb=2**20, rss_pages=1)
    page = os.sysconf("SC_PAGE_SIZE")
    assert memory_fit.host_available(proc, root, environ={}) == Available(
        GiB + page, page, GiB, "MemAvailable of /proc/meminfo")
    limited = memory_fit.host_available(proc, root, environ={MEMORY_LIMIT_ENV: str(300 * MiB)})
    assert limited is not None and limited.limit_bytes == 300 * MiB and limited.free_bytes == 300 * MiB - page
    assert limited.source == "--memory-limit"


def test_available_on_this_cpu_is_the_host_memory() -> None:
    avail = available(jax.devices("cpu")[0])
    assert avail is not None and 0 < avail.free_bytes <= avail.limit_bytes


RECORD_AVAILABLE = """\
import jax
import jaxrun
from jaxrun.probe.memory_fit import _cgroup_limits, available

a = available(jax.devices()[0])
jaxrun.record(limit=a.limit_bytes, in_use=a.in_use_bytes, free=a.free_bytes, source=a.source,
              cgroups=[list(c) for c in _cgroup_limits("/proc", "/sys/fs/cgroup")])
"""


def _can_limit_memory() -> bool:
    group = cgroups.create(memory_limit=GiB)
    if group is None:
        return False
    held = group.memory_enforced
    group.remove()
    return bool(held)


@pytest.mark.skipif(not _can_limit_memory(), reason="jaxrun cannot create a cgroup with a memory limit here")
def test_available_under_a_real_cgroup_memory_limit(tmp_path: Path) -> None:
    script = write(tmp_path / "s", "avail.py", RECORD_AVAILABLE)
    result = execute_jax_script(script, device="cpu", memory_limit="700MiB", timeout=120)
    assert result.success, result.error_message
    recorded = result.results
    # The kernel's charge of the group, and jaxrun's --memory-limit against the RSS: the tighter is taken.
    [(limit, in_use, free, source)] = [c for c in recorded["cgroups"] if c[0] < GiB]
    assert limit == 700 * MiB and source.startswith("cgroup v") and 0 < in_use < 700 * MiB, recorded
    assert recorded["limit"] == 700 * MiB and 0 < recorded["in_use"] < 700 * MiB
    assert recorded["free"] == 700 * MiB - recorded["in_use"] <= free


def test_available_under_jaxruns_sampled_memory_limit(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(cgroups.DISABLE_ENV, "1")  # no cgroup: the limit reaches the script as a variable
    script = write(tmp_path / "s", "avail.py", RECORD_AVAILABLE)
    result = execute_jax_script(script, device="cpu", memory_limit="700MiB", timeout=120)
    assert result.success, result.error_message
    recorded = result.results
    assert recorded["limit"] == 700 * MiB and recorded["source"] == "--memory-limit", recorded
    assert 0 < recorded["in_use"] < 700 * MiB


# --- bench.fits -------------------------------------------------------------------------------------

def test_fits_a_small_program_on_cpu() -> None:
    x = jnp.ones((1024, 1024), jnp.float32)
    check = bench.fits(chained, x)
    assert check.fits is True and check.reason is None and check.program == "jit(chained)"
    assert check.memory is not None and check.memory.argument_bytes == 4 * MiB
    # x is already on the device: only the output and the temporary are still to allocate.
    assert check.resident_bytes == 4 * MiB and check.needed_bytes == check.memory.total_bytes - 4 * MiB
    assert check.free_bytes is not None and check.needed_bytes <= check.free_bytes
    assert "jit(chained) on cpu:0" in str(check) and "fits" in str(check)


def test_fits_says_no_to_a_program_bigger_than_the_machine_without_allocating_it() -> None:
    huge = jax.ShapeDtypeStruct((200_000, 200_000), jnp.float32)  # 149 GiB each: input, output, temporary
    check = bench.fits(jax.jit(chained), huge, device="cpu")
    assert check.fits is False and check.resident_bytes == 0
    assert check.memory is not None and check.memory.argument_bytes == 200_000 * 200_000 * 4
    assert check.needed_bytes == check.memory.total_bytes > check.free_bytes
    assert "would likely run out of memory" in check.reason and "does not fit" in str(check)


def test_fits_takes_numpy_arrays_and_keywords_and_names_a_bad_device() -> None:
    check = bench.fits(lambda a, *, b: a + b, np.ones(8, np.float32), b=np.ones(8, np.float32),
                       device=jax.devices()[0])
    assert check.fits is True and check.resident_bytes == 0  # host arrays are not on the device yet
    with pytest.raises(UsageError, match="cpu, gpu"):
        bench.fits(chained, SQUARE, device="gpus")
    with pytest.raises(UsageError, match="no gpu device here"):
        bench.fits(chained, SQUARE, device="gpu")


# --- the out-of-memory hint -----------------------------------------------------------------------

WARNING = ("jit(step) needs 9 GiB on cuda:0 (temporaries 8 GiB, outputs 1 GiB; beyond its 100 MiB of inputs) "
           f"but the device has 6.2 GiB free (...): it {FIT_MARKER}")


def test_an_out_of_memory_hint_names_the_fit_warnings() -> None:
    oom = classification("out_of_memory", "RESOURCE_EXHAUSTED: Out of memory")
    hint = _hint(oom, ["some other warning", WARNING])
    assert hint == f"jaxrun warned at compile time: {WARNING}. {oom.hint[0].upper()}{oom.hint[1:]}"
    assert _hint(oom, ["some other warning"]) == oom.hint
    other = classification("script_error", "ValueError: no")
    assert _hint(other, [WARNING]) == other.hint  # evidence only for an out-of-memory failure
    assert _hint(None, [WARNING]) is None


RUNS_OUT = """\
import jax, jax.numpy as jnp

def grow(x):
    return jnp.concatenate([x, x * 2, x * 3, x * 4])  # 4 x its input, written in one pass

x = jnp.ones((8192, 8192), jnp.float32)  # 256 MiB
jax.jit(grow)(x).block_until_ready()
print("never reached")
"""


def test_a_real_out_of_memory_failure_says_what_jaxrun_foresaw(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(cgroups.DISABLE_ENV, "1")  # jaxrun's sampled limit: the same everywhere
    script = write(tmp_path / "s", "grow.py", RUNS_OUT)
    result = execute_jax_script(script, device="cpu", memory_limit="700MiB", timeout=120)
    assert not result.success and result.error_class == "out_of_memory", (result.error_message, result.warnings)
    [warning] = [w for w in result.warnings if FIT_MARKER in w]
    assert warning.startswith("jit(grow) needs 1 GiB on cpu:0 (outputs 1 GiB; beyond its 256 MiB of inputs)")
    assert result.hint.startswith(f"jaxrun warned at compile time: {warning}")


def test_a_program_that_fits_warns_of_nothing(tmp_path: Path) -> None:
    script = write(tmp_path / "s", "small.py", "import jax, jax.numpy as jnp\njax.jit(lambda x: x @ x)(jnp.ones((512, 512)))\n")
    result = execute_jax_script(script, device="cpu", memory_limit="2GB", timeout=120)
    assert result.success and not [w for w in result.warnings if FIT_MARKER in w], result.warnings
    assert result.compiles["jit(<lambda>)"].memory.argument_bytes == 512 * 512 * 4
