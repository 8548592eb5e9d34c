"""Run every JAX script under one or more paths: options -> plan -> executor -> sinks.

The results folder (docs/ARCHITECTURE.md, "Results folder") is rewritten after every script, atomically, so a batch cut
off by a crash or Ctrl-C still leaves valid, schema-conforming files describing what ran
(``metadata.complete`` tells whether the batch finished).
"""

from __future__ import annotations

import functools
import logging
import platform as platform_module
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from .. import __version__, resultfiles
from ..cache import compile_cache_warning
from ..devices import get_jax_device_info
from ..errors import DeviceProbeError, ResultsWriteError, UsageError
from ..executors.base import RunJob, make_executor
from ..models import BatchMetadata, BatchResult, DeviceInfo, ScriptResult, SkippedScript
from ..failures import HINTS
from ..options import BatchOptions, RunOptions
from ..run import execute
from ..job import Job
from ..run.launcher import Launcher
from ..run.runner import failed_before_running
from ..run.spare import spare_environment
from ..sinks import BaseSink, Sink, Sinks
from ..sinks.batch_files import BatchFilesSink, clear_previous_run
from ..sinks.run_log import RunLogSink
from ..sinks.registry import report_sinks
from ..sinks.script_files import ScriptFileSink
from ..startup_trace import mark
from ..timestamps import now_iso
from .lock import ResultsFolderLock, unwritable
from .plan import DevicePlan, discover, make_jobs, plan_devices, plan_scripts
from .resume import finished_before

if TYPE_CHECKING:
    from ..history import HistoryStore

logger = logging.getLogger("jaxrun")


def _optional_sink(wanted: bool, where: str, *args: Any) -> list[Sink]:
    """The sink ``module:Class`` of jaxrun.sinks when ``wanted``, imported only then."""
    if not wanted:
        return []
    import importlib

    module, name = where.split(":")
    return [getattr(importlib.import_module(f"..sinks.{module}", __package__), name)(*args)]


def _history_sink(store: "HistoryStore | None", problem: str | None, info: DeviceInfo | None, options: BatchOptions,
                  meta: BatchMetadata) -> list[Sink]:
    if store is None and problem is None:
        return []
    from ..sinks.history import HistorySink

    return [HistorySink(store, info, options.allow_mismatch, meta=meta, problem=problem)]


def _open_history(options: BatchOptions) -> "tuple[HistoryStore | None, str | None]":
    """The history store, or why SQLite could not use it (a damaged page): the batch goes on
    without it. A --history that is no history database (a folder, another file) is a UsageError."""
    from ..history import HistoryStore, HistoryUnreadable  # numpy and scipy: only for a batch that benchmarks

    try:
        return HistoryStore(options.history), None
    except HistoryUnreadable as exc:
        return None, exc.problem


def _header(options: BatchOptions, jobs: list[Job], scripts: int, devices: DevicePlan, unreadable: list[str],
            skipped: list[SkippedScript]) -> list[str]:
    run = options.run
    lines = [f"jaxrun {__version__}: {scripts} script(s), device={','.join(options.device)}, running on {devices.summary}"]
    if options.config_file is not None:
        lines.append(f"settings from {options.config_file}")
    lines += devices.notes
    lines += [f"skipped, could not be read: {path}" for path in unreadable]
    lines += [f"skipped {s.script_name}: {s.reason}" for s in skipped]
    if run.benchmark_runs:
        lines.append(f"benchmarking: {run.warmup_runs} warm-up + {run.benchmark_runs} counted process runs per script")
    if options.jobs > 1 or options.backend != "local":
        lines.append(f"running up to {options.jobs} script(s) at once on the {options.backend} backend")
    return lines


def run_batch(options: BatchOptions, *, sinks: Iterable[Sink] = (), run_job: RunJob | None = None,
              launcher: Launcher | None = None) -> BatchResult:
    """Run a batch as ``options`` say; ``sinks`` are told of every job after jaxrun's own sinks.
    ``launcher``: the one that starts its processes (the ``jaxrun`` command's, with a spare
    already started; a new one by default); ``run_job``: a stand-in for running a job (tests)."""
    launcher = launcher if launcher is not None else Launcher()
    if run_job is None:
        run_job = functools.partial(execute.run_job, attempt=launcher.attempt)
    if options.run.verbose:
        logging.basicConfig(level=logging.INFO, format="[jaxrun] %(message)s")
    scripts, unreadable = discover(options.paths, options.recursive, options.include, options.exclude)

    # Open the history before running anything: a bad --history is a usage error, not a late crash.
    store, history_problem = None, None
    if options.run.benchmark_runs and options.history:
        store, history_problem = _open_history(options)
    out = options.results_dir
    lock = ResultsFolderLock(out)
    try:
        if out.exists() and not out.is_dir():
            raise UsageError(f"cannot write the results folder {str(out)!r}: it is a file; pass a folder to --results-dir")
        out.mkdir(parents=True, exist_ok=True)
        lock.acquire()  # before touching anything: a batch running there keeps its files
    except (OSError, UsageError) as exc:
        lock.release()
        if store is not None:
            store.close()
        if isinstance(exc, UsageError):
            raise
        raise unwritable(out, exc) from None
    launcher.open_spares(spare_environment())  # each script's process starts while the last one's result is written
    try:
        return _run_locked(options, sinks, run_job, launcher, scripts, unreadable, store, history_problem, out)
    finally:
        launcher.close()
        lock.release()


class _HandedOver(BaseSink):
    """For an executor whose jobs start elsewhere: the put-off set-up is done once the first job
    is handed over (a local launch does it once the script's process has started)."""

    def __init__(self, launcher: Launcher) -> None:
        self.launcher = launcher

    def on_start(self, job: Job, total: int) -> None:
        self.launcher.started()


