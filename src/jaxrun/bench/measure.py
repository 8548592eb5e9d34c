"""``measure``: one jitted function, from tracing to steady state, with XLA's cost and memory figures.

The phases are timed separately through JAX's ahead-of-time API (``jit(fn).trace(...)``,
``.lower()``, ``.compile()``), because "the first call was slow" mixes three different costs
that have different cures (tracing: Python work in the function; lowering: program size;
compiling: XLA). The steady-state calls then go through the same ``jax.jit`` object, whose cache
the AOT compile filled, on the C++ fast path a training loop uses; a compilation counter proves
that no call compiled again.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from jaxrun.bench._compiles import CompileCounter, counting
from jaxrun.bench._cost import cost_figures, program_cost  # noqa: F401  (cost_figures: importable from here too)
from jaxrun.bench._energy import ProgramEnergy, program_energy
from jaxrun.bench._timing import (
    _run_sample,
    budget_of,
    clean_warnings,
    device_label,
    device_of,
    sample,
    timed_call,
)
from jaxrun.bench.records import DevicePeaks, Measurement
from jaxrun.bench.roofline import compute_dtype, device_peaks, roofline
from jaxrun.core.defaults import (
    DEFAULT_MAX_SAMPLES,
    DEFAULT_MIN_SAMPLES,
    DEFAULT_TIME_BUDGET,
)
from jaxrun.core.formatting import plural
from jaxrun.errors import UsageError
from jaxrun.judge.stats import describe

__all__ = ["measure"]

_remeasured: dict[str, int] = {}  # device -> times measure() refreshed its peaks in this process
_MAX_REMEASURE = 2


def _is_jitted(fn: Any) -> bool:
    return callable(fn) and all(hasattr(fn, a) for a in ("trace", "lower", "eval_shape"))


def memory_figures(analysis: Any) -> dict[str, int | None]:
    """argument / output / temp / generated-code bytes from ``compiled.memory_analysis()``."""
    fields = {
        "argument_bytes": "argument_size_in_bytes",
        "output_bytes": "output_size_in_bytes",
        "temp_bytes": "temp_size_in_bytes",
        "generated_code_bytes": "generated_code_size_in_bytes",
    }
    out: dict[str, int | None] = {}
    for key, attr in fields.items():
        value = getattr(analysis, attr, None) if analysis is not None else None
        out[key] = int(value) if isinstance(value, (int, float)) and value >= 0 else None
    # The CPU backend reports 0 bytes of generated code for every executable: not a measurement.
    if out["generated_code_bytes"] == 0:
        out["generated_code_bytes"] = None
    return out


def _safe(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception:  # not implemented on this backend / version: unknown
        return None


def program_devices(compiled: Any) -> int:
    """How many devices a compiled program spans (from its input and output shardings)."""
    devices: set[Any] = set()
    for attr in ("input_shardings", "output_shardings"):
        try:
            shardings = getattr(compiled, attr)
        except Exception:
            continue
        import jax

        for sharding in jax.tree_util.tree_leaves(shardings):
            devices |= set(getattr(sharding, "device_set", ()) or ())
    return max(1, len(devices))


def scaled_peaks(peaks: DevicePeaks, n_devices: int) -> DevicePeaks:
    """Peaks of n accelerators working together; simulated CPU devices share one host's peak."""
    if n_devices <= 1 or peaks.platform == "cpu":
        return peaks
    update = {}
    for field_name in ("flops_per_s_float32", "flops_per_s_bfloat16", "bytes_per_s"):
        value = getattr(peaks, field_name, None)
        if value is not None:
            update[field_name] = value * n_devices
    return peaks.model_copy(update=update)


