"""Run every JAX script under one or more paths: options -> plan -> executor -> sinks.

The results folder (docs/ARCHITECTURE.md, "Results folder") is rewritten after every script, atomically, so a batch cut
off by a crash or Ctrl-C still leaves valid, schema-conforming files describing what ran
(``metadata.complete`` tells whether the batch finished).
"""

from __future__ import annotations

import functools
import logging
import os
from typing import TYPE_CHECKING, Iterable

from jaxrun.core.version import __version__
from jaxrun.batch.folder_lock import ResultsFolderLock, unwritable
from jaxrun.config.options import BatchOptions
from jaxrun.core.defaults import HISTORY_NOT_USED
from jaxrun.core.extras import require
from jaxrun.core.formatting import plural
from jaxrun.core.interpreters import is_other
from jaxrun.core.startup_trace import mark
from jaxrun.core.timestamps import now_iso
from jaxrun.core.validate import log_cap_bytes
from jaxrun.discover.devices import DeviceFacts, device_facts
from jaxrun.errors import DeviceProbeError, ResultsWriteError, UsageError
from jaxrun.executors.base import Executor, RunJob, make_executor
from jaxrun.plan.batch_plan import Plan, search_roots
from jaxrun.plan.job import Job, Jobs
from jaxrun.present.sinks.claims import ClaimSink, RecordSink
from jaxrun.present.sinks.registry import check_output_files, output_files, report_sinks
from jaxrun.present.sinks.run_log import RunLogSink
from jaxrun.results import result_files
from jaxrun.results.ownership import ResultsFolder
from jaxrun.plan.sink import BaseSink, Later, Sink, Sinks
from jaxrun.run import execute
from jaxrun.run.launcher import Launcher
from jaxrun.run.process.spare import spare_environment

if TYPE_CHECKING:
    from jaxrun.judge.history import HistoryStore
    from jaxrun.present.sinks.batch_files import BatchFilesSink
    from jaxrun.results.models import (
        BatchMetadata,
        BatchResult,
        DeviceInfo,
        ScriptResult,
    )

logger = logging.getLogger("jaxrun")


def _profile_sink(options: BatchOptions) -> list[Sink]:
    """``--profile``'s files, its module imported only when the run profiles."""
    if not options.run.enable_profiling:
        return []
    from jaxrun.present.sinks.profile_files import ProfileSink

    return [ProfileSink(options.results_dir)]


def _history_sink(store: "HistoryStore | None", problem: str | None, info: "DeviceInfo | None", options: BatchOptions,
                  meta: "BatchMetadata") -> list[Sink]:
    if store is None and problem is None:
        return []
    from jaxrun.present.sinks.history_sink import HistorySink

    return [HistorySink(store, info, options.allow_mismatch, meta=meta, problem=problem,
                        cold_cache=options.run.cold_cache)]


class _History:
    """The batch's history database: opened before anything runs when the batch benchmarks (a bad
    --history is a usage error, not a late crash), and closed once, however the batch ends."""

    def __init__(self, options: BatchOptions) -> None:
        self.options = options
        self.store: "HistoryStore | None" = None
        self.problem: str | None = None  # why SQLite could not use it (a damaged page): the batch goes on without

    def open(self, *, scripts_ran: bool = False) -> None:
        """A --history that is no history database (a folder, another file) is a UsageError; so
        is a damaged one while no script has run (checked with the rest, exit 2, nothing run).
        Once scripts ran (``scripts_ran``), a damaged history is a note and the batch goes on."""
        from jaxrun.judge.history import HistoryStore, HistoryUnreadable

        if self.store is None and self.problem is None:
            try:
                self.store = HistoryStore(self.options.history)
            except HistoryUnreadable as exc:
                if not scripts_ran:
                    raise UsageError(f"{exc} (or run with --no-history)") from None
                self.problem = exc.problem

    def close(self) -> None:
        if self.store is not None:
            self.store.close()  # the history sink may have closed it already: closing again is nothing


def _header(options: BatchOptions, plan: Plan, complete: bool) -> list[str]:
    """The run log's first lines; what the plan had not yet found (``complete`` False) is said
    when it has (:class:`_PlanFacts`)."""
    run = options.run
    found = plural(plan.found, "script") if complete else "scripts found as they run"
    lines = [f"jaxrun {__version__}: {found}, device={','.join(options.device)}, running on {plan.devices.summary}"]
    if options.config_file is not None:
        lines.append(f"settings from {options.config_file}")
    if complete:
        lines += _plan_lines(plan)
    if run.benchmark_runs:
        lines.append(f"benchmarking: {run.warmup_runs} warm-up + {run.benchmark_runs} counted process runs per script")
    if options.jobs > 1 or options.backend != "local":
        lines.append(f"running up to {plural(options.jobs, 'script')} at once on the {options.backend} backend")
    return lines


