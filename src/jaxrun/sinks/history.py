"""The history sink: stores each benchmarked result in the history database and annotates it with
the regression check against earlier comparable runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..history import HistoryStore, history_run_from_benchmark
from . import BaseSink

if TYPE_CHECKING:
    from ..models import BatchResult, DeviceInfo, ScriptResult
    from ..job import Job


class HistorySink(BaseSink):
    def __init__(self, store: HistoryStore, info: "DeviceInfo | None", allow_mismatch: bool = False) -> None:
        self.store, self.info, self.allow_mismatch = store, info, allow_mismatch

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        bench = result.benchmark
        if bench is None or not bench.runs_completed or bench.history_run_id is not None:
            return result  # nothing measured, or already recorded (a result --resume reuses)
        run = history_run_from_benchmark(
            bench,
            jax_version=self.info.jax_version if self.info else None,
            jaxlib_version=self.info.jaxlib_version if self.info else None,
        )
        run_id = self.store.record(run)
        check = self.store.check_regression(run_id, allow_mismatch=self.allow_mismatch)
        annotated = bench.model_copy(update={"history_run_id": run_id, "history_check": check})
        return result.model_copy(update={"benchmark": annotated})

    def on_end(self, batch: "BatchResult") -> None:
        self.store.close()
