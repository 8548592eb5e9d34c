"""One attempt of a multi-process job (``--processes N``): N probes of one script, started together,
stopped together, merged into one outcome (README, "Multi-process programs").

Each process is an ordinary launch (run/process_watch.py: its own session, cgroup, logs, monitor, limits),
in a thread of its own; its environment adds the coordinator's address on localhost (a free port
jaxrun chose), the number of processes and its id, which the probe hands to
``jax.distributed.initialize()`` (probe/cluster.py), and gloo for CPU collectives. The calling
thread watches them: the first process that fails (an error, a signal, a limit) has the others
stopped at once, as Ctrl-C or the batch's stop does, rather than left waiting in a collective for
gloo's own timeouts; ``--timeout`` is the job's (every process gets what is left of it).

The job's figures: its wall time from the first start to the last end; ``cpu_time`` and
``memory_peak`` the sums over the processes (they run at once: a sum of peaks, an upper bound of
the peak of their sum); its error, exit status, phases and compiles those of its *lead*: the first
process that failed, else process 0. Only process 0 may take the batch's spare process
(run/spare.py): the others start their own interpreter.
"""

from __future__ import annotations

import dataclasses
import queue
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from jaxrun.config.options import RunOptions
from jaxrun.core.defaults import MiB
from jaxrun.core.validate import log_cap_bytes
from jaxrun.plan.job import Job
from jaxrun.probe.channel import EVENTS_ENV
from jaxrun.probe.cluster import (
    COLLECTIVES_ENV,
    COORDINATOR_ENV,
    PROCESS_COUNT_ENV,
    PROCESS_ID_ENV,
)
from jaxrun.run.classify import Classification, Evidence, classify, stderr_tail
from jaxrun.run.environment import probe_command
from jaxrun.run.probe_report import ProbeReport, memory_peak_mb, read_probe_report
from jaxrun.run.process_watch import Interrupted, LaunchOutcome, Limits, launch

if TYPE_CHECKING:
    from jaxrun.run.launcher import Launcher

_WATCH_INTERVAL = 0.02  # seconds between looks at the batch's stop while no process has ended
# SIGTERM to SIGKILL for a process jaxrun stops. Short: a process that called
# jax.distributed.initialize() has JAX's preemption notifier catching SIGTERM (it only marks a
# preemption point), and one waiting in a collective has nothing to save.
KILL_GRACE = 0.5

CPU_METHOD = "the sum over the job's processes, each: {method}"


@dataclass
class ProcessRun:
    """One process of the job, as its launch left it."""

    process_id: int
    outcome: LaunchOutcome
    report: ProbeReport
    failure: Classification | None  # its own failure (a stopped process: "interrupted")
    stopped: str | None  # why jaxrun stopped it, when it had not failed itself
    stdout_log: Path
    stderr_log: Path


@dataclass
class JobRun:
    """The N processes of one attempt and what they make together."""

    processes: list[ProcessRun]
    lead: ProcessRun  # whose error and phases are the job's: the first that failed, else process 0
    outcome: LaunchOutcome  # the job's (see the module's docstring)
    failure: Classification | None


def log_paths(job: Job, process_id: int) -> tuple[Path, Path]:
    """``logs/<name>.stdout.log`` for process 0 (a one-process run's), ``logs/<name>.p<k>.stdout.log``
    for process k."""
    own = dataclasses.replace(job, process=process_id)
    return own.stdout_log, own.stderr_log


