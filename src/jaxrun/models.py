"""The data model: every result jaxrun returns or writes is one of these pydantic models.

Field names follow the seed documents and are fixed (docs/ARCHITECTURE.md, "Results folder"), so
tools and tests can rely on them.
Unknown numbers are ``None`` (serialized as JSON ``null``), never 0. Serialization to files lives
in :mod:`jaxrun.resultfiles`; this module only describes the shapes.
"""

from __future__ import annotations

from typing import Any, Iterator, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

# 2: run phases (import_time, run_time; steady_time is read as run_time) and per-phase verdicts.
SCHEMA_VERSION = 2

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

    # NaN and infinities (a script may record them) are written as the JSON strings "NaN",
    # "Infinity", "-Infinity": valid JSON, and never confused with null (a value not measured).
    model_config = ConfigDict(extra="forbid", validate_assignment=False, ser_json_inf_nan="strings")

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


MAX_RECOMPILE_REASONS = 100


class CompileStats(MappingModel):
    """JIT work for one program, keyed by the name JAX's transformations give it (``jit(loss)``,
    ``jit(grad(loss))``, ``pmap(step)``; ``name @ file:line`` when two functions share a name),
    from ``jax.monitoring`` duration events."""

    count: int = Field(0, description="XLA compilations (executables loaded from the persistent cache are cache_hits)")
    trace_time: float = Field(0.0, description="Seconds of tracing to a jaxpr")
    lower_time: float = Field(0.0, description="Seconds of lowering to StableHLO")
    compile_time: float = Field(0.0, description="Seconds of XLA compilation (cache loads not included)")
    source: str | None = Field(None, description="path:line of the function (null for JAX's own)")
    traces: int = Field(0, description="Times the program was traced; more than 1 means JAX retraced it")
    cache_hits: int = Field(0, description="Executables loaded from the persistent compilation cache")
    cache_load_time: float = Field(0.0, description="Seconds spent loading them")
    recompile_reasons: list[str] = Field(
        [], description="Why each trace after the first happened, as JAX explains its cache misses "
        f"(jax_explain_cache_misses); at most {MAX_RECOMPILE_REASONS} kept"
    )


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
    import_time: float | None = Field(
        None, description="Seconds the body spent in import statements (jax included, with what it loads)"
    )
    run_time: float | None = Field(
        None, description="Seconds of the script's own work: body_time - import_time - the wall time of "
        "JIT work outside imports (jit_compile_time sums nested phases, so it can be a little larger)"
    )
    cpu_time: float | None = Field(None, description="Seconds user+sys, children included")
    memory_peak: float | None = Field(
        None, description="MB, peak host memory of the script's processes (its own, its descendants'; shared "
        "pages counted once; nothing inherited from the launcher)"
    )
    memory_method: str | None = Field(None, description="How memory_peak was measured")
    device_memory_peak: float | None = Field(None, description="MB, peak device memory (null on CPU)")
    device_memory_reason: str | None = None
    device_utilization: float | None = Field(None, description="0-1, null when not measurable")
    device_utilization_reason: str | None = None
    jit_compile_time: float | None = Field(
        None, description="Seconds, trace + lower + compile (or load from the persistent cache), every program"
    )
    compile_count: int | None = Field(None, description="XLA compilations (cache loads are cache_hits)")
    compiles: dict[str, CompileStats] = Field({}, description="Per program, e.g. jit(loss), jit(grad(loss))")
    cache_hits: int | None = Field(
        None, description="Executables loaded from the persistent compilation cache; null when it is off"
    )
    cache_misses: int | None = Field(
        None, description="Persistent-cache lookups that found nothing (requests - hits); null when it is off"
    )
    compile_time_saved: float | None = Field(
        None,
        description="Seconds of compilation the persistent cache saved, a lower bound (JAX stores "
        "compile times in whole seconds)",
    )
    warnings: list[str] = Field(
        [], description="What deserves a look though the run succeeded, e.g. a program compiled many times and why"
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
    total_execution_time: float | None = Field(
        None, description="Seconds, every process run counted (each benchmark run and warm-up too)"
    )
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
SAMPLE_METRICS: tuple[str, ...] = ("wall_time", "body_time", "import_time", "compile_time", "run_time", "memory_peak")
# Names older files and databases used: ``steady_time`` (body minus compile) became ``run_time``.
METRIC_ALIASES: dict[str, str] = {"steady_time": "run_time"}


class RunSample(MappingModel):
    """One process run of a benchmarked script (a warm-up or a counted run)."""

    index: int
    warmup: bool
    success: bool
    error_class: ErrorClass | None = None
    wall_time: float | None = Field(None, description="Seconds, whole process")
    body_time: float | None = Field(None, description="Seconds, script body")
    import_time: float | None = Field(None, description="Seconds of the body spent importing modules")
    compile_time: float | None = Field(None, description="Seconds of trace+lower+compile")
    run_time: float | None = Field(
        None,
        # Files written before import_time existed call it steady_time (body minus compile).
        validation_alias=AliasChoices("run_time", "steady_time"),
        description="Seconds of the script's own work: body minus imports minus compilation",
    )
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
    warnings: list[str] = Field([], description="E.g. steady calls that compiled (they are not steady)")


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
    mean_execution_time: float | None = Field(None, description="Seconds, mean wall time of this script's counted runs")
    std_execution_time: float | None = Field(None, description="Seconds, their standard deviation")
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
    mean_execution_time: float | None = Field(
        None, description="Seconds, one pass over the benchmarked scripts: the sum of their mean wall times"
    )
    std_execution_time: float | None = Field(
        None, description="Seconds, standard deviation of that pass: the root of the sum of the scripts' "
        "variances (runs are independent); never samples of different scripts pooled together"
    )
    performance_stability: Literal["stable", "noisy", "unknown"] = Field(
        "unknown", description="That of the noisiest script (its wall-time CV above 5%: noisy)"
    )
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


class PhaseComparison(MappingModel):
    """One metric (phase) of one script, NEW judged against BASE."""

    metric: str
    base_n: int
    new_n: int
    base_median: float | None
    new_median: float | None
    ratio: float | None = Field(None, description="new median / base median (> 1 is slower, or larger for memory)")
    ratio_ci_low: float | None = Field(None, description="95% bootstrap CI of the ratio")
    ratio_ci_high: float | None = None
    p_value: float | None = Field(
        None, description="Two-sided Mann-Whitney U (exact with ties and small samples); null without a test"
    )
    verdict: Verdict = Field(
        description="slower / faster need p < alpha and a ratio beyond 1 +- min_effect; not comparable "
        "without at least 2 samples per side"
    )
    note: str | None = None


class ScriptComparison(MappingModel):
    """One script: every phase judged on its own, and the verdict of the phases in its gate."""

    script_name: str
    device: str | None
    verdict: Verdict = Field(
        description="Over the gate's phases: slower if one is slower, else faster if one is faster, "
        "else no significant change; not comparable when no gate phase could be tested"
    )
    gate: list[str] = Field(
        description="The phases that decide the verdict: the chosen metric, or run_time and "
        "compile_time (the code's own phases), or wall_time when neither was measured on both sides"
    )
    slower: list[str] = Field([], description="Phases judged slower (larger), gate or not")
    faster: list[str] = Field([], description="Phases judged faster (smaller), gate or not")
    phases: dict[str, PhaseComparison] = Field({}, description="Per metric: wall, import, compile, run, memory")
    note: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_one_metric(cls, data: Any) -> Any:
        # Files written before per-phase verdicts judged one metric, flat in the script's entry.
        if isinstance(data, dict) and "metric" in data and "phases" not in data:
            data = dict(data)
            metric = METRIC_ALIASES.get(data["metric"], data["metric"])
            phase = {k: data.pop(k) for k in list(data) if k in PhaseComparison.model_fields}
            phase["metric"] = metric
            data["phases"] = {metric: phase}
            data["gate"] = [metric]
            data["verdict"] = phase.get("verdict", "not comparable")
            if data["verdict"] in ("slower", "faster"):
                data[data["verdict"]] = [metric]
        return data

    def phase(self, metric: str) -> PhaseComparison | None:
        """The judgement of one metric (an old name such as ``steady_time`` works too)."""
        return self.phases.get(METRIC_ALIASES.get(metric, metric))


class ComparisonReport(MappingModel):
    schema_version: int = SCHEMA_VERSION
    base: str
    new: str
    metrics: list[str] = Field(description="The phases judged for every script")
    gate: list[str] = Field(description="The phases that decide regressions (per script, see scripts[].gate)")
    alpha: float
    min_effect: float
    scripts: list[ScriptComparison] = []
    only_in_base: list[str] = []
    only_in_new: list[str] = []
    geometric_mean_ratio: dict[str, float | None] = Field(
        {}, description="Per phase: geometric mean of the scripts' ratios (NEW/BASE)"
    )
    regressions: list[str] = Field([], description="Scripts whose verdict is slower")
    improvements: list[str] = Field([], description="Scripts whose verdict is faster")


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
    gate: list[str] = Field(description="The phases that decide the regression")
    newest_run_id: int
    previous_runs: int = Field(description="Earlier comparable runs pooled as the baseline")
    comparison: ScriptComparison | None = None
    regression: bool

    @model_validator(mode="before")
    @classmethod
    def _from_one_metric(cls, data: Any) -> Any:
        if isinstance(data, dict) and "metric" in data and "gate" not in data:  # an older file
            data = {k: v for k, v in data.items() if k != "metric"} | {"gate": [data["metric"]]}
        return data


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


# These refer to models defined after them.
ScriptBenchmark.model_rebuild()
BenchmarkingSection.model_rebuild()
BenchmarkResults.model_rebuild()
ScriptResult.model_rebuild()
BatchResult.model_rebuild()
