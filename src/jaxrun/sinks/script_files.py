"""``script_results/<name>_result.json``: one file per script, replaced after every benchmark run
and when the result is final (atomically, so a reader never sees half a file)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import resultfiles
from . import BaseSink

if TYPE_CHECKING:
    from ..models import ScriptResult
    from ..job import Job


class ScriptFileSink(BaseSink):
    # Not fsynced one by one (the batch files that list them all are): see atomic_write_text.
    def on_progress(self, job: "Job", result: "ScriptResult") -> None:
        resultfiles.write_model(resultfiles.script_result_file(job.results_dir, job.file_name), result, durable=False)

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        resultfiles.write_model(resultfiles.script_result_file(job.results_dir, job.file_name), result, durable=False)
        return result
