"""``--profile``: ``jax_profiling/memory_profile.json`` and ``jax_profiling/timing_profile.json``,
one entry per profiled script, rewritten (atomically) after each script like the batch files.
The jax.profiler traces and device memory profiles are already under ``jax_profiling/traces/``,
written by the scripts' own processes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from jaxrun.core.timestamps import now_iso
from jaxrun.results import result_files
from jaxrun.results.models import (
    MemoryProfile,
    ScriptMemoryProfile,
    ScriptTimingProfile,
    TimingProfile,
)
from jaxrun.plan.sink import BaseSink

if TYPE_CHECKING:
    from jaxrun.outputs.declarations import OutputContext
    from jaxrun.plan.job import Job
    from jaxrun.results.models import ScriptResult


class ProfileSink(BaseSink):
    def __init__(self, results_dir: Path) -> None:
        self.folder = Path(results_dir) / result_files.PROFILING_DIR
        self.memory: dict[str, ScriptMemoryProfile] = {}
        self.timing: dict[str, ScriptTimingProfile] = {}

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        if result.profile is None:
            return result
        self.memory[job.file_name] = result.profile.memory
        self.timing[job.file_name] = result.profile.timing
        now = now_iso()
        result_files.write_model(self.folder / result_files.MEMORY_PROFILE, MemoryProfile(generated_at=now, scripts=self.memory))
        result_files.write_model(self.folder / result_files.TIMING_PROFILE, TimingProfile(generated_at=now, scripts=self.timing))
        return result


def for_batch(context: "OutputContext") -> ProfileSink:
    return ProfileSink(context.options.results_dir)
