"""The view of the history's change points (``jaxrun history --changes``): one column list, each
cell the text a reader sees, laid out by the terminal's table and by Markdown alike."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from jaxrun.core.formatting import (
    fmt_change,
    fmt_commit,
    fmt_p,
    fmt_ratio,
    fmt_ratio_ci,
    fmt_share,
    plural,
)
from jaxrun.results.figures import format_metric

if TYPE_CHECKING:
    from jaxrun.results.models import ChangeCheck, RunMark, SeriesChange, SeriesSummary


def run_mark(mark: "RunMark") -> str:
    """A run as a change names it: its id, and its commit when known (``+dirty``: uncommitted changes)."""
    return f"run {mark.run_id}" + ("" if mark.git_commit is None else " " + fmt_commit(mark.git_commit, mark.git_dirty))


def check_text(check: "ChangeCheck | None") -> str:
    """A change's confirmation as a reader sees it: its label, what the pairs measured (the ratio
    after / before with its 95% CI, the pairs, p) and, with --bisect, the first slower commit."""
    if check is None:
        return "-"
    parts = [check.verdict]
    if check.ratio is not None:
        parts.append(f"after / before {fmt_ratio(check.ratio)} ({fmt_ratio_ci(check.ratio_ci_low, check.ratio_ci_high)}), "
                     f"{plural(check.pairs, 'pair')}, p {fmt_p(check.p_value)}")
    if check.reason and check.verdict != "confirmed":
        parts.append(check.reason)
    if check.first_slower is not None:
        parts.append(f"first slower: {fmt_commit(check.first_slower)}"
                     + (f" {check.first_slower_subject}" if check.first_slower_subject else ""))
    elif check.bisect_note:
        parts.append(check.bisect_note)
    return "; ".join(parts)


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
    ("found", False, lambda c: "candidate" if c.candidate else "change"),
    ("runs", True, lambda c: f"{c.runs_before} | {c.runs_after}"),
    ("confirmation", False, lambda c: check_text(c.check)),
)


def change_cells(change: "SeriesChange") -> list[str]:
    return [cell(change) for _, _, cell in CHANGE_COLUMNS]


# Each series: what its noise lets the change points see.
SERIES_COLUMNS: tuple[tuple[str, bool, Callable[["SeriesSummary"], str]], ...] = (
    ("script", False, lambda s: s.script_name),
    ("device", False, lambda s: s.device or "-"),
    ("host", False, lambda s: s.host),
    ("runs", True, lambda s: str(s.runs)),
    ("noise", True, lambda s: fmt_share(s.noise)),
    ("smallest step found", True, lambda s: fmt_share(s.smallest_step)),
    ("changes", True, lambda s: str(s.changes)),
    ("candidates", True, lambda s: str(s.candidates)),
)


def series_cells(summary: "SeriesSummary") -> list[str]:
    return [cell(summary) for _, _, cell in SERIES_COLUMNS]


SERIES_HEADING = ("each series: its noise, and the smallest step its change points find about 4 times in 5 "
                  "(smaller ones are candidates at best: --confirm decides them)")


def alarms(change: "SeriesChange") -> bool:
    """Whether ``change`` is one ``--fail-on-change`` counts: a change (a candidate once confirmed),
    never a refuted one."""
    verdict = change.check.verdict if change.check is not None else None
    return verdict != "refuted" and (not change.candidate or verdict == "confirmed")


def changes_heading(metric: str, where: str, since: str | None = None) -> str:
    return f"where {metric} changed ({where})" + (f", runs since {since}" if since else "")


def no_change_line(metric: str, where: str, since: str | None = None) -> str:
    return f"no change in {metric} in any series of {where!r}" + (f" since {since}" if since else "")
