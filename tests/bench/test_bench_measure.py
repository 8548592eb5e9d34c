"""jaxrun.bench.measure and the roofline, on real JAX (CPU): the issue's done-when matmul and more."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrun import bench
from jaxrun.bench.measure import cost_figures, memory_figures
from jaxrun.bench.records import DevicePeaks, Measurement
from jaxrun.errors import UsageError


@pytest.fixture(scope="module")
def peaks(jaxrun_cache_dir, tmp_path_factory) -> DevicePeaks:
    # Measured once for the test session (the cache folder is shared by conftest's fixture).
    mp = pytest.MonkeyPatch()
    mp.setenv("JAXRUN_CACHE_DIR", str(jaxrun_cache_dir))
    try:
        return bench.device_peaks()
    finally:
        mp.undo()


def test_import_jaxrun_and_bench_does_not_import_jax() -> None:
    code = "import sys, jaxrun; jaxrun.bench; import jaxrun.pytest_plugin; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_device_peaks_are_measured_and_cached(peaks: DevicePeaks, jaxrun_cache_dir) -> None:
    assert peaks.platform == "cpu"
    assert peaks.flops_per_s_float32 and peaks.flops_per_s_float32 > 1e8
    assert peaks.flops_per_s_bfloat16 and peaks.flops_per_s_bfloat16 > 1e8
    assert peaks.bytes_per_s and peaks.bytes_per_s > 1e8
    kinds = {(t.kind, t.dtype) for t in peaks.trials}
    assert {("matmul", "float32"), ("matmul", "bfloat16"), ("copy", "float32")} <= kinds
    best32 = max(t.flops_per_s for t in peaks.trials if t.kind == "matmul" and t.dtype == "float32")
    assert peaks.flops_per_s_float32 == pytest.approx(best32)
    files = list(jaxrun_cache_dir.glob("device_peaks_*.json"))
    assert len(files) == 1
    assert DevicePeaks.model_validate(json.loads(files[0].read_text())).flops_per_s_float32 > 0
    assert bench.device_peaks() is not None  # second call reads the cache, no re-measurement
    assert peaks.flops_per_s("bfloat16") == peaks.flops_per_s_bfloat16
    assert peaks.flops_per_s("float64") == peaks.flops_per_s_float32


def test_matmul_1024_done_when(peaks: DevicePeaks) -> None:
    def matmul(a, b):
        return a @ b

    key_a, key_b = jax.random.split(jax.random.key(1))
    a = jax.random.normal(key_a, (1024, 1024), jnp.float32)
    b = jax.random.normal(key_b, (1024, 1024), jnp.float32)
    m = bench.measure(matmul, a, b)

    assert isinstance(m, Measurement) and m.name == "matmul"
    assert m.device == "cpu:0 (cpu)"
    assert m.trace_time > 0 and m.lower_time > 0 and m.compile_time > 0
    assert m.compile_cached is False
    assert m.first_call > 0
    s = m.steady
    assert s.n == len(m.samples) >= 5
    assert s.ci_low is not None and s.ci_low <= s.median <= s.ci_high
    assert m.median == s.median
    assert m.compiles_during_timing == 0
    assert m.flops == 2 * 1024**3 == 2147483648
    assert m.bytes_accessed == 3 * 1024 * 1024 * 4  # two operands read, one result written
    assert m.argument_bytes == 2 * 1024 * 1024 * 4 and m.output_bytes == 1024 * 1024 * 4
    assert m.peak_dtype == "float32"
    assert m.achieved_flops_per_s == pytest.approx(m.flops / s.median)
    assert 0 < m.fraction_of_peak_flops < 1, m.warnings
    assert m.peak_flops_per_s >= peaks.flops_per_s_float32  # peaks only ever go up
    assert m.arithmetic_intensity == pytest.approx(m.flops / m.bytes_accessed)
    assert m.ridge_point == pytest.approx(m.peak_flops_per_s / m.peak_bytes_per_s)
    assert m.bound == ("compute" if m.arithmetic_intensity >= m.ridge_point else "memory")
    text = str(m)
    assert "compile" in text and "of peak float32 FLOP/s" in text
    # The model is a mapping too, and round-trips through JSON.
    assert m["flops"] == m.flops
    assert Measurement.model_validate_json(m.model_dump_json()) == m


def test_second_measure_of_same_function_flags_cached_compile() -> None:
    def scale(x):
        return x * 3.0

    x = jnp.ones(64)
    bench.measure(scale, x, peaks=False, min_time=0.01)
    again = bench.measure(scale, x, peaks=False, min_time=0.01)
    assert again.compile_cached is True
    assert any("did not compile" in w for w in again.warnings)


def test_pytree_in_and_out_and_keyword_arguments() -> None:
    def layer(params, x, *, scale=1.0):
        y = (x @ params["w"] + params["b"]) * scale
        return {"y": y, "stats": (jnp.mean(y), jnp.std(y))}

    params = {"w": jnp.ones((32, 16)), "b": jnp.zeros(16)}
    x = jnp.ones((8, 32))
    m = bench.measure(layer, params, x, scale=jnp.float32(0.5), min_time=0.02, peaks=False)
    assert m.steady.median > 0
    assert m.flops is not None and m.flops >= 2 * 8 * 32 * 16
    assert m.argument_bytes == (32 * 16 + 16 + 8 * 32 + 1) * 4
    assert m.output_bytes >= 8 * 16 * 4
    assert m.fraction_of_peak_flops is None and m.peak_flops_per_s is None  # peaks=False
    assert m.achieved_flops_per_s == pytest.approx(m.flops / m.steady.median)


def test_static_arguments_by_number_and_by_name() -> None:
    def power(x, n, *, mode):
        out = x
        for _ in range(n - 1):
            out = out * x
        return out if mode == "plain" else -out

    x = jnp.full(16, 2.0)
    m = bench.measure(power, x, 3, mode="neg", static_argnums=1, static_argnames="mode", min_time=0.02, peaks=False)
    assert m.compiles_during_timing == 0
    assert m.flops == 2 * 16 + 16  # two multiplies and a negation per element

    jitted = jax.jit(power, static_argnums=1, static_argnames="mode")
    m2 = bench.measure(jitted, x, 4, mode="plain", min_time=0.02, peaks=False)
    assert m2.compiles_during_timing == 0 and m2.flops == 3 * 16

    with pytest.raises(UsageError, match="already jitted"):
        bench.measure(jitted, x, 4, mode="plain", static_argnums=1)


def test_cost_unavailable_is_none_not_zero(peaks: DevicePeaks) -> None:
    # XLA cannot see into a host callback: its cost analysis reports -1, which is "unknown".
    def through_host(x):
        return jax.pure_callback(lambda v: np.asarray(v) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    m = bench.measure(through_host, jnp.ones(128), min_time=0.02, peaks=peaks)
    assert m.flops is None and m.bytes_accessed is None and m.transcendentals is None
    assert m.achieved_flops_per_s is None and m.fraction_of_peak_flops is None
    assert m.arithmetic_intensity is None and m.bound is None
    assert m.peak_flops_per_s == peaks.flops_per_s_float32  # the peak itself is still known
    assert any("host callback" in w for w in m.warnings)


def test_cost_and_memory_parsers() -> None:
    assert cost_figures(None) == {"flops": None, "bytes_accessed": None, "transcendentals": None}
    assert cost_figures([]) == cost_figures(None) == cost_figures({})
    # Older JAX: one dict per computation.
    assert cost_figures([{"flops": 10.0, "bytes accessed": 4.0}, {"flops": 5.0, "transcendentals": 1.0}]) == {
        "flops": 15.0, "bytes_accessed": 4.0, "transcendentals": 1.0,
    }
    # XLA omits zero properties from a valid analysis.
    assert cost_figures({"flops": 8.0, "bytes accessed": 64.0})["transcendentals"] == 0.0
    assert cost_figures({"flops": -1.0, "bytes accessed": -1.0})["flops"] is None
    assert memory_figures(None) == dict.fromkeys(["argument_bytes", "output_bytes", "temp_bytes", "generated_code_bytes"])


def test_bfloat16_inputs_use_the_bfloat16_peak(peaks: DevicePeaks) -> None:
    x = jnp.ones((256, 256), jnp.bfloat16)
    m = bench.measure(jnp.matmul, x, x, min_time=0.05, peaks=peaks)
    assert m.peak_dtype == "bfloat16"
    # The bfloat16 matmul peak, or this function's fastest call where that beat it (a loaded machine).
    if m.peak_flops_source == "this function's fastest call":
        assert m.peak_flops_per_s > peaks.flops_per_s_bfloat16
    else:
        assert m.peak_flops_per_s == peaks.flops_per_s_bfloat16 and "bfloat16, measured" in m.peak_flops_source
    # XLA:CPU multiplies bfloat16 in float32: the conversions add a FLOP per element converted.
    assert 2 * 256**3 <= m.flops <= 2 * 256**3 + 4 * 256 * 256


def test_roofline_model() -> None:
    peaks = DevicePeaks(platform="cpu", device_kind="cpu", device_count=1, jax_version="0", host="h",
                        flops_per_s_float32=1e11, flops_per_s_bfloat16=2e11, bytes_per_s=1e10, measured_at="now")
    # A memory-bound elementwise op: 1 FLOP per 8 bytes is far below the ridge (10 FLOP/byte).
    r = bench.roofline(1e6, 8e6, 1e-3, peaks)
    assert r.arithmetic_intensity == pytest.approx(0.125) and r.ridge_point == pytest.approx(10.0)
    assert r.bound == "memory"
    assert r.fraction_of_peak_bandwidth == pytest.approx(0.8) and r.fraction_of_peak_flops == pytest.approx(0.01)
    compute = bench.roofline(2e9, 1e7, 0.01, peaks, "bfloat16")
    assert compute.bound == "compute" and compute.peak_flops_per_s == 2e11
    assert compute.fraction_of_peak_flops == pytest.approx(1.0)
    assert compute.peak_flops_source == "given with the device peaks (no trial recorded)"
    # Faster than the peak given: the peak is the fastest call's rate, said so; never a fraction > 1.
    over = bench.roofline(4e9, 1e7, 0.01, peaks, best_seconds=0.008)
    assert over.peak_flops_per_s == pytest.approx(5e11) and over.peak_flops_source == "this function's fastest call"
    assert over.fraction_of_peak_flops == pytest.approx(0.8)  # the median call against the fastest
    assert any("4.00x the measured float32 matmul peak" in w or "5.00x the measured float32 matmul peak" in w
               for w in over.warnings), over.warnings
    assert over.peak_bandwidth_source == "given with the device peaks (no trial recorded)"  # 1.25e9 B/s < 1e10
    unknown = bench.roofline(None, None, 0.01, peaks)
    assert unknown.achieved_flops_per_s is None and unknown.bound is None and unknown.fraction_of_peak_flops is None
    no_peaks = bench.roofline(1e6, 1e6, 0.01, None)
    assert no_peaks.achieved_flops_per_s == pytest.approx(1e8) and no_peaks.fraction_of_peak_flops is None


CACHE_RESIDENT_LOOP = 1000  # x * a + b over 16 KiB, a thousand times: bytes that never leave the caches


def _roofline_workloads() -> list[tuple[str, object, tuple]]:
    loop = lambda v: jax.lax.fori_loop(0, CACHE_RESIDENT_LOOP, lambda i, w: w * 1.0001 + 0.5, v)  # noqa: E731
    return [
        ("matmul 256", jnp.matmul, (jnp.ones((256, 256)),) * 2),
        ("matmul 1024", jnp.matmul, (jnp.ones((1024, 1024)),) * 2),
        ("bfloat16 matmul", jnp.matmul, (jnp.ones((512, 512), jnp.bfloat16),) * 2),
        ("elementwise in cache", loop, (jnp.ones(4096),)),
        ("elementwise 64 MiB", lambda v: v * 2.0 + 1.0, (jnp.ones(16 * 2**20),)),
    ]


def _no_fraction_above_one(measured: list[Measurement]) -> None:
    fractions = {m.name: (m.fraction_of_peak_flops, m.fraction_of_peak_bandwidth) for m in measured}
    assert all(f is not None and 0 < f <= 1 for pair in fractions.values() for f in pair), fractions
    for m in measured:
        for source, what in ((m.peak_flops_source, "matmul"), (m.peak_bandwidth_source, "copy")):
            # The peak says what it is: a measured kernel, or the function's own fastest call (warned).
            assert source == "this function's fastest call" or (source.startswith(what) and source.endswith("measured"))
            if source == "this function's fastest call":
                assert any("the fastest call" in w for w in m.warnings), m.warnings


@pytest.mark.slow
@pytest.mark.parametrize("stale", [False, True], ids=["measured peaks", "peaks measured under load"])
def test_no_fraction_of_a_peak_exceeds_one(peaks: DevicePeaks, stale: bool) -> None:
    """Real functions on this CPU, against the measured peaks and against peaks 100 times too low
    (a cache written while the machine was loaded): every fraction is at most 1, and each peak
    says whether it is a measured kernel or the function's own fastest call. A loop whose data
    stays in the caches moves more bytes/s than the 256 MiB copy ever can."""
    given = peaks
    if stale:
        given = peaks.model_copy(update={key: getattr(peaks, key) / 100 for key in (
            "flops_per_s_float32", "flops_per_s_bfloat16", "bytes_per_s")})
    measured = [bench.measure(fn, *args, time_budget=0.1, min_samples=5, peaks=given, name=name)
                for name, fn, args in _roofline_workloads()]
    # peaks=True: the device's cached peaks, measured again when beaten.
    measured.append(bench.measure(_roofline_workloads()[3][1], jnp.ones(4096), time_budget=0.1, min_samples=5,
                                  name="elementwise in cache, cached peaks"))
    _no_fraction_above_one(measured)
    assert measured[-1].peak_bandwidth_source == "this function's fastest call"
    if stale:  # a matmul beats a hundredth of the matmul peak
        assert all(m.peak_flops_source == "this function's fastest call" for m in measured if "matmul" in m.name)


def test_measure_rejects_bad_input() -> None:
    with pytest.raises(UsageError, match="needs a function"):
        bench.measure(42)
    with pytest.raises(ValueError, match="min_samples"):
        bench.measure(functools.partial(jnp.add, 1.0), jnp.ones(3), min_samples=10, max_samples=5, peaks=False)


@pytest.mark.slow
def test_copy_bandwidth_is_within_2x_of_numpys_best_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The outside reading: numpy's in-place copy of the same 256 MiB on the same machine. A fresh
    output array per call (the old method) measured about 3 GB/s against numpy's 10-35. Both are
    bests over the same seconds: numpy's copies for a second before and after jaxrun measures its
    peaks afresh (its own cache folder), each given the same chance at the machine's quiet moments
    (under a loaded test run, numpy's best of 15 copies once read 8.6 GB/s against a peak of 44
    cached from a quieter moment)."""
    import time

    source = np.ones(64 * 2**20, np.float32)
    target = np.empty_like(source)

    def numpy_best(seconds: float = 1.0) -> float:
        best, end, copies = float("inf"), time.perf_counter() + seconds, 0
        while copies < 15 or time.perf_counter() < end:
            started = time.perf_counter()
            np.copyto(target, source)
            best = min(best, time.perf_counter() - started)
            copies += 1
        return 2 * source.nbytes / best

    before = numpy_best()
    monkeypatch.setenv("JAXRUN_CACHE_DIR", str(tmp_path))
    peaks = bench.device_peaks(refresh=True)
    numpy_bytes_per_s = max(before, numpy_best())
    assert peaks.bytes_per_s >= numpy_bytes_per_s / 2, (peaks.bytes_per_s / 1e9, numpy_bytes_per_s / 1e9)
    assert peaks.bytes_per_s <= numpy_bytes_per_s * 4, (peaks.bytes_per_s / 1e9, numpy_bytes_per_s / 1e9)


