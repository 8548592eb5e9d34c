"""``--markdown FILE``: the run summary as Markdown tables (what needs attention first: failures and
regressions; then every script), also appended to ``$GITHUB_STEP_SUMMARY`` when that is set, so a
GitHub Actions job shows it on its summary page."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .. import resultfiles
from ..verdicts import describe_gate
from . import BaseSink

if TYPE_CHECKING:
    from ..models import BatchResult, ScriptResult

GITHUB_STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
# Each column with whether it holds numbers (right-aligned): one list, so that the header and the
# alignment row always have as many cells as every row.
_COLUMNS = (("script", False), ("status", False), ("device", False), ("time s", True), ("body s", True),
            ("import s", True), ("JIT s", True), ("run s", True), ("compiles", True), ("peak RSS MB", True),
            ("details", False))


def _cell(value: object) -> str:
    text = "-" if value is None else str(value)
    # A pipe would end the cell, a newline the row.
    return " ".join(text.replace("|", "\\|").split())


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _regression(result: "ScriptResult") -> str | None:
    check = result.benchmark.history_check if result.benchmark is not None else None
    if check is None or not check.regression or check.comparison is None:
        return None
    return f"slower than {check.previous_runs} earlier run(s): {describe_gate(check.comparison)}"


def _row(result: "ScriptResult") -> str:
    regression = _regression(result)
    if not result.success:
        status, details = f"FAILED {result.error_class}", result.error_message
    elif regression:
        status, details = "regression", regression
    else:
        status, details = "ok", None
    device = result.device_used or "-"
    if result.fallback_reason:
        device += f" (fallback from {result.device_requested})"
        details = details or f"fallback: {result.fallback_reason}"
    cells = (
        result.script_name, status, device, _num(result.execution_time), _num(result.body_time),
        _num(result.import_time), _num(result.jit_compile_time), _num(result.run_time), "-" if result.compile_count is None else result.compile_count,
        _num(result.memory_peak, 0), details,
    )
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _table(results: "list[ScriptResult]") -> list[str]:
    header = "| " + " | ".join(name for name, _ in _COLUMNS) + " |"
    align = "|" + "|".join("---:" if numeric else "---" for _, numeric in _COLUMNS) + "|"
    return [header, align, *(_row(r) for r in results)]


def render_markdown(batch: "BatchResult") -> str:
    """The summary of a batch as Markdown."""
    meta = batch.metadata
    results = batch.script_results
    state = "" if meta.complete else " (interrupted before the end)"
    lines = [
        f"## jaxrun: {meta.scripts_successful}/{meta.scripts_executed} scripts succeeded{state}",
        "",
        f"Device asked: `{meta.device_requested}`, used: `{meta.device_used or '-'}`; "
        f"results in `{meta.results_dir}`.",
        "",
    ]
    attention = [r for r in results if not r.success or _regression(r)]
    if attention:
        lines += ["### Failures and regressions", "", *_table(attention), ""]
    lines += ["### Every script", "", *_table(results), ""]
    return "\n".join(lines)


class MarkdownSink(BaseSink):
    def __init__(self, path: Path | None) -> None:
        self.path = path

    def on_end(self, batch: "BatchResult") -> None:
        text = render_markdown(batch)
        if self.path is not None:
            resultfiles.atomic_write_text(self.path, text)
        step_summary = os.environ.get(GITHUB_STEP_SUMMARY)
        if step_summary:
            # GitHub gives each step its own file and shows them all; appending keeps other output.
            with open(step_summary, "a", encoding="utf-8", errors="backslashreplace") as handle:
                handle.write(text + "\n")
