"""Repeated runs of a script: samples, statistics, warm mode, device speed-ups."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, Field, create_model

from jaxrun.errors import UsageError
from jaxrun.results.base_model import SCHEMA_VERSION, ErrorClass, MappingModel
from jaxrun.results.figures import (  # noqa: F401 - the models' names for them
    METRIC_ALIASES,
    RESULT_FIELDS,
    SAMPLE_METRICS,
    SCRIPT_FIGURES,
    ScriptFigure,
)

if TYPE_CHECKING:
    from jaxrun.results.comparison_report import RegressionCheck
    from jaxrun.results.script_result import Numerics

class Statistics(MappingModel):
    """Summary of one metric's samples, in its unit (seconds; MiB, 2^20 bytes, for memory_peak; the
    others' as ScriptBenchmark.statistics says); see :mod:`jaxrun.judge.stats` for the methods."""

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


def resolve_metric(metric: str) -> str:
    """The name of a sample metric (an old name such as ``steady_time`` gives its new name), or a
    UsageError listing the valid ones."""
    name = METRIC_ALIASES.get(metric, metric)
    if name not in SAMPLE_METRICS:
        raise UsageError(f"unknown metric {metric!r}: choose one of {', '.join(SAMPLE_METRICS)}")
    return name


class _RunIdentity(MappingModel):
    index: int
    warmup: bool
    success: bool
    error_class: ErrorClass | None = None
    setup_padding: int | None = Field(
        None, description="--randomize-setup: bytes of random padding in this run's environment (null: not randomised)")


def _sample_field(figure: ScriptFigure) -> Any:
    """A RunSample field of a figure: a number or null, read under its older names too."""
    older = {"validation_alias": AliasChoices(figure.name, *figure.aliases)} if figure.aliases else {}
    return (float | None, Field(None, description=figure.description, **older))


if TYPE_CHECKING:
    class RunSample(_RunIdentity):
        """One process run of a benchmarked script (a warm-up or a counted run)."""

        def __getattr__(self, name: str) -> float | None: ...
else:
    # One field per declared figure (results/figures.py), in their order, after the run's identity.
    RunSample = create_model(
        "RunSample", __base__=_RunIdentity, __module__=__name__,
        __doc__="One process run of a benchmarked script (a warm-up or a counted run).",
        **{figure.name: _sample_field(figure) for figure in SCRIPT_FIGURES},
    )


class WarmCall(MappingModel):
    run: int = Field(1, description="Which counted process run made the call")
    index: int
    seconds: float
    compile_time: float = Field(0.0, description="Seconds of JIT work during this call")
    live_array_bytes: int | None = Field(
        None, description="Bytes of the jax.Arrays alive after the call (its return value dropped); null without JAX"
    )


class WarmSummary(MappingModel):
    """``--warm``: the script's entry function called repeatedly in one process."""

    entry: str
    calls: list[WarmCall] = []
    first_call: float | None = None
    steady_state: Literal["flat", "warmup", "slowdown", "none", "unknown"] | None = Field(
        None, description="Whether the calls after the first reach a steady level (changepoint analysis of each "
        "run's per-call seconds): flat (from the second call), warmup (faster after some calls), slowdown "
        "(slower after some calls), none (they keep changing: no steady state), unknown (fewer than 8 calls "
        "after the first to tell); with several runs, none when one run has none")
    steady_from: int | None = Field(
        None, description="The call (from 1, the first) where the steady level starts: the latest over the runs; "
        "null when there is none, or it is unknown")
    steady: Statistics | None = Field(
        None, description="Calls of the steady level (from steady_from on in each run; every call after the first "
        "when steady_state is unknown); null when there is no steady state")
    compile_first_call_overhead_ratio: float | None = Field(
        None, description="compile+first-call overhead ratio: first call / median steady call"
    )
    live_array_growth: int | None = Field(
        None, description="Bytes of live jax.Arrays the steady calls added (after the last call minus after the "
        "first; the median over runs); null when unknown. Growth at every steady call is warned of as a possible leak"
    )
    warnings: list[str] = Field([], description="E.g. steady calls that compiled (they are not steady)")


class ScriptBenchmark(MappingModel):
    script_name: str
    script_path: str
    device_requested: str
    device_used: str | None = Field(description="Where it ran: the platform, or the one device chosen (gpu:1)")
    fallback_reason: str | None = None
    benchmark_runs: int
    warmup_runs: int
    runs_completed: int
    samples: list[RunSample] = []
    warmups: list[RunSample] = []
    statistics: dict[str, Statistics] = Field(
        {}, description="Per metric in SAMPLE_METRICS, in its unit: seconds, or MiB (2^20 bytes) for memory_peak"
        + "".join(f", {f.unit_name} for {f.name}" for f in SCRIPT_FIGURES if f.sampled and f.kind not in ("seconds", "mib")))
    mean_execution_time: float | None = Field(None, description="Seconds, mean wall time of this script's counted runs")
    std_execution_time: float | None = Field(None, description="Seconds, their standard deviation")
    performance_stability: Literal["stable", "noisy", "unknown"] = "unknown"
    memory_efficiency: float | None = Field(
        None,
        description="The executor API's name for a utilisation: median peak host memory of the counted runs "
        "(memory_peak) / the memory available to them (the machine's RAM, or its cgroup's limit when "
        "lower); 0.02 = 2% of it, lower leaves more room. Null when either is unknown",
    )
    warm: WarmSummary | None = None
    mode: str = Field("process", description='"process", or "warm:<entry>x<calls>" for warm mode')
    numerics: Numerics | None = Field(None, description="The numerics the runs started with")
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
    search_paths: list[str] = Field([], description="The folders (and files) the run searched: what scripts' "
                                    "paths are shown relative to")