def test_flops_are_counted_from_the_jaxpr_where_xla_reports_none(monkeypatch, peaks: DevicePeaks) -> None:
    # On NVIDIA GPUs JAX's compiled cost analysis says flops -1 (measured on an H100, jax 0.11);
    # this CPU has a real analysis, so the test takes it away as the GPU does (no GPU here).
    from jaxrun.bench._flops import jaxpr_cost

    cost_module = sys.modules["jaxrun.probe.loop_costs"]  # where XLA's figures are read

    n = 256
    a = jnp.ones((n, n), jnp.float32)
    real = bench.measure(lambda x: x @ x, a, min_time=0.02, peaks=peaks)
    monkeypatch.setattr(cost_module, "cost_figures", lambda cost: cost_figures({"flops": -1.0, "bytes accessed": -1.0}))
    counted = bench.measure(lambda x: x @ x, a, min_time=0.02, peaks=peaks)
    assert real.cost_source == "xla" and counted.cost_source == "jaxpr"
    assert counted.flops == real.flops == 2 * n**3  # exact for a matrix product
    assert counted.bytes_accessed == 2 * n * n * 4  # the argument and the output
    assert counted.achieved_flops_per_s is not None and counted.fraction_of_peak_flops is not None
    assert any("counted from the jaxpr" in w for w in counted.warnings)
    # A scan's body counts `length` times (XLA's own analysis counts a loop body once).
    scan = jax.jit(lambda x: jax.lax.scan(lambda c, _: (c @ c, None), x, None, length=5)[0]).trace(jnp.ones((16, 16)))
    assert jaxpr_cost(scan.jaxpr).flops == 5 * 2 * 16**3