def _plan_lines(plan: Plan) -> list[str]:
    return [*plan.devices.notes, *(f"skipped, could not be read: {path}" for path in plan.unreadable),
            *(f"skipped {s.script_name}: {s.reason}" for s in plan.skipped)]


class _PlanFacts(BaseSink):
    """What the plan found, in the batch's metadata as it stands at each write; and, when the
    plan ended after the batch began, the run log's lines about it."""

    def __init__(self, plan: Plan, meta: "BatchMetadata", log: RunLogSink, said: bool, to_run: Jobs,
                 launcher: Launcher | None) -> None:
        self.plan, self.meta, self.log, self.to_run, self.launcher = plan, meta, log, to_run, launcher
        self.said = said  # the run log's header said what the plan found
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
        if self.launcher is not None:
            # No spare process is started after the last job's (run/spare.py: expect).
            self.launcher.expect(_processes_of(self.plan.options, (
                job for job in self.to_run.planned() if job.index not in self.started)))
        self.started = set()  # needed no more (a batch of 10,000 held 10,000 numbers)
        if self.said:
            return
        for line in [f"found {plural(plan.found, 'script')}, running on {plan.devices.summary}", *_plan_lines(plan)]:
            self.log.write(line)

    def on_begin(self, jobs: Jobs) -> None:
        self.update()

    def on_start(self, job: Job, total: int | None) -> None:
        if not self.complete:
            self.started.add(job.index)
        self.update()

    def on_result(self, job: Job, result: "ScriptResult") -> "ScriptResult":
        self.plan.go_on()  # a job ended, whether or not a process started for it
        self.update()
        return result

    def on_end(self, batch: "BatchResult") -> None:
        self.update()


def run_batch(options: BatchOptions, *, sinks: Iterable[Sink] = (), run_job: RunJob | None = None,
              launcher: Launcher | None = None) -> "BatchResult":
    """Run a batch as ``options`` say; ``sinks`` are told of every job after jaxrun's own sinks.
    ``launcher``: the one that starts its processes (the ``jaxrun`` command's, with a spare
    already started; a new one by default); ``run_job``: a stand-in for running a job (tests)."""
    # A file the batch could not write at its end, a backend whose package cannot be imported, or a
    # log cap (JAXRUN_LOG_CAP_BYTES) that is no size, is refused before anything runs or is deleted.
    check_output_files(options)
    log_cap_bytes()
    if options.backend in ("ray", "slurm"):
        require(options.backend)
    launcher = launcher if launcher is not None else Launcher()
    if run_job is None:
        run_job = functools.partial(execute.run_job, attempt=launcher.attempt)
    if options.run.verbose:
        logging.basicConfig(level=logging.INFO, format="[jaxrun] %(message)s")
    try:
        # The facts of the scripts' interpreter (--python: another environment's, read by its child).
        info: DeviceFacts | None = device_facts(python=options.run.python)
    except DeviceProbeError as exc:
        info = None
        logger.warning("device facts unavailable: %s", exc)
    # The plan reads the folder in a thread of its own; a small folder is planned whole here,
    # a large one goes on while its first scripts run (plan/batch_plan.py).
    plan = Plan(options, info).start()
    try:
        return _run_planned(options, sinks, run_job, launcher, plan, info)
    finally:
        plan.stop()


def _run_planned(options: BatchOptions, sinks: Iterable[Sink], run_job: RunJob, launcher: Launcher, plan: Plan,
                 info: DeviceFacts | None) -> "BatchResult":
    plan.wait_ahead()
    history = _History(options)
    try:
        if options.run.benchmark_runs and options.history:
            history.open()
        return _run_in_folder(options, sinks, run_job, launcher, plan, info, history)
    finally:
        history.close()


