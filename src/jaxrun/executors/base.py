"""The executor protocol: what every backend (sequential, local parallel, Ray, ...) implements.

An executor is built from the batch options and the device facts, then runs the batch's jobs
(a :class:`~jaxrun.plan.job.Jobs`: iterating it waits for the plan's next job, ``total`` is None while
the plan is still finding them):

* it calls ``sink.on_start(job, total)`` when a job really starts (it got its slot, or its task was
  handed to a worker; ``total``: ``jobs.total``), and ``sink.on_result(job, result)`` once per job with its final result,
  whether it succeeded, failed, or its worker was lost;
* it runs each job with ``run_job`` (:func:`jaxrun.run.execute.run_job` unless a test passes
  another), which follows the one failure table (core/failures.py) for retries and fallback;
* on Ctrl-C it stops every running job, reports each stopped job's (interrupted) result, and
  raises :class:`BatchInterrupted`. Jobs that never started have no result.

An executor that holds something outside this process (Ray's: a connection to the cluster, made
when it is built, so that an unreachable cluster is said before the results folder changes) has a
``close()``, which the batch calls when it ends, whether ``run`` was reached or not.

An executor whose jobs may outlive jaxrun (Slurm's arrays) has ``running_elsewhere(jobs)``: the
indices of the jobs whose earlier run it reattaches to with ``--resume``; the batch keeps their
files while it clears the folder for the rest.

Results may be reported in any order; ``job.index`` is the batch order.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Iterator, Protocol

if TYPE_CHECKING:
    from jaxrun.config.options import BatchOptions, RunOptions
    from jaxrun.discover.devices import Facts
    from jaxrun.plan.job import Job, Jobs
    from jaxrun.results.models import ScriptResult
    from jaxrun.results.script_result import Attempt
    from jaxrun.plan.sink import Sink
    from jaxrun.run.process.placement import Placement


class RunJob(Protocol):
    def __call__(
        self, job: "Job", options: "RunOptions", *, placement: "Placement", stop: "threading.Event | None",
        sink: "Sink",
    ) -> "ScriptResult": ...


class Executor(Protocol):
    # Whether its jobs' processes start on this machine (in this jaxrun process's pool, with
    # its spare process). A backend that hands jobs to other machines says False (the default of
    # a class that does not say): no spare is started here, and the batch's put-off set-up runs
    # when the first job is handed over.
    starts_processes_here: bool = False

    def __init__(self, options: "BatchOptions", facts: "Facts | None") -> None: ...

    def run(self, jobs: "Jobs", run_job: RunJob, sink: "Sink") -> None: ...


class BatchInterrupted(KeyboardInterrupt):
    """Ctrl-C during a batch: running jobs were stopped and their results reported."""


def with_lost_attempts(result: "ScriptResult", lost: "list[Attempt]", why: str) -> "ScriptResult":
    """``result`` (of the last run) after the runs lost with their machine (``why``: "its Ray node
    or worker was lost"): those come first in ``attempts``, and a warning says the script was run
    again."""
    if not lost:
        return result
    from jaxrun.core.formatting import plural

    attempts = [*lost, *(a.model_copy(update={"number": a.number + len(lost)}) for a in result.attempts)]
    note = f"run again after {why} {plural(len(lost), 'time')}: " + "; ".join(a.error_message or "" for a in lost)
    return result.model_copy(update={"attempts": attempts, "warnings": [*result.warnings, note]})


def make_executor(options: "BatchOptions", facts: "Facts | None") -> Executor:
    """The executor the options ask for: ``options.backend``, or sequential for one local job."""
    import importlib

    from jaxrun.executors.backends import of_batch

    module_name, class_name = of_batch(options).executor.split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls(options, facts)


@contextlib.contextmanager
def opened_executor(options: "BatchOptions", facts: "Facts | None") -> Iterator[Executor]:
    """The executor the options ask for, made now (a Ray cluster reached: one that cannot be is a
    usage error before anything changes in the results folder), and closed (what it holds, when its
    ``run`` did not get to it) however the batch ends."""
    executor = make_executor(options, facts)
    try:
        yield executor
    finally:
        close = getattr(executor, "close", None)
        if close is not None:
            close()
