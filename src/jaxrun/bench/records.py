"""Results of jaxrun.bench, which times jitted functions inside the caller's process, and the
file the pytest plugin writes. Quantities that XLA cannot tell on this platform (cost analysis of a
host callback, say) are None. Each writes itself as plain text (``str()``), with bench/format.py's
helpers."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from jaxrun.bench.format import fmt_bytes, fmt_rate, fmt_seconds, text_table
from jaxrun.core.formatting import fmt_kind, plural
from jaxrun.results.models import (
    SCHEMA_VERSION,
    MappingModel,
    ProgramMemory,
    ScriptComparison,
    Statistics,
)


class PeakTrial(MappingModel):
    """One measurement behind a device peak (a matmul size and dtype, or the copy)."""

    kind: Literal["matmul", "copy"]
    dtype: str
    size: Annotated[int, Meta(description="Matrix side for a matmul, element count for the copy")]
    best_seconds: Annotated[float, Meta(description="Fastest per-call time of the samples")]
    median_seconds: float
    flops_per_s: float | None = None
    bytes_per_s: float | None = None


class DevicePeaks(MappingModel):
    """Measured (not datasheet) peaks of one device, cached per device kind and JAX version."""

    schema_version: int = SCHEMA_VERSION
    platform: str
    device_kind: str
    device_count: int
    jax_version: str
    host: str
    flops_per_s_float32: Annotated[float | None, Meta(description=(
        "Best matmul FLOP/s in float32 (the fastest "
        "call of the fastest size)"
    ))] = None
    flops_per_s_bfloat16: Annotated[float | None, Meta(description="Best matmul FLOP/s in bfloat16")] = None
    bytes_per_s: Annotated[float | None, Meta(description=(
        "Copy bandwidth, bytes read + written per second: x + 1 over 256 MiB of float32, "
        "in place (the input donated, so no fresh output is allocated inside the timed loop)"
    ))] = None
    trials: list[PeakTrial] = []
    measured_at: str
    measure_seconds: Annotated[float | None, Meta(description="Wall time spent measuring these peaks")] = None

    def flops_per_s(self, dtype: str) -> float | None:
        """The peak for ``dtype``: bfloat16/float16 use the bfloat16 peak, anything else float32."""
        return self.flops_per_s_bfloat16 if dtype in ("bfloat16", "float16") else self.flops_per_s_float32


_PEAK_FLOPS = ("The FLOP/s peak the fraction is against: the device's measured matmul peak in this dtype, or the "
               "function's fastest call where that was faster (peak_flops_source says which)")
_PEAK_BYTES = ("The bandwidth peak: the device's measured copy bandwidth, or the function's fastest call where that "
               "moved more bytes/s (data that fits in the caches; peak_bandwidth_source says which)")
_FLOPS_SOURCE = ("What peak_flops_per_s is: the matmul trial it was measured with ('matmul 1536x1536 float32, "
                 "measured'), or \"this function's fastest call\" (with a warning)")
_BYTES_SOURCE = ("What peak_bytes_per_s is: the copy it was measured with ('copy of 256 MiB float32, measured'), or "
                 "\"this function's fastest call\" (with a warning)")
_FRACTION = "Achieved (median call) over the peak: at most 1, since a peak is never less than the fastest call"


class Roofline(MappingModel):
    """Where a computation sits against the device's peaks (roofline model)."""

    dtype: Annotated[str, Meta(description="Which FLOP/s peak was used (float32 or bfloat16)")]
    achieved_flops_per_s: float | None = None
    achieved_bytes_per_s: float | None = None
    peak_flops_per_s: Annotated[float | None, Meta(description=_PEAK_FLOPS)] = None
    peak_bytes_per_s: Annotated[float | None, Meta(description=_PEAK_BYTES)] = None
    peak_flops_source: Annotated[str | None, Meta(description=_FLOPS_SOURCE)] = None
    peak_bandwidth_source: Annotated[str | None, Meta(description=_BYTES_SOURCE)] = None
    fraction_of_peak_flops: Annotated[float | None, Meta(description=_FRACTION)] = None
    fraction_of_peak_bandwidth: Annotated[float | None, Meta(description=_FRACTION)] = None
    arithmetic_intensity: Annotated[float | None, Meta(description="FLOPs per byte accessed")] = None
    ridge_point: Annotated[float | None, Meta(description="peak FLOP/s / peak bytes/s, in FLOPs per byte")] = None
    bound: Annotated[Literal["compute", "memory"] | None, Meta(description=(
        "compute if the arithmetic intensity reaches the ridge point, else memory"
    ))] = None
    warnings: list[str] = []