def _run_in_folder(options: BatchOptions, sinks: Iterable[Sink], run_job: RunJob, launcher: Launcher, plan: Plan,
                   info: DeviceFacts | None, history: _History) -> "BatchResult":
    out = options.results_dir
    lock = ResultsFolderLock(out)
    try:
        if out.exists() and not out.is_dir():
            raise UsageError(f"cannot write the results folder {str(out)!r}: it is a file; pass a folder to --results-dir")
        # Before anything is written there (the lock's file included): whose files it holds.
        folder = ResultsFolder(out)
        folder.check(allow_other_files=options.allow_other_files, names=lambda: [job.file_name for job in plan.all()])
        out.mkdir(parents=True, exist_ok=True)
        lock.acquire()  # before touching anything: a batch running there keeps its files
    except (OSError, UsageError) as exc:
        lock.release()
        if isinstance(exc, UsageError):
            raise
        raise unwritable(out, exc) from None
    try:
        # Made (a Ray cluster reached) before anything in the folder changes: a backend that cannot
        # be reached is a usage error that leaves the folder as it was.
        executor = make_executor(options, info)
    except BaseException:
        lock.release()
        raise
    if options.run.python is None or not is_other(options.run.python):
        # Each script's process starts while the last one's result is written. A spare runs
        # jaxrun's own interpreter: none for a batch under another one (--python).
        launcher.open_spares(spare_environment())
    try:
        return _run_locked(options, sinks, run_job, launcher, plan, info, history, folder, executor)
    finally:
        close = getattr(executor, "close", None)  # what it holds (a Ray connection), when run() did not get to it
        if close is not None:
            close()
        launcher.close()
        folder.close()
        lock.release()


class _HandedOver(BaseSink):
    """For an executor whose jobs start elsewhere: the put-off set-up is done once the first job
    is handed over (a local launch does it once the script's process has started)."""

    def __init__(self, launcher: Launcher) -> None:
        self.launcher = launcher

    def on_start(self, job: Job, total: int) -> None:
        self.launcher.started()


def _processes_of(options: BatchOptions, jobs: Iterable[Job]) -> int:
    """The processes ``jobs`` start, retries and fallbacks aside."""
    runs = (options.options_for(job) for job in jobs)
    return sum(run.warmup_runs + run.benchmark_runs if run.benchmark_runs else 1 for run in runs)


def _build_result_models() -> None:
    """Build what pydantic builds at a model's first use (results/base_model.py: defer_build) for the
    models every script's result goes through, and import the code that turns an ended process
    into its result (run/result.py and what it imports), so that the first result is not kept
    waiting for them after its script's last line."""
    from jaxrun.results.models import BatchResult, ScriptResult
    from jaxrun.run.reading import result  # noqa: F401 - imported for the first result's sake

    for model in (ScriptResult, BatchResult):
        model.model_rebuild()


def _run_locked(options: BatchOptions, sinks: Iterable[Sink], run_job: RunJob, launcher: Launcher, plan: Plan,
                info: DeviceFacts | None, history: _History, folder: ResultsFolder, executor: Executor) -> "BatchResult":
    """The batch, once its results folder is ours."""
    everything, reused = _keep_earlier_results(options, plan, folder, executor)
    if history.store is None and options.history and plan.jobs.complete \
            and any(_benchmarks(job) for job in plan.jobs.planned()):
        # A script's own settings benchmark it: a history that cannot be opened is a usage error
        # before anything runs, as for --benchmark-runs.
        history.open()
    said = plan.jobs.complete
    log = RunLogSink(folder.root / result_files.EXECUTION_LOG, _header(options, plan, said),
                     verbose=options.run.verbose)
    here = getattr(executor, "starts_processes_here", False)  # a backend that does not say: elsewhere
    to_run = Jobs([j for j in everything if j.index not in reused]) if reused else plan.jobs
    # The sinks that write results (and the result models they import) are made once the first
    # script's process has started, while it runs: nothing they do is needed before its first line.
    made = _ResultSinks(options, plan, info, history, log, said, to_run, launcher if here else None)
    results = Later(made.make)
    report = Later(lambda: Sinks(report_sinks(options)))
    chain = Sinks([ClaimSink(folder), results, log, report, RecordSink(folder, options), *sinks])
    if not here:  # its jobs run elsewhere (Ray's workers): a spare here would never be used
        plan.go_on()  # nor a first local script to wait for
        launcher.expect(0)
        chain = Sinks([_HandedOver(launcher), chain])
    elif to_run.complete:
        # How many processes the batch starts, known before the first: the spare started beside
        # each script is not started after the last one (_PlanFacts says so for a plan that ends later).
        launcher.expect(_processes_of(options, to_run.planned()))
    # What the scripts need not wait for is done while the first one runs, the rest of the plan too.
    launcher.when_started(plan.go_on)
    launcher.when_started(lambda: made.files(results).begin())
    launcher.when_started(report.build)
    launcher.when_started(_build_result_models)
    try:
        chain.on_begin(plan.jobs)
        for index, previous in sorted(reused.items()):
            chain.on_result(everything[index], previous.model_copy(update={"kept": True}))
        mark("discovery, plan, device facts and sinks ready")
        executor.run(to_run, run_job, chain)
    except KeyboardInterrupt:
        _interrupted(plan, chain, made.files(results))
        raise
    except ResultsWriteError as exc:
        plan.stop()
        _stop_early(plan.jobs, chain, made.files(results), f"{exc.path} could not be written",
                    "make room (or fix the folder) and run the batch again with --resume")
        raise
    except UsageError as exc:
        if exc is not plan.jobs.error:
            raise
        # The plan found a mistake (a bad '# jaxrun:' comment) after the first scripts ran.
        _stop_early(plan.jobs, chain, made.files(results), "the plan stopped at a mistake",
                    "fix it and run the batch again with --resume")
        ran = sum(1 for r in made.files(results).batch(complete=False).script_results if r.error_class != "interrupted")
        raise UsageError(f"{exc} (the batch stopped after {plural(ran, 'script')}: fix it, then run it again with "
                         "--resume to keep what ran)") from None
    result = made.files(results).batch(complete=True)
    try:
        chain.on_end(result)
    except ResultsWriteError as exc:
        _stop_early(plan.jobs, chain, made.files(results), f"{exc.path} could not be written",
                    "make room (or fix the folder) and run the batch again with --resume")
        raise
    return result


