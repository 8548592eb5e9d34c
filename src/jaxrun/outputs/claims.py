"""The results folder's manifest (results/ownership.py), told of each script before any of its files
is made (:class:`ClaimSink`, the first sink of a batch, made on the way to the first script: it
imports no result model) and of what its run wrote once it ended (:class:`RecordSink`, after every
sink that writes a script's files)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jaxrun.errors import ResultsWriteError
from jaxrun.results.ownership import ResultsFolder
from jaxrun.plan.sink import BaseSink

if TYPE_CHECKING:
    from jaxrun.outputs.declarations import OutputContext
    from jaxrun.config.options import BatchOptions
    from jaxrun.plan.job import Job
    from jaxrun.results.models import ScriptResult


class ClaimSink(BaseSink):
    """Claims each script's files in the results folder's manifest before any is made: as the
    script starts, or as its result comes in for one that never started (results/ownership.py)."""

    def __init__(self, folder: ResultsFolder) -> None:
        self.folder = folder

    def on_start(self, job: "Job", total: int | None) -> None:
        self._claim(job)

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        self._claim(job)
        return result

    def _claim(self, job: "Job") -> None:
        try:
            self.folder.claim_scripts([job.file_name])
        except OSError as exc:  # a full disk: the batch stops with one line, as for any file of it
            raise ResultsWriteError(self.folder.path, exc) from None


class RecordSink(BaseSink):
    """Records, once a script's result is in and its files are written, which files those are
    (each by its identity): a later run deletes only these very files. A script whose process
    may still run (its backend lost sight of it) is not recorded: its claim stands."""

    def __init__(self, folder: ResultsFolder, options: "BatchOptions") -> None:
        self.folder = folder
        self.options = options  # whose run options say which scripts write jax.profiler traces

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        if result.may_still_run:  # its files may still change: its claim stands until a run sees it end
            return result
        try:
            self.folder.record_script(job.file_name, result,
                                      profiled=self.options.options_for(job).enable_profiling)
        except OSError as exc:
            raise ResultsWriteError(self.folder.path, exc) from None
        return result


def claims_for_batch(context: "OutputContext") -> ClaimSink:
    return ClaimSink(context.folder)


def record_for_batch(context: "OutputContext") -> RecordSink:
    return RecordSink(context.folder, context.options)