class Measurement(MappingModel):
    """``jaxrun.bench.measure``: one jitted function, compile phases and steady-state calls."""

    name: str
    device: Annotated[str | None, Meta(description="platform:id (device kind) the function ran on")] = None
    jax_version: str | None = None
    trace_time: Annotated[float, Meta(description="Seconds of jax.jit(fn).trace(...)")]
    lower_time: Annotated[float, Meta(description="Seconds of .lower()")]
    compile_time: Annotated[float, Meta(description="Seconds of .compile()")]
    compile_cached: Annotated[bool, Meta(description=(
        "XLA did not compile: the executable came from a cache (compile_time is small)"
    ))] = False
    first_call: Annotated[float, Meta(description=(
        "Seconds of the first call after compiling, to the result being ready"
    ))]
    warmup_calls: int = 0
    inner_loops: Annotated[int, Meta(description="Calls per timed sample (calibrated)")]
    num_samples: Annotated[int | None, Meta(description=(
        "Timed samples taken (each inner_loops calls): as many as time_budget holds, within "
        "[min_samples, max_samples], or the number asked for (null in files from before it was recorded)"
    ))] = None
    num_samples_from: Annotated[Literal["time_budget", "min_samples", "max_samples", "samples"] | None, Meta(description=(
        "What set num_samples: the time budget; min_samples (the budget holds fewer: a slow "
        "function takes longer than time_budget); max_samples (it holds more); or samples=N asked for"
    ))] = None
    time_budget: Annotated[float | None, Meta(description=(
        "Seconds of steady-state timing aimed for (calibration and samples; not compiling "
        "or warm-up); it also sets each sample's length (>= time_budget / max_samples, >= 1 ms)"
    ))] = None
    sampling_time: Annotated[float | None, Meta(description=(
        "Seconds actually spent calibrating and taking the samples"
    ))] = None
    samples: Annotated[list[float], Meta(description="Seconds per call, one value per sample, in run order")] = []
    steady: Annotated[Statistics, Meta(description="Statistics of the per-call seconds")]
    compiles_during_timing: Annotated[int, Meta(description="Compilations seen while timing (should be 0)")] = 0
    num_devices: Annotated[int, Meta(description="Devices the compiled program runs on (SPMD partitions)")] = 1
    flops: Annotated[float | None, Meta(description=(
        "FLOPs of one call, every loop iteration counted, summed over "
        "devices; where they come from: cost_source. Null when unknown (a loop whose "
        "trip count depends on the data, a host callback): warnings say why"
    ))] = None
    cost_source: Annotated[str | None, Meta(description=(
        '"xla" (the compiled cost analysis; the program has no loop), "xla_trip_counts" (the same, '
        "with each loop's body counted by its trip count: XLA alone counts it once), \"jaxpr\" (FLOPs counted "
        "from the jaxpr with trip counts, bytes a lower bound: no usable XLA analysis), or null (unknown)"
    ))] = None
    bytes_accessed: Annotated[float | None, Meta(description=(
        "Bytes read and written, from the same source as flops"
    ))] = None
    transcendentals: Annotated[float | None, Meta(description=(
        "From the same source as flops (null for jaxpr)"
    ))] = None
    argument_bytes: Annotated[int | None, Meta(description="From the compiled memory analysis")] = None
    output_bytes: int | None = None
    temp_bytes: int | None = None
    generated_code_bytes: int | None = None
    peak_dtype: Annotated[str | None, Meta(description="Which FLOP/s peak the fractions use")] = None
    achieved_flops_per_s: Annotated[float | None, Meta(description="FLOPs over the median call's seconds")] = None
    achieved_bytes_per_s: Annotated[float | None, Meta(description=(
        "Bytes accessed over the median call's seconds"
    ))] = None
    peak_flops_per_s: Annotated[float | None, Meta(description=_PEAK_FLOPS)] = None
    peak_bytes_per_s: Annotated[float | None, Meta(description=_PEAK_BYTES)] = None
    peak_flops_source: Annotated[str | None, Meta(description=_FLOPS_SOURCE)] = None
    peak_bandwidth_source: Annotated[str | None, Meta(description=_BYTES_SOURCE)] = None
    fraction_of_peak_flops: Annotated[float | None, Meta(description=_FRACTION)] = None
    fraction_of_peak_bandwidth: Annotated[float | None, Meta(description=_FRACTION)] = None
    arithmetic_intensity: float | None = None
    ridge_point: float | None = None
    bound: Literal["compute", "memory"] | None = None
    energy_per_call: Annotated[float | None, Meta(description=(
        "Joules one steady call uses: the device's energy counter (an NVIDIA GPU's through NVML; on the CPU the "
        "host's RAPL packages, every process's work on them included) read around energy_calls calls; null with "
        "energy_reason"))] = None
    power: Annotated[float | None, Meta(description=(
        "Watts, the device's mean power over those calls"))] = None
    energy_calls: Annotated[int, Meta(description=(
        "Steady calls made between the two readings (at least 0.5 s of them: the counters move in steps)"))] = 0
    energy_source: Annotated[Literal["nvml", "rapl"] | None, Meta(description="Which counter was read")] = None
    energy_reason: Annotated[str | None, Meta(description="Why energy_per_call is null, when it is")] = None
    warnings: list[str] = []

    @property
    def median(self) -> float | None:
        """Median seconds per steady-state call."""
        return self.steady.median

    def __str__(self) -> str:
        return measurement_text(self)

