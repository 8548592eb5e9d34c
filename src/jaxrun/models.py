"""The data model: every result jaxrun returns or writes is one of these pydantic models.

Field names follow DESIGN.md §4/§6 and the seed documents, so tools and tests can rely on them.
Unknown numbers are ``None`` (serialized as JSON ``null``), never 0. Serialization to files lives
in :mod:`jaxrun.resultfiles`; this module only describes the shapes.
"""

from __future__ import annotations

from typing import Any, Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1

ErrorClass = Literal[
    "device_unavailable",
    "out_of_memory",
    "compilation_failed",
    "numerical_instability",
    "timeout",
    "import_error",
    "syntax_error",
    "script_error",
    "crashed",
    "interrupted",
]
ERROR_CLASSES: tuple[str, ...] = ErrorClass.__args__  # type: ignore[attr-defined]


class MappingModel(BaseModel):
    """A model that can also be read like the dicts the seed documents return (``r["success"]``)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    def __getitem__(self, key: str) -> Any:
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return key in type(self).model_fields

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default) if key in type(self).model_fields else default

    def keys(self) -> Iterator[str]:
        return iter(type(self).model_fields)


# --- devices -----------------------------------------------------------------------------------


class DeviceEntry(MappingModel):
    id: int
    platform: str
    device_kind: str
    process_index: int = 0
    memory_bytes: int | None = Field(None, description="Device memory limit, when the backend tells")
    compute_capability: str | None = None


class PlatformInfo(MappingModel):
    name: Literal["cpu", "gpu", "tpu"]
    available: bool
    backend: str | None = Field(None, description="JAX backend name behind it (cuda, rocm, tpu, cpu)")
    devices: list[DeviceEntry] = []
    error: str | None = Field(None, description="Why the platform did not initialise")


class NvmlInfo(MappingModel):
    usable: bool
    driver_version: str | None = None
    gpu_count: int | None = None
    error: str | None = None


class DeviceInfo(MappingModel):
    """Device facts read by a short-lived child process (the parent never imports jax)."""

    schema_version: int = SCHEMA_VERSION
    jax_available: bool
    jax_version: str | None = None
    jaxlib_version: str | None = None
    python_version: str
    python_executable: str
    default_backend: str | None = None
    platforms: dict[str, PlatformInfo] = {}
    error: str | None = Field(None, description="Why JAX could not be imported or probed")
    probed_at: str
    probe_seconds: float | None = None

    @property
    def available_platforms(self) -> list[str]:
        return [name for name, p in self.platforms.items() if p.available]

    @property
    def device_count(self) -> int:
        return sum(len(p.devices) for p in self.platforms.values() if p.available)


# --- one script ---------------------------------------------------------------------------------


class CompileStats(MappingModel):
    """JIT work for one function name, from ``jax.monitoring`` duration events."""

    count: int = 0
    trace_time: float = 0.0
    lower_time: float = 0.0
    compile_time: float = 0.0


class Attempt(MappingModel):
    """One launch of the script (retries and the CPU fallback each add one)."""

    number: int
    device: str
    success: bool
    error_class: ErrorClass | None = None
    error_message: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    execution_time: float | None = None
    started_at: str


class ScriptResult(MappingModel):
    """What happened when one script ran (possibly over several attempts)."""

    schema_version: int = SCHEMA_VERSION
    script_name: str
    script_path: str
    success: bool
    error_class: ErrorClass | None = None
    error_message: str | None = None
    exception_type: str | None = None
    traceback: str | None = Field(None, description="Tail of the Python traceback, when one exists")
    hint: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    device_requested: str
    device_used: str | None = Field(None, description="Platform the last attempt ran on")
    jax_backend: str | None = Field(None, description="Backend JAX actually initialised in the child")
    device_count: int | None = Field(None, description="Devices the script saw, when it used JAX")
    fallback_reason: str | None = None
    attempts: list[Attempt] = []
    execution_time: float | None = Field(None, description="Seconds, whole process")
    body_time: float | None = Field(None, description="Seconds, the script body inside the probe")
    cpu_time: float | None = Field(None, description="Seconds user+sys, children included")
    memory_peak: float | None = Field(None, description="MB, peak RSS of the process tree")
    device_memory_peak: float | None = Field(None, description="MB, peak device memory (null on CPU)")
    device_memory_reason: str | None = None
    device_utilization: float | None = Field(None, description="0-1, null when not measurable")
    device_utilization_reason: str | None = None
    jit_compile_time: float | None = Field(None, description="Seconds, trace+lower+compile")
    compile_count: int | None = None
    compiles: dict[str, CompileStats] = {}
    cache_hits: int | None = None
    compile_time_saved: float | None = Field(
        None,
        description="Seconds of compilation the persistent cache saved, a lower bound (JAX stores "
        "compile times in whole seconds)",
    )
    output_files: list[str] = []
    results: dict[str, Any] = Field({}, description="What the script passed to jaxrun.record")
    stdout_log: str | None = None
    stderr_log: str | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    started_at: str
    finished_at: str
    warm: WarmSummary | None = Field(None, description="Warm mode: the entry function's calls")
    benchmark: ScriptBenchmark | None = Field(None, description="Process benchmark runs, when asked")


# --- a batch ------------------------------------------------------------------------------------


class BatchMetadata(MappingModel):
    framework: str = "JAX"
    jaxrun_version: str
    device_requested: str
    device_used: str | None
    jax_version: str | None
    execution_timestamp: str
    finished_timestamp: str | None = None
    scripts_found: int
    scripts_executed: int
    scripts_successful: int
    scripts_failed: int
    search_paths: list[str]
    results_dir: str
    host: str
    python_version: str
    complete: bool = Field(False, description="False while the batch is still running or was cut off")


class PerformanceSummary(MappingModel):
    total_execution_time: float | None = None
    average_execution_time: float | None = None
    median_execution_time: float | None = None
    total_body_time: float | None = None
    total_jit_compile_time: float | None = None
    total_compile_count: int | None = None
    peak_memory_mb: float | None = None
    peak_device_memory_mb: float | None = None
    fastest_script: str | None = None
    slowest_script: str | None = None
    success_rate: float | None = None
    error_classes: dict[str, int] = {}


class Statistics(MappingModel):
    """Summary of one metric's samples (see :mod:`jaxrun.stats` for the methods)."""

    n: int
    mean: float | None
    std: float | None
    median: float | None
    min: float | None
    max: float | None
    q1: float | None
    q3: float | None
    iqr: float | None
    mad: float | None
    ci_low: float | None = Field(None, description="Lower bound of the CI of the median")
    ci_high: float | None = None
    ci_coverage: float | None = Field(None, description="Actual coverage of [ci_low, ci_high]")
    cv: float | None = Field(None, description="Coefficient of variation, std / mean")
    outliers_tukey: list[int] = []
    outliers_modified_z: list[int] = []
    warnings: list[str] = []


