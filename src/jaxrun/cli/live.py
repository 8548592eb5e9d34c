"""The live view of a running batch in a terminal (a sink, like cli/progress.py's plain lines).

A rich ``Live`` on stderr, refreshed 4 times a second, holds a progress bar for the batch with an
ETA, and one line per running script with its device and elapsed time. The ETA comes from the
history: the median wall time of each script's recent runs (``Job.expected_seconds``); scripts
without history count as the mean of the scripts finished so far, and until one has finished the
ETA is unknown ("-"), never a guess. Each finished script leaves its plain line above the view.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Sequence

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ..sinks import BaseSink
from .progress import outcome_text

if TYPE_CHECKING:
    from ..models import ScriptResult
    from ..job import Job


class LiveProgress(BaseSink):
    """The live view of a batch in a terminal (see the module's docstring)."""

    def __init__(self, console: Console, slots: int = 1) -> None:
        self.console = console
        self.slots = max(1, slots)
        self._progress = Progress(
            TextColumn("[bold]jaxrun"), BarColumn(), MofNCompleteColumn(), TextColumn("elapsed"),
            TimeElapsedColumn(), TextColumn("{task.fields[eta]}"), console=console,
        )
        self._task = self._progress.add_task("batch", total=0, eta="ETA -")
        self._running: dict[int, tuple["Job", float]] = {}
        self._expected: dict[int, float | None] = {}
        self._finished_seconds: list[float] = []
        self._live = Live(self, console=console, refresh_per_second=4, transient=True)

    def __rich__(self) -> Group:
        """Rendered at every refresh: the bar, then one line per running script."""
        self._progress.update(self._task, eta=f"ETA {self._eta()}")
        running = Table.grid(padding=(0, 2))
        for job, started in sorted(self._running.values(), key=lambda item: item[1]):
            running.add_row(Text(f"  {job.file_name}"), Text(job.platform or job.device, style="cyan"),
                            Text(f"{time.monotonic() - started:.1f} s", style="dim"))
        return Group(self._progress, running)

    def _eta(self) -> str:
        """Seconds left: expected durations of what has not finished, less what already ran."""
        mean_done = sum(self._finished_seconds) / len(self._finished_seconds) if self._finished_seconds else None
        left = 0.0
        for index, expected in self._expected.items():
            if expected is None:
                if mean_done is None:
                    return "-"
                expected = mean_done
            if index in self._running:
                expected = max(0.0, expected - (time.monotonic() - self._running[index][1]))
            left += expected
        return f"{left / self.slots:.0f} s"

    def on_begin(self, jobs: "Sequence[Job]") -> None:
        self._expected = {job.index: job.expected_seconds for job in jobs}
        self._progress.update(self._task, total=len(jobs))
        self._live.start()

    def on_start(self, job: "Job", total: int) -> None:
        self._running[job.index] = (job, time.monotonic())

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        self._running.pop(job.index, None)
        self._expected.pop(job.index, None)
        if result.execution_time is not None:
            self._finished_seconds.append(result.execution_time)
        self._progress.advance(self._task)
        # Each finished script stays visible above the live view, as a plain line would.
        self._live.console.print(f"  {job.file_name}: {outcome_text(result)}", markup=False, highlight=False,
                                 soft_wrap=True)
        return result

    def on_end(self, batch: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Leave the terminal as it was (also after Ctrl-C)."""
        self._live.stop()
