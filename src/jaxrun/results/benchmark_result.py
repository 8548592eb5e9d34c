"""Repeated runs of a script: its samples and their statistics (results/run_samples.py), its
check against the history, device speed-ups."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from jaxrun.errors import UsageError
from jaxrun.results.base_model import SCHEMA_VERSION, MappingModel
from jaxrun.results.comparisons import RegressionCheck
from jaxrun.results.figures import (  # noqa: F401 - the models' names for them
    METRIC_ALIASES,
    RESULT_FIELDS,
    SAMPLE_METRICS,
    SCRIPT_FIGURES,
)
from jaxrun.results.numerics import Numerics
from jaxrun.results.run_samples import RunSample, Statistics, WarmSummary


def resolve_metric(metric: str) -> str:
    """The name of a sample metric (an old name such as ``steady_time`` gives its new name), or a
    UsageError listing the valid ones."""
    name = METRIC_ALIASES.get(metric, metric)
    if name not in SAMPLE_METRICS:
        from jaxrun.core.validate import shown_value

        raise UsageError(f"unknown metric {shown_value(metric)}: choose one of {', '.join(SAMPLE_METRICS)}")
    return name


class ScriptBenchmark(MappingModel):
    script_name: str
    script_path: str
    device_requested: str
    device_used: Annotated[str | None, Meta(description=(
        "Where it ran: the platform, or the one device chosen (gpu:1)"
    ))]
    fallback_reason: str | None = None
    benchmark_runs: int
    warmup_runs: int
    runs_completed: int
    samples: list[RunSample] = []
    warmups: list[RunSample] = []
    statistics: Annotated[dict[str, Statistics], Meta(description=(
        "Per metric in SAMPLE_METRICS, in its unit: seconds, or MiB (2^20 bytes) for memory_peak"
        + "".join(f", {f.unit_name} for {f.name}" for f in SCRIPT_FIGURES if f.sampled and f.kind not in ("seconds", "mib"))
    ))] = {}
    mean_execution_time: Annotated[float | None, Meta(description=(
        "Seconds, mean wall time of this script's counted runs"
    ))] = None
    std_execution_time: Annotated[float | None, Meta(description="Seconds, their standard deviation")] = None
    performance_stability: Literal["stable", "noisy", "unknown"] = "unknown"
    memory_efficiency: Annotated[float | None, Meta(description=(
        "The executor API's name for a utilisation: median peak host memory of the counted runs "
        "(memory_peak) / the memory available to them (the machine's RAM, or its cgroup's limit when "
        "lower); 0.02 = 2% of it, lower leaves more room. Null when either is unknown"
    ))] = None
    warm: WarmSummary | None = None
    mode: Annotated[str, Meta(description='"process", or "warm:<entry>x<calls>" for warm mode')] = "process"
    numerics: Annotated[Numerics | None, Meta(description="The numerics the runs started with")] = None
    warnings: list[str] = []
    run_key: Annotated[str | None, Meta(description=(
        "Its key in any history (32 hex digits): a history keeps the run once under it, so --resume writes a "
        "run the history missed (a lost connection), never twice; null: no history was named"))] = None
    git_commit: Annotated[str | None, Meta(description=(
        "The commit of the repository holding the script when it was measured (null: none, or no history named)"))] = None
    git_dirty: Annotated[bool | None, Meta(description="Whether that repository had uncommitted changes")] = None
    git_commit_time: Annotated[str | None, Meta(description="When git_commit was committed (ISO)")] = None
    history_run_id: Annotated[int | None, Meta(description=(
        "Row id in the history database (null: not written there; see the batch's history_problem)"))] = None
    history_check: Annotated[RegressionCheck | None, Meta(description=(
        "This run against earlier comparable runs in the history"
    ))] = None


class DeviceSpeedup(MappingModel):
    """``--device cpu,gpu``: one script's speed on each device relative to the first device."""

    script_name: str
    baseline_device: str
    device: str
    device_used: str | None
    metric: str
    speedup: Annotated[float | None, Meta(description="baseline median / this device's median")] = None
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
    mean_execution_time: Annotated[float | None, Meta(description=(
        "Seconds, one pass over the benchmarked scripts: the sum of their mean wall times"
    ))] = None
    std_execution_time: Annotated[float | None, Meta(description=(
        "Seconds, standard deviation of that pass: the root of the sum of the scripts' "
        "variances (runs are independent); never samples of different scripts pooled together"
    ))] = None
    performance_stability: Annotated[Literal["stable", "noisy", "unknown"], Meta(description=(
        "That of the noisiest script (its wall-time CV above 5%: noisy)"
    ))] = "unknown"
    benchmarks: list[ScriptBenchmark] = []
    device_comparison: list[DeviceSpeedup] = []


class BenchmarkResults(BenchmarkingSection):
    """The content of ``jax_benchmark_results.json``."""

    schema_version: int = SCHEMA_VERSION
    generated_at: str
    host: str
    jaxrun_version: str
    jax_version: str | None
    search_paths: Annotated[list[str], Meta(description=(
        "The folders (and files) the run searched: what scripts' "
        "paths are shown relative to"
    ))] = []
