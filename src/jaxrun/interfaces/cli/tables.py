"""Rich tables the CLI prints. Values come straight from the models; unknown shows as "-"."""

from __future__ import annotations

import copy
import io
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text

from jaxrun.core.formatting import fmt, fmt_commit, fmt_share, fmt_p, fmt_seconds, shorten_middle
from jaxrun.results.comparisons import TOO_FEW
from jaxrun.results.figures import (
    SCRIPT_FIGURES,
    format_metric,
    metric_label,
)
from jaxrun.results.models import (
    ComparisonReport,
    DeviceSpeedup,
    HistoryRun,
    RegressionCheck,
    ScriptBenchmark,
    SeriesChange,
    SeriesSummary,
    WarmSummary,
)
from jaxrun.results.program_figures import PROGRAM_FIGURES

if TYPE_CHECKING:
    from rich.console import ConsoleOptions, RenderResult

    from jaxrun.present.view import ProgramView, BatchView, ScriptView, SweepView, TransferView
    from jaxrun.results.models import CellTiming


def _table(title: str, columns: Iterable[tuple[str, str]], no_wrap: bool = False) -> Table:
    """A table of plain columns; a cell too long for its column wraps between words, and a word
    too long for it is folded, never cut short (an ellipsis would hide a figure's digits:
    ``8.9e-…``); ``no_wrap``: never: the table is fitted to the terminal by :func:`fitted` instead."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                  collapse_padding=True)
    for column, justify in columns:
        table.add_column(column, justify=justify, no_wrap=no_wrap,  # type: ignore[arg-type]
                         overflow="ellipsis" if no_wrap else "fold")
    return table


_STYLES = {"good": "green", "bad": "red", "warn": "yellow"}
# The summary's columns: header, the cell of a script's view (``star`` marks a median in a mixed
# batch), and whether it holds numbers. When the table would not fit the terminal, long names are
# shortened in the middle, then the columns of _DROPPED_FIRST are left out, in that order.
_SUMMARY_COLUMNS: tuple[tuple[str, Callable[["ScriptView", str], str], bool], ...] = (
    ("script", lambda s, star: s.label, False),
    ("status", lambda s, star: s.status_text + (" (kept)" if s.kept else ""), False),
    ("device", lambda s, star: s.device_text, False),
    ("time s", lambda s, star: fmt(s.time) + (star if s.timing else ""), True),
    ("body s", lambda s, star: fmt(s.body), True),
    ("import s", lambda s, star: fmt(s.import_), True),
    ("jit s", lambda s, star: fmt(s.jit), True),
    ("run s", lambda s, star: fmt(s.run), True),
    ("compiles", lambda s, star: s.compiles_text, True),
    ("RSS MiB", lambda s, star: fmt(s.memory, 0), True),
    ("verdict", lambda s, star: s.verdict_short or "-", False),
)
# What gives way, in order, when the table is wider than the terminal (after shortening the
# names, not below _MIN_NAME): a column left out, or "device" written short.
_NARROWER = ("body s", "import s", "compiles", "device", "run s", "verdict")
_MIN_NAME = 20
_READABLE_NAME = 32


def summary_table(view: "BatchView", width: int = 160) -> Table:
    """Every script of the run in at most ``width`` columns, no word broken: long names are
    shortened in the middle (not below _MIN_NAME), then _NARROWER's columns give way in order."""
    star, note, shown = _summary_columns(view)
    given_up, _, table = _fit(_summary_maker(view.scripts, note, star, shown), _NARROWER, _longest_label(view.scripts),
                              width)
    return _say_left_out(table, given_up, shown)


def _say_left_out(table: Table, given_up: set[str], shown: list) -> Table:
    """A table that gave columns up for the terminal's width says which under it (never a column
    cut without a word): the figures are all in the results file."""
    from jaxrun.results.result_files import EXECUTION_RESULTS

    dropped = [header for header, _, _ in shown if header in given_up and header != "device"]
    if dropped:
        table.caption = f"left out for the terminal's width: {', '.join(dropped)} (every figure: {EXECUTION_RESULTS})"
        table.caption_justify = "left"
    return table


# The rows of each of the tables summary_tables gives.
SUMMARY_ROWS = 50