def _keep_earlier_results(options: BatchOptions, plan: Plan, folder: ResultsFolder,
                          executor: Executor) -> "tuple[list[Job], dict[int, ScriptResult]]":
    """With --resume, the whole plan and the earlier results it keeps (by job index); then the
    folder cleared of jaxrun's other files (not those of a job the executor reattaches to, which
    still runs elsewhere), and the files options put there claimed."""
    reused: dict[int, ScriptResult] = {}
    everything: list[Job] = []
    running: set[int] = set()
    try:
        if options.resume:
            from jaxrun.plan.resume import finished_before

            plan.go_on()
            plan.jobs.wait()  # the earlier results are matched to the whole plan
            everything = plan.all()
            reused = finished_before(options, everything)
            elsewhere = getattr(executor, "running_elsewhere", None)
            if elsewhere is not None:
                running = elsewhere(j for j in everything if j.index not in reused)
        kept = {everything[i].file_name for i in (*reused, *running)}
        folder.clear(keep=kept)
        folder.compact(kept)
        for path in output_files(options):
            folder.claim_file(path)
    except OSError as exc:
        raise unwritable(folder.root, exc) from None
    return everything, reused


def _interrupted(plan: Plan, chain: Sink, files: "BatchFilesSink") -> None:
    """Ctrl-C: every script of the batch is in the files, those that never ran marked interrupted."""
    from jaxrun.core.failures import HINTS
    from jaxrun.run.reading.result import failed_before_running

    plan.stop()
    for job in plan.jobs.planned():
        if job.index not in files.reported:
            chain.on_result(job, failed_before_running(
                job, "not run: the batch was interrupted first", "interrupted", hint=HINTS["interrupted"]))
    chain.on_end(files.batch(complete=False))


