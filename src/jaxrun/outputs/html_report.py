"""``RESULTS_DIR/report.html`` (``--report``, ``report = true``): the HTML report of a batch that
ran to its end, written from the files the batch wrote, as ``jaxrun report RESULTS_DIR`` writes it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from jaxrun.plan.sink import BaseSink

if TYPE_CHECKING:
    from jaxrun.outputs.declarations import OutputContext
    from jaxrun.results.models import BatchResult


class HtmlReportSink(BaseSink):
    def __init__(self, results_dir: Path) -> None:
        self.results_dir = Path(results_dir)

    def on_end(self, batch: "BatchResult") -> None:
        if not batch.metadata.complete:  # stopped (Ctrl-C, a full disk): its files say so; `jaxrun report` can
            return                       # still draw them, but the stop is not kept waiting for plotly
        from jaxrun.present.reports import (
            write_report,  # plotly: checked before the batch began (outputs/registry.py)
        )

        write_report(self.results_dir)


def for_batch(context: "OutputContext") -> HtmlReportSink:
    return HtmlReportSink(context.options.results_dir)
