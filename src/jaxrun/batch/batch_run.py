"""A batch once its results folder is ours: what it keeps of an earlier run (``--resume``), its
outputs told of every job, its jobs run by the executor, and its end however it comes (the last
script's result, Ctrl-C, a file that could not be written, a mistake the plan found late). A stop
at any point leaves valid files: every script of the batch in them, those not run marked so."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Iterable

from jaxrun.batch.folder_lock import unwritable
from jaxrun.batch.plan_facts import processes_of
from jaxrun.batch.put_off import PutOffStartUp
from jaxrun.core.formatting import plural
from jaxrun.core.startup_trace import mark
from jaxrun.errors import ResultsWriteError, UsageError
from jaxrun.outputs.declarations import output_files
from jaxrun.outputs.history_opener import benchmarks
from jaxrun.plan.job import Jobs
from jaxrun.plan.sink import BaseSink, Sink, Sinks

if TYPE_CHECKING:
    from jaxrun.batch.batch_outputs import BatchOutputs
    from jaxrun.executors.base import Executor, RunJob
    from jaxrun.plan.batch_plan import Plan
    from jaxrun.plan.job import Job
    from jaxrun.results.models import BatchResult, ScriptResult
    from jaxrun.results.ownership import ResultsFolder
    from jaxrun.run.batch_pool import BatchPool

logger = logging.getLogger("jaxrun")

RESUME_HINT = "make room (or fix the folder) and run the batch again with --resume"


class _HandedOver(BaseSink):
    """For an executor whose jobs start elsewhere: the put-off start-up is done once the first job
    is handed over (a local launch does it once the script's process has started)."""

    def __init__(self, pool: "BatchPool") -> None:
        self.pool = pool

    def on_start(self, job: "Job", total: int | None) -> None:
        self.pool.started()


class Batch:
    def __init__(self, plan: "Plan", folder: "ResultsFolder", pool: "BatchPool") -> None:
        self.plan, self.options, self.folder, self.pool = plan, plan.options, folder, pool

    def run(self, executor: "Executor", run_job: "RunJob", outputs: "BatchOutputs", sinks: Iterable[Sink]) -> "BatchResult":
        plan, pool = self.plan, self.pool
        everything, reused = self._keep_earlier_results(executor)
        self._open_history_for_scripts_settings(outputs)
        here = getattr(executor, "starts_processes_here", False)  # a backend that does not say: elsewhere
        to_run = Jobs([j for j in everything if j.index not in reused]) if reused else plan.jobs
        chain: Sink = outputs.chain(to_run, pool if here else None, sinks)
        if not here:  # its jobs run elsewhere (Ray's workers): a spare here would never be used
            plan.go_on()  # nor a first local script to wait for
            pool.expect(0)
            chain = Sinks([_HandedOver(pool), chain])
        elif to_run.complete:
            # How many processes the batch starts, known before the first: the spare started beside
            # each script is not started after the last one (PlanFacts says so for a plan that ends later).
            pool.expect(processes_of(self.options, to_run.planned()))
        pool.when_started(PutOffStartUp(plan, outputs))
        try:
            chain.on_begin(plan.jobs)
            for index, previous in sorted(reused.items()):
                chain.on_result(everything[index], previous.model_copy(update={"kept": True}))
            mark("discovery, plan, device facts and sinks ready")
            executor.run(to_run, run_job, chain)
        except KeyboardInterrupt:
            self._interrupted(chain, outputs)
            raise
        except ResultsWriteError as exc:
            self._stop_early(chain, outputs, f"{exc.path} could not be written", RESUME_HINT)
            raise
        except UsageError as exc:
            if exc is not plan.jobs.error:
                raise
            self._stopped_at_a_mistake(chain, outputs, exc)
        return self._end(chain, outputs)

    def _end(self, chain: Sink, outputs: "BatchOutputs") -> "BatchResult":
        result = outputs.files().batch(complete=True)
        try:
            chain.on_end(result)
        except ResultsWriteError as exc:
            self._stop_early(chain, outputs, f"{exc.path} could not be written", RESUME_HINT)
            raise
        return result

    def _open_history_for_scripts_settings(self, outputs: "BatchOutputs") -> None:
        """A script's own settings benchmark it: a history that cannot be opened is a usage error
        before anything runs, as for --benchmark-runs."""
        history, plan = outputs.context.history, self.plan
        if history.store is None and self.options.history and plan.jobs.complete \
                and any(benchmarks(job) for job in plan.jobs.planned()):
            history.open()

    def _keep_earlier_results(self, executor: "Executor") -> "tuple[list[Job], dict[int, ScriptResult]]":
        """With --resume, the whole plan and the earlier results it keeps (by job index); then the
        folder cleared of jaxrun's other files (not those of a job the executor reattaches to, which
        still runs elsewhere), and the files options put there claimed."""
        options, plan, folder = self.options, self.plan, self.folder
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

    def _interrupted(self, chain: Sink, outputs: "BatchOutputs") -> None:
        """Ctrl-C: every script of the batch is in the files, those that never ran marked interrupted."""
        from jaxrun.core.failures import HINTS
        from jaxrun.run.reading.result import failed_before_running

        self.plan.stop()
        files = outputs.files()
        for job in self.plan.jobs.planned():
            if job.index not in files.reported:
                chain.on_result(job, failed_before_running(
                    job, "not run: the batch was interrupted first", "interrupted", hint=HINTS["interrupted"]))
        chain.on_end(files.batch(complete=False))

    def _stopped_at_a_mistake(self, chain: Sink, outputs: "BatchOutputs", exc: UsageError) -> None:
        """The plan found a mistake (a bad '# jaxrun:' comment) after the first scripts ran."""
        self._stop_early(chain, outputs, "the plan stopped at a mistake", "fix it and run the batch again with --resume")
        ran = sum(1 for r in outputs.files().batch(complete=False).script_results if r.error_class != "interrupted")
        raise UsageError(f"{exc} (the batch stopped after {plural(ran, 'script')}: fix it, then run it again with "
                         "--resume to keep what ran)") from None

    def _stop_early(self, chain: Sink, outputs: "BatchOutputs", why: str, hint: str) -> None:
        """The batch stops before its end (a file that could not be written: a full disk, an I/O
        error; a mistake the plan found late) and what can still be written is: every script not run
        marked so, the batch files with ``complete: false`` (a later ``--resume`` runs what is
        missing). Further write errors are expected now and left unsaid: the CLI says the first one,
        in one line."""
        from jaxrun.run.reading.result import failed_before_running

        self.plan.stop()
        logger.info("the batch stops: %s", why)
        files = outputs.files()
        files.release()  # the room kept for the batch files' last rewrite, which lists every result held
        for job in self.plan.jobs.planned():
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