def _processes(run: RunOptions) -> int:
    """The processes a job starts, retries and fallbacks aside."""
    return run.warmup_runs + run.benchmark_runs if run.benchmark_runs else 1


def _build_result_models() -> None:
    """Build what pydantic builds at a model's first use (models/base.py: defer_build) for the
    models every script's result goes through, so that the first result is not kept waiting."""
    for model in (ScriptResult, BatchResult):
        model.model_rebuild()


def _run_locked(
    options: BatchOptions, sinks: Iterable[Sink], run_job: RunJob, launcher: Launcher, scripts: list[tuple[Path, str]],
    unreadable: list[str], store: HistoryStore | None, history_problem: str | None, out: Path,
) -> BatchResult:
    """The batch, once its results folder is ours."""
    try:
        info: DeviceInfo | None = get_jax_device_info()
    except DeviceProbeError as exc:
        info = None
        logger.warning("device facts unavailable: %s", exc)
    planned, skipped = plan_scripts(options, scripts)
    devices = plan_devices(options, info, tuple(d for p in planned for d in p.devices))
    meta = BatchMetadata(
        jaxrun_version=__version__,
        device_requested=",".join(options.device),
        device_used=devices.summary,
        jax_version=info.jax_version if info else None,
        execution_timestamp=now_iso(),
        scripts_found=len(scripts),
        scripts_executed=0,
        scripts_successful=0,
        scripts_failed=0,
        search_paths=[str(p.resolve()) for p in options.paths],
        unreadable_paths=unreadable,
        results_dir=str(out),
        host=socket.gethostname(),
        python_version=platform_module.python_version(),
        strict_xfail=options.strict_xfail,
        fail_on_regression=options.fail_on_regression,
        skipped=skipped,
        config_file=str(options.config_file) if options.config_file else None,
        compile_cache_warning=compile_cache_warning(options.run.compile_cache, options.run.cold_cache, options.run.env),
    )
    jobs = make_jobs(options, planned, devices)
    if store is None and history_problem is None and options.history and any(
            j.run_options is not None and j.run_options.benchmark_runs for j in jobs):
        store, history_problem = _open_history(options)  # a script's own settings benchmark it: its runs are history too
    try:
        reused = finished_before(options, jobs) if options.resume else {}
        clear_previous_run(out, keep={jobs[i].file_name for i in reused})
    except (OSError, UsageError) as exc:
        if store is not None:
            store.close()
        if isinstance(exc, UsageError):
            raise
        raise unwritable(out, exc) from None
    run = options.run
    # The batch files sink holds the results as they stand; the returned batch is its view.
    files = BatchFilesSink(meta, info, benchmark_runs=run.benchmark_runs, warmup_runs=run.warmup_runs,
                           devices=options.device)
    chain = Sinks([
        *_history_sink(store, history_problem, info, options, meta),
        ScriptFileSink(),
        *_optional_sink(run.enable_profiling, "profiles:ProfileSink", out),
        files,
        RunLogSink(out / resultfiles.EXECUTION_LOG, _header(options, jobs, len(scripts), devices, unreadable, skipped),
                   verbose=options.run.verbose),
        *report_sinks(options),
        *sinks,
    ])
    to_run = [j for j in jobs if j.index not in reused]
    executor = make_executor(options, info)
    if getattr(executor, "starts_processes_here", False):  # a backend that does not say: elsewhere
        launcher.expect(sum(_processes(options.options_for(job)) for job in to_run))
    else:  # its jobs run elsewhere (Ray's workers): a spare here would never be used
        launcher.expect(0)
        chain = Sinks([_HandedOver(launcher), chain])
    # What the scripts need not wait for is done while the first one runs.
    launcher.when_started(files.begin)
    launcher.when_started(_build_result_models)
    try:
        chain.on_begin(jobs)
        for index, previous in sorted(reused.items()):
            chain.on_result(jobs[index], previous.model_copy(update={"kept": True}))
        mark("discovery, plan, device facts and sinks ready")
        executor.run(to_run, run_job, chain)
    except KeyboardInterrupt:
        # Every script of the batch is in the files: those that never ran are marked interrupted.
        for job in jobs:
            if job.index not in files.reported:
                chain.on_result(job, failed_before_running(
                    job, "not run: the batch was interrupted first", "interrupted", hint=HINTS["interrupted"]))
        chain.on_end(files.batch(complete=False))
        raise
    except ResultsWriteError as exc:
        _stop_unwritable(jobs, chain, files, exc)
        if store is not None:
            store.close()
        raise
    except BaseException:
        if store is not None:
            store.close()
        raise
    result = files.batch(complete=True)
    try:
        chain.on_end(result)
    except ResultsWriteError as exc:
        _stop_unwritable(jobs, chain, files, exc)
        raise
    return result


def _stop_unwritable(jobs: list[Job], chain: Sink, files: BatchFilesSink, exc: ResultsWriteError) -> None:
    """A file of the batch could not be written (a full disk, an I/O error): the batch stops there,
    and what can still be written is: every script not run marked so, the batch files with
    ``complete: false`` (a later ``--resume`` runs what is missing). Further write errors are
    expected now and left unsaid: the CLI says the first one, in one line."""
    logger.info("the batch stops: %s", exc)
    for job in jobs:
        if job.index not in files.reported:
            try:
                chain.on_result(job, failed_before_running(
                    job, f"not run: the batch stopped first ({exc.path} could not be written)", "interrupted",
                    hint="make room (or fix the folder) and run the batch again with --resume"))
            except ResultsWriteError:
                pass
    try:
        chain.on_end(files.batch(complete=False))
    except ResultsWriteError:
        pass
