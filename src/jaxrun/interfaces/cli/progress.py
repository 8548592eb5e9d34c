"""What `jaxrun run` shows while a batch runs elsewhere than in a terminal (CI logs, pipes,
``--quiet``, ``--json``): one plain line per event, greppable. In a terminal it shows the live
view instead (interfaces/cli/live.py). Both are sinks (plan/sink.py), told of every job as it starts
and ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from jaxrun.core.formatting import of_total
from jaxrun.plan.sink import BaseSink

if TYPE_CHECKING:
    from jaxrun.plan.job import Job
    from jaxrun.results.models import ScriptResult


def outcome_text(result: "ScriptResult") -> str:
    """A finished script's one line (interfaces/cli/live.py's too), from the view of a run (jaxrun/view)."""
    import os

    from jaxrun.present.view.script_rows import script_view

    # Where it failed, relative to the script's own folder (the line has no room for more).
    return script_view(result, (os.path.dirname(result.script_path),)).outcome_text()


class LineProgress(BaseSink):
    """``[k/n] name ...`` when the k-th of the n scripts to run starts (``[k/?]`` before the plan
    of a large batch knows n), ``  ok cpu, 1.23 s`` or its
    failure when it ends; a result kept from an earlier run (``--resume``) says so. Plain lines on
    a stream (no rich: its import would delay the first script by ~40 ms)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.started = 0  # jobs started so far
        self._running: set[int] = set()  # their indices, until their result (a batch of 10,000 held them all)

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def on_start(self, job: "Job", total: int | None) -> None:
        # Counted here, not by job.index: kept scripts and several jobs at once leave gaps in it.
        # The total is "?" while a large batch's plan is still finding scripts (plan/batch_plan.py).
        if job.index not in self._running:
            self._running.add(job.index)
            self.started += 1
        self._line(f"[{self.started}/{of_total(total)}] {job.shown} ...")

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        self._running.discard(job.index)
        if not result.kept:
            self._line(f"  {job.shown}: {outcome_text(result)}")
        else:
            self._line(f"  {job.shown}: kept from the earlier run ({outcome_text(result)}, "
                       f"finished {result.finished_at})")
        return result
