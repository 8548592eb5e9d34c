"""``--markdown FILE``: the run summary as Markdown tables (what needs attention first: failures and
regressions; then every script), also appended to ``$GITHUB_STEP_SUMMARY`` when that is set, so a
GitHub Actions job shows it on its summary page."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from jaxrun.core.formatting import fmt
from jaxrun.plan.sink import BaseSink
from jaxrun.results import result_files

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from jaxrun.outputs.declarations import OutputContext
    from jaxrun.present.view import BatchView, ScriptView, SweepView
    from jaxrun.results.models import BatchResult, SeriesChange, SeriesSummary

GITHUB_STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
# Each column: header, whether it holds numbers (right-aligned), its cell of a script's view. One
# list, so that the header and the alignment row always have as many cells as every row.
_COLUMNS: tuple[tuple[str, bool, Callable[["ScriptView"], object]], ...] = (
    ("script", False, lambda s: s.label),
    ("status", False, lambda s: s.status_text + (" (kept)" if s.kept else "")),
    ("device", False, lambda s: s.device_text),
    ("time s", True, lambda s: fmt(s.time)),
    ("body s", True, lambda s: fmt(s.body)),
    ("import s", True, lambda s: fmt(s.import_)),
    ("JIT s", True, lambda s: fmt(s.jit)),
    ("run s", True, lambda s: fmt(s.run)),
    ("compiles", True, lambda s: s.compiles_text),
    ("peak RSS MiB", True, lambda s: fmt(s.memory, 0)),
    ("verdict", False, lambda s: s.verdict),
    ("details", False, lambda s: _details(s)),
)


def _cell(value: object) -> str:
    text = "-" if value is None else str(value)
    # A pipe would end the cell, a newline the row.
    return " ".join(text.replace("|", "\\|").split())


def _details(script: "ScriptView") -> str | None:
    parts = []
    if script.status in ("failed", "xfailed"):
        parts.append((script.error or "") + (f" at {script.location}" if script.location else ""))
    if script.fallback_reason:
        parts.append(f"fallback from {script.device_requested}: {script.fallback_reason}")
    return "; ".join(parts) or None


def _grid(headers: "Sequence[tuple[str, bool]]", rows: "Iterable[Sequence[object]]") -> list[str]:
    """A GFM table's lines: ``headers`` (each a name and whether its column holds numbers:
    right-aligned), then each row of cells."""
    return ["| " + " | ".join(_cell(name) for name, _ in headers) + " |",
            "|" + "|".join("---:" if numeric else "---" for _, numeric in headers) + "|",
            *("| " + " | ".join(_cell(c) for c in cells) + " |" for cells in rows)]


def _table(scripts: "list[ScriptView]", timing_mark: str) -> list[str]:
    rows = []
    for script in scripts:
        cells = [cell(script) for _, _, cell in _COLUMNS]
        if script.timing and timing_mark:
            cells[3] = f"{cells[3]}{timing_mark}"
        rows.append(cells)
    return _grid([(name, numeric) for name, numeric, _ in _COLUMNS], rows)


def _sweep_table(sweep: "SweepView") -> list[str]:
    columns = sweep.columns
    return _grid([(c.label, c.kind not in ("param", "status")) for c in columns],
                 ([p.text(c) for c in columns] for p in sweep.points))


def render_markdown(view: "BatchView") -> str:
    """The view of a run as Markdown (GitHub's flavour: tables)."""
    mark, note = view.timing_note()
    lines = [
        f"## jaxrun: {view.heading}",
        "",
        f"Device asked: `{view.device_requested}`, used: `{view.device_used or '-'}`; "
        f"results in `{view.results_dir}`.",
        "",
    ]
    if note:
        lines += [_cell(note), ""]
    if view.attention:
        lines += ["### Failures and regressions", "", *_table(view.attention, mark), ""]
    lines += ["### Every script", "", *_table(view.scripts, mark), ""]
    for sweep in view.sweeps:
        lines += [f"### Sweep: `{sweep.script}`", "", *_sweep_table(sweep), ""]
        lines += [*(f"- note: {_cell(n)}" for n in sweep.notes), *([""] if sweep.notes else [])]
    extra = [f"- skipped: `{s.label}`: {s.reason}" for s in view.skipped] + [f"- note: {n}" for n in view.notes]
    if extra:
        lines += [*extra, ""]
    return "\n".join(lines)


def render_changes_markdown(changes: "Sequence[SeriesChange]", series: "Sequence[SeriesSummary]", metric: str,
                            where: str, since: str | None = None) -> str:
    """``jaxrun history --changes``'s tables as Markdown (the same cells as the terminal's), for a
    CI to post on a pull request."""
    from jaxrun.present.view.changes_view import (
        CHANGE_COLUMNS,
        SERIES_COLUMNS,
        SERIES_HEADING,
        change_cells,
        changes_heading,
        no_change_line,
        series_cells,
    )

    if changes:
        lines = [f"## jaxrun: {_cell(changes_heading(metric, where, since))}", "",
                 *_grid([(name, numeric) for name, numeric, _ in CHANGE_COLUMNS], map(change_cells, changes)), ""]
    else:
        lines = [f"## jaxrun: {_cell(no_change_line(metric, where, since))}", ""]
    if series:
        lines += [f"### {_cell(SERIES_HEADING)}", "",
                  *_grid([(name, numeric) for name, numeric, _ in SERIES_COLUMNS], map(series_cells, series)), ""]
    return "\n".join(lines)


class MarkdownSink(BaseSink):
    def __init__(self, path: Path | None) -> None:
        self.path = path

    def on_end(self, batch: "BatchResult") -> None:
        from jaxrun.present.view import view_batch

        write_markdown(self.path, render_markdown(view_batch(batch)))


def write_markdown(path: Path | None, text: str) -> None:
    """``text`` to ``path`` (atomically; None: no file) and appended to ``$GITHUB_STEP_SUMMARY``
    when that is set."""
    if path is not None:
        result_files.atomic_write_text(path, text)
    step_summary = os.environ.get(GITHUB_STEP_SUMMARY)
    if step_summary:
        # GitHub gives each step its own file and shows them all; appending keeps other output.
        with open(step_summary, "a", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(text + "\n")


def for_batch(context: "OutputContext") -> MarkdownSink:
    return MarkdownSink(context.options.markdown)
