"""The files of a results folder that describe the whole batch (docs/ARCHITECTURE.md, "Results folder"):
``jax_device_info.json`` once, and ``jax_execution_results.json``, ``jax_performance_metrics.json``
and, when benchmarking, ``jax_benchmark_results.json`` after every script (atomically), so a batch
cut off by a crash or Ctrl-C still leaves valid files (``metadata.complete`` says whether it ended).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from .. import __version__, resultfiles
from ..models import BatchMetadata, BatchResult, BenchmarkResults, DeviceInfo, ScriptResult
from ..summary import assemble_batch, performance_metrics
from ..timestamps import now_iso
from . import BaseSink

if TYPE_CHECKING:
    from ..run.job import Job


class BatchFilesSink(BaseSink):
    def __init__(
        self, meta: BatchMetadata, info: DeviceInfo | None, *, benchmark_runs: int, warmup_runs: int,
        devices: Sequence[str],
    ) -> None:
        self.results_dir = Path(meta.results_dir)
        self.meta, self.info = meta, info
        self.benchmark_runs, self.warmup_runs, self.devices = benchmark_runs, warmup_runs, list(devices)
        self._done: dict[int, ScriptResult] = {}

    def on_begin(self, jobs: Sequence["Job"]) -> None:
        if self.info is not None:
            resultfiles.write_model(self.results_dir / resultfiles.DEVICE_INFO, self.info)
        self._write(self.batch(complete=False))

    def on_result(self, job: "Job", result: ScriptResult) -> ScriptResult:
        self._done[job.index] = result
        self._write(self.batch(complete=False))
        return result

    def on_end(self, batch: BatchResult) -> None:
        self._write(batch)

    @property
    def reported(self) -> set[int]:
        """The indices of the jobs whose result is in."""
        return set(self._done)

    def batch(self, complete: bool) -> BatchResult:
        """The batch as it stands: every result so far, in batch order."""
        return assemble_batch(
            self.meta, self.info, [self._done[i] for i in sorted(self._done)], complete=complete,
            benchmark_runs=self.benchmark_runs, warmup_runs=self.warmup_runs, devices=self.devices,
        )

    def _write(self, batch: BatchResult) -> None:
        out = self.results_dir
        if batch.benchmarking.enabled:
            resultfiles.write_model(
                out / resultfiles.BENCHMARK_RESULTS,
                BenchmarkResults(
                    generated_at=now_iso(), host=self.meta.host, jaxrun_version=__version__,
                    jax_version=self.meta.jax_version, **dict(batch.benchmarking),
                ),
            )
        resultfiles.write_model(out / resultfiles.EXECUTION_RESULTS, batch)
        resultfiles.write_model(
            out / resultfiles.PERFORMANCE_METRICS, performance_metrics(batch.script_results, batch.performance_summary)
        )


def _belongs(entry: str, name: str) -> bool:
    """Whether a file or folder of the results folder is script ``name``'s."""
    return entry in (name, f"{name}_result.json") or re.fullmatch(
        rf"{re.escape(name)}(\.attempt\d+)?\.(stdout|stderr)\.log", entry) is not None


def clear_previous_run(results_dir: Path, keep: Iterable[str] = ()) -> None:
    """Per-script files from an earlier batch would pass for this one's: start from a clean slate,
    except for the scripts in ``keep`` (their earlier results are reused by --resume)."""
    kept = set(keep)
    for sub in (resultfiles.SCRIPT_RESULTS_DIR, resultfiles.LOGS_DIR, resultfiles.OUTPUTS_DIR, resultfiles.PROFILING_DIR):
        target = results_dir / sub
        if not target.is_dir():
            continue
        if not kept:
            shutil.rmtree(target)
            continue
        for entry in [*target.iterdir(), *(target / resultfiles.TRACES_DIR).glob("*")]:
            if entry.name == resultfiles.TRACES_DIR or any(_belongs(entry.name, n) for n in kept):
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink(missing_ok=True)
    # jax_device_info.json too: when this run cannot read device facts it writes none, and the
    # previous run's file must not pass for this machine's current state.
    for name in (resultfiles.EXECUTION_LOG, resultfiles.BENCHMARK_RESULTS, resultfiles.DEVICE_INFO):
        (results_dir / name).unlink(missing_ok=True)
