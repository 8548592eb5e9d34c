"""``script_results/<name>_result.json``: one file per script, replaced after every benchmark run
and when the result is final (atomically, so a reader never sees half a file)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jaxrun.results import result_files
from jaxrun.plan.sink import BaseSink

if TYPE_CHECKING:
    from jaxrun.outputs.declarations import OutputContext
    from jaxrun.plan.job import Job
    from jaxrun.results.models import ScriptResult


class ScriptFileSink(BaseSink):
    """Writes each result's file; keeps the JSON of the last one it wrote (:meth:`text_of`: the
    batch files sink holds a result as that text, serialized once).

    Once :meth:`stop` is called (the batch stops at a write that failed) no more files are written:
    what room is left is for the batch files, which list every result."""

    def __init__(self) -> None:
        self._last: "tuple[ScriptResult, str | None] | None" = None
        self.stopped = False

    # Not fsynced one by one (the batch files that list them all are): see atomic_write_text.
    def on_progress(self, job: "Job", result: "ScriptResult") -> None:
        if not self.stopped:
            self._write(job, result)

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        self._last = None
        if not self.stopped:
            self._write(job, result)
        return result

    def stop(self) -> None:
        self.stopped = True

    def _write(self, job: "Job", result: "ScriptResult") -> None:
        self._last = None
        text = result_files.dump_json(result)
        path = result_files.script_result_file(job.results_dir, job.file_name)
        result_files.atomic_write_text(path, (result_files.dump_text(result) if text is None else text) + "\n",
                                      durable=False)
        self._last = (result, text)

    def text_of(self, result: "ScriptResult") -> "str | None | Unwritten":
        """The JSON (:func:`~jaxrun.results.result_files.dump_json`'s) this sink last wrote, when it was of
        ``result`` (this very object); else :data:`UNWRITTEN`."""
        last = self._last
        return last[1] if last is not None and last[0] is result else UNWRITTEN


class Unwritten:
    """The type of :data:`UNWRITTEN`."""


UNWRITTEN = Unwritten()  # ScriptFileSink.text_of: no text of that result (None is a text that could not be made)


def for_batch(context: "OutputContext") -> ScriptFileSink:
    return ScriptFileSink()
