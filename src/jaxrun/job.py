"""One script to run, and where its files go: the unit every executor schedules."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import resultfiles
from .options import RunOptions


@dataclass(frozen=True)
class Job:
    index: int  # position in the batch's order; results are reported in this order
    script: Path
    name: str  # the script's batch-unique ``<name>`` (docs/ARCHITECTURE.md, "Results folder")
    file_name: str  # ``<name>``, or ``<name>@<device>`` when a batch runs on several devices
    device: str  # the device asked for
    platform: str | None  # where the batch plans to run it ("cpu", "gpu", "tpu"); None: nowhere
    results_dir: Path
    expected_seconds: float | None = None  # from the history, to start the longest first
    # The job's own run options, when per-script settings changed the batch's (BatchOptions.options_for).
    run_options: RunOptions | None = None
    # What a reader sees (the view's label): the path relative to the folder given, with "/".
    label: str = ""

    @property
    def shown(self) -> str:
        return self.label or self.file_name

    @property
    def stdout_log(self) -> Path:
        return self.results_dir / resultfiles.LOGS_DIR / f"{self.file_name}.stdout.log"

    @property
    def stderr_log(self) -> Path:
        return self.results_dir / resultfiles.LOGS_DIR / f"{self.file_name}.stderr.log"

    @property
    def output_dir(self) -> Path:
        return self.results_dir / resultfiles.OUTPUTS_DIR / self.file_name

    @property
    def profile_dir(self) -> Path:
        """Where ``--profile`` puts this script's jax.profiler trace and device memory profile."""
        return self.results_dir / resultfiles.PROFILING_DIR / resultfiles.TRACES_DIR / self.file_name

    @property
    def result_file(self) -> Path:
        return resultfiles.script_result_path(self.results_dir, self.file_name)
