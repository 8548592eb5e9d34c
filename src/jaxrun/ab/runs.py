"""One side's runs of one script (``jaxrun ab``, ``jaxrun bisect``), through the layer a batch runs
its scripts with (run/execute.py's ``run_job``), as ``jaxrun run`` would run the script alone: its
options resolved once (the comparison's run options over ``JAXRUN_*``, the script's own settings
and the config file's, with the persistent compilation cache off: every run compiles), then each
run a job of its own in its pair's folder, placed on a duet's half when there is one, its result
file written as a batch writes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from jaxrun.batch.one_script import checked_script, script_outputs
from jaxrun.config.options import RunOptions
from jaxrun.plan.job import Job
from jaxrun.results import result_files
from jaxrun.results.models import ScriptResult
from jaxrun.results.ownership import take_script_place
from jaxrun.plan.sink import Sink
from jaxrun.run.execute import RunInterrupted, run_job
from jaxrun.run.process.placement import WHOLE_MACHINE, Placement

__all__ = ["ScriptRuns", "script_runs"]


@dataclass(frozen=True)
class ScriptRuns:
    """A script, its name on both sides, and the options of each of its runs."""

    script: Path
    name: str
    options: RunOptions

    def run(self, results_dir: Path, placement: Placement | None = None) -> ScriptResult:
        """One run, its files in ``results_dir`` (a pair's folder: logs, outputs, its result file)."""
        job = Job(index=0, script=self.script, name=self.name, file_name=result_files.file_stem(self.name),
                  device=self.options.device, platform=None, results_dir=results_dir)
        take_script_place(results_dir, job.file_name)
        sink = self._sink(results_dir)
        try:
            result = run_job(job, self.options, placement=placement or WHOLE_MACHINE, sink=sink)
        except RunInterrupted as stopped:
            sink.on_result(job, stopped.result)
            raise
        return sink.on_result(job, result)

    def _sink(self, results_dir: Path) -> Sink:
        return script_outputs(results_dir, self.options)


def script_runs(script: Path, name: str, given: Mapping[str, Any], config: bool) -> ScriptRuns:
    """``script``'s runs with the run options ``given`` (RunOptions' keywords), over the config
    file's (none when ``config`` is False) and the script's own settings."""
    script, options = checked_script(script, {**given, "compile_cache": False}, None if config else False,
                                     lambda where: (f"{script.name}: a sweep ({where}) makes a batch of runs of each "
                                                    "script, and an A/B runs each once per pair: leave it out, or "
                                                    "give one point as params"))
    return ScriptRuns(script, name, options)