# Metrics kept for every benchmark run; compare / history / stats use these names.
SAMPLE_METRICS: tuple[str, ...] = ("wall_time", "body_time", "compile_time", "steady_time", "memory_peak")


class RunSample(MappingModel):
    """One process run of a benchmarked script (a warm-up or a counted run)."""

    index: int
    warmup: bool
    success: bool
    error_class: ErrorClass | None = None
    wall_time: float | None = Field(None, description="Seconds, whole process")
    body_time: float | None = Field(None, description="Seconds, script body")
    compile_time: float | None = Field(None, description="Seconds of trace+lower+compile")
    steady_time: float | None = Field(None, description="Seconds, body minus compile")
    memory_peak: float | None = Field(None, description="MB, peak RSS of the process tree")


class WarmCall(MappingModel):
    run: int = Field(1, description="Which counted process run made the call")
    index: int
    seconds: float
    compile_time: float = Field(0.0, description="Seconds of JIT work during this call")


class WarmSummary(MappingModel):
    """``--warm``: the script's entry function called repeatedly in one process."""

    entry: str
    calls: list[WarmCall] = []
    first_call: float | None = None
    steady: Statistics | None = Field(None, description="Calls after the first")
    compile_first_call_overhead_ratio: float | None = Field(
        None, description="compile+first-call overhead ratio: first call / median steady call"
    )