class BatchScalingRow(MappingModel):
    size: Annotated[int, Meta(description="Batch size (leading axis of every input)")]
    time: Annotated[float | None, Meta(description="Median seconds per batched call")] = None
    ci_low: float | None = None
    ci_high: float | None = None
    per_item: Annotated[float | None, Meta(description="time / size")] = None
    items_per_s: Annotated[float | None, Meta(description="size / time")] = None
    speedup_per_item: Annotated[float | None, Meta(description=(
        "Efficiency vs the baseline batch: per-item time at the baseline size / per-item "
        "time at this size (> 1: batching makes each item cheaper)"
    ))] = None
    compile_time: float | None = None
    steady: Statistics | None = None


class BatchScaling(MappingModel):
    """``jaxrun.bench.batch_scaling``: a vmapped function timed at several batch sizes."""

    name: str
    device: str | None = None
    baseline_size: Annotated[int, Meta(description="The batch size speedup_per_item is relative to (1 if measured)")]
    rows: list[BatchScalingRow] = []
    warnings: list[str] = []

    def table(self) -> str:
        return batch_scaling_table(self)

    def __str__(self) -> str:
        return self.table()

class TimedCall(MappingModel):
    """One function's steady-state calls, timed in-process."""

    name: str
    steady: Annotated[Statistics, Meta(description="Statistics of the per-call seconds")]
    samples: Annotated[list[float], Meta(description="Seconds per call, one value per sample, in run order")] = []
    inner_loops: Annotated[int, Meta(description="Calls per timed sample (calibrated)")] = 1


