"""A batch's outputs (outputs/declarations.py), made stage by stage into the one chain of sinks its
executor tells of every job: the claims and the run log before the first script starts; the
result files (with the batch's metadata) and the reports once its process has started, while it
runs; the record of what each script wrote last; then the caller's own sinks."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Iterable

from jaxrun.batch.plan_facts import PlanFacts, header
from jaxrun.core.timestamps import now_iso
from jaxrun.core.version import version
from jaxrun.errors import DeviceProbeError
from jaxrun.outputs.declarations import OUTPUTS, OutputContext, made
from jaxrun.plan.batch_plan import search_roots
from jaxrun.plan.sink import Later, Sink, Sinks

if TYPE_CHECKING:
    from jaxrun.discover.devices import DeviceFacts
    from jaxrun.outputs.batch_files import BatchFilesSink
    from jaxrun.outputs.history_opener import HistoryOpener
    from jaxrun.outputs.run_log import RunLogSink
    from jaxrun.plan.batch_plan import Plan
    from jaxrun.plan.job import Jobs
    from jaxrun.results.models import BatchMetadata
    from jaxrun.results.ownership import ResultsFolder
    from jaxrun.run.batch_pool import BatchPool

logger = logging.getLogger("jaxrun")


class BatchOutputs:
    def __init__(self, plan: "Plan", folder: "ResultsFolder", history: "HistoryOpener",
                 facts: "DeviceFacts | None") -> None:
        self.plan, self.facts = plan, facts
        self.began = now_iso()  # the batch's start, not when its result files are made
        # The run log's header says what the plan found when it is whole by now; else PlanFacts says it later.
        self.header_complete = complete = plan.jobs.complete
        self.context = OutputContext(plan.options, folder, history, header=lambda: header(plan, complete),
                                     expected=lambda: plan.jobs.total)
        self.results: Later | None = None
        self.reports: Later | None = None

    def chain(self, to_run: "Jobs", pool: "BatchPool | None", sinks: Iterable[Sink]) -> Sinks:
        """Every output in the order it is told of a job, then ``sinks``. ``pool``: the one that
        starts the jobs' processes here (None when they run elsewhere), told how many more the
        batch starts once the plan is whole."""
        context = self.context
        claims, log = made("claims", context), made("log", context)
        self.results = Later(lambda: Sinks([self._plan_facts(to_run, pool), *made("results", self.context)]))
        self.reports = Later(lambda: Sinks(made("reports", self.context, self._with_installed())))
        return Sinks([*claims, self.results, *log, self.reports, *made("record", context), *sinks])

    @property
    def log(self) -> "RunLogSink":
        return self.context.built["run_log"]  # type: ignore[return-value]

    def files(self) -> "BatchFilesSink":
        """The batch files' sink (made now, with the other result files, if it is not yet)."""
        assert self.results is not None
        self.results.build()
        return self.context.built["batch_files"]  # type: ignore[return-value]

    def _plan_facts(self, to_run: "Jobs", pool: "BatchPool | None") -> PlanFacts:
        """The batch's metadata, made first of the result files' stage (the device facts read by
        then), and the sink that keeps what the plan found in it."""
        context = self.context
        try:
            context.facts = self.facts.record if self.facts is not None else None
        except DeviceProbeError as exc:
            context.facts = None
            logger.warning("device facts unavailable: %s", exc)
        context.meta = self._metadata()
        plan_facts = PlanFacts(self.plan, context.meta, self.log, to_run, pool)
        plan_facts.said = self.header_complete
        return plan_facts

    def _metadata(self) -> "BatchMetadata":
        from platform import python_version

        from jaxrun.discover.compile_cache import compile_cache_warning
        from jaxrun.results.models import BatchMetadata

        plan, options, facts = self.plan, self.plan.options, self.context.facts
        run = options.run
        return BatchMetadata(
            jaxrun_version=version(),
            device_requested=",".join(options.device),
            device_used=plan.devices.summary,
            jax_version=facts.jax_version if facts else None,
            execution_timestamp=self.began,
            scripts_found=plan.found,
            scripts_executed=0,
            scripts_successful=0,
            scripts_failed=0,
            search_paths=search_roots(options),
            unreadable_paths=plan.unreadable,
            results_dir=str(options.results_dir),
            host=os.uname().nodename,  # gethostname(2)'s name, without importing socket
            python_version=(facts.python_version if run.python and facts else python_version()),
            python=run.python,
            strict_xfail=options.strict_xfail,
            fail_on_regression=options.fail_on_regression,
            skipped=list(plan.skipped),
            config_file=str(options.config_file) if options.config_file else None,
            compile_cache_warning=compile_cache_warning(run.compile_cache, run.cold_cache, run.env),
        )

    def _with_installed(self) -> tuple:
        """jaxrun's outputs and those other packages installed (made with the reports): looked up
        while the first script runs; one that cannot be loaded is a line of the run log."""
        from jaxrun.outputs.installed import installed_outputs

        found, problems = installed_outputs()
        for name, why in problems.items():
            self.log.write(f"the output {name!r} a package installed is not used: {why}")
        return (*OUTPUTS, *found)