class ScriptBenchmark(MappingModel):
    script_name: str
    script_path: str
    device_requested: str
    device_used: str | None
    fallback_reason: str | None = None
    benchmark_runs: int
    warmup_runs: int
    runs_completed: int
    samples: list[RunSample] = []
    warmups: list[RunSample] = []
    statistics: dict[str, Statistics] = Field({}, description="Per metric in SAMPLE_METRICS")
    mean_execution_time: float | None = None
    std_execution_time: float | None = None
    performance_stability: Literal["stable", "noisy", "unknown"] = "unknown"
    warm: WarmSummary | None = None
    mode: str = Field("process", description='"process", or "warm:<entry>x<calls>" for warm mode')
    warnings: list[str] = []
    history_run_id: int | None = Field(None, description="Row id in the history database")
    history_check: RegressionCheck | None = Field(
        None, description="This run against earlier comparable runs in the history"
    )


class DeviceSpeedup(MappingModel):
    """``--device cpu,gpu``: one script's speed on each device relative to the first device."""

    script_name: str
    baseline_device: str
    device: str
    device_used: str | None
    metric: str
    speedup: float | None = Field(None, description="baseline median / this device's median")
    ci_low: float | None = None
    ci_high: float | None = None
    real_comparison: bool
    note: str | None = None


class BenchmarkingSection(MappingModel):
    """Filled by process benchmarking (``--benchmark-runs``); disabled otherwise."""

    enabled: bool = False
    benchmark_runs: int = 0
    warmup_runs: int = 0
    runs_completed: int = 0
    mean_execution_time: float | None = None
    std_execution_time: float | None = None
    performance_stability: Literal["stable", "noisy", "unknown"] = "unknown"
    benchmarks: list[ScriptBenchmark] = []
    device_comparison: list[DeviceSpeedup] = []


class BenchmarkResults(BenchmarkingSection):
    """The content of ``jax_benchmark_results.json``."""

    schema_version: int = SCHEMA_VERSION
    generated_at: str
    host: str
    jaxrun_version: str
    jax_version: str | None


# --- compare and history --------------------------------------------------------------------------


Verdict = Literal["faster", "slower", "no significant change", "not comparable"]


class ScriptComparison(MappingModel):
    script_name: str
    device: str | None
    metric: str
    base_n: int
    new_n: int
    base_median: float | None
    new_median: float | None
    ratio: float | None = Field(None, description="new median / base median (> 1 is slower)")
    ratio_ci_low: float | None = None
    ratio_ci_high: float | None = None
    p_value: float | None = Field(None, description="Two-sided Mann-Whitney U; null without raw samples")
    verdict: Verdict
    note: str | None = None


class ComparisonReport(MappingModel):
    schema_version: int = SCHEMA_VERSION
    base: str
    new: str
    metric: str
    alpha: float
    min_effect: float
    scripts: list[ScriptComparison] = []
    only_in_base: list[str] = []
    only_in_new: list[str] = []
    geometric_mean_ratio: float | None = None
    regressions: list[str] = []
    improvements: list[str] = []


class HistoryRun(MappingModel):
    """One benchmarked run of one script, as stored in the history database."""

    id: int | None = None
    recorded_at: str
    script_name: str
    script_path: str
    content_hash: str
    git_commit: str | None = None
    git_dirty: bool | None = None
    host: str
    device_requested: str
    device_used: str | None
    jax_version: str | None = None
    jaxlib_version: str | None = None
    jaxrun_version: str
    samples: list[RunSample] = []
    median_wall_time: float | None = None
    mode: str = Field("process", description='"process", or "warm:<entry>x<calls>" for warm mode')


