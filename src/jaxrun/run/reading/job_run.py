"""A multi-process job's attempt (``--processes N``, run/process/process_group.py) read into one:
each process's failure and probe reading, the job's *lead* and its figures (README, "Multi-process
programs").

The job's figures: its wall time from the first start to the last end; ``cpu_time`` and
``memory_peak`` the sums over the processes (they run at once: a sum of peaks, an upper bound of
the peak of their sum); its error, exit status, phases and compiles those of its lead: the first
process that failed, else process 0.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import msgspec.structs

from jaxrun.config.options import RunOptions
from jaxrun.core.defaults import MiB
from jaxrun.plan.job import Job
from jaxrun.run.process.process_group import ProcessGroup, log_paths
from jaxrun.run.process.process_watch import ProcessOutcome, cpu_time_of
from jaxrun.run.reading.classify import Classification, Evidence, classify, stderr_tail
from jaxrun.run.reading.compiles import totals
from jaxrun.run.reading.probe_reading import ProbeReading, memory_peak_mb, phases, read_probe_events

CPU_METHOD = "the sum over the job's processes, each: {method}"


class ProcessRun(msgspec.Struct):
    """One process of the job, as its launch left it."""

    process_id: int
    outcome: ProcessOutcome
    reading: ProbeReading
    failure: Classification | None  # its own failure (a stopped process: "interrupted")
    stopped: str | None  # why jaxrun stopped it, when it had not failed itself
    stdout_log: Path
    stderr_log: Path


class JobRun(msgspec.Struct):
    """The N processes of one attempt and what they make together."""

    processes: list[ProcessRun]
    lead: ProcessRun  # whose error and phases are the job's: the first that failed, else process 0
    outcome: ProcessOutcome  # the job's (see the module's docstring)
    failure: Classification | None


def read_job(job: Job, options: RunOptions, group: ProcessGroup) -> JobRun:
    """The job's processes, its lead and its one outcome, from what its launches left."""
    count, interrupted = len(group.outcomes), group.interrupted
    runs = [_process_run(job, options, k, group.outcomes[k], group.stopped_by.get(k)) for k in range(count)]
    # The lead: the process whose failure came first by its end (the queue's order is the order the
    # launches returned, which their reaping and log draining can shuffle by a few ms).
    failed = [run for run in runs if run.failure is not None and run.stopped is None and not interrupted]
    lead = min(failed, key=lambda run: run.outcome.started + run.outcome.wall_time) if failed else runs[0]
    failure = lead.failure
    if failure is not None:
        failure = msgspec.structs.replace(failure, message=f"process {lead.process_id} of {count}: {failure.message}")
    return JobRun(runs, lead, _job_outcome(lead, runs, group.started, interrupted), failure)


def _process_run(job: Job, options: RunOptions, k: int, outcome: ProcessOutcome, stopped: str | None) -> ProcessRun:
    stdout_log, stderr_log = log_paths(job, k)
    if stopped is not None and not outcome.interrupted:
        stopped = None  # it ended on its own before the stop reached it
    failure = classify(Evidence.of(outcome, options, stderr_tail(stderr_log)))
    return ProcessRun(k, outcome, read_probe_events(outcome.events), failure, stopped, stdout_log, stderr_log)


def sum_known(values: list[float | None]) -> float | None:
    """The sum, or None (unknown) when one of them is unknown."""
    return None if any(v is None for v in values) else sum(values)  # type: ignore[arg-type]


def _job_outcome(lead: ProcessRun, runs: list[ProcessRun], started: float, interrupted: bool) -> ProcessOutcome:
    """The lead's outcome, with the job's wall time, CPU, memory and process counts."""
    last_end = max(run.outcome.started + run.outcome.wall_time for run in runs)
    first_start = min([started, *(run.outcome.started for run in runs)])
    memory = sum_known([memory_peak_mb(run.outcome, run.reading) for run in runs])
    cpu = sum_known([run.outcome.cpu_time for run in runs])
    return msgspec.structs.replace(
        lead.outcome,
        wall_time=last_end - first_start,
        started=first_start,
        cpu_time=cpu,
        cpu_method=CPU_METHOD.format(method=lead.outcome.cpu_method) if cpu is not None else None,
        sampled_peak_rss_bytes=int(memory * MiB) if memory is not None else 0,
        cgroup_peak_bytes=None,  # the lead's group alone is not the job's
        leftovers=sum(run.outcome.leftovers for run in runs),
        peak_processes=sum(run.outcome.peak_processes for run in runs),
        stdout_truncated=any(run.outcome.stdout_truncated for run in runs),
        stderr_truncated=any(run.outcome.stderr_truncated for run in runs),
        log_errors=[note for run in runs for note in run.outcome.log_errors],
        interrupted=interrupted,
        memory_series=runs[0].outcome.memory_series,
    )


def process_results(job_run: JobRun) -> list[dict[str, object]]:
    """Each process's figures, as results/script_result.py's ``ProcessResult`` takes them."""
    results: list[dict[str, object]] = []
    for run in job_run.processes:
        outcome, reading, failure = run.outcome, run.reading, run.failure
        body, imports, work, _ = phases(reading, outcome)
        jit_seconds, compile_count, _, _ = totals(reading.jax_loaded, reading.compiles, reading.compile_cache)
        own_failure = failure if run.stopped is None else None
        results.append(dict(
            process_id=run.process_id, success=failure is None,
            error_class=own_failure.error_class if own_failure else None,
            error_message=own_failure.message if own_failure else None, stopped=run.stopped,
            exit_code=outcome.exit_code, signal=outcome.signal, execution_time=outcome.wall_time,
            body_time=body, import_time=imports, jit_compile_time=jit_seconds, run_time=work,
            cpu_time=cpu_time_of(outcome, reading.cpu_time)[0], memory_peak=memory_peak_mb(outcome, reading),
            compile_count=compile_count, results=reading.results,
            stdout_log=str(run.stdout_log), stderr_log=str(run.stderr_log),
        ))
    return results