class Speedup(MappingModel):
    """``jaxrun.bench.speedup``: sustained speed of ``fast`` against ``reference`` on the same inputs."""

    fast: TimedCall
    reference: TimedCall
    ratio: Annotated[float | None, Meta(description="Speed-up: median reference time / median fast time")] = None
    ci_low: Annotated[float | None, Meta(description="Bootstrap 95% CI of the ratio of medians")] = None
    ci_high: float | None = None
    rtol: float
    atol: float
    leaves_checked: Annotated[int, Meta(description="Output leaves compared before timing")]
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    warnings: list[str] = []

    def table(self) -> str:
        return speedup_table(self)

    def __str__(self) -> str:
        return self.table()

class FitCheck(MappingModel):
    """``jaxrun.bench.fits``: whether a function's compiled program fits in what its device can
    still give, from XLA's memory analysis, without running it."""

    fits: Annotated[bool | None, Meta(description=(
        "None when the backend gives no memory analysis or no limit (see reason)"
    ))]
    program: Annotated[str, Meta(description="The program, as jaxrun names it: jit(step)")]
    device: Annotated[str, Meta(description="The device it was compiled for, e.g. cpu:0 (cpu)")]
    memory: Annotated[ProgramMemory | None, Meta(description=(
        "XLA's memory analysis of the program (per device)"
    ))] = None
    needed_bytes: Annotated[int | None, Meta(description=(
        "What a call must still allocate: the program's total, less its inputs already on the device"
    ))] = None
    resident_bytes: Annotated[int | None, Meta(description=(
        "Bytes of its inputs already on the device (given as "
        "arrays there); 0 for jax.ShapeDtypeStruct inputs"
    ))] = None
    free_bytes: Annotated[int | None, Meta(description="What the device can still give: limit - in use")] = None
    limit_bytes: Annotated[int | None, Meta(description="The most the device (on CPU, this process) may hold")] = None
    in_use_bytes: int | None = None
    source: Annotated[str | None, Meta(description=(
        "Where the limit comes from: memory_stats()'s bytes_limit, a "
        "cgroup's memory limit, /proc/meminfo's MemAvailable, ..."
    ))] = None
    reason: Annotated[str | None, Meta(description="Why it does not fit, or why it is unknown")] = None

    def __str__(self) -> str:
        return fit_text(self)


class LeafBytes(MappingModel):
    """One leaf of a pytree and the memory it holds."""

    path: Annotated[str, Meta(description="jax.tree_util.keystr of the leaf, e.g. ['params']['w']")]
    shape: list[int] | None = None
    dtype: str | None = None
    nbytes: Annotated[int | None, Meta(description="None for leaves that are not arrays or numbers")] = None


class PytestBenchmarks(MappingModel):
    """The ``--jax-benchmark-json`` file written by the pytest plugin."""

    schema_version: int = SCHEMA_VERSION
    generated_at: str
    host: str
    jaxrun_version: str
    jax_version: str | None = None
    benchmarks: Annotated[dict[str, Measurement], Meta(description="Per test node id (one call per test)")] = {}
    baseline: Annotated[str | None, Meta(description="The baseline file compared against, if any")] = None
    comparisons: list[ScriptComparison] = []


# --- each record's text ---------------------------------------------------------------------------