def summary_tables(view: "BatchView", width: int = 160, rows: int = SUMMARY_ROWS) -> Iterator[Table]:
    """:func:`summary_table` as tables of at most ``rows`` rows, each column as wide as in the
    whole table, the title and header in the first only: printed one after the other they are
    the same lines, and the whole table (~5 KB a script as rich renders it) is never held at once
    (jaxrun's peak RSS a result has a budget: benchmarks/README.md)."""
    scripts = view.scripts
    if len(scripts) <= rows:
        yield summary_table(view, width)
        return
    star, note, shown = _summary_columns(view)
    # The widths are those of the rows that hold some column's widest cell (_widest_rows).
    widest = _widest_scripts(scripts, star, shown)
    make = _summary_maker(widest, note, star, shown)
    given_up, name_width, narrow = _fit(make, _NARROWER, _longest_label(scripts), width)
    columns = narrow.columns
    if _width(narrow) > width or not all(isinstance(cell, Text) and "\t" not in cell.plain and "\n" not in cell.plain
                                         for column in columns for cell in column._cells):
        yield summary_table(view, width)  # squeezed by rich, or a cell whose width is not its length
        return
    widths = [max(cell_len(str(column.header)), *(_cell_width(cell) for cell in column._cells)) for column in columns]
    for start in range(0, len(scripts), rows):
        table = _summary_maker(scripts[start:start + rows], note, star, shown)(given_up, name_width)
        for column, fixed in zip(table.columns, widths):
            column.width = fixed
        if start:
            table.title, table.show_header = None, False
        if start + rows >= len(scripts):
            table = _say_left_out(table, given_up, shown)
        yield FixedRows(table) if start else table


class FixedRows:
    """The rows of a table of :func:`_table`'s kind, without title, header or caption, whose
    columns have fixed widths that every cell fits on one line: the lines rich prints for it,
    colours included, made here (rich lays a table out ~15x slower: 0.4 s at the end of a batch of
    1,000 scripts). Any other table is rich's to print."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def _plain(self) -> bool:
        table = self.table
        return (not table.title and not table.show_header and not table.caption and not table.show_footer
                and _of_table_kind(table) and not table.row_styles
                and table.style in ("", "none") and all(not row.style and not row.end_section for row in table.rows)
                and all(column.width is not None and not column.style and column.justify in ("left", "right")
                        and all(isinstance(cell, Text) and not cell.spans and "\n" not in cell.plain
                                and "\t" not in cell.plain and cell_len(cell.plain) <= column.width
                                and isinstance(cell.style, str) and cell.justify is None
                                for cell in column._cells)
                        for column in table.columns))

    def __rich_console__(self, console: Console, options: "ConsoleOptions") -> "RenderResult":
        table = self.table
        if not self._plain() or _spread([c.width or 0 for c in table.columns]) > options.max_width:
            yield table
            return
        columns = [(column.width, column.justify == "right", column._cells) for column in table.columns]
        styles: dict[str, Style | None] = {"": None}
        for row in range(table.row_count):
            for i, (width, right, cells) in enumerate(columns):
                if i:
                    yield Segment(_GAP)
                cell = cells[row]
                pad = " " * (width - cell_len(cell.plain))
                style = cell.style
                if style not in styles:
                    styles[style] = console.get_style(style)
                yield Segment(pad + cell.plain if right else cell.plain + pad, styles[style])
            yield Segment.line()


def _summary_columns(view: "BatchView") -> tuple[str, str | None, list]:
    star, note = view.timing_note()
    return star, note, [c for c in _SUMMARY_COLUMNS if c[0] != "verdict" or any(s.verdict for s in view.scripts)]


def _longest_label(scripts: Sequence["ScriptView"]) -> int:
    return max((len(s.label) for s in scripts), default=0)


def _summary_maker(scripts: Sequence["ScriptView"], note: str | None, star: str,
                   shown: list) -> Callable[[set[str], int | None], Table]:
    return lambda given_up, name_width: _summary(
        scripts, note, star, [c for c in shown if c[0] not in given_up or c[0] == "device"], name_width,
        short_device="device" in given_up)


def _widest_scripts(scripts: Sequence["ScriptView"], star: str, shown: list) -> list["ScriptView"]:
    """The scripts that hold the widest cell of some column (the device column written either
    way), in their order: whatever gives way, the summary of these is as wide as that of all."""
    keep: set[int] = set()
    cells = [cell for _, cell, _ in shown] + [lambda s, star: f"{s.device} (fallback)" if s.fallback_reason else s.device_text]
    for cell in cells:
        keep.add(max(range(len(scripts)), key=lambda i: cell_len(cell(scripts[i], star))))
    return [scripts[i] for i in sorted(keep)]


def fitted(make: Callable[[set[str], int | None], Table], narrower: Iterable[str], longest: int, width: int) -> Table:
    """The table ``make(given_up, name_width)`` builds, at most ``width`` wide if it can be: the
    names (``longest`` characters at most) shortened to what the other columns leave, then the next
    of ``narrower`` given up, and so on; first keeping names of _READABLE_NAME characters, failing
    that of _MIN_NAME (a name says which script; a column only one more figure of it)."""
    return _fit(make, narrower, longest, width)[2]


def _fit(make: Callable[[set[str], int | None], Table], narrower: Iterable[str], longest: int,
         width: int) -> tuple[set[str], int | None, Table]:
    """:func:`fitted`'s ``(given_up, name_width, table)``."""
    steps = [None, *narrower]
    for least in (min(_READABLE_NAME, longest), _MIN_NAME):
        given_up: set[str] = set()
        for step in steps:
            if step is not None:
                given_up.add(step)
            table = make(given_up, None)
            over = _width(table) - width
            if over <= 0:
                return given_up, None, table
            if longest - over >= least:
                return given_up, longest - over, make(given_up, longest - over)
    return given_up, _MIN_NAME, make(given_up, _MIN_NAME)


