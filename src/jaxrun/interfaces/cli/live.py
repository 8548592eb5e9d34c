"""The live view of a running batch in a terminal (a sink, like interfaces/cli/progress.py's plain lines).

A rich ``Live`` on stderr, refreshed 4 times a second, holds a progress bar for the batch with an
ETA, and one line per running script with its device and elapsed time. The ETA comes from the
history: the median wall time of each script's recent runs (``Job.expected_seconds``); scripts
without history count as the mean of the scripts finished so far, and until one has finished the
ETA is unknown ("-"), never a guess. Each finished script leaves its plain line above the view.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from jaxrun.interfaces.cli.progress import outcome_text
from jaxrun.plan.sink import BaseSink

if TYPE_CHECKING:
    from jaxrun.plan.job import Job, Jobs
    from jaxrun.results.models import ScriptResult


class LiveProgress(BaseSink):
    """The live view of a batch in a terminal (see the module's docstring)."""

    def __init__(self, console: Console, slots: int = 1, runs: int = 1) -> None:
        self.console = console
        self.slots = max(1, slots)
        self.runs = max(1, runs)  # process runs per script: warm-ups + counted runs when benchmarking
        self._bar = BarColumn(complete_style="green", finished_style="green")
        self._progress = Progress(
            TextColumn("[bold]jaxrun"), self._bar, MofNCompleteColumn(), TextColumn("elapsed"),
            TimeElapsedColumn(), TextColumn("{task.fields[eta]}"), console=console,
        )
        self._task = self._progress.add_task("batch", total=0, eta="ETA -")
        self._running: dict[int, tuple["Job", float]] = {}
        self._expected: dict[int, float | None] = {}
        self._runs_of: dict[int, int] = {}  # job index -> its process runs
        self._runs_done: dict[int, list[float]] = {}  # job index -> seconds of its finished runs
        self._finished_seconds: list[float] = []
        self._jobs: "Jobs | None" = None
        self._taken = 0  # jobs of the plan read into _expected and _runs_of
        self._taking = threading.Lock()
        self._live = Live(self, console=console, refresh_per_second=4, transient=True)

    def __rich__(self) -> Group:
        """Rendered at every refresh: the bar, then one line per running script."""
        self._take_planned()
        self._progress.update(self._task, eta=f"ETA {self._eta()}")
        running = Table.grid(padding=(0, 2))
        for job, started in sorted(self._running.values(), key=lambda item: item[1]):
            runs = self._runs_of.get(job.index, 1)
            cells = [Text(f"  {job.shown}"), Text(job.platform or job.device, style="cyan"),
                     Text(f"{time.monotonic() - started:.1f} s", style="dim")]
            if runs > 1:
                cells.append(Text(f"run {min(len(self._runs_done.get(job.index, [])) + 1, runs)}/{runs}", style="dim"))
            running.add_row(*cells)
        return Group(self._progress, running)

    def _eta(self) -> str:
        """Seconds left: expected durations of what has not finished, less what already ran. A
        script benchmarked N times is expected to take N runs; once one of its runs has ended,
        its own runs say how long the rest will take."""
        if self._jobs is not None and not self._jobs.complete:
            return "-"  # the plan is still finding scripts
        mean_done = sum(self._finished_seconds) / len(self._finished_seconds) if self._finished_seconds else None
        left = 0.0
        for index, expected in list(self._expected.items()):
            runs = self._runs_of.get(index, 1)
            done = self._runs_done.get(index, [])
            if done:
                per_run: float | None = sum(done) / len(done)
            else:
                per_run = expected if expected is not None else (mean_done / runs if mean_done is not None else None)
            if per_run is None:
                return "-"
            remaining = per_run * (runs - len(done))
            if index in self._running:
                ran = max(0.0, time.monotonic() - self._running[index][1] - sum(done))  # of the run going on
                remaining = max(0.0, remaining - ran)
            left += remaining
        return f"{left / self.slots:.0f} s"

    def _take_planned(self) -> None:
        """What each job the plan added since expects; the bar's total once the plan is complete."""
        if self._jobs is None:
            return
        with self._taking:  # the refresh's thread and the batch's both call it
            complete = self._jobs.complete
            planned = self._jobs.planned(self._taken)
            for job in planned:
                self._expected[job.index] = job.expected_seconds
                own = job.run_options
                self._runs_of[job.index] = max(1, own.warmup_runs + own.benchmark_runs) if own is not None else self.runs
            self._taken += len(planned)
            if complete and not planned and self._progress.tasks[0].total != self._taken:
                self._progress.update(self._task, total=self._taken)

    def on_begin(self, jobs: "Jobs") -> None:
        self._jobs = jobs
        self._progress.update(self._task, total=None)  # not known until the plan is complete
        self._take_planned()
        self._live.start()

    def on_start(self, job: "Job", total: int | None) -> None:
        self._take_planned()
        self._running[job.index] = (job, time.monotonic())

    def on_progress(self, job: "Job", result: "ScriptResult") -> None:
        """One process run of a benchmarked script ended."""
        if result.execution_time is not None:
            self._runs_done.setdefault(job.index, []).append(result.execution_time)

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        self._take_planned()
        self._running.pop(job.index, None)
        self._expected.pop(job.index, None)
        runs = self._runs_done.pop(job.index, None)
        spent = sum(runs) if runs else result.execution_time
        if spent is not None and not result.kept:
            self._finished_seconds.append(spent)
        if not (result.success or result.outcome == "xfailed"):
            self._bar.complete_style = self._bar.finished_style = "red"  # something failed: the bar says so
        self._progress.advance(self._task)
        # Each finished script stays visible above the live view, as a plain line would.
        text = outcome_text(result) if not result.kept else f"kept from the earlier run ({outcome_text(result)})"
        self._live.console.print(f"  {job.shown}: {text}", markup=False, highlight=False, soft_wrap=True)
        return result

    def on_end(self, batch: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Leave the terminal as it was (also after Ctrl-C)."""
        self._live.stop()
