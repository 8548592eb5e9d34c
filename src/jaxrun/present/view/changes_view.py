"""The view of the history's change points (``jaxrun history --changes``): one column list, each
cell the text a reader sees, laid out by the terminal's table and by Markdown alike."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from jaxrun.core.formatting import fmt_change, fmt_commit, fmt_p
from jaxrun.results.figures import format_metric

if TYPE_CHECKING:
    from jaxrun.results.models import RunMark, SeriesChange


def run_mark(mark: "RunMark") -> str:
    """A run as a change names it: its id, and its commit when known (``+dirty``: uncommitted changes)."""
    return f"run {mark.run_id}" + ("" if mark.git_commit is None else " " + fmt_commit(mark.git_commit, mark.git_dirty))


# Each column: its header, whether it holds numbers (right-aligned), its cell of a change.
CHANGE_COLUMNS: tuple[tuple[str, bool, Callable[["SeriesChange"], str]], ...] = (
    ("script", False, lambda c: c.script_name),
    ("device", False, lambda c: c.device or "-"),
    ("host", False, lambda c: c.host),
    ("last before", False, lambda c: run_mark(c.last_before)),
    ("first after", False, lambda c: run_mark(c.first_after)),
    ("before", True, lambda c: format_metric(c.metric, c.before)),
    ("after", True, lambda c: format_metric(c.metric, c.after)),
    ("change", True, lambda c: fmt_change(c.change, c.change_low, c.change_high)),
    ("p", True, lambda c: fmt_p(c.p_value)),
    ("runs", True, lambda c: f"{c.runs_before} | {c.runs_after}"),
)


def change_cells(change: "SeriesChange") -> list[str]:
    return [cell(change) for _, _, cell in CHANGE_COLUMNS]


def changes_heading(metric: str, where: str, since: str | None = None) -> str:
    return f"where {metric} changed ({where})" + (f", runs since {since}" if since else "")


def no_change_line(metric: str, where: str, since: str | None = None) -> str:
    return f"no change in {metric} in any series of {where!r}" + (f" since {since}" if since else "")
