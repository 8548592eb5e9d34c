"""One job after another in this process's own time: the default (``--jobs 1``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from jaxrun.executors.base import BatchInterrupted, RunJob
from jaxrun.plan.job import Jobs
from jaxrun.run.process.placement import WHOLE_MACHINE
from jaxrun.run.runner import RunInterrupted

if TYPE_CHECKING:
    from jaxrun.config.options import BatchOptions
    from jaxrun.discover.devices import Facts
    from jaxrun.plan.job import Job
    from jaxrun.plan.sink import Sink


class SequentialExecutor:
    starts_processes_here = True  # through the batch's pool (run/batch_pool.py)
    def __init__(self, options: "BatchOptions", facts: "Facts | None") -> None:
        self.options = options

    def run(self, jobs: "Jobs | Sequence[Job]", run_job: RunJob, sink: "Sink") -> None:
        jobs = Jobs.of(jobs)
        for job in jobs:  # waits for the plan's next job
            sink.on_start(job, jobs.total)
            try:
                result = run_job(
                    job, self.options.options_for(job), placement=WHOLE_MACHINE, stop=None, sink=sink
                )
            except RunInterrupted as stopped:
                sink.on_result(job, stopped.result)
                raise BatchInterrupted from None
            sink.on_result(job, result)
