"""``jax_execution_log.txt``: one timestamped line per event of the batch. What a progress line
already says (a script's start and end, the batch's end) goes to the file only; the rest (the
header, the executor API's performance line) also to the ``jaxrun`` logger, which ``--verbose`` prints:
each fact is said once on the terminal. Every message is one line (a multi-line error is its
first line and ``(+N more lines)``: the full text is in the result file)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from jaxrun.core.formatting import of_total, one_line, plural
from jaxrun.core.timestamps import now_iso
from jaxrun.core.validate import device_label
from jaxrun.errors import ResultsWriteError
from jaxrun.results import result_files
from jaxrun.plan.sink import BaseSink

if TYPE_CHECKING:
    from jaxrun.outputs.declarations import OutputContext
    from jaxrun.plan.job import Job, Jobs
    from jaxrun.results.models import BatchResult, ScriptResult

logger = logging.getLogger("jaxrun")


def _mib(value: float | None) -> str:
    return "memory unknown" if value is None else f"{value:.0f}MiB"


def performance_line(result: "ScriptResult", label: str | None = None) -> str:
    """The executor API's performance line: "Script executed successfully: pomdp_solver.py
    (2.3s, 512MiB)" (wall time, peak memory), or its failure counterpart; the script named by its
    ``label`` in a batch (``sub/model.py``), by its file's name alone."""
    file_name = label or Path(result.script_path).name
    seconds = "time unknown" if result.execution_time is None else f"{result.execution_time:.1f}s"
    if result.success:
        return f"Script executed successfully: {file_name} ({seconds}, {_mib(result.memory_peak)})"
    return (
        f"Script failed: {file_name} ({result.error_class}, {seconds}, {_mib(result.memory_peak)}): "
        f"{one_line(result.error_message)}"
    )


class RunLogSink(BaseSink):
    def __init__(self, path: Path, header: Sequence[str] = (), *, verbose: bool = False) -> None:
        self.path = path
        self.verbose = verbose  # adds the executor API's performance line per script
        self.header = list(header)
        self._jobs: "Jobs | None" = None
        self._handle = None

    def write(self, message: str, *, echo: bool = True) -> None:
        """A line of the log file; ``echo``: also to the logger (what no progress line says)."""
        if echo:
            logger.info(message)
        try:
            if self._handle is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._handle = open(self.path, "a", encoding="utf-8", errors="backslashreplace")
            self._handle.write(f"{now_iso()} {message}\n")
            self._handle.flush()
        except OSError as exc:  # a full disk: one line naming the file, the batch stops (batch/pipeline.py)
            self._drop()
            raise ResultsWriteError(self.path, exc) from None

    def _drop(self) -> None:
        """Close the file, whatever its buffer still held (what the disk would not take)."""
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                handle.close()
            except OSError:
                pass

    @property
    def _total(self) -> str:
        """How many jobs the batch has; ``?`` while its plan is still finding them."""
        return of_total(self._jobs.total if self._jobs is not None else None)

    def on_begin(self, jobs: "Jobs") -> None:
        self._jobs = jobs
        for line in self.header:
            self.write(line)

    def on_start(self, job: "Job", total: int | None) -> None:
        self.write(f"[{job.index + 1}/{of_total(total)}] start {job.shown} ({job.script})", echo=False)

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        state = "ok" if result.success else f"FAILED {result.error_class}: {one_line(result.error_message)}"
        seconds = "time unknown" if result.execution_time is None else f"{result.execution_time:.2f} s"
        self.write(f"[{job.index + 1}/{self._total}] {job.shown} on {device_label(result.device_used, result.device_index)}: {state} ({seconds})",
                   echo=False)
        if self.verbose:
            self.write(performance_line(result, job.shown))
        return result

    def on_end(self, batch: "BatchResult") -> None:
        meta = batch.metadata
        if meta.complete:
            self.write(f"done: {meta.scripts_successful}/{meta.scripts_executed} succeeded", echo=False)
        else:
            self.write(f"interrupted after {meta.scripts_executed} of {plural(self._total, 'run')}", echo=False)
        if self._handle is not None:
            try:
                self._handle.close()
            except OSError as exc:
                self._handle = None
                raise ResultsWriteError(self.path, exc) from None
            self._handle = None


def for_batch(context: "OutputContext") -> RunLogSink:
    return RunLogSink(context.folder.root / result_files.EXECUTION_LOG, context.header(),
                      verbose=context.options.run.verbose)