class RegressionCheck(MappingModel):
    script_path: str
    device: str | None
    host: str
    metric: str
    newest_run_id: int
    previous_runs: int = Field(description="Earlier comparable runs pooled as the baseline")
    comparison: ScriptComparison | None = None
    regression: bool


class BatchResult(MappingModel):
    """The content of ``jax_execution_results.json`` (and ``run_jax_scripts(..., True)``)."""

    schema_version: int = SCHEMA_VERSION
    metadata: BatchMetadata
    device_info: DeviceInfo | None
    performance_summary: PerformanceSummary
    script_results: list[ScriptResult]
    benchmarking: BenchmarkingSection = BenchmarkingSection()

    @property
    def success(self) -> bool:
        return self.metadata.complete and all(r.success for r in self.script_results)


class ScriptMetrics(MappingModel):
    execution_time: float | None
    body_time: float | None
    cpu_time: float | None
    memory_peak: float | None
    device_memory_peak: float | None
    device_utilization: float | None
    jit_compile_time: float | None
    compile_count: int | None
    cache_hits: int | None
    success: bool


class PerformanceMetrics(MappingModel):
    """The content of ``jax_performance_metrics.json``."""

    schema_version: int = SCHEMA_VERSION
    generated_at: str
    scripts: dict[str, ScriptMetrics]
    aggregate: PerformanceSummary


# --- in-process benchmarks (jaxrun.bench) --------------------------------------------------------
# Results of jaxrun.bench, which times jitted functions inside the caller's process. Quantities
# that XLA cannot tell on this platform (cost analysis of a host callback, say) are None.


def _text_table(headers: list[str], rows: list[list[str]]) -> str:
    """Plain-text table, names (first column) left-aligned, figures right-aligned; no rich needed."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(headers), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


def _fmt_seconds(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(value) >= scale:
            return f"{value / scale:.4g} {unit}"
    return f"{value / 1e-9:.4g} ns"


def _fmt_rate(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def _fmt_bytes(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= scale:
            return f"{value / scale:.4g} {unit}"
    return f"{int(value)} B"


class PeakTrial(MappingModel):
    """One measurement behind a device peak (a matmul size and dtype, or the copy)."""

    kind: Literal["matmul", "copy"]
    dtype: str
    size: int = Field(description="Matrix side for a matmul, element count for the copy")
    best_seconds: float = Field(description="Fastest per-call time of the samples")
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
    flops_per_s_float32: float | None = Field(None, description="Best matmul FLOP/s in float32")
    flops_per_s_bfloat16: float | None = Field(None, description="Best matmul FLOP/s in bfloat16")
    bytes_per_s: float | None = Field(None, description="Copy bandwidth, bytes read + written per second")
    trials: list[PeakTrial] = []
    measured_at: str
    measure_seconds: float | None = Field(None, description="Wall time spent measuring these peaks")

    def flops_per_s(self, dtype: str) -> float | None:
        """The peak for ``dtype``: bfloat16/float16 use the bfloat16 peak, anything else float32."""
        return self.flops_per_s_bfloat16 if dtype in ("bfloat16", "float16") else self.flops_per_s_float32


class Roofline(MappingModel):
    """Where a computation sits against the device's measured peaks (roofline model)."""

    dtype: str = Field(description="Which FLOP/s peak was used (float32 or bfloat16)")
    achieved_flops_per_s: float | None = None
    achieved_bytes_per_s: float | None = None
    peak_flops_per_s: float | None = None
    peak_bytes_per_s: float | None = None
    fraction_of_peak_flops: float | None = None
    fraction_of_peak_bandwidth: float | None = None
    arithmetic_intensity: float | None = Field(None, description="FLOPs per byte accessed")
    ridge_point: float | None = Field(None, description="peak FLOP/s / peak bytes/s, in FLOPs per byte")
    bound: Literal["compute", "memory"] | None = Field(
        None, description="compute if the arithmetic intensity reaches the ridge point, else memory"
    )
    warnings: list[str] = []