def free_port() -> int:
    """A TCP port nobody listens on now, for the coordinator (process 0 binds it within a second)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_env(env: dict[str, str], process_id: int, count: int, address: str, events_path: Path) -> dict[str, str]:
    """Process ``process_id``'s environment: the job's, plus what initialize() and gloo need."""
    own = {**env, COORDINATOR_ENV: address, PROCESS_COUNT_ENV: str(count), PROCESS_ID_ENV: str(process_id),
           EVENTS_ENV: str(events_path)}
    own.setdefault(COLLECTIVES_ENV, "gloo")  # a user's "mpi" is kept
    return own


def launch_processes(job: Job, options: RunOptions, env: dict[str, str], events_dir: Path, *,
                     cpu_affinity: tuple[int, ...] | None, stop: threading.Event | None,
                     launcher: "Launcher | None") -> JobRun:
    """Run the job's N processes to their end (or the first failure, the timeout, ``stop``, Ctrl-C:
    then every one is stopped). A job the user or the batch stopped has
    ``outcome.interrupted``."""
    count = options.processes
    address = f"127.0.0.1:{free_port()}"
    started = time.perf_counter()
    halts = [threading.Event() for _ in range(count)]
    outcomes: list[LaunchOutcome | None] = [None] * count
    ended: queue.SimpleQueue[int] = queue.SimpleQueue()
    errors: list[BaseException] = []  # a launch that could not happen (a full disk): raised here

    def run(k: int) -> None:
        stdout_log, stderr_log = log_paths(job, k)
        events_path = events_dir / f"events.p{k}.jsonl"
        left = None if options.timeout is None else max(0.0, options.timeout - (time.perf_counter() - started))
        try:
            outcomes[k] = launch(
                probe_command(job.script, events_path, options, job.profile_dir if k == 0 else None),
                cwd=job.script.parent, env=process_env(env, k, count, address, events_path),
                stdout_log=stdout_log, stderr_log=stderr_log, events_path=events_path,
                limits=Limits(left, options.memory_limit, options.max_processes, KILL_GRACE), log_cap=log_cap_bytes(),
                cpu_affinity=cpu_affinity, stop=halts[k], record_memory=options.enable_profiling and k == 0,
                launcher=launcher if k == 0 else None,  # no spare for the others (a launch of their own)
            )
        except Interrupted as stopped:
            outcomes[k] = stopped.outcome
        except BaseException as error:  # noqa: BLE001 - the others are stopped, then it is raised
            errors.append(error)
        finally:
            ended.put(k)

    threads = [threading.Thread(target=run, args=(k,), name=f"jaxrun-process-{k}", daemon=True) for k in range(count)]
    for thread in threads:
        thread.start()
    interrupted, stopped_by = _watch(count, ended, outcomes, halts, stop)
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    runs = [_process_run(job, options, k, outcomes[k], stopped_by.get(k)) for k in range(count)]  # type: ignore[arg-type]
    # The lead: the process whose failure came first by its end (the queue's order is the order the
    # launches returned, which their reaping and log draining can shuffle by a few ms).
    failed = [run for run in runs if run.failure is not None and run.stopped is None and not interrupted]
    lead = min(failed, key=lambda run: run.outcome.started + run.outcome.wall_time) if failed else runs[0]
    failure = lead.failure
    if failure is not None:
        failure = dataclasses.replace(failure, message=f"process {lead.process_id} of {count}: {failure.message}")
    return JobRun(runs, lead, _job_outcome(lead, runs, started, interrupted), failure)


def _failed(outcome: LaunchOutcome) -> bool:
    return bool(outcome.exit_code or outcome.signal is not None or outcome.timed_out or outcome.over_memory_limit
                or outcome.over_process_limit or outcome.exit_code is None)


def _watch(count: int, ended: "queue.SimpleQueue[int]", outcomes: list[LaunchOutcome | None],
           halts: list[threading.Event], stop: threading.Event | None) -> tuple[bool, dict[int, str]]:
    """Wait for every process; stop the rest when one fails or the user (Ctrl-C, the batch's stop)
    asks. Returns whether the user stopped the job, and why jaxrun stopped which process."""
    pending = set(range(count))
    first_failed: int | None = None
    interrupted = False
    stopped_by: dict[int, str] = {}
    while pending:
        try:
            k = ended.get(timeout=_WATCH_INTERVAL)
        except queue.Empty:
            if stop is not None and stop.is_set() and not interrupted:
                interrupted = True
                for halt in halts:
                    halt.set()
            continue
        except KeyboardInterrupt:  # only this (the main) thread sees Ctrl-C
            interrupted = True
            for halt in halts:
                halt.set()
            continue
        pending.discard(k)
        outcome = outcomes[k]
        if interrupted or first_failed is not None or (outcome is not None and (outcome.interrupted or not _failed(outcome))):
            continue  # (no outcome: its launch raised, the job cannot go on)
        first_failed = k
        for other in pending:
            stopped_by[other] = f"stopped by jaxrun: process {k} failed first"
            halts[other].set()
    return interrupted, stopped_by


def _process_run(job: Job, options: RunOptions, k: int, outcome: LaunchOutcome, stopped: str | None) -> ProcessRun:
    stdout_log, stderr_log = log_paths(job, k)
    if stopped is not None and not outcome.interrupted:
        stopped = None  # it ended on its own before the stop reached it
    failure = classify(Evidence.of(outcome, options, stderr_tail(stderr_log)))
    return ProcessRun(k, outcome, read_probe_report(outcome.events), failure, stopped, stdout_log, stderr_log)


def sum_known(values: list[float | None]) -> float | None:
    """The sum, or None (unknown) when one of them is unknown."""
    return None if any(v is None for v in values) else sum(values)  # type: ignore[arg-type]


def _job_outcome(lead: ProcessRun, runs: list[ProcessRun], started: float, interrupted: bool) -> LaunchOutcome:
    """The lead's outcome, with the job's wall time, CPU, memory and process counts."""
    last_end = max(run.outcome.started + run.outcome.wall_time for run in runs)
    first_start = min([started, *(run.outcome.started for run in runs)])
    memory = sum_known([memory_peak_mb(run.outcome, run.report) for run in runs])
    cpu = sum_known([run.outcome.cpu_time for run in runs])
    return dataclasses.replace(
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
    from jaxrun.run.compiles import totals
    from jaxrun.run.probe_report import phases
    from jaxrun.run.process_watch import cpu_time_of

    results: list[dict[str, object]] = []
    for run in job_run.processes:
        outcome, report, failure = run.outcome, run.report, run.failure
        body, imports, work, _ = phases(report, outcome)
        jit_seconds, compile_count, _, _ = totals(report.jax_loaded, report.compiles, report.compile_cache)
        own_failure = failure if run.stopped is None else None
        results.append(dict(
            process_id=run.process_id, success=failure is None,
            error_class=own_failure.error_class if own_failure else None,
            error_message=own_failure.message if own_failure else None, stopped=run.stopped,
            exit_code=outcome.exit_code, signal=outcome.signal, execution_time=outcome.wall_time,
            body_time=body, import_time=imports, jit_compile_time=jit_seconds, run_time=work,
            cpu_time=cpu_time_of(outcome, report.cpu_time)[0], memory_peak=memory_peak_mb(outcome, report),
            compile_count=compile_count, results=report.results,
            stdout_log=str(run.stdout_log), stderr_log=str(run.stderr_log),
        ))
    return results


def job_log_files(job: Job, count: int) -> list[Path]:
    """Every log of the job's processes (a retry keeps them under the attempt's number)."""
    return [log for k in range(count) for log in log_paths(job, k)]


__all__ = ["JobRun", "ProcessRun", "free_port", "job_log_files", "launch_processes", "log_paths", "process_env",
           "process_results", "sum_known", "CPU_METHOD"]