def _summary(scripts: Sequence["ScriptView"], note: str | None, star: str, columns: list, name_width: int | None,
             short_device: bool) -> Table:
    title = "jaxrun results" + (f" ({note})" if note else "")
    table = _table(title, [(header, "right" if numeric else "left") for header, _, numeric in columns], no_wrap=True)
    for script in scripts:
        styles = {"status": _STYLES.get(script.level, ""), "verdict": _STYLES.get(script.verdict_level, "")}
        cells = []
        for header, cell, _ in columns:
            value = cell(script, star)
            if header == "script" and name_width is not None:
                value = shorten_middle(value, name_width)
            elif header == "device" and short_device and script.fallback_reason:
                value = f"{script.device} (fallback)"
            cells.append(Text(value, style=styles.get(header, "")))
        table.add_row(*cells)
    return table


def _width(table: Table) -> int:
    """The width ``table`` takes when nothing constrains it: :func:`natural_width` where it says,
    else that of the table of its widest rows (a column as wide as its widest cell:
    :func:`_widest_rows`), rendered, so that fitting the summary of 10,000 scripts renders a dozen
    rows, not 10,000, at each step."""
    natural = natural_width(table)
    if natural is not None:
        return natural
    console = Console(width=100_000, file=io.StringIO(), color_system=None)
    with console.capture() as capture:
        console.print(_widest_rows(table))
    return max((len(line.rstrip()) for line in capture.get().splitlines()), default=0)


def natural_width(table: Table) -> int | None:
    """The width rich gives a table of :func:`_table`'s kind with its header shown, where nothing
    constrains it, worked out rather than rendered: each column as wide as its widest cell (the
    header's included), two spaces between two columns; the rule under the header spans them all.
    None for any other table (a cell of more than one line, a tab, markup, a width set)."""
    if not (table.show_header and _of_table_kind(table) and table.columns):
        return None
    widths = []
    for column in table.columns:
        if column.width is not None or column.min_width is not None or column.max_width is not None or column.ratio:
            return None
        header = column.header
        if not isinstance(header, str) or "[" in header or "\n" in header or "\t" in header:
            return None
        widest = cell_len(header)
        for cell in column._cells:
            if not isinstance(cell, Text) or "\n" in cell.plain or "\t" in cell.plain:
                return None
            widest = max(widest, cell_len(cell.plain))
        widths.append(widest)
    return _spread(widths)


# Between two columns of _table's kind (no edges, padding collapsed): one padding and the box's
# divider.
_GAP = "  "


def _of_table_kind(table: Table) -> bool:
    """Whether ``table`` is laid out as :func:`_table` makes it: columns :data:`_GAP` apart, no edges."""
    return (table.box is box.SIMPLE_HEAD and not table.pad_edge and not table.show_edge and table.collapse_padding
            and table.padding == (0, 1, 0, 1))