class Measurement(MappingModel):
    """``jaxrun.bench.measure``: one jitted function, compile phases and steady-state calls."""

    name: str
    device: str | None = Field(None, description="platform:id (device kind) the function ran on")
    jax_version: str | None = None
    trace_time: float = Field(description="Seconds of jax.jit(fn).trace(...)")
    lower_time: float = Field(description="Seconds of .lower()")
    compile_time: float = Field(description="Seconds of .compile()")
    compile_cached: bool = Field(
        False, description="XLA did not compile: the executable came from a cache (compile_time is small)"
    )
    first_call: float = Field(description="Seconds of the first call after compiling, to the result being ready")
    warmup_calls: int = 0
    inner_loops: int = Field(description="Calls per timed sample (calibrated)")
    samples: list[float] = Field([], description="Seconds per call, one value per sample, in run order")
    steady: Statistics = Field(description="Statistics of the per-call seconds")
    compiles_during_timing: int = Field(0, description="Compilations seen while timing (should be 0)")
    num_devices: int = Field(1, description="Devices the compiled program runs on (SPMD partitions)")
    flops: float | None = Field(None, description="From the compiled cost analysis, summed over devices")
    bytes_accessed: float | None = None
    transcendentals: float | None = None
    argument_bytes: int | None = Field(None, description="From the compiled memory analysis")
    output_bytes: int | None = None
    temp_bytes: int | None = None
    generated_code_bytes: int | None = None
    peak_dtype: str | None = Field(None, description="Which FLOP/s peak the fractions use")
    achieved_flops_per_s: float | None = None
    achieved_bytes_per_s: float | None = None
    peak_flops_per_s: float | None = None
    peak_bytes_per_s: float | None = None
    fraction_of_peak_flops: float | None = None
    fraction_of_peak_bandwidth: float | None = None
    arithmetic_intensity: float | None = None
    ridge_point: float | None = None
    bound: Literal["compute", "memory"] | None = None
    warnings: list[str] = []

    @property
    def median(self) -> float | None:
        """Median seconds per steady-state call."""
        return self.steady.median

    def __str__(self) -> str:
        s = self.steady
        ci = f" [{_fmt_seconds(s.ci_low)}, {_fmt_seconds(s.ci_high)}]" if s.ci_low is not None else ""
        lines = [
            f"{self.name} on {self.device or 'unknown device'}",
            f"  trace {_fmt_seconds(self.trace_time)}, lower {_fmt_seconds(self.lower_time)}, "
            f"compile {_fmt_seconds(self.compile_time)}{' (cached)' if self.compile_cached else ''}, "
            f"first call {_fmt_seconds(self.first_call)}",
            f"  steady {_fmt_seconds(s.median)}{ci} median of {s.n} samples x {self.inner_loops} calls",
        ]
        if self.flops is not None:
            lines.append(
                f"  {self.flops:.4g} FLOPs, {_fmt_bytes(self.bytes_accessed)} accessed: "
                f"{_fmt_rate(self.achieved_flops_per_s, 'FLOP/s')}, {_fmt_rate(self.achieved_bytes_per_s, 'B/s')}"
            )
        if self.fraction_of_peak_flops is not None:
            bandwidth = self.fraction_of_peak_bandwidth
            lines.append(
                f"  {self.fraction_of_peak_flops:.1%} of peak {self.peak_dtype} FLOP/s, "
                f"{'-' if bandwidth is None else f'{bandwidth:.1%}'} of peak bandwidth"
                + (f": {self.bound}-bound" if self.bound else "")
            )
        lines += [f"  warning: {w}" for w in self.warnings + s.warnings]
        return "\n".join(lines)


class BatchScalingRow(MappingModel):
    size: int = Field(description="Batch size (leading axis of every input)")
    time: float | None = Field(None, description="Median seconds per batched call")
    ci_low: float | None = None
    ci_high: float | None = None
    per_item: float | None = Field(None, description="time / size")
    items_per_s: float | None = Field(None, description="size / time")
    speedup_per_item: float | None = Field(
        None,
        description="Efficiency vs the baseline batch: per-item time at the baseline size / per-item "
        "time at this size (> 1: batching makes each item cheaper)",
    )
    compile_time: float | None = None
    steady: Statistics | None = None


