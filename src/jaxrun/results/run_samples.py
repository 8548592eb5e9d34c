"""What each run of a benchmarked script leaves: its sample (:class:`RunSample`, one field per
figure of results/figures.py), the statistics of a figure's samples, and warm mode's calls."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, Field, create_model

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
    ci_low: float | None = Field(None, description="Lower bound of the CI of the median")
    ci_high: float | None = None
    ci_coverage: float | None = Field(None, description="Actual coverage of [ci_low, ci_high]")
    cv: float | None = Field(None, description="Coefficient of variation, std / mean")
    outliers_tukey: list[int] = []
    outliers_modified_z: list[int] = []
    warnings: list[str] = []


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
