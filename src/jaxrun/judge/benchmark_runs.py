"""Process benchmarking: turn repeated runs of a script into samples and statistics.

Each run is a separate process (so every run pays its own import and compilation, as a user's
run does). Warm-up runs are kept but not counted. This module only aggregates; the runs are
made by :mod:`jaxrun.execute`.
"""

from __future__ import annotations

import math
import statistics as pystats
from typing import Sequence

from jaxrun.core.formatting import listed, plural
from jaxrun.core.host import available_memory_mb
from jaxrun.core.validate import device_label
from jaxrun.judge.stats import CV_WARN, describe, ratio_of_medians_ci
from jaxrun.judge.steady_state import steady_state
from jaxrun.results.figures import metric_unit
from jaxrun.results.models import (
    RESULT_FIELDS,
    SAMPLE_METRICS,
    BenchmarkingSection,
    DeviceSpeedup,
    RunSample,
    ScriptBenchmark,
    ScriptResult,
    WarmCall,
    WarmSummary,
)


def sample_from_result(result: ScriptResult, index: int, warmup: bool) -> RunSample:
    padding = result.environment.setup_padding if result.environment is not None else None
    return RunSample(index=index, warmup=warmup, success=result.success, error_class=result.error_class,
                     setup_padding=padding, **{metric: getattr(result, field) for metric, field in RESULT_FIELDS.items()})


def metric_values(samples: Sequence[RunSample], metric: str) -> list[float]:
    """One metric over the counted samples, in run order: successful, not warm-ups, and measured
    (a null or non-finite value is not a measurement). Benchmarks, history and compare all use it."""
    values = []
    for sample in samples:
        value = getattr(sample, metric)
        if sample.success and not sample.warmup and value is not None and math.isfinite(value):
            values.append(float(value))
    return values


def warm_summary(entry: str, calls: list[WarmCall]) -> WarmSummary:
    """First calls include compilation; the steady state is found in each run's later calls
    (judge/steady_state.py) and its calls pooled over runs."""
    firsts = [c.seconds for c in calls if c.index == 1]
    first = pystats.median(firsts) if firsts else None
    kind, start, steady, note = _steady_calls(entry, calls)
    steady_stats = describe(steady) if steady else None
    ratio = None
    if first is not None and steady_stats is not None and steady_stats.median:
        ratio = first / steady_stats.median
    compiled = [c for c in calls if c.index > 1 and c.compile_time > 0]
    warnings = []
    if compiled:
        warnings.append(
            f"{len(compiled)} of {plural(len(steady), 'steady call')} of {entry}() compiled "
            f"({sum(c.compile_time for c in compiled):.3g} s of JIT work): they are not steady; "
            "look for arguments that change shape or dtype between calls"
        )
    growth, leak = live_array_growth(entry, calls)
    if leak is not None:
        warnings.append(leak)
    if note is not None:
        warnings.append(note)
    return WarmSummary(
        entry=entry, calls=calls, first_call=first, steady_state=kind, steady_from=start, steady=steady_stats,
        compile_first_call_overhead_ratio=ratio, live_array_growth=growth, warnings=warnings,
    )


def _steady_calls(entry: str, calls: list[WarmCall]) -> tuple[str | None, int | None, list[float], str | None]:
    """(steady_state, steady_from, the seconds of the steady calls pooled over runs, a warning)."""
    runs: dict[int, list[WarmCall]] = {}
    for call in calls:
        if call.index > 1:
            runs.setdefault(call.run, []).append(call)
    if not runs:
        return None, None, [], None
    found = {}
    for run, later in runs.items():
        later.sort(key=lambda c: c.index)
        found[run] = steady_state([c.seconds for c in later])
    kinds = [s.kind for s in found.values()]
    if "none" in kinds:
        run = next(r for r, s in found.items() if s.kind == "none")
        cuts = [runs[run][k].index for k in found[run].cuts]
        where = f"its level changed at calls {listed(cuts, 6)}" if cuts else "they drift to the end"
        return "none", None, [], (
            f"no steady state: the calls of {entry}() kept changing ({where}"
            + (f", in run {run}" if len(runs) > 1 else "") + "): the median of a trend is not its speed; "
            "see the per-call times (warm.calls)")
    if "unknown" in kinds:  # too few calls to tell: every call after the first, as counted before
        return "unknown", None, [c.seconds for later in runs.values() for c in later], None
    starts = {run: runs[run][s.start].index for run, s in found.items() if s.start is not None}
    kind = "flat" if set(kinds) == {"flat"} else "slowdown" if "slowdown" in kinds else "warmup"
    steady = [c.seconds for run, later in runs.items() for c in later if c.index >= starts[run]]
    return kind, max(starts.values()), steady, None


def live_array_growth(entry: str, calls: list[WarmCall]) -> tuple[int | None, str | None]:
    """``(growth, warning)``: the bytes of live arrays the steady calls added (after the last call
    minus after the first; the median over runs), and a warning when every run's steady calls
    kept arrays alive: each call left at least as many live bytes as the one before, more than
    half of them more, and the run grew (one call that fills a cache, then none, is no leak)."""
    runs: dict[int, list[WarmCall]] = {}
    for call in calls:
        runs.setdefault(call.run, []).append(call)
    growths: list[int] = []
    leaking: list[tuple[int, int]] = []  # (growth, steady calls) of each run that grew at every step
    for run_calls in runs.values():
        ordered = sorted(run_calls, key=lambda c: c.index)
        live = [c.live_array_bytes for c in ordered]
        if len(live) < 2 or ordered[0].index != 1 or any(v is None for v in live):
            return None, None  # a run without the figure after each call: unknown
        steps = [b - a for a, b in zip(live, live[1:])]  # type: ignore[operator]
        growth = live[-1] - live[0]  # type: ignore[operator]
        growths.append(growth)
        if len(steps) >= 2 and min(steps) >= 0 and sum(1 for s in steps if s > 0) * 2 > len(steps) and growth > 0:
            leaking.append((growth, len(steps)))
    if not growths:
        return None, None
    median = int(pystats.median(growths))
    if not leaking or len(leaking) < len(growths):
        return median, None
    grew, steady = leaking[0]
    where = f" (in each of the {plural(len(leaking), 'run')})" if len(leaking) > 1 else ""
    return median, (f"live array bytes grew by {grew:,} over {plural(steady, 'steady call')} of {entry}() "
                    f"({grew // steady:,} per call){where}: arrays kept alive between calls, a possible leak")


