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
    output_files: list[str] = []
    results: dict[str, Any] = Field({}, description="What the script passed to jaxrun.record")
    stdout_log: str | None = None
    stderr_log: str | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    started_at: str
    finished_at: str


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


class BenchmarkingSection(MappingModel):
    """Filled by process benchmarking (``--benchmark-runs``); disabled otherwise."""

    enabled: bool = False
    benchmark_runs: int = 0
    warmup_runs: int = 0
    runs_completed: int = 0
    scripts: dict[str, Any] = {}


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
