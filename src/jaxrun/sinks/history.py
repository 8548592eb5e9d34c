"""The history sink: stores each benchmarked result in the history database and annotates it with
the regression check against earlier comparable runs. The history never costs a batch: once SQLite
cannot read or write it (a damaged page, an I/O error), the sink stops using it, says so once in the
batch's metadata (``history_problem``) and marks each later benchmark "not judged: history
unreadable (...)"."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from ..history import HistoryStore, history_run_from_benchmark
from ..models import RegressionCheck
from . import BaseSink

if TYPE_CHECKING:
    from ..models import BatchMetadata, BatchResult, DeviceInfo, ScriptResult
    from ..job import Job


class HistorySink(BaseSink):
    def __init__(self, store: HistoryStore | None, info: "DeviceInfo | None", allow_mismatch: bool = False, *,
                 meta: "BatchMetadata | None" = None, problem: str | None = None) -> None:
        """``store``: None when it could not be opened, ``problem`` then says why."""
        self.store, self.info, self.allow_mismatch, self.meta = store, info, allow_mismatch, meta
        self.problem: str | None = None
        if problem is not None:
            self._unreadable(problem)

    def _unreadable(self, problem: str) -> None:
        self.problem = problem
        if self.meta is not None:
            self.meta.history_problem = problem
        if self.store is not None:
            try:
                self.store.close()
            except sqlite3.Error:
                pass
            self.store = None

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        bench = result.benchmark
        if bench is None or not bench.runs_completed or bench.history_run_id is not None:
            return result  # nothing measured, or already recorded (a result --resume reuses)
        run = history_run_from_benchmark(
            bench,
            jax_version=self.info.jax_version if self.info else None,
            jaxlib_version=self.info.jaxlib_version if self.info else None,
        )
        run_id = None
        if self.store is not None:
            try:
                run_id = self.store.record(run)
                check = self.store.check_regression(run_id, allow_mismatch=self.allow_mismatch)
            except sqlite3.Error as exc:
                self._unreadable(f"{self.store.path}: {exc}")
        if self.problem is not None:
            check = RegressionCheck(
                script_path=run.script_path, device=run.device_used, host=run.host, gate=[], newest_run_id=run_id,
                previous_runs=0, judged=False, regression=False,
                reason=f"not judged: history unreadable ({self.problem})",
            )
        annotated = bench.model_copy(update={"history_run_id": run_id, "history_check": check})
        return result.model_copy(update={"benchmark": annotated})

    def on_end(self, batch: "BatchResult") -> None:
        if self.store is not None:
            self.store.close()