# --- how many samples: a time budget, calibrated ------------------------------------------------


def _sleepy(seconds: float):
    """A function whose every call lasts at least ``seconds`` (a host sleep), so that sample counts
    can be bounded without timing anything in the test."""
    import time

    def sleepy(x):
        return jax.pure_callback(lambda v: (time.sleep(seconds), v)[1], jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    return sleepy


def test_default_sample_count_never_draws_a_too_few_samples_warning() -> None:
    # The defaults' own minimum gives a 95% CI of the median inside [min, max]: no warning.
    from jaxrun.core.defaults import DEFAULT_MIN_SAMPLES
    from jaxrun.judge.stats import describe

    stats = describe([1.0 + 0.01 * i for i in range(DEFAULT_MIN_SAMPLES)])
    assert stats.ci_coverage >= 0.95 and stats.ci_low > stats.min and stats.ci_high < stats.max
    assert not any("too few" in w for w in stats.warnings)


def test_measure_fills_its_default_time_budget_without_a_too_few_samples_warning() -> None:
    # 50 ms a call: the old default (0.2 s, at least 5 samples) took 5 and warned that 5 are too few.
    m = bench.measure(_sleepy(0.05), jnp.ones(4), peaks=False)
    assert not any("too few" in w for w in m.steady.warnings + m.warnings), m.steady.warnings
    from jaxrun.core.defaults import DEFAULT_MIN_SAMPLES, DEFAULT_TIME_BUDGET

    assert m.time_budget == DEFAULT_TIME_BUDGET == 1.0
    assert m.num_samples == len(m.samples) == m.steady.n
    assert m.inner_loops == 1  # a call lasts longer than a sample must: no calibration loops
    # Every call sleeps 50 ms, so the budget holds at most 1 s / 50 ms = 20 samples.
    assert DEFAULT_MIN_SAMPLES <= m.num_samples <= 20
    assert m.num_samples_from in ("time_budget", "min_samples")
    assert m.sampling_time is not None and m.sampling_time > 0


def test_a_fast_function_is_sampled_within_its_budget() -> None:
    # Each sample is calibrated to last >= max(1 ms, budget / max_samples): at most budget / 1 ms
    # samples, each of many calls.
    m = bench.measure(jnp.sin, jnp.ones(8), time_budget=0.05, peaks=False)
    assert m.time_budget == 0.05
    assert 10 <= m.num_samples == len(m.samples) <= 50
    assert m.inner_loops > 1
    assert not any("too few" in w for w in m.steady.warnings + m.warnings)


def test_a_slow_function_takes_the_minimum_and_explicit_samples_win() -> None:
    # 30 ms a call against a 50 ms budget: one sample fits, the minimum (10) is taken all the same.
    slow = _sleepy(0.03)
    m = bench.measure(slow, jnp.ones(4), time_budget=0.05, peaks=False)
    assert (m.num_samples, m.num_samples_from) == (10, "min_samples") and len(m.samples) == 10
    few = bench.measure(slow, jnp.ones(4), time_budget=0.05, min_samples=6, peaks=False)
    assert (few.num_samples, few.num_samples_from) == (6, "min_samples")
    # An explicit count wins over the budget, both ways.
    exact = bench.measure(slow, jnp.ones(4), samples=3, peaks=False)
    assert (exact.num_samples, exact.num_samples_from, len(exact.samples)) == (3, "samples", 3)
    # The older name of the budget still works; both at once is a usage error.
    old = bench.measure(jnp.cos, jnp.ones(8), min_time=0.02, peaks=False)
    assert old.time_budget == 0.02
    with pytest.raises(UsageError, match="time_budget or min_time"):
        bench.measure(jnp.cos, jnp.ones(8), min_time=0.02, time_budget=0.1, peaks=False)
    with pytest.raises(UsageError, match="time_budget must be a number of seconds > 0, got 0"):
        bench.measure(jnp.cos, jnp.ones(8), time_budget=0, peaks=False)
