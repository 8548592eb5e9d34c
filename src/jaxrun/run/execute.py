""":func:`run_job`, which every executor (and the API's ``execute_jax_script``) calls to run one
job: once, or W warm-up + N counted process runs when benchmarking."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Callable

from jaxrun.config.options import DEFAULT_WARM_CALLS, RunOptions
from jaxrun.core.timestamps import now_iso
from jaxrun.core.validate import device_label
from jaxrun.plan.job import Job
from jaxrun.plan.sink import NO_SINK, Sink
from jaxrun.run.attempt import make_attempt
from jaxrun.run.process.placement import WHOLE_MACHINE, Placement
from jaxrun.run.runner import AttemptFn, RunInterrupted, run_attempts

if TYPE_CHECKING:
    from jaxrun.discover.devices import Facts
    from jaxrun.results.models import RunSample, ScriptResult, WarmCall

logger = logging.getLogger("jaxrun")

__all__ = ["run_job", "RunInterrupted", "DEFAULT_WARM_CALLS"]


def run_job(
    job: Job,
    options: RunOptions,
    *,
    placement: Placement = WHOLE_MACHINE,
    stop: threading.Event | None = None,
    sink: Sink = NO_SINK,
    attempt: AttemptFn = make_attempt,
    read_facts: "Callable[[], Facts] | None" = None,
) -> ScriptResult:
    """Run one job as ``options`` say; ``sink.on_progress`` sees each benchmark run's result.
    ``attempt`` and ``read_facts``: see :func:`jaxrun.run.runner.run_attempts`.

    Raises :class:`RunInterrupted` (carrying the interrupted result) when stopped.
    """
    if not job.script.is_file():
        # Deleted (or unmounted) after discovery: a result for this script, not the batch's end.
        from jaxrun.run.reading.result import failed_before_running

        return failed_before_running(
            job, f"the script no longer exists (ScriptNotFoundError: no such script {str(job.script)!r})",
            "script_error", hint="the file was removed or moved after jaxrun found it; run again (on a "
            "cluster, e.g. with Ray, check that the script path is reachable on every node)",
        )
    if not options.benchmark_runs:
        return run_attempts(job, options, placement=placement, stop=stop, attempt=attempt, read_facts=read_facts)
    return _benchmark(job, options, placement, stop, sink, attempt, read_facts)


def _benchmark(
    job: Job, options: RunOptions, placement: Placement, stop: threading.Event | None, sink: Sink,
    attempt: AttemptFn, read_facts: "Callable[[], Facts] | None",
) -> ScriptResult:
    """W warm-up then N counted process runs; stops at the first failed run (it would repeat)."""
    samples: list["RunSample"] = []
    warmups: list["RunSample"] = []
    calls: list["WarmCall"] = []
    cell_runs: list[list[Any]] = []  # a notebook's cells, each counted run's
    first: "ScriptResult | None" = None
    result: "ScriptResult | None" = None
    device: str | None = None
    warmup_runs, benchmark_runs = options.warmup_runs, options.benchmark_runs
    for number in range(1, warmup_runs + benchmark_runs + 1):
        warmup = number <= warmup_runs
        result = run_attempts(job, options, placement=placement, stop=stop, device=device, attempt=attempt, read_facts=read_facts)
        if first is None:
            first = result
            # After a fallback, later runs start on the platform that worked: re-trying the
            # missing accelerator each time would only add noise.
            device = device_label(result.device_used, result.device_index) if result.success else None
        # Statistics need numpy (~50 ms to import): only a batch that benchmarks pays for it, once
        # its first run has ended (its result has to be read anyway), not on the way to it.
        from jaxrun.judge.benchmark_runs import (
            sample_from_result,
            script_benchmark,
            warm_summary,
        )

        index = number if warmup else number - warmup_runs
        (warmups if warmup else samples).append(sample_from_result(result, index, warmup))
        if not warmup and result.warm is not None:
            calls += [call.model_copy(update={"run": index}) for call in result.warm.calls]
        if not warmup and result.cells is not None:
            cell_runs.append(result.cells)
        sink.on_progress(job, result)  # progress survives a crash of the parent
        if not result.success:
            break
    assert result is not None and first is not None
    entry = options.entry
    warm = warm_summary(entry, calls) if entry and calls else result.warm
    bench = script_benchmark(result, samples, warmups, benchmark_runs, warmup_runs, warm, options.mode)
    update: dict[str, Any] = {"benchmark": bench, "started_at": first.started_at, "finished_at": now_iso(),
                              **benchmark_medians(result, samples)}
    if "timing" in update and cell_runs and len({len(cells) for cells in cell_runs}) == 1:
        # A notebook's cells, as its headline figures: each cell's median over the counted runs.
        import statistics

        def median(seconds: list[float | None]) -> float | None:  # a cell not run (or not finished) has none
            return None if None in seconds else statistics.median(seconds)  # type: ignore[type-var]

        update["cells"] = [cell.model_copy(update={"seconds": median([run[i].seconds for run in cell_runs])})
                           for i, cell in enumerate(result.cells or ())]
    if entry and calls:
        # The last run's own summary labels its calls run=1 whatever counted run it was, and
        # leaves the other runs out; the result's .warm must say the same as .benchmark.warm.
        update["warm"] = warm
    if first.fallback_reason and not result.fallback_reason:
        update["fallback_reason"] = first.fallback_reason
        update["benchmark"] = bench.model_copy(update={"fallback_reason": first.fallback_reason})
    return result.model_copy(update=update)


def benchmark_medians(last: ScriptResult, samples: list[RunSample]) -> dict[str, Any]:
    """A benchmarked script's headline figures: the median of its counted runs, each figure on its
    own (what the benchmark table prints), labelled in ``timing``. Only when every counted run
    succeeded: a failed run's result keeps its own figures, which say how it failed."""
    if not last.success or not samples or not all(s.success for s in samples):
        return {}
    import statistics

    from jaxrun.results.figures import (
        SCRIPT_FIGURES,  # each figure's result field and aggregate
    )

    medians: dict[str, Any] = {"timing": f"median of {len(samples)} counted run{'s' if len(samples) > 1 else ''}"}
    for figure in SCRIPT_FIGURES:
        values = [v for v in (getattr(s, figure.name) for s in samples) if v is not None]
        # A figure some run could not measure stays that of the last run (null when it is).
        if len(values) == len(samples):
            if figure.aggregate == "median_low":  # a whole number (bytes): the lower middle run's own
                medians[figure.field] = int(statistics.median_low(values))
            else:
                medians[figure.field] = statistics.median(values)
    return medians
