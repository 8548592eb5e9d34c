"""The N processes of one attempt of a multi-process job (``--processes N``): N probes of one
script, started together and stopped together (docs/guide/multiprocess.md).

Each process is an ordinary launch (run/process/process_watch.py: its own session, cgroup, logs,
monitor, limits), in a thread of its own; its environment adds the coordinator's address on
localhost (a free port jaxrun chose), the number of processes and its id, which the probe hands
to ``jax.distributed.initialize()`` (probe/cluster.py), and gloo for CPU collectives. The calling
thread watches them: the first process that fails (an error, a signal, a limit) has the others
stopped at once, as Ctrl-C or the batch's stop does, rather than left waiting in a collective for
gloo's own timeouts; ``--timeout`` is the job's (every process gets what is left of it). Only
process 0 may take the batch's spare process (run/process/spare.py): the others start their own
interpreter.

What the processes left is read into the job's one result by run/reading/job_run.py.
"""

from __future__ import annotations

import queue
import socket
import threading
import time
from pathlib import Path

import msgspec
import msgspec.structs

from jaxrun.config.options import RunOptions
from jaxrun.plan.job import Job
from jaxrun.probe.channel import EVENTS_ENV
from jaxrun.probe.cluster import (
    COLLECTIVES_ENV,
    COORDINATOR_ENV,
    PROCESS_COUNT_ENV,
    PROCESS_ID_ENV,
)
from jaxrun.run.process.environment import probe_command
from jaxrun.run.process.process_pool import ProcessPool
from jaxrun.run.process.process_watch import Interrupted, ProcessOutcome, Limits, launch

_WATCH_INTERVAL = 0.02  # seconds between looks at the batch's stop while no process has ended
# SIGTERM to SIGKILL for a process jaxrun stops. Short: a process that called
# jax.distributed.initialize() has JAX's preemption notifier catching SIGTERM (it only marks a
# preemption point), and one waiting in a collective has nothing to save.
KILL_GRACE = 0.5


class ProcessGroup(msgspec.Struct):
    """The N launches of one attempt, as they ended."""

    outcomes: list[ProcessOutcome]  # process k's
    stopped_by: dict[int, str]  # why jaxrun stopped which process, when it had not failed itself
    interrupted: bool  # the user (Ctrl-C) or the batch's stop stopped the job
    started: float  # perf_counter before the first start


def log_paths(job: Job, process_id: int) -> tuple[Path, Path]:
    """``logs/<name>.stdout.log`` for process 0 (a one-process run's), ``logs/<name>.p<k>.stdout.log``
    for process k."""
    own = msgspec.structs.replace(job, process=process_id)
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


def run_group(job: Job, options: RunOptions, env: dict[str, str], events_dir: Path, *,
                     cpu_affinity: tuple[int, ...] | None, stop: threading.Event | None,
                     pool: ProcessPool | None) -> ProcessGroup:
    """Run the job's N processes to their end (or the first failure, the timeout, ``stop``, Ctrl-C:
    then every one is stopped). A job the user or the batch stopped is ``interrupted``."""
    count = options.processes
    address = f"127.0.0.1:{free_port()}"
    started = time.perf_counter()
    halts = [threading.Event() for _ in range(count)]
    outcomes: list[ProcessOutcome | None] = [None] * count
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
                limits=Limits(left, options.memory_limit, options.max_processes, KILL_GRACE),
                cpu_affinity=cpu_affinity, stop=halts[k], record_memory=options.enable_profiling and k == 0,
                pool=pool if k == 0 else None,  # no spare for the others (a launch of their own)
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
    return ProcessGroup(outcomes, stopped_by, interrupted, started)  # type: ignore[arg-type]  # each launch left one


def _failed(outcome: ProcessOutcome) -> bool:
    return bool(outcome.exit_code or outcome.signal is not None or outcome.timed_out or outcome.over_memory_limit
                or outcome.over_process_limit or outcome.exit_code is None)


def _watch(count: int, ended: "queue.SimpleQueue[int]", outcomes: list[ProcessOutcome | None],
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


def job_log_files(job: Job, count: int) -> list[Path]:
    """Every log of the job's processes (a retry keeps them under the attempt's number)."""
    return [log for k in range(count) for log in log_paths(job, k)]