def measurement_text(m: "Measurement") -> str:
    s = m.steady
    ci = f" [{fmt_seconds(s.ci_low)}, {fmt_seconds(s.ci_high)}]" if s.ci_low is not None else ""
    lines = [
        f"{m.name} on {m.device or 'unknown device'}",
        f"  trace {fmt_seconds(m.trace_time)}, lower {fmt_seconds(m.lower_time)}, "
        f"compile {fmt_seconds(m.compile_time)}{' (cached)' if m.compile_cached else ''}, "
        f"first call {fmt_seconds(m.first_call)}",
        f"  steady {fmt_seconds(s.median)}{ci} median of {plural(s.n, 'sample')} x {plural(m.inner_loops, 'call')}"
        + (f" in {fmt_seconds(m.sampling_time)} (budget {fmt_seconds(m.time_budget)})"
           if m.sampling_time is not None and m.time_budget is not None else ""),
    ]
    if m.flops is not None:
        lines.append(
            f"  {m.flops:.4g} FLOPs, {fmt_bytes(m.bytes_accessed)} accessed: "
            f"{fmt_rate(m.achieved_flops_per_s, 'FLOP/s')}, {fmt_rate(m.achieved_bytes_per_s, 'B/s')}"
        )
    if m.fraction_of_peak_flops is not None:
        bandwidth = m.fraction_of_peak_bandwidth
        lines.append(
            f"  {m.fraction_of_peak_flops:.1%} of peak {m.peak_dtype} FLOP/s, "
            f"{'-' if bandwidth is None else f'{bandwidth:.1%}'} of peak bandwidth"
            + (f": {m.bound}-bound" if m.bound else "")
        )
        peaks = [f"{fmt_rate(rate, unit)} ({source})" for rate, unit, source in (
            (m.peak_flops_per_s, "FLOP/s", m.peak_flops_source), (m.peak_bytes_per_s, "B/s", m.peak_bandwidth_source))
            if rate is not None and source]
        if peaks:
            lines.append(f"  peaks: {', '.join(peaks)}")
    if m.energy_per_call is not None:
        lines.append(f"  energy {fmt_kind('joules', m.energy_per_call)} a call, {fmt_kind('watts', m.power)} "
                     f"({m.energy_source}, over {plural(m.energy_calls, 'call')})")
    lines += [f"  warning: {w}" for w in m.warnings + s.warnings]
    return "\n".join(lines)


def batch_scaling_table(b: "BatchScaling") -> str:
    headers = ["batch", "time/call", "time/item", "items/s", f"speedup/item vs {b.baseline_size}"]
    rows = [
        [
            str(r.size),
            fmt_seconds(r.time),
            fmt_seconds(r.per_item),
            "-" if r.items_per_s is None else f"{r.items_per_s:,.0f}",
            "-" if r.speedup_per_item is None else f"{r.speedup_per_item:.2f}x",
        ]
        for r in b.rows
    ]
    return f"{b.name} on {b.device or 'unknown device'}\n" + text_table(headers, rows)


def speedup_table(sp: "Speedup") -> str:
    def ci(s: "Statistics") -> str:
        return "-" if s.ci_low is None else f"[{fmt_seconds(s.ci_low)}, {fmt_seconds(s.ci_high)}]"

    rows = [
        [t.name, fmt_seconds(t.steady.median), ci(t.steady), str(t.steady.n)]
        for t in (sp.fast, sp.reference)
    ]
    text = text_table(["function", "median/call", "95% CI", "samples"], rows)
    if sp.ratio is not None:
        interval = "" if sp.ci_low is None else f" (95% CI {sp.ci_low:.3g}x - {sp.ci_high:.3g}x)"
        text += f"\nspeed-up of {sp.fast.name} over {sp.reference.name}: {sp.ratio:.3g}x{interval}"
    return text


def fit_text(f: "FitCheck") -> str:
    verdict = {True: "fits", False: "does not fit", None: "unknown whether it fits"}[f.fits]
    lines = [f"{f.program} on {f.device}: {verdict}"]
    m = f.memory
    if m is not None:
        lines.append(
            f"  needs {fmt_bytes(f.needed_bytes)}: inputs {fmt_bytes(m.argument_bytes)} "
            f"({fmt_bytes(f.resident_bytes)} already on the device), outputs {fmt_bytes(m.output_bytes)}, "
            f"temporaries {fmt_bytes(m.temp_bytes)}, code {fmt_bytes(m.generated_code_bytes)}"
            + (f", less {fmt_bytes(m.alias_bytes)} of donated inputs" if m.alias_bytes else "")
        )
    if f.free_bytes is not None:
        lines.append(f"  free {fmt_bytes(f.free_bytes)} = limit {fmt_bytes(f.limit_bytes)} - "
                     f"{fmt_bytes(f.in_use_bytes)} in use ({f.source})")
    if f.reason:
        lines.append(f"  {f.reason}")
    return "\n".join(lines)