class BatchScaling(MappingModel):
    """``jaxrun.bench.batch_scaling``: a vmapped function timed at several batch sizes."""

    name: str
    device: str | None = None
    baseline_size: int = Field(description="The batch size speedup_per_item is relative to (1 if measured)")
    rows: list[BatchScalingRow] = []
    warnings: list[str] = []

    def table(self) -> str:
        headers = ["batch", "time/call", "time/item", "items/s", f"speedup/item vs {self.baseline_size}"]
        rows = [
            [
                str(r.size),
                _fmt_seconds(r.time),
                _fmt_seconds(r.per_item),
                "-" if r.items_per_s is None else f"{r.items_per_s:,.0f}",
                "-" if r.speedup_per_item is None else f"{r.speedup_per_item:.2f}x",
            ]
            for r in self.rows
        ]
        return f"{self.name} on {self.device or 'unknown device'}\n" + _text_table(headers, rows)

    def __str__(self) -> str:
        return self.table()


class TimedCall(MappingModel):
    """One function's steady-state calls, timed in-process."""

    name: str
    steady: Statistics = Field(description="Statistics of the per-call seconds")
    samples: list[float] = Field([], description="Seconds per call, one value per sample, in run order")
    inner_loops: int = Field(1, description="Calls per timed sample (calibrated)")


class Speedup(MappingModel):
    """``jaxrun.bench.speedup``: sustained speed of ``fast`` against ``reference`` on the same inputs."""

    fast: TimedCall
    reference: TimedCall
    ratio: float | None = Field(None, description="Speed-up: median reference time / median fast time")
    ci_low: float | None = Field(None, description="Bootstrap 95% CI of the ratio of medians")
    ci_high: float | None = None
    rtol: float
    atol: float
    leaves_checked: int = Field(description="Output leaves compared before timing")
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    warnings: list[str] = []

    def table(self) -> str:
        def ci(s: Statistics) -> str:
            return "-" if s.ci_low is None else f"[{_fmt_seconds(s.ci_low)}, {_fmt_seconds(s.ci_high)}]"

        rows = [
            [t.name, _fmt_seconds(t.steady.median), ci(t.steady), str(t.steady.n)]
            for t in (self.fast, self.reference)
        ]
        text = _text_table(["function", "median/call", "95% CI", "samples"], rows)
        if self.ratio is not None:
            interval = "" if self.ci_low is None else f" (95% CI {self.ci_low:.3g}x - {self.ci_high:.3g}x)"
            text += f"\nspeed-up of {self.fast.name} over {self.reference.name}: {self.ratio:.3g}x{interval}"
        return text

    def __str__(self) -> str:
        return self.table()


class LeafBytes(MappingModel):
    """One leaf of a pytree and the memory it holds."""

    path: str = Field(description="jax.tree_util.keystr of the leaf, e.g. ['params']['w']")
    shape: list[int] | None = None
    dtype: str | None = None
    nbytes: int | None = Field(None, description="None for leaves that are not arrays or numbers")


class PytestBenchmarks(MappingModel):
    """The ``--jax-benchmark-json`` file written by the pytest plugin."""

    schema_version: int = SCHEMA_VERSION
    generated_at: str
    host: str
    jaxrun_version: str
    jax_version: str | None = None
    benchmarks: dict[str, Measurement] = Field({}, description="Per test node id (one call per test)")
    baseline: str | None = Field(None, description="The baseline file compared against, if any")
    comparisons: list[ScriptComparison] = []


# These refer to models defined after them.
ScriptBenchmark.model_rebuild()
BenchmarkingSection.model_rebuild()
BenchmarkResults.model_rebuild()
ScriptResult.model_rebuild()
BatchResult.model_rebuild()