def _spread(widths: list[int]) -> int:
    """The width of columns of ``widths``, side by side as :func:`_table` lays them out."""
    return sum(widths) + len(_GAP) * (len(widths) - 1)


def _widest_rows(table: Table) -> Table:
    """``table`` with only the rows that hold the widest cell of some column (in their order): as
    wide as ``table`` where nothing constrains it (no cell wraps: each column takes its widest
    cell, and the header, title and padding are kept)."""
    columns = table.columns
    if table.row_count <= 2 * len(columns):
        return table
    if not all(isinstance(cell, str) or (isinstance(cell, Text) and "\t" not in cell.plain)
               for column in columns for cell in column._cells):
        return table  # a cell whose width is not its text's length (a tab, another renderable)
    keep: set[int] = set()
    for column in columns:
        cells = column._cells
        if cells:
            keep.add(max(range(len(cells)), key=lambda i: _cell_width(cells[i])))
    rows = sorted(keep)
    narrow = copy.copy(table)
    narrow.columns = []
    for column in columns:
        kept = copy.copy(column)
        kept._cells = [column._cells[i] for i in rows]
        narrow.columns.append(kept)
    narrow.rows = [table.rows[i] for i in rows]
    return narrow


def _cell_width(cell: "Text | str") -> int:
    return max((cell_len(line) for line in (cell.plain if isinstance(cell, Text) else cell).split("\n")), default=0)


_BENCHMARK_NARROWER = ("body", "import", "95% CI", "runs", "CV", "history")


# The benchmark table's phase columns after the wall time: each sampled figure in seconds.
_BENCHMARK_PHASES = tuple(f for f in SCRIPT_FIGURES if f.sampled and f.kind == "seconds" and f.name != "wall_time")


def benchmark_table(benchmarks: list[ScriptBenchmark], width: int = 160, labels: dict | None = None) -> Table:
    """The benchmark of each script, fitted to ``width`` as the summary is; ``labels``: (name,
    device asked) -> the name the summary shows."""
    labels = labels or {}

    def row(b: ScriptBenchmark) -> dict[str, str]:
        stats = b.statistics
        wall = stats.get("wall_time")
        ci = "-" if wall is None or wall.ci_low is None else f"{fmt_seconds(wall.ci_low)} – {fmt_seconds(wall.ci_high)}"
        cells = {"script": labels.get((b.script_name, b.device_requested), b.script_name),
                 "device": _device_cell(b.device_used, b.device_requested),
                 "runs": f"{b.runs_completed}/{b.benchmark_runs}", "wall": fmt_seconds(wall.median if wall else None),
                 "95% CI": ci}
        for figure in _BENCHMARK_PHASES:
            cells[figure.label] = figure.format(stats[figure.name].median if figure.name in stats else None)
        cells["CV"] = "-" if wall is None or wall.cv is None else f"{wall.cv:.1%}"
        cells["history"] = history_cell(b.history_check)
        return cells

    rows = [row(b) for b in benchmarks]
    headers = ("script", "device", "runs", "wall", "95% CI", *(f.label for f in _BENCHMARK_PHASES), "CV", "history")

    def make(given_up: set[str], name_width: int | None) -> Table:
        table = _table("process benchmark (medians, 95% CI of the median)",
                       [(h, "left" if h in ("script", "device", "history") else "right") for h in headers if h not in given_up],
                       no_wrap=True)
        for cells in rows:
            name = cells["script"] if name_width is None else shorten_middle(cells["script"], name_width)
            table.add_row(*(Text(name if h == "script" else cells[h]) for h in headers if h not in given_up))
        return table

    return fitted(make, _BENCHMARK_NARROWER, max((len(r["script"]) for r in rows), default=0), width)


def _device_cell(used: str | None, requested: str) -> str:
    """The device a benchmark ran on; the request too when it was a specific other device."""
    if requested in ("auto", used):
        return used or "-"
    return f"{used or '-'} (asked {requested})"


def history_cell(check: RegressionCheck | None) -> str:
    """The history check as every surface words it (jaxrun/view): the verdict against N earlier
    runs, or why there is none ("not judged: 1 earlier run, needs 3")."""
    from jaxrun.present.view.script_rows import history_verdict

    return history_verdict(check)[0] or "-"