def stability(cv: float | None) -> str:
    if cv is None:
        return "unknown"
    return "stable" if cv <= CV_WARN else "noisy"


def memory_efficiency(median_peak_mb: float | None) -> float | None:
    """The executor API's ``memory_efficiency``: median peak host memory / memory available to the run."""
    available = available_memory_mb()
    if median_peak_mb is None or not available:
        return None
    return median_peak_mb / available


def script_benchmark(
    result: ScriptResult,
    samples: list[RunSample],
    warmups: list[RunSample],
    benchmark_runs: int,
    warmup_runs: int,
    warm: WarmSummary | None,
    mode: str = "process",
) -> ScriptBenchmark:
    stats = {
        metric: describe(metric_values(samples, metric), unit=metric_unit(metric))
        for metric in SAMPLE_METRICS
    }
    wall = stats["wall_time"]
    warnings = list(wall.warnings) if wall.n else []
    if len(metric_values(samples, "wall_time")) < benchmark_runs:
        failed = next((s for s in samples if not s.success), None)
        why = f" ({failed.error_class})" if failed else ""
        warnings.insert(0, f"only {wall.n} of {benchmark_runs} runs succeeded{why}")
    return ScriptBenchmark(
        script_name=result.script_name,
        script_path=result.script_path,
        device_requested=result.device_requested,
        device_used=device_label(result.device_used, result.device_index),  # gpu:1 vs gpu:0 are two devices
        fallback_reason=result.fallback_reason,
        benchmark_runs=benchmark_runs,
        warmup_runs=warmup_runs,
        runs_completed=wall.n,
        samples=samples,
        warmups=warmups,
        statistics=stats,
        mean_execution_time=wall.mean,
        std_execution_time=wall.std,
        performance_stability=stability(wall.cv),  # type: ignore[arg-type]
        memory_efficiency=memory_efficiency(stats["memory_peak"].median),
        warm=warm,
        mode=mode,
        numerics=result.numerics,
        warnings=warnings,
    )


def device_speedups(benchmarks: list[ScriptBenchmark], devices: list[str], metric: str = "wall_time") -> list[DeviceSpeedup]:
    """Per script, each device's speed-up over the first device (baseline median / its median)."""
    if len(devices) < 2:
        return []
    by_key = {(b.script_name, b.device_requested): b for b in benchmarks}
    rows: list[DeviceSpeedup] = []
    names = list(dict.fromkeys(b.script_name for b in benchmarks))
    base_device = devices[0]
    for name in names:
        base = by_key.get((name, base_device))
        for device in devices[1:]:
            other = by_key.get((name, device))
            if base is None or other is None:
                continue
            speedup, low, high = ratio_of_medians_ci(
                metric_values(base.samples, metric), metric_values(other.samples, metric)
            )
            notes = []
            real = True
            for leg in (base, other):
                if leg.device_used != leg.device_requested:
                    real = False
                    notes.append(f"{leg.device_requested} ran on {leg.device_used or 'nothing'}")
            if real and base.device_used == other.device_used:
                real = False
                notes.append(f"both legs ran on {base.device_used}")
            note = None if real else "not a real comparison: " + "; ".join(notes)
            rows.append(
                DeviceSpeedup(
                    script_name=name, baseline_device=base_device, device=device,
                    device_used=other.device_used, metric=metric, speedup=speedup, ci_low=low,
                    ci_high=high, real_comparison=real, note=note,
                )
            )
    return rows


def benchmarking_section(
    benchmarks: list[ScriptBenchmark], benchmark_runs: int, warmup_runs: int, devices: list[str]
) -> BenchmarkingSection:
    """What the execution results' ``benchmarking`` and jax_benchmark_results.json both hold."""
    # Per script first, then summarised: pooling a 0.1 s and a 10 s script's samples would make
    # their spread look like noise.
    timed = [b for b in benchmarks if b.mean_execution_time is not None]
    mean = sum(b.mean_execution_time for b in timed) if timed else None  # type: ignore[misc]
    spread = [b.std_execution_time for b in timed]
    std = math.sqrt(sum(s * s for s in spread)) if timed and all(s is not None for s in spread) else None  # type: ignore[operator]
    cvs = [b.statistics["wall_time"].cv for b in benchmarks if "wall_time" in b.statistics]
    known = [cv for cv in cvs if cv is not None]
    # The batch is as stable as its noisiest script.
    overall = stability(max(known)) if known else "unknown"
    return BenchmarkingSection(
        enabled=True,
        benchmark_runs=benchmark_runs,
        warmup_runs=warmup_runs,
        runs_completed=sum(b.runs_completed for b in benchmarks),
        mean_execution_time=mean,
        std_execution_time=std,
        performance_stability=overall,  # type: ignore[arg-type]
        benchmarks=benchmarks,
        device_comparison=device_speedups(benchmarks, devices),
    )
