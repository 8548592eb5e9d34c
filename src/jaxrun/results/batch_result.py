"""A batch: its metadata, summary, the whole results file and the metrics file."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from jaxrun.results.base_model import SCHEMA_VERSION, MappingModel
from jaxrun.results.benchmark_result import BenchmarkingSection
from jaxrun.results.device_info import DeviceInfo
from jaxrun.results.machine import Machine
from jaxrun.results.script_result import ScriptResult


class SkippedScript(MappingModel):
    script_name: str
    script_path: str
    reason: str
    origin: Annotated[str | None, Meta(description="Where the skip was set")] = None


class BatchMetadata(MappingModel):
    framework: str = "jax"  # as the executor API writes it
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
    unreadable_paths: Annotated[list[str], Meta(description=(
        "What discovery could not read and skipped (\"path: reason\"): folders it "
        "could not list, files it could not open, notebooks that are not valid, files a bound of discovery left "
        "undecided"
    ))] = []
    results_dir: str
    host: str
    python_version: str
    python: Annotated[str | None, Meta(description=(
        "The interpreter the scripts ran under when it was not jaxrun's own (--python); "
        "jax_version and python_version are then that interpreter's"
    ))] = None
    complete: Annotated[bool, Meta(description="False while the batch is still running or was cut off")] = False
    scripts_xfailed: Annotated[int, Meta(description=(
        "Scripts expected to fail (xfail) that failed: not a batch failure"
    ))] = 0
    scripts_xpassed: Annotated[int, Meta(description=(
        "Scripts expected to fail that passed (a failure with strict_xfail)"
    ))] = 0
    strict_xfail: bool = False
    fail_on_regression: Annotated[bool, Meta(description=(
        "Whether a regression against the history fails the batch (--fail-on-regression)"
    ))] = False
    skipped: Annotated[list[SkippedScript], Meta(description="Scripts a skip setting left out, with the reason")] = []
    config_file: Annotated[str | None, Meta(description="The config file the batch read (null: none)")] = None
    history_problem: Annotated[str | None, Meta(description=(
        "Why the history could not be read or written during the batch (\"<path>: <SQLite's "
        "message>\"): the benchmarks from then on were neither recorded nor judged (a PostgreSQL server is "
        "connected to again, and the benchmarks after it came back are); null when it could"
    ))] = None
    history_unwritten: Annotated[int, Meta(description=(
        "How many benchmarked scripts' runs are not in the history (history_problem says why): "
        "`jaxrun run ... --resume` in the same results folder writes them, each once"
    ))] = 0
    compile_cache_warning: Annotated[str | None, Meta(description=(
        "Why the persistent compilation cache folder the scripts use cannot be written, naming "
        "it (checked once before the batch; null: it can, or there is none)"
    ))] = None
    machine: Annotated[Machine | None, Meta(description=(
        "The machine the batch ran on (its processor, CPUs, memory, GPUs and driver): runs of other machines are "
        "not compared unless asked (jaxrun compare --allow-mismatch); null until the batch ends, or written "
        "before jaxrun kept it"))] = None



class PerformanceSummary(MappingModel):
    total_execution_time: Annotated[float | None, Meta(description=(
        "Seconds, every process run counted (each benchmark run and warm-up too)"
    ))] = None
    average_execution_time: Annotated[float | None, Meta(description=(
        "Seconds, mean of the scripts' execution_time"
    ))] = None
    median_execution_time: Annotated[float | None, Meta(description="Seconds, their median")] = None
    total_body_time: Annotated[float | None, Meta(description="Seconds, sum of the scripts' body_time")] = None
    total_jit_compile_time: Annotated[float | None, Meta(description=(
        "Seconds, sum of the scripts' jit_compile_time"
    ))] = None
    total_compile_count: int | None = None
    peak_memory_mb: Annotated[float | None, Meta(description=(
        "MiB (2^20 bytes), largest memory_peak of a script"
    ))] = None
    peak_device_memory_mb: Annotated[float | None, Meta(description=(
        "MiB (2^20 bytes), largest device_memory_peak (null on CPU)"
    ))] = None
    average_memory_usage: Annotated[float | None, Meta(description=(
        "MiB (2^20 bytes), mean of the scripts' memory_peak"
    ))] = None
    peak_memory_usage: Annotated[float | None, Meta(description=(
        "MiB (2^20 bytes), the executor API's name for peak_memory_mb"
    ))] = None
    device_utilization: Annotated[float | None, Meta(description=(
        "0-1, mean of the scripts' device_utilization (null where none was measurable)"
    ))] = None
    fastest_script: Annotated[str | None, Meta(description=(
        "<name> of the script with the shortest execution_time; every script with a time counts "
        "(a failed one, one kept by --resume), as in the terminal's 'slowest:' line; null: none has a time"
    ))] = None
    slowest_script: Annotated[str | None, Meta(description=(
        "<name> of the script with the longest execution_time (the "
        "first of the terminal's 'slowest:' line)"
    ))] = None
    success_rate: float | None = None
    error_classes: dict[str, int] = {}


class BatchResult(MappingModel):
    """The content of ``jax_execution_results.json`` (and ``run_jax_scripts(..., True)``)."""

    schema_version: int = SCHEMA_VERSION
    metadata: BatchMetadata
    device_info: DeviceInfo | None
    performance_summary: PerformanceSummary
    # A running batch's results are held compactly and read back on use (results/held_results.py's
    # HeldList): written as the list they are.
    script_results: list[ScriptResult]
    benchmarking: BenchmarkingSection = msgspec.field(default_factory=BenchmarkingSection)

    @property
    def success(self) -> bool:
        """The batch finished, every script succeeded or failed as expected (xfail) and, with
        strict_xfail, none expected to fail passed."""
        results = self.script_results
        if not self.metadata.complete or not all(r.success or r.outcome == "xfailed" for r in results):
            return False
        return not (self.metadata.strict_xfail and any(r.outcome == "xpassed" for r in results))

    def __bool__(self) -> bool:
        """True exactly when the batch finished and every script did what was expected."""
        return self.success


class ScriptMetrics(MappingModel):
    """One script's figures, as its result has them (jax_performance_metrics.json)."""

    execution_time: float | None
    body_time: float | None
    cpu_time: float | None
    memory_peak: Annotated[float | None, Meta(description="MiB (2^20 bytes), the result's memory_peak")]
    device_memory_peak: Annotated[float | None, Meta(description="MiB (2^20 bytes), the result's device_memory_peak")]
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
    avg_execution_time: Annotated[float | None, Meta(description=(
        "Seconds, the executor API's name for aggregate.average_execution_time"
    ))] = None
    peak_memory_mb: Annotated[float | None, Meta(description=(
        "MiB (2^20 bytes), the executor API's name for aggregate.peak_memory_mb"
    ))] = None
