"""What each run of a benchmarked script leaves: its sample (:class:`RunSample`, one field per
figure of results/figures.py), the statistics of a figure's samples, and warm mode's calls."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TYPE_CHECKING

from msgspec import Meta

from jaxrun.results.base_model import ErrorClass, MappingModel
from jaxrun.results.figures import SCRIPT_FIGURES, ScriptFigure


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
    ci_low: Annotated[float | None, Meta(description="Lower bound of the CI of the median")] = None
    ci_high: float | None = None
    ci_coverage: Annotated[float | None, Meta(description="Actual coverage of [ci_low, ci_high]")] = None
    cv: Annotated[float | None, Meta(description="Coefficient of variation, std / mean")] = None
    outliers_tukey: list[int] = []
    outliers_modified_z: list[int] = []
    warnings: list[str] = []


class _RunIdentity(MappingModel):
    index: int
    warmup: bool
    success: bool
    error_class: ErrorClass | None = None
    setup_padding: Annotated[int | None, Meta(description=(
        "--randomize-setup: bytes of random padding in this run's environment (null: not randomised)"
    ))] = None


def _sample_field(figure: ScriptFigure) -> tuple[str, Any, None]:
    """A RunSample field of a figure: a number or null (read under its older names too: ``_older``)."""
    return figure.name, Annotated[float | None, Meta(description=figure.description)], None


def _older_samples(data: dict[str, Any]) -> dict[str, Any]:
    """A sample of an older file, its figures under their older names (results/figures.py's aliases)."""
    for figure in SCRIPT_FIGURES:
        if figure.name not in data:
            for alias in figure.aliases:
                if alias in data:
                    data = {k: v for k, v in data.items() if k != alias} | {figure.name: data[alias]}
                    break
    return data


if TYPE_CHECKING:
    class RunSample(_RunIdentity):
        """One process run of a benchmarked script (a warm-up or a counted run)."""

        def __getattr__(self, name: str) -> float | None: ...
else:
    # One field per declared figure (results/figures.py), in their order, after the run's identity.
    RunSample = type(_RunIdentity)(
        "RunSample", (_RunIdentity,), {
            "__module__": __name__, "__doc__": "One process run of a benchmarked script (a warm-up or a counted run).",
            "__annotations__": {name: kind for name, kind, _ in map(_sample_field, SCRIPT_FIGURES)},
            **{figure.name: None for figure in SCRIPT_FIGURES},
            "_older": staticmethod(_older_samples)})


class WarmCall(MappingModel):
    run: Annotated[int, Meta(description="Which counted process run made the call")] = 1
    index: int
    seconds: float
    compile_time: Annotated[float, Meta(description="Seconds of JIT work during this call")] = 0.0
    live_array_bytes: Annotated[int | None, Meta(description=(
        "Bytes of the jax.Arrays alive after the call (its return value dropped); null without JAX"
    ))] = None


class WarmSummary(MappingModel):
    """``--warm``: the script's entry function called repeatedly in one process."""

    entry: str
    calls: list[WarmCall] = []
    first_call: float | None = None
    steady_state: Annotated[Literal["flat", "warmup", "slowdown", "none", "unknown"] | None, Meta(description=(
        "Whether the calls after the first reach a steady level (changepoint analysis of each "
        "run's per-call seconds): flat (from the second call), warmup (faster after some calls), slowdown "
        "(slower after some calls), none (they keep changing: no steady state), unknown (fewer than 8 calls "
        "after the first to tell); with several runs, none when one run has none"
    ))] = None
    steady_from: Annotated[int | None, Meta(description=(
        "The call (from 1, the first) where the steady level starts: the latest over the runs; "
        "null when there is none, or it is unknown"
    ))] = None
    steady: Annotated[Statistics | None, Meta(description=(
        "Calls of the steady level (from steady_from on in each run; every call after the first "
        "when steady_state is unknown); null when there is no steady state"
    ))] = None
    compile_first_call_overhead_ratio: Annotated[float | None, Meta(description=(
        "compile+first-call overhead ratio: first call / median steady call"
    ))] = None
    live_array_growth: Annotated[int | None, Meta(description=(
        "Bytes of live jax.Arrays the steady calls added (after the last call minus after the "
        "first; the median over runs); null when unknown. Growth at every steady call is warned of as a possible leak"
    ))] = None
    warnings: Annotated[list[str], Meta(description="E.g. steady calls that compiled (they are not steady)")] = []
