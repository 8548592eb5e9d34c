"""Run every JAX script under one or more paths, as the data flows: checks -> device facts -> plan
-> results folder and lock -> executor -> outputs -> the jobs run -> the batch's end.

The results folder (docs/ARCHITECTURE.md, "Results folder") is rewritten after every script, atomically, so a batch cut
off by a crash or Ctrl-C still leaves valid, schema-conforming files describing what ran
(``metadata.complete`` tells whether the batch finished).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from typing import TYPE_CHECKING, Iterable

from jaxrun.batch.batch_outputs import BatchOutputs
from jaxrun.batch.batch_run import Batch
from jaxrun.batch.folder_lock import held_results_folder
from jaxrun.config.options import BatchOptions
from jaxrun.core.interpreters import is_other
from jaxrun.core.validate import log_cap_bytes
from jaxrun.discover.devices import DeviceFacts, device_facts
from jaxrun.errors import DeviceProbeError
from jaxrun.executors.backends import check_backend
from jaxrun.executors.base import RunJob, opened_executor
from jaxrun.outputs.declarations import check_output_files
from jaxrun.outputs.history_opener import HistoryOpener
from jaxrun.plan.batch_plan import Plan
from jaxrun.plan.sink import Sink
from jaxrun.run import execute
from jaxrun.run.batch_pool import BatchPool
from jaxrun.run.process.spare import spare_environment

if TYPE_CHECKING:
    from jaxrun.results.models import BatchResult

logger = logging.getLogger("jaxrun")


def run_batch(options: BatchOptions, *, sinks: Iterable[Sink] = (), run_job: RunJob | None = None,
              pool: BatchPool | None = None, launcher: BatchPool | None = None) -> "BatchResult":
    """Run a batch as ``options`` say; ``sinks`` are told of every job after jaxrun's own outputs.
    ``pool``: the one that starts its processes (the ``jaxrun`` command's, with a spare
    already started; a new one by default; ``launcher`` is its old name, still accepted);
    ``run_job``: a stand-in for running a job (tests)."""
    check_before_anything_runs(options)
    pool = pool if pool is not None else launcher if launcher is not None else BatchPool()
    run_job = run_job if run_job is not None else functools.partial(execute.run_job, attempt=pool.attempt)
    if options.run.verbose:
        logging.basicConfig(level=logging.INFO, format="[jaxrun] %(message)s")
    facts = facts_of_the_scripts_interpreter(options)
    with contextlib.ExitStack() as stack:
        # The plan reads the folder in a thread of its own; a small folder is planned whole here,
        # a large one goes on while its first scripts run (plan/batch_plan.py).
        plan = stack.enter_context(Plan(options, facts))
        history = stack.enter_context(HistoryOpener(options))  # a benchmark's bad --history: refused now
        folder = stack.enter_context(held_results_folder(options, plan))
        stack.callback(pool.close)
        # Made (a Ray cluster reached) before anything in the folder changes.
        executor = stack.enter_context(opened_executor(options, facts))
        open_start_up(pool, options, executor)
        outputs = BatchOutputs(plan, folder, history, facts)
        return Batch(plan, folder, pool).run(executor, run_job, outputs, sinks)


def open_start_up(pool: BatchPool, options: BatchOptions, executor: object) -> None:
    """How this batch's scripts' processes start (run/process/prestart.py): ``--prestart auto``
    forks them from a prestarted interpreter where the processes start here, opened now so that it
    is ready by the first script; otherwise (or for a batch that execs) a spare keeps each next
    script's interpreter started while the last one's result is written. Neither runs another
    interpreter (--python)."""
    here = getattr(executor, "starts_processes_here", False)
    other = options.run.python is not None and is_other(options.run.python)
    pool.open_prestart("probe" if here and not other else "none", None)
    from jaxrun.run.process.prestart import plan_start

    batch_start = plan_start(options.run, pool.prestart.auto)
    if batch_start.mode != "probe":
        pool.prestart.drop("probe")  # the jaxrun command's, started before its options were read
    if batch_start.mode == "probe":
        pool.spares.close()  # the scripts are forked: a spare would only be stopped again
        pool.prestart.open("probe", spare_environment())
    elif batch_start.mode == "jax":
        pool.spares.close()  # its server starts with the first script's environment (what jax reads)
    elif not other:
        pool.open_spares(spare_environment())


def check_before_anything_runs(options: BatchOptions) -> None:
    """A file the batch could not write at its end, a backend that is unknown, cannot be imported
    or is asked for what it cannot do, or a log cap (JAXRUN_LOG_CAP_BYTES) that is no size: refused
    before anything runs or is deleted."""
    check_output_files(options)
    log_cap_bytes()
    check_backend(options, importable=True)


def facts_of_the_scripts_interpreter(options: BatchOptions) -> DeviceFacts | None:
    """The device facts of the scripts' interpreter (--python: another environment's, read by its
    child); None, said once, when they cannot be read."""
    try:
        return device_facts(python=options.run.python)
    except DeviceProbeError as exc:
        logger.warning("device facts unavailable: %s", exc)
        return None