def sweep_table(sweep: "SweepView") -> Table:
    """A parameter sweep of one script: a row per point, its parameters in the first columns."""
    table = _table(f"sweep: {sweep.script}", [(c.label, "left" if c.kind in ("param", "status") else "right")
                                              for c in sweep.columns])
    for point in sweep.points:
        table.add_row(*(Text(point.text(c)) for c in sweep.columns))
    return table


def warm_table(rows: list[tuple[str, WarmSummary]]) -> Table:
    from jaxrun.present.view import steady_state_text

    table = _table("warm mode: entry called repeatedly in one process", (
        ("script", "left"), ("entry", "left"), ("calls", "right"), ("first call", "right"),
        ("steady state", "left"), ("steady median", "right"), ("steady 95% CI", "right"),
        ("compile+first-call overhead ratio", "right"),
    ))
    for name, warm in rows:
        steady = warm.steady
        ci = "-" if steady is None or steady.ci_low is None else f"{fmt_seconds(steady.ci_low)} – {fmt_seconds(steady.ci_high)}"
        ratio = warm.compile_first_call_overhead_ratio
        table.add_row(
            Text(name), Text(warm.entry), str(len(warm.calls)), fmt_seconds(warm.first_call),
            steady_state_text(warm), fmt_seconds(steady.median if steady else None), ci,
            "-" if ratio is None else f"{ratio:.1f}",
        )
    return table


def cells_table(rows: "Iterable[tuple[str, CellTiming]]") -> Table:
    """``jaxrun run -v``: a notebook's code cells, each timed (In [N], its first line, seconds)."""
    from jaxrun.present.view import cell_outcome

    table = _table("notebook cells: the seconds of each code cell (In [N])", (
        ("script", "left"), ("cell", "right"), ("first line", "left"), ("seconds", "right"), ("outcome", "left"),
    ))
    for name, cell in rows:
        table.add_row(Text(name), str(cell.index), Text(cell.source), fmt_seconds(cell.seconds), cell_outcome(cell))
    return table


def programs_table(rows: "Iterable[ProgramView]") -> Table:
    """``jaxrun run -v``: what XLA knows about each program (present/view/program_rows.py), as the report lists it."""
    table = _table("programs: XLA's analyses of the last executable of each", (
        ("script", "left"), ("program", "left"), ("built", "left"),
        *((figure.label, "right") for figure in PROGRAM_FIGURES),  # results/program_figures.py
        ("fingerprint", "left"), ("compiled for", "left"),
    ))
    for p in rows:
        table.add_row(Text(p.script), Text(p.program), p.builds, *(text for _, text in p.figures),
                      p.fingerprint_text, Text(p.device_text))
    return table


def transfers_table(rows: "Iterable[TransferView]") -> Table:
    """``jaxrun run -v``: implicit copies and live arrays of each script that used JAX (present/view/program_rows.py)."""
    table = _table("implicit transfers (count, bytes) and arrays alive at the end", (
        ("script", "left"), ("host to device", "right"), ("device to host", "right"), ("device to device", "right"),
        ("live arrays", "right"), ("note", "left"),
    ))
    for t in rows:
        table.add_row(Text(t.script), t.host_to_device, t.device_to_host, t.device_to_device, t.live_arrays,
                      Text(t.note or ""))
    return table


def speedup_table(rows: list[DeviceSpeedup], labels: "dict[str, str] | None" = None) -> Table:
    table = _table("cross-device speed-up (baseline median / device median)", (
        ("script", "left"), ("baseline", "left"), ("device", "left"), ("speed-up", "right"),
        ("95% CI", "right"), ("note", "left"),
    ))
    for row in rows:
        ci = "-" if row.ci_low is None else f"{row.ci_low:.3f} – {row.ci_high:.3f}"
        table.add_row(
            Text((labels or {}).get(row.script_name, row.script_name)), row.baseline_device,
            Text(f"{row.device} (ran on {row.device_used})"),
            "-" if row.speedup is None else f"x{row.speedup:.3f}", ci,
            Text(row.note or "real comparison"),
        )
    return table


