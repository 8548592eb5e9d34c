"""Batch-level figures computed from the per-script results (no measurement happens here)."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, NamedTuple, Optional, Sequence, TypeVar

from jaxrun.core.timestamps import now_iso
from jaxrun.core.validate import device_label, split_device
from jaxrun.results import result_files
from jaxrun.results.machine import this_machine
from jaxrun.results.models import (
    BatchMetadata,
    BatchResult,
    BenchmarkingSection,
    DeviceInfo,
    PerformanceMetrics,
    PerformanceSummary,
    ScriptMetrics,
    ScriptResult,
)


def _known(values: list[float | int | None]) -> list[float]:
    return [float(v) for v in values if v is not None]


T = TypeVar("T")


def slowest_first(items: Iterable[T], seconds: Callable[[T], Optional[float]]) -> list[T]:
    """The scripts whose time was measured, the slowest first (ties in batch order): the one
    ranking of the batch's ``slowest_script`` / ``fastest_script`` and the terminal's ``slowest:``
    line. Every script with a time counts: one that failed (a timeout's 10 s are where the batch's
    time went) and one kept from the earlier run by --resume (its result is this batch's)."""
    timed = [(value, item) for item in items if (value := seconds(item)) is not None]
    return [item for _, item in sorted(timed, key=lambda pair: -pair[0])]


def _all_runs_time(result: ScriptResult) -> float | None:
    bench = result.benchmark
    if bench is None:
        return result.execution_time
    walls = [s.wall_time for s in [*bench.warmups, *bench.samples] if s.wall_time is not None]
    return sum(walls) if walls else result.execution_time


class Figures(NamedTuple):
    """What the batch-level figures read of one result (its summary, counts, metrics entry): a
    batch holds these, not its results (results/held_results.py)."""

    script_name: str
    success: bool
    error_class: Optional[str]
    outcome: Optional[str]
    device: Optional[str]  # device_label(device_used, device_index): "cpu", "gpu:1"; None when it ran nowhere
    execution_time: Optional[float]
    all_runs_time: Optional[float]  # every process run's wall time (a benchmark's warm-ups included)
    body_time: Optional[float]
    cpu_time: Optional[float]
    memory_peak: Optional[float]
    device_memory_peak: Optional[float]
    device_utilization: Optional[float]
    jit_compile_time: Optional[float]
    compile_count: Optional[int]
    cache_hits: Optional[int]


def figures_of(r: ScriptResult) -> Figures:
    return Figures(
        script_name=r.script_name, success=r.success, error_class=r.error_class, outcome=r.outcome,
        device=device_label(r.device_used, r.device_index) if r.device_used else None,
        execution_time=r.execution_time, all_runs_time=_all_runs_time(r), body_time=r.body_time, cpu_time=r.cpu_time,
        memory_peak=r.memory_peak, device_memory_peak=r.device_memory_peak, device_utilization=r.device_utilization,
        jit_compile_time=r.jit_compile_time, compile_count=r.compile_count, cache_hits=r.cache_hits,
    )


def performance_summary(results: Sequence[ScriptResult]) -> PerformanceSummary:
    return summary_of_figures([figures_of(r) for r in results])


def summary_of_figures(results: Sequence[Figures]) -> PerformanceSummary:
    """:func:`performance_summary` of the results whose figures are ``results``."""
    if not results:
        return PerformanceSummary()
    times = _known([r.execution_time for r in results])
    # Every process run costs time: a benchmarked script ran W + N times, not once.
    spent = _known([r.all_runs_time for r in results])
    ranked = slowest_first(results, lambda r: r.execution_time)
    slowest, fastest = (ranked[0], ranked[-1]) if ranked else (None, None)
    compile_times = _known([r.jit_compile_time for r in results])
    compile_counts = [r.compile_count for r in results if r.compile_count is not None]
    memory = _known([r.memory_peak for r in results])
    device_memory = _known([r.device_memory_peak for r in results])
    bodies = _known([r.body_time for r in results])
    utilisation = _known([r.device_utilization for r in results])
    return PerformanceSummary(
        total_execution_time=sum(spent) if spent else None,
        average_execution_time=statistics.fmean(times) if times else None,
        median_execution_time=statistics.median(times) if times else None,
        total_body_time=sum(bodies) if bodies else None,
        total_jit_compile_time=sum(compile_times) if compile_times else None,
        total_compile_count=sum(compile_counts) if compile_counts else None,
        peak_memory_mb=max(memory) if memory else None,
        peak_device_memory_mb=max(device_memory) if device_memory else None,
        average_memory_usage=statistics.fmean(memory) if memory else None,
        peak_memory_usage=max(memory) if memory else None,
        device_utilization=statistics.fmean(utilisation) if utilisation else None,
        fastest_script=fastest.script_name if fastest is not None else None,
        slowest_script=slowest.script_name if slowest is not None else None,
        success_rate=sum(r.success for r in results) / len(results),
        error_classes=dict(Counter(r.error_class for r in results if r.error_class)),
    )


def performance_metrics(results: list[ScriptResult], summary: PerformanceSummary | None = None) -> PerformanceMetrics:
    """Per-script metrics plus the aggregate (pass ``summary`` when it is already computed)."""
    head = performance_metrics_head(results, summary)
    return head.model_copy(update={"scripts": {name: script_metrics(r) for name, r in latest_by_name(results)}})


def performance_metrics_head(results: Sequence[ScriptResult] | Sequence[Figures],
                             summary: PerformanceSummary | None = None) -> PerformanceMetrics:
    """:func:`performance_metrics` with no ``scripts`` yet: the batch files sink writes them one
    at a time (``latest_by_name``, ``script_metrics``: result_files.write_model_chunks)."""
    summary = summary if summary is not None else performance_summary(results)  # type: ignore[arg-type]
    return PerformanceMetrics(
        generated_at=now_iso(),
        scripts={},
        aggregate=summary,
        avg_execution_time=summary.average_execution_time,
        peak_memory_mb=summary.peak_memory_mb,
    )


R = TypeVar("R", ScriptResult, Figures)


def latest_by_name(results: Sequence[R]) -> list[tuple[str, R]]:
    """``(script_name, result)`` as a dict keyed by name keeps them: a name's first place, its last result."""
    latest: dict[str, R] = {}
    for r in results:
        latest[r.script_name] = r
    return list(latest.items())


def script_metrics(r: ScriptResult | Figures) -> ScriptMetrics:
    """One entry of jax_performance_metrics.json, of a result or of its figures."""
    return ScriptMetrics(
        execution_time=r.execution_time,
        body_time=r.body_time,
        cpu_time=r.cpu_time,
        memory_peak=r.memory_peak,
        device_memory_peak=r.device_memory_peak,
        device_utilization=r.device_utilization,
        jit_compile_time=r.jit_compile_time,
        compile_count=r.compile_count,
        cache_hits=r.cache_hits,
        success=r.success,
    )


def _counts(results: Sequence[ScriptResult] | Sequence[Figures]) -> dict[str, int]:
    """The metadata's counts of the scripts that ran."""
    return {
        "scripts_executed": len(results),
        "scripts_successful": sum(r.success for r in results),
        "scripts_failed": sum(not r.success for r in results),
        "scripts_xfailed": sum(r.outcome == "xfailed" for r in results),
        "scripts_xpassed": sum(r.outcome == "xpassed" for r in results),
    }


def assemble_batch(
    meta: BatchMetadata,
    facts: DeviceInfo | None,
    results: Sequence[ScriptResult],
    *,
    complete: bool,
    benchmarking: BenchmarkingSection | None = None,
    figures: Sequence[Figures] | None = None,
) -> BatchResult:
    """The batch as it stands: ``results`` in batch order, the metadata counts brought up to date,
    with its ``benchmarking`` section as the caller judged it (judge/benchmark_runs.py). ``results``
    may be a batch's held results (results/held_results.py, not a list): then ``figures`` are
    theirs, and the batch is built around them without reading them."""
    if figures is None:
        figures = [figures_of(r) for r in results]
    used = sorted({f.device for f in figures if f.device})  # "cpu:1": one chosen
    meta = meta.model_copy(
        update={
            "device_used": ",".join(used) if used else meta.device_used,
            **_counts(figures),
            "complete": complete,
            "finished_timestamp": now_iso() if complete else None,
            # Read once the batch ends, off the way to its first script.
            "machine": this_machine(facts) if complete and meta.machine is None else meta.machine,
        }
    )
    if benchmarking is None:
        benchmarking = BenchmarkingSection()
    if facts is not None and used:
        # The executor API's top-level device description is of the device the batch ran on.
        facts = facts.describing(*split_device(used[0]))
    parts = dict(metadata=meta, device_info=facts, performance_summary=summary_of_figures(figures),
                 script_results=results, benchmarking=benchmarking)
    if isinstance(results, list):
        return BatchResult(**parts)
    # Held results are read back one at a time, on use: validating them here would read them all.
    return BatchResult(**parts)


def with_unlisted_results(batch: BatchResult, results_dir: Path) -> BatchResult:
    """A batch file of a batch that did not finish (``metadata.complete`` false) may lag behind:
    its batch files are rewritten at a bounded rate, each script's own result file when it
    finishes. This adds the results that only have their own file (after the listed ones, in the
    order they started) and brings the counts up to date; a finished batch is returned as is."""
    if batch.metadata.complete:
        return batch
    listed = {(r.script_name, r.device_requested) for r in batch.script_results}
    # An unreadable script file: the batch file's view stands.
    found = [result for result, _ in script_files(results_dir).readable
             if (result.script_name, result.device_requested) not in listed]
    if not found:
        return batch
    results = [*batch.script_results, *found]
    meta = batch.metadata.model_copy(update=_counts(results))
    return batch.model_copy(update={"metadata": meta, "script_results": results,
                                    "performance_summary": performance_summary(results)})


class ScriptFiles(NamedTuple):
    readable: list[tuple[ScriptResult, Path]]  # in the order the scripts started
    damaged: list[result_files.DamagedFileError]


def script_files(results_dir: Path) -> ScriptFiles:
    """The per-script result files (``script_results/*_result.json``) of ``results_dir``: what
    each readable one holds, and why each damaged one cannot be used."""
    readable: list[tuple[ScriptResult, Path]] = []
    damaged: list[result_files.DamagedFileError] = []
    for path in sorted((Path(results_dir) / result_files.SCRIPT_RESULTS_DIR).glob("*_result.json")):
        try:
            readable.append((result_files.read_model(path, ScriptResult), path))
        except result_files.DamagedFileError as exc:
            damaged.append(exc)
        except OSError:
            continue  # gone or unreadable since it was listed: as if it had never been written
    readable.sort(key=lambda pair: pair[0].started_at or "")
    return ScriptFiles(readable, damaged)
