"""What the plan found, said where a reader looks: the run log's first lines, and the batch's
metadata as it stands at each write (the plan of a large folder ends after the batch began)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from jaxrun.config.option_spec import default_of
from jaxrun.core.formatting import plural
from jaxrun.core.version import version
from jaxrun.plan.sink import BaseSink

if TYPE_CHECKING:
    from jaxrun.config.options import BatchOptions
    from jaxrun.outputs.run_log import RunLogSink
    from jaxrun.plan.batch_plan import Plan
    from jaxrun.plan.job import Job, Jobs
    from jaxrun.results.models import BatchMetadata, BatchResult, ScriptResult
    from jaxrun.run.batch_pool import BatchPool


def header(plan: "Plan", complete: bool) -> list[str]:
    """The run log's first lines; what the plan had not yet found (``complete`` False) is said
    when it has (:class:`PlanFacts`)."""
    options = plan.options
    run = options.run
    found = plural(plan.found, "script") if complete else "scripts found as they run"
    lines = [f"jaxrun {version()}: {found}, device={','.join(options.device)}, running on {plan.devices.summary}"]
    if options.config_file is not None:
        lines.append(f"settings from {options.config_file}")
    if complete:
        lines += _plan_lines(plan)
    if run.benchmark_runs:
        lines.append(f"benchmarking: {run.warmup_runs} warm-up + {run.benchmark_runs} counted process runs per script")
    if options.jobs > 1 or options.backend != default_of(type(options), "backend"):
        lines.append(f"running up to {plural(options.jobs, 'script')} at once on the {options.backend} backend")
    return lines


def _plan_lines(plan: "Plan") -> list[str]:
    return [*plan.devices.notes, *(f"skipped, could not be read: {path}" for path in plan.unreadable),
            *(f"skipped {s.script_name}: {s.reason}" for s in plan.skipped)]


def processes_of(options: "BatchOptions", jobs: "Iterable[Job]") -> int:
    """The processes ``jobs`` start, retries and fallbacks aside."""
    runs = (options.options_for(job) for job in jobs)
    return sum(run.warmup_runs + run.benchmark_runs if run.benchmark_runs else 1 for run in runs)


class PlanFacts(BaseSink):
    """What the plan found, in the batch's metadata as it stands at each write; and, when the
    plan ended after the batch began, the run log's lines about it and the processes the rest of
    the batch starts (no spare process is started after the last job's: run/process/spare.py)."""

    def __init__(self, plan: "Plan", meta: "BatchMetadata", log: "RunLogSink", to_run: "Jobs",
                 pool: "BatchPool | None") -> None:
        self.plan, self.meta, self.log, self.to_run, self.pool = plan, meta, log, to_run, pool
        self.said = False  # the run log's header said what the plan found (its maker says so)
        self.complete = False  # what the plan found is all in the metadata and the log
        self.started: set[int] = set()

    def update(self) -> None:
        if self.complete:
            return
        plan, meta = self.plan, self.meta
        complete = plan.jobs.complete
        meta.scripts_found, meta.skipped = plan.found, list(plan.skipped)
        meta.unreadable_paths, meta.device_used = plan.unreadable, plan.devices.summary
        if not complete:
            return
        self.complete = True
        if self.pool is not None:
            self.pool.expect(processes_of(self.plan.options, (
                job for job in self.to_run.planned() if job.index not in self.started)))
        self.started = set()  # needed no more (a batch of 10,000 held 10,000 numbers)
        if self.said:
            return
        for line in [f"found {plural(plan.found, 'script')}, running on {plan.devices.summary}", *_plan_lines(plan)]:
            self.log.write(line)

    def on_begin(self, jobs: "Jobs") -> None:
        self.update()

    def on_start(self, job: "Job", total: int | None) -> None:
        if not self.complete:
            self.started.add(job.index)
        self.update()

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        self.plan.go_on()  # a job ended, whether or not a process started for it
        self.update()
        return result

    def on_end(self, batch: "BatchResult") -> None:
        self.update()