def measure(
    fn: Callable[..., Any],
    *args: Any,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    time_budget: float | None = None,
    samples: int | None = None,
    min_samples: int = DEFAULT_MIN_SAMPLES,
    max_samples: int = DEFAULT_MAX_SAMPLES,
    min_time: float | None = None,
    warmup_calls: int = 1,
    name: str | None = None,
    peaks: bool | DevicePeaks = True,
    energy: bool = True,
    **kwargs: Any,
) -> Measurement:
    """Time ``fn(*args, **kwargs)`` under ``jax.jit``: trace, lower, compile, first call, steady state.

    >>> import jax.numpy as jnp
    >>> from jaxrun.bench import measure
    >>> def matmul(a, b):
    ...     return a @ b
    >>> x = jnp.ones((1024, 1024), jnp.float32)
    >>> m = measure(matmul, x, x)
    >>> m.flops == 2 * 1024**3, m.compile_time > 0, m.steady.ci_low <= m.median <= m.steady.ci_high
    (True, True, True)
    >>> 0 < m.fraction_of_peak_flops, m.bound
    (True, 'compute')

    ``fn`` may take and return pytrees. Pass ``static_argnums`` / ``static_argnames`` as to
    ``jax.jit``, or pass an already jitted function (then give them to ``jax.jit``, not here).
    Steady-state timing is calibrated to ``time_budget`` seconds (default 1 s, calibration
    included; compiling and warm-up are not), as timeit's autorange and pytest-benchmark do: a
    sample is ``inner_loops`` calls (calibrated so it lasts >= 1 ms) ended by
    ``jax.block_until_ready``; one sample is timed, then as many are taken as the budget holds, at
    least ``min_samples`` (10: it wins over the budget for a slow function) and at most
    ``max_samples``. ``samples=N`` takes exactly N instead. The result's ``samples`` holds seconds
    per call; ``num_samples``, ``num_samples_from``, ``time_budget`` and ``sampling_time`` say how
    many were taken, why, and in how long. ``min_time`` is the older name of ``time_budget``.
    FLOPs, bytes accessed and transcendentals count every loop iteration (XLA's own analysis counts
    a loop body once): ``cost_source`` says how they were had, and they are None where a loop's trip
    count depends on the data (see ``_cost``). ``peaks=True`` compares against the device's
    measured peaks (measured once, then cached; pass a :class:`~jaxrun.results.models.DevicePeaks` to
    reuse one, ``False`` to skip the roofline). ``energy=True`` reads the device's energy counter
    around at least half a second of steady calls (``energy_per_call``, ``power``; null with
    ``energy_reason`` where the device has none jaxrun can read: no cost then).
    Keyword arguments other than the options above are passed to ``fn``.
    """
    import jax

    if not callable(fn):
        raise UsageError(f"measure needs a function as first argument, got {type(fn).__name__}: {fn!r}")
    if warmup_calls < 0:
        raise UsageError(f"warmup_calls must be >= 0, got {warmup_calls}")
    budget = budget_of(time_budget, min_time, DEFAULT_TIME_BUDGET)
    if _is_jitted(fn):
        if static_argnums or static_argnames:
            raise UsageError(
                "fn is already jitted: give static_argnums/static_argnames to jax.jit, not to measure "
                "(or pass the plain function)"
            )
        jitted = fn
    else:
        jitted = jax.jit(fn, static_argnums=static_argnums, static_argnames=static_argnames)
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    warnings: list[str] = []
    device = device_of((args, kwargs))

    # Ahead-of-time phases. The counter tells whether XLA really compiled or hit a cache.
    aot = CompileCounter()
    with counting(aot):
        start = time.perf_counter()
        traced = jitted.trace(*args, **kwargs)
        t_traced = time.perf_counter()
        lowered = traced.lower()
        t_lowered = time.perf_counter()
        compiled = lowered.compile()
        t_compiled = time.perf_counter()
    compile_cached = not aot.backend_compiles or aot.cache_loads > 0
    if compile_cached:
        warnings.append(
            "XLA did not compile: the executable came from JAX's in-process or persistent cache (this "
            "function was compiled before with these argument types), so compile_time is not a cold "
            "compile; measure in a fresh process for that"
        )

    def call() -> Any:
        return jitted(*args, **kwargs)

    # First call, then warm-up, then timing: any compilation here would be timed as "steady".
    during = CompileCounter()
    with counting(during):
        first_call, out = timed_call(call)
        warm: float | None = None  # seconds of the last warm-up call: spares calibrating a slow function
        for _ in range(warmup_calls):
            warm, _ = timed_call(call)
        timing = sample([call], time_budget=budget, samples=samples, min_samples=min_samples,
                        max_samples=max_samples, one_call=None if warm is None else [warm])
        (sampled,) = timing.timed
        used = (program_energy(call, min(sampled.samples) if sampled.samples else None, device, run=_run_sample)
                if energy else ProgramEnergy(None, None, 0, None, "not asked for (energy=False)"))
    if during.total:
        warnings.append(
            f"{plural(during.total, 'compilation')} during the timed calls ({during.counts}): the jit cache did "
            "not reuse the AOT executable; steady-state samples may include compile time"
        )
    steady = describe(sampled.samples)
    steady.warnings = clean_warnings(steady.warnings)

    memory = memory_figures(_safe(compiled.memory_analysis))
    n_devices = program_devices(compiled)
    program = program_cost(compiled, traced, memory, device)
    cost, cost_source = program.figures, program.source
    warnings += program.warnings
    if n_devices > 1 and cost_source in ("xla", "xla_trip_counts"):
        # XLA's cost analysis of an SPMD program describes one partition; the program does n.
        cost = {k: (v * n_devices if v is not None else None) for k, v in cost.items()}
    dtype = compute_dtype((args, kwargs))
    peak_figures: dict[str, Any] = {}
    if peaks is not False:
        device_peak = peaks if isinstance(peaks, DevicePeaks) else device_peaks(device)
        device_peak = scaled_peaks(device_peak, n_devices)
        if n_devices > 1 and device_peak.platform == "cpu":
            warnings.append(
                f"{n_devices} CPU devices share the host's cores: the fractions are against the "
                f"host's measured peak, not {n_devices} times it"
            )
        fastest = min(sampled.samples) if sampled.samples else None

        def beats(measured: DevicePeaks) -> bool:
            peak = measured.flops_per_s(dtype)
            return bool(cost["flops"] and fastest and peak and cost["flops"] / fastest > peak)

        key = device_label(device)
        while peaks is True and beats(device_peak) and _remeasured.get(key, 0) < _MAX_REMEASURE:
            # The function beat the cached peak: that peak was measured under heavier load. Peaks
            # only go up when measured again, so this converges; a bounded number of times per
            # device and process, so a function that truly beats every matmul costs little (the
            # roofline then takes its fastest call as the peak, and says so).
            _remeasured[key] = _remeasured.get(key, 0) + 1
            device_peak = scaled_peaks(device_peaks(device, refresh=True), n_devices)
            if not any("measured again" in w for w in warnings):
                warnings.append("this function beat the cached FLOP/s peak, so the device peaks were measured again")
        line = roofline(cost["flops"], cost["bytes_accessed"], steady.median, device_peak, dtype, best_seconds=fastest)
        warnings += line.warnings
        peak_figures = line.model_dump(exclude={"dtype", "warnings"})
        peak_figures["peak_dtype"] = line.dtype
    elif cost["flops"] is not None and steady.median:
        peak_figures = {
            "achieved_flops_per_s": cost["flops"] / steady.median,
            "achieved_bytes_per_s": (cost["bytes_accessed"] / steady.median) if cost["bytes_accessed"] is not None else None,
        }
    del out
    return Measurement(
        name=label,
        device=device_label(device),
        jax_version=jax.__version__,
        trace_time=t_traced - start,
        lower_time=t_lowered - t_traced,
        compile_time=t_compiled - t_lowered,
        compile_cached=compile_cached,
        num_devices=n_devices,
        first_call=first_call,
        warmup_calls=warmup_calls,
        inner_loops=sampled.inner,
        num_samples=timing.rounds,
        num_samples_from=timing.rounds_from,
        time_budget=timing.time_budget,
        sampling_time=timing.elapsed,
        samples=sampled.samples,
        steady=steady,
        compiles_during_timing=during.total,
        **cost,
        cost_source=cost_source,
        **memory,
        **peak_figures,
        energy_per_call=used.joules_per_call,
        power=used.watts,
        energy_calls=used.calls,
        energy_source=used.source,
        energy_reason=used.reason,
        warnings=warnings,
    )