class _ResultSinks:
    """The sinks that write a batch's results (the history, each script's file, the batch files,
    the profiles) and what they share (the batch's metadata): made by :meth:`make`, which the
    batch calls through a :class:`~jaxrun.results.sink.Later` once its first script is running."""

    def __init__(self, options: BatchOptions, plan: Plan, info: DeviceFacts | None, history: _History,
                 log: RunLogSink, said: bool, to_run: Jobs, launcher: Launcher | None) -> None:
        self.options, self.plan, self.facts, self.history = options, plan, info, history
        self.log, self.said, self.to_run, self.launcher = log, said, to_run, launcher
        self.made: "BatchFilesSink | None" = None
        self.began = now_iso()  # the batch's start, not when these sinks are made

    def files(self, results: Later) -> "BatchFilesSink":
        """The batch files' sink (made now, with the others, if they are not yet)."""
        results.build()
        assert self.made is not None
        return self.made

    def make(self) -> Sink:
        from platform import python_version

        from jaxrun.discover.compile_cache import compile_cache_warning
        from jaxrun.present.sinks.batch_files import BatchFilesSink
        from jaxrun.present.sinks.script_files import ScriptFileSink
        from jaxrun.results.models import BatchMetadata

        options, plan, run = self.options, self.plan, self.options.run
        try:
            info = self.facts.info if self.facts is not None else None
        except DeviceProbeError as exc:
            info = None
            logger.warning("device facts unavailable: %s", exc)
        meta = BatchMetadata(
            jaxrun_version=__version__,
            device_requested=",".join(options.device),
            device_used=plan.devices.summary,
            jax_version=info.jax_version if info else None,
            execution_timestamp=self.began,
            scripts_found=plan.found,
            scripts_executed=0,
            scripts_successful=0,
            scripts_failed=0,
            search_paths=search_roots(options),
            unreadable_paths=plan.unreadable,
            results_dir=str(options.results_dir),
            host=os.uname().nodename,  # gethostname(2)'s name, without importing socket
            python_version=(info.python_version if run.python and info else python_version()),
            python=run.python,
            strict_xfail=options.strict_xfail,
            fail_on_regression=options.fail_on_regression,
            skipped=list(plan.skipped),
            config_file=str(options.config_file) if options.config_file else None,
            compile_cache_warning=compile_cache_warning(run.compile_cache, run.cold_cache, run.env),
        )
        store, problem = self.history.store, self.history.problem
        if store is None and problem is None and options.history:
            # What every run that used JAX compiled is kept: the history is opened at the first
            # result that needs it.
            history: list[Sink] = [_HistoryWhenNeeded(self.history, info, options, meta)]
        else:
            history = _history_sink(store, problem, info, options, meta)
        # The batch files sink holds the results as they stand; the returned batch is its view. It
        # holds each result as the text its own file was written with (serialized once).
        script_files = ScriptFileSink()
        self.made = BatchFilesSink(meta, info, benchmark_runs=run.benchmark_runs, warmup_runs=run.warmup_runs,
                                   devices=options.device, texts=script_files, expected=lambda: plan.jobs.total)
        return Sinks([
            _PlanFacts(plan, meta, self.log, self.said, self.to_run, self.launcher),
            *history,
            script_files,
            *_profile_sink(options),
            self.made,
        ])


def _benchmarks(job: Job) -> bool:
    return job.run_options is not None and bool(job.run_options.benchmark_runs)


def _used_jax(result: "ScriptResult") -> bool:
    return result.compile_environment is not None or bool(result.compiles)


class _HistoryWhenNeeded(BaseSink):
    """The history sink of a batch that may need one, opened at the first result that does: a
    script's own settings benchmark it, or it used JAX (what it compiled is kept); a batch of
    scripts that never use JAX never opens it. A history jaxrun cannot open for a run that only
    used JAX (a folder, a file that is no history, a folder it may not create) is one note in
    the batch's metadata, as an unreadable one; for a benchmark it is a usage error, as before."""

    def __init__(self, history: _History, info: "DeviceInfo | None", options: BatchOptions,
                 meta: "BatchMetadata") -> None:
        self.history, self.info, self.options, self.meta = history, info, options, meta
        self.sink: Sink | None = None

    def on_result(self, job: Job, result: "ScriptResult") -> "ScriptResult":
        if self.sink is None and (_benchmarks(job) or _used_jax(result)):
            try:
                self.history.open(scripts_ran=True)
                store, problem = self.history.store, self.history.problem
            except UsageError as exc:
                if _benchmarks(job):
                    raise
                store, problem = None, f"{HISTORY_NOT_USED}: {exc}"
            self.sink = _history_sink(store, problem, self.info, self.options, self.meta)[0]
        return self.sink.on_result(job, result) if self.sink is not None else result

    def on_end(self, batch: "BatchResult") -> None:
        if self.sink is not None:
            self.sink.on_end(batch)


def _stop_early(jobs: Jobs, chain: Sink, files: "BatchFilesSink", why: str, hint: str) -> None:
    """The batch stops before its end (a file that could not be written: a full disk, an I/O
    error; a mistake the plan found late) and what can still be written is: every script not run
    marked so, the batch files with ``complete: false`` (a later ``--resume`` runs what is
    missing). Further write errors are expected now and left unsaid: the CLI says the first one,
    in one line."""
    from jaxrun.run.reading.result import failed_before_running

    logger.info("the batch stops: %s", why)
    files.release()  # the room kept for the batch files' last rewrite, which lists every result held
    for job in jobs.planned():
        if job.index not in files.reported:
            try:
                chain.on_result(job, failed_before_running(job, f"not run: the batch stopped first ({why})",
                                                           "interrupted", hint=hint))
            except ResultsWriteError:
                pass
    try:
        chain.on_end(files.batch(complete=False))
    except ResultsWriteError:
        pass
