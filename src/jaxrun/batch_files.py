"""The files of a batch's results folder that describe the whole batch (DESIGN §4).

``jax_execution_results.json``, ``jax_performance_metrics.json`` and, when benchmarking,
``jax_benchmark_results.json`` are rewritten after every script (atomically), and the run log
gets a timestamped line per event.
"""

from __future__ import annotations

import logging
import shutil
from datetime import datetime, timezone
from pathlib import Path

from . import __version__, resultfiles
from .benchmark import benchmarking_section
from .models import BatchMetadata, BatchResult, BenchmarkingSection, BenchmarkResults, DeviceInfo, ScriptResult
from .runner import now_iso
from .summary import performance_metrics, performance_summary

logger = logging.getLogger("jaxrun")


class RunLog:
    """``jax_execution_log.txt``: one timestamped line per event of the batch."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(path, "a", encoding="utf-8")

    def write(self, message: str) -> None:
        stamp = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        self._handle.write(f"{stamp} {message}\n")
        self._handle.flush()
        logger.info(message)

    def close(self) -> None:
        self._handle.close()


def clear_previous_run(results_dir: Path) -> None:
    """Per-script files from an earlier batch would pass for this one's: start from a clean slate."""
    for sub in (resultfiles.SCRIPT_RESULTS_DIR, resultfiles.LOGS_DIR, resultfiles.OUTPUTS_DIR):
        target = results_dir / sub
        if target.is_dir():
            shutil.rmtree(target)
    # jax_device_info.json too: when this run cannot read device facts it writes none, and the
    # previous run's file must not pass for this machine's current state.
    for name in (resultfiles.EXECUTION_LOG, resultfiles.BENCHMARK_RESULTS, resultfiles.DEVICE_INFO):
        (results_dir / name).unlink(missing_ok=True)


class BatchWriter:
    def __init__(
        self,
        results_dir: Path,
        meta: BatchMetadata,
        info: DeviceInfo | None,
        benchmark_runs: int,
        warmup_runs: int,
        devices: list[str],
    ) -> None:
        self.results_dir, self.meta, self.info = results_dir, meta, info
        self.benchmark_runs, self.warmup_runs, self.devices = benchmark_runs, warmup_runs, devices

    def _benchmarking(self, results: list[ScriptResult]) -> BenchmarkingSection:
        if not self.benchmark_runs:
            return BenchmarkingSection()
        benchmarks = [r.benchmark for r in results if r.benchmark is not None]
        section = benchmarking_section(benchmarks, self.benchmark_runs, self.warmup_runs, self.devices)
        resultfiles.write_model(
            self.results_dir / resultfiles.BENCHMARK_RESULTS,
            BenchmarkResults(
                generated_at=now_iso(), host=self.meta.host, jaxrun_version=__version__,
                jax_version=self.meta.jax_version, **dict(section),
            ),
        )
        return section

    def write(self, results: list[ScriptResult], complete: bool) -> BatchResult:
        used = sorted({r.device_used for r in results if r.device_used})
        meta = self.meta.model_copy(
            update={
                "device_used": ",".join(used) if used else self.meta.device_used,
                "scripts_executed": len(results),
                "scripts_successful": sum(r.success for r in results),
                "scripts_failed": sum(not r.success for r in results),
                "complete": complete,
                "finished_timestamp": now_iso() if complete else None,
            }
        )
        summary = performance_summary(results)
        batch = BatchResult(
            metadata=meta,
            device_info=self.info,
            performance_summary=summary,
            script_results=results,
            benchmarking=self._benchmarking(results),
        )
        resultfiles.write_model(self.results_dir / resultfiles.EXECUTION_RESULTS, batch)
        resultfiles.write_model(self.results_dir / resultfiles.PERFORMANCE_METRICS, performance_metrics(results, summary))
        return batch
