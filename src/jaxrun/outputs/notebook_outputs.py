"""``--save-notebooks``: each notebook as it ran, with its outputs, written to
``notebooks/<name>`` in the results folder (``<name>`` ends in ``.ipynb``); the user's file is
only read.

The copy is the notebook itself (cells, ids, metadata kept) with each code cell's outputs and
execution count replaced by this run's: what the cell's Python code printed, as ``stream``
outputs (stdout, stderr; probe/notebook.py keeps them, the logs still have everything, output of
C code and of subprocesses included; a cell that ended the process, ``os._exit`` included, has
what it printed up to then), and an ``error`` output for the cell that raised (the exception's
type, message and traceback) and for the cell the process was stopped in (a timeout: why).
Cells that did not run have no outputs and no count.
Plain ``json`` writes it (nbformat 4; tests/probe/test_notebooks.py validates a copy with nbformat).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jaxrun.probe import notebook_cells
from jaxrun.results import result_files
from jaxrun.plan.sink import BaseSink

if TYPE_CHECKING:
    from jaxrun.outputs.declarations import OutputContext
    from jaxrun.plan.job import Job
    from jaxrun.results.models import CellTiming, ScriptResult


def copy_path(job: "Job") -> Path:
    """``notebooks/<name>``, ``.ipynb`` added when ``<name>`` has another ending (``@device``)."""
    name = job.file_name if job.file_name.endswith(notebook_cells.SUFFIX) else job.file_name + notebook_cells.SUFFIX
    return job.results_dir / result_files.NOTEBOOKS_DIR / name


def _error_output(result: "ScriptResult") -> dict[str, Any]:
    ename = result.exception_type or result.error_class or "Error"
    return {"output_type": "error", "ename": ename, "evalue": (result.error_message or "").removeprefix(f"{ename}: "),
            "traceback": (result.traceback or "").splitlines()}


def _outputs(cell: "CellTiming", result: "ScriptResult") -> list[dict[str, Any]]:
    outputs: list[dict[str, Any]] = [{"output_type": "stream", "name": name, "text": text}
                                     for name, text in cell.outputs or ()]
    # The cell that raised; or the one the process was stopped in (a timeout, a kill: what it
    # printed then is only in the logs), as nbconvert marks a cell that timed out.
    if cell.outcome == "error" or (cell.outcome == "not finished" and result.error_class):
        outputs.append(_error_output(result))
    return outputs


def executed_copy(notebook: dict[str, Any], result: "ScriptResult") -> dict[str, Any]:
    """``notebook`` with the outputs and execution counts of ``result``'s cells."""
    ran = {cell.index: cell for cell in result.cells or () if cell.outcome != "not run"}
    cells = notebook["cells"]
    for code in notebook_cells.code_cells(notebook):
        cell = dict(cells[code.position])
        timing = ran.get(code.number)
        cell["execution_count"] = code.number if timing is not None else None
        cell["outputs"] = _outputs(timing, result) if timing is not None else []
        cells[code.position] = cell
    return notebook


class NotebookSink(BaseSink):
    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        # Only a notebook whose cells sent their outputs (the option may be set for one notebook).
        if result.cells is None or not any(cell.outputs is not None for cell in result.cells):
            return result
        try:
            notebook = notebook_cells.read_whole(str(job.script))
        except (OSError, notebook_cells.NotebookError) as exc:
            result.warnings.append(f"--save-notebooks: the notebook could not be read again ({exc}); no copy written")
            return result
        path = copy_path(job)
        path.parent.mkdir(parents=True, exist_ok=True)
        result_files.atomic_write_text(path, json.dumps(executed_copy(notebook, result), indent=1,
                                                       ensure_ascii=False) + "\n", durable=False)
        return result


def for_batch(context: "OutputContext") -> NotebookSink:
    return NotebookSink()