def compare_table(report: ComparisonReport) -> Table:
    from jaxrun.judge.verdicts import correction_text

    gate = " + ".join(report.gate)
    table = _table(
        f"NEW vs BASE per phase ({'paired: median of the per-pair ratios, Wilcoxon signed-rank p' if report.paired else 'ratio of medians'}; "
        f"alpha={report.alpha:g}, min effect={report.min_effect:.0%}, "
        f"{correction_text(report.correction, len(report.scripts))}; "
        f"* = gate phase, by default {gate}; could see: the smallest change the pairs could have found)",
        (
            ("script", "left"), ("device", "left"), ("phase", "left"), ("base", "right"), ("new", "right"),
            ("ratio", "right"), ("95% CI", "right"), ("p", "right"), ("n", "right"), ("could see", "right"),
            ("verdict", "left"),
        ),
    )
    # "too few runs to judge" is not "no significant change": the samples could not have shown one.
    styles = {"slower": "red", "faster": "green", TOO_FEW: "yellow"}
    for c in report.scripts:
        # A note that several phases share ("with 3 and 3 samples no test can reach...") is said once.
        notes = [p.note for p in c.phases.values() if p.note]
        shared = list(dict.fromkeys(n for n in notes if notes.count(n) > 1))
        note = "; ".join(([c.note] if c.note else []) + shared)
        for i, (metric, phase) in enumerate(c.phases.items()):
            ci = "-" if phase.ratio_ci_low is None else f"{phase.ratio_ci_low:.3f} – {phase.ratio_ci_high:.3f}"
            own = phase.note if phase.note and phase.note not in shared else None
            verdict = Text(phase.verdict + (f" ({own})" if own else ""), style=styles.get(phase.verdict, ""))
            name = Text((c.path or c.script_name) + (f" → {c.verdict}" if c.verdict != "no significant change" else ""),
                        style=styles.get(c.verdict, "")) if i == 0 else Text("")
            table.add_row(
                name, Text(c.device or "-") if i == 0 else Text(""),
                Text(metric_label(metric, metric in c.gate)),
                format_metric(metric, phase.base_median), format_metric(metric, phase.new_median),
                "-" if phase.ratio is None else f"{phase.ratio:.3f}", ci, fmt_p(phase.p_value),
                f"{phase.base_n}/{phase.new_n}", fmt_share(phase.detectable), verdict,
                end_section=not note and i == len(c.phases) - 1,
            )
        if note:
            table.add_row(Text(""), Text(""), Text("note"), "", "", "", "", "", "", "", Text(note), end_section=True)
    return table


def history_scripts_table(rows: list) -> Table:
    table = _table("benchmark history", (
        ("script", "left"), ("path", "left"), ("runs", "right"), ("last recorded", "left"),
    ))
    from jaxrun.present.view import label_from_name

    for row in rows:
        table.add_row(Text(label_from_name(row.script_path, row.script_name)), Text(row.script_path), str(row.n_runs),
                      row.last_recorded_at)
    return table


def history_changes_table(title: str, changes: "Sequence[SeriesChange]") -> Table:
    """Where each series changed level (present/view/changes_view.py's columns)."""
    from jaxrun.present.view.changes_view import CHANGE_COLUMNS, change_cells

    table = _table(title, tuple((header, "right" if numeric else "left") for header, numeric, _ in CHANGE_COLUMNS))
    for change in changes:
        table.add_row(*(Text(cell) for cell in change_cells(change)))
    return table


def history_series_table(title: str, summaries: "Sequence[SeriesSummary]") -> Table:
    """What each series' noise lets its change points see (present/view/changes_view.py's columns)."""
    from jaxrun.present.view.changes_view import SERIES_COLUMNS, series_cells

    table = _table(title, tuple((header, "right" if numeric else "left") for header, numeric, _ in SERIES_COLUMNS))
    for summary in summaries:
        table.add_row(*(Text(cell) for cell in series_cells(summary)))
    return table


def history_runs_table(title: str, runs: list[HistoryRun], metric_medians: list[float | None], flags: dict[int, str],
                       metric: str = "run_time") -> Table:
    table = _table(title, (
        ("run", "right"), ("recorded", "left"), ("git", "left"), ("device", "left"),
        ("host", "left"), ("mode", "left"), ("n", "right"), ("median", "right"), ("check", "left"),
    ))
    for run, median in zip(runs, metric_medians):
        counted = sum(1 for s in run.samples if not s.warmup and s.success)
        table.add_row(
            str(run.id), run.recorded_at, fmt_commit(run.git_commit, run.git_dirty), Text(run.device_used or "-"), Text(run.host),
            Text(run.mode), str(counted), format_metric(metric, median), Text(flags.get(run.id or -1, "")),
        )
    return table
