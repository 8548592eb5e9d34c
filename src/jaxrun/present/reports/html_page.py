"""``jaxrun report``: one self-contained HTML file of a results folder (no network needed).

Summary cards; a table of every script, sortable by any column; a section per parameter sweep
(its table and plot: present/reports/sweep_section.py); plotly figures (plotly.js inlined
once): where each script's time went (import, trace, lower, compile, run, stacked), its peak
memory, the distribution of its benchmark runs (box plots, when there are samples), and the ratio
to a baseline run (``--baseline``) with the verdicts of ``jaxrun compare``; then what XLA knows
about each program (present/view/program_rows.py: cost, memory, fingerprint), the recompile reasons and each
failure with its hint and the tail of its stderr log.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from jaxrun.core.formatting import fmt, fmt_seconds, left_out, listed, plural
from jaxrun.present.reports.html_text import breakable, esc, wide
from jaxrun.results.program_figures import PROGRAM_FIGURES
from jaxrun.results.result_files import NotRegularFileError, open_regular

if TYPE_CHECKING:
    from jaxrun.present.view import ProgramView, BatchView, ScriptView
    from jaxrun.results.models import BatchResult, ComparisonReport, ScriptResult

_LOG_TAIL_LINES = 30
_LOG_TAIL_BYTES = 256 * 1024  # the end of a log (capped at 50 MiB) that holds its last lines
_PHASES = ("import", "trace", "lower", "compile", "run")
_COLORS = {"import": "#8c8c8c", "trace": "#f4a261", "lower": "#e9c46a", "compile": "#e76f51", "run": "#2a9d8f"}

_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;background:#fafafa}
h1{margin:0 0 4px} .sub{color:#666;margin-bottom:16px}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin:16px 0}
.card{background:#fff;border:1px solid #ddd;border-radius:8px;padding:10px 16px;min-width:120px}
.card b{display:block;font-size:1.5em} .bad b{color:#c0392b} .good b{color:#27ae60}
table{border-collapse:collapse;background:#fff;margin:8px 0 24px}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:right} th{cursor:pointer;background:#f0f0f0}
td:first-child,th:first-child,td.text,th.text{text-align:left}
tr.failed td{background:#fdecea} td.bad{color:#c0392b;font-weight:bold} td.good{color:#27ae60}
td.warn{color:#b7791f} caption{caption-side:bottom;text-align:left;color:#666;padding-top:4px}
.heading{font-size:1.2em;margin:4px 0} .note{color:#444} pre{background:#fff;border:1px solid #ddd;padding:8px;overflow:auto;max-height:20em}
section{margin-bottom:28px}
body{overflow-wrap:break-word} table{font-size:.875em} td:not(.text){white-space:nowrap}
.wide{max-width:100%;overflow-x:auto}
"""
# The page fits its window: text wraps at its spaces (a word longer than its line breaks), a figure
# (every cell not marked text: "196 ms", "5.33 MiB (temp 12.7 KiB)") is never split over two lines,
# and a table that still needs more than the page's width scrolls in its own box (.wide), never
# the page.

# Sorts the table by the clicked column: numbers as numbers ("-" last), text as text.
_SORT_JS = """
document.querySelectorAll('table.sortable th').forEach(function (th) {
  th.addEventListener('click', function () {
    var col = th.cellIndex;  // within its own row: the page has more than one sortable table
    var body = th.closest('table').tBodies[0];
    var rows = Array.from(body.rows);
    var up = th.dataset.order !== 'asc';
    th.dataset.order = up ? 'asc' : 'desc';
    rows.sort(function (a, b) {
      var x = a.cells[col].dataset.value, y = b.cells[col].dataset.value;
      var nx = parseFloat(x), ny = parseFloat(y);
      var cmp = (isNaN(nx) || isNaN(ny)) ? String(x).localeCompare(String(y)) : nx - ny;
      if (x === '' && y !== '') { return 1; } if (y === '' && x !== '') { return -1; }
      return up ? cmp : -cmp;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
"""


def _phase_seconds(result: "ScriptResult") -> dict[str, float]:
    """Where the body's time went; JIT phases summed over the script's programs."""
    compiles = result.compiles.values()
    return {
        "import": result.import_time or 0.0,
        "trace": sum(c.trace_time for c in compiles),
        "lower": sum(c.lower_time for c in compiles),
        "compile": sum(c.compile_time + c.cache_load_time for c in compiles),
        "run": result.run_time or 0.0,
    }


def _cards(view: "BatchView") -> str:
    cards = [
        ("scripts", view.executed, ""),
        ("succeeded", view.succeeded, "good"),
        ("failed", view.failed, "bad" if view.failed else ""),
        ("total time", f"{fmt(view.total_time, 1)} s", ""),
        ("largest peak", f"{fmt(view.largest_memory, 0)} MiB", ""),
        ("device", view.device_used or "-", ""),
        ("exit status", view.exit_status, "bad" if view.exit_status else "good"),
    ]
    return '<div class="cards">' + "".join(
        f'<div class="card {cls}"><b>{esc(value)}</b>{esc(label)}</div>' for label, value, cls in cards) + "</div>"


# The scripts table: header, the shown text and the value it sorts by, whether it is text.
_COLUMNS: tuple[tuple[str, Callable[["ScriptView", str], tuple[object, object]], bool], ...] = (
    ("script", lambda s, m: (s.label, s.label), True),
    ("status", lambda s, m: (s.status_text + (" (kept)" if s.kept else ""), s.status_text), True),
    ("device", lambda s, m: (s.device_text, s.device_text), True),
    ("time s", lambda s, m: (fmt(s.time) + (m if s.timing else ""), s.time), False),
    ("import s", lambda s, m: (fmt(s.import_), s.import_), False),
    ("JIT s", lambda s, m: (fmt(s.jit), s.jit), False),
    ("run s", lambda s, m: (fmt(s.run), s.run), False),
    ("compiles", lambda s, m: (s.compiles_text, s.compiles), False),
    ("peak MiB", lambda s, m: (fmt(s.memory, 0), s.memory), False),
    ("verdict", lambda s, m: (s.verdict or "-", s.verdict_short or ""), True),
)


_TEXT_CLASS = ' class="text"'


def _table(view: "BatchView") -> str:
    mark, note = view.timing_note()
    rows = []
    for s in view.scripts:
        tds = []
        for header, cell, text in _COLUMNS:
            shown, raw = cell(s, mark)
            style = {"status": s.level, "verdict": s.verdict_level}.get(header, "")
            cls = " ".join(c for c in ("text" if text else "", style) if c)
            tds.append(f'<td class="{cls}" data-value="{esc("" if raw is None else raw)}">'
                       f"{breakable(shown) if text else esc(shown)}</td>")
        rows.append(f'<tr class="{"failed" if s.status == "failed" else ""}" data-script="{esc(s.name)}">{"".join(tds)}</tr>')
    head = "".join(f"<th{_TEXT_CLASS if text else ''}>{esc(c)}</th>" for c, _, text in _COLUMNS)
    caption = f"<caption>{esc(note)}</caption>" if note else ""
    return wide(f'<table id="scripts" class="sortable">{caption}<thead><tr>{head}</tr></thead>'
                f'<tbody>{"".join(rows)}</tbody></table>')


def _figures(batch: "BatchResult", view: "BatchView", comparison: "ComparisonReport | None") -> list[tuple[str, Any]]:
    import plotly.graph_objects as go

    results = batch.script_results
    names = [s.label for s in view.scripts]
    figures = []
    phases = [_phase_seconds(r) for r in results]
    time_fig = go.Figure([go.Bar(name=p, x=names, y=[s[p] for s in phases], marker_color=_COLORS[p]) for p in _PHASES])
    time_fig.update_layout(barmode="stack", yaxis_title="seconds", title="Where the time went (script body)")
    figures.append(("time", time_fig))
    memory_fig = go.Figure([go.Bar(name="host peak (MiB)", x=names, y=[r.memory_peak for r in results])])
    device_peaks = [r.device_memory_peak for r in results]
    if any(p is not None for p in device_peaks):
        memory_fig.add_bar(name="device peak (MiB)", x=names, y=device_peaks)
    memory_fig.update_layout(barmode="group", yaxis_title="MiB (2^20 bytes)", title="Peak memory")
    figures.append(("memory", memory_fig))
    energy = _energy_figure(results, names)
    if energy is not None:
        figures.append(("energy", energy))
    warm = _warm_figure(results, names)
    if warm is not None:
        figures.append(("warm", warm))
    benchmarks = [b for b in batch.benchmarking.benchmarks if any(s.success for s in b.samples)]
    if benchmarks:
        labels = {(s.name, s.device_requested): s.label for s in view.scripts}
        box = go.Figure([go.Box(name=labels.get((b.script_name, b.device_requested), b.script_name), boxpoints="all",
                                y=[s.wall_time for s in b.samples if s.success and s.wall_time is not None])
                         for b in benchmarks])
        box.update_layout(yaxis_title="seconds", title="Benchmark runs: wall time of every counted run")
        figures.append(("benchmarks", box))
    if comparison is not None and comparison.scripts:
        figures.append(("comparison", _comparison_figure(view, comparison)))
    return figures


def _energy_figure(results: "list[ScriptResult]", names: list[str]) -> Any:
    """Each script's energy from the hardware's counters, GPU and host side by side, where any
    script has one (a machine with neither has no such plot: its results say why each is null)."""
    import plotly.graph_objects as go

    from jaxrun.results.figures import FIGURES

    bars = []
    for name in ("device_energy", "host_energy"):
        values = [getattr(r, name) for r in results]
        if any(v is not None for v in values):
            bars.append(go.Bar(name=FIGURES[name].label, x=names, y=values))
    if not bars:
        return None
    figure = go.Figure(bars)
    figure.update_layout(barmode="group", yaxis_title="joules", title="Energy (the hardware's counters, whole job)")
    return figure


def _warm_figure(results: "list[ScriptResult]", names: list[str]) -> Any:
    """Warm mode: the seconds of every call, a line per script and run, with where the steady
    level starts (or that there is none) in its name."""
    import plotly.graph_objects as go

    from jaxrun.present.view import steady_state_text

    lines = []
    for name, result in zip(names, results):
        warm = result.warm
        if warm is None or not warm.calls:
            continue
        for run in sorted({c.run for c in warm.calls}):
            calls = sorted((c for c in warm.calls if c.run == run), key=lambda c: c.index)
            label = f"{name}: {steady_state_text(warm)}" + (f" (run {run})" if run > 1 else "")
            lines.append(go.Scatter(name=label, x=[c.index for c in calls], y=[c.seconds for c in calls],
                                    mode="lines+markers"))
    if not lines:
        return None
    figure = go.Figure(lines)
    figure.update_layout(title="Warm mode: the seconds of each call (the first traces and compiles)",
                         xaxis_title="call", yaxis_title="seconds", yaxis_type="log")
    return figure


def _comparison_figure(view: "BatchView", comparison: "ComparisonReport") -> Any:
    """Each gate phase's ratio (this run / baseline) per script, with its 95% CI and its own
    verdict on the bar; under each script, its verdict: the one the table beside it states."""
    import plotly.graph_objects as go

    by_key = {(c.script_name, c.device): c for c in comparison.scripts}
    judged = [(s, by_key.get((s.name, s.device)) or by_key.get((s.name, s.device_requested))) for s in view.scripts]
    judged = [(s, c) for s, c in judged if c is not None]
    x = [f"{s.label}<br>{s.verdict_short or c.verdict}" for s, c in judged]
    traces, tops = [], []
    for metric in comparison.gate:
        phases = [c.phases.get(metric) for _, c in judged]
        ratios = [p.ratio if p else None for p in phases]
        traces.append(go.Bar(
            name=metric, x=x, y=ratios, offsetgroup=metric,
            error_y=dict(type="data", symmetric=False,
                         array=[(p.ratio_ci_high - p.ratio) if p and p.ratio and p.ratio_ci_high else 0 for p in phases],
                         arrayminus=[(p.ratio - p.ratio_ci_low) if p and p.ratio and p.ratio_ci_low else 0 for p in phases]),
        ))
        # Each bar's own verdict sits above the top of its CI (a bar's text would sit on the
        # whisker): a text trace in the bar's offset group, so over its own bar, not the group's middle.
        top = [max(v for v in (p.ratio, p.ratio_ci_high) if v is not None) if p and p.ratio is not None else None
               for p in phases]
        tops += [t for t in top if t is not None]
        traces.append(go.Scatter(
            x=x, y=top, text=[p.verdict if p else "" for p in phases], mode="markers+text", textposition="top center",
            marker=dict(size=10, opacity=0),  # unseen: it only keeps the label a few pixels off the whisker's cap
            offsetgroup=metric, showlegend=False, hoverinfo="skip", cliponaxis=False, name=f"{metric} verdict"))
    figure = go.Figure(traces)
    figure.add_hline(y=1.0, line_dash="dot")
    figure.update_layout(barmode="group", scattermode="group", yaxis_title="this run / baseline (median ratio)",
                         title="Against the baseline: each gate phase, 95% CI; under each script its verdict")
    if tops:  # room above the highest CI for its label
        figure.update_yaxes(range=[0, max(max(tops), 1.0) * 1.15])
    return figure


def _comparison_table(view: "BatchView", comparison: "ComparisonReport") -> str:
    by_key = {(c.script_name, c.device): c for c in comparison.scripts}
    rows = []
    for s in view.scripts:
        c = by_key.get((s.name, s.device)) or by_key.get((s.name, s.device_requested))
        if c is None:
            continue
        rows.append(f"<tr data-compared='{esc(s.name)}'><td class='text'>{breakable(s.label)}</td>"
                    f"<td class='text {s.verdict_level}'>{esc(s.verdict)}</td>"
                    f"<td class='text'>{esc(', '.join(c.slower) or '-')}</td><td class='text'>{esc(', '.join(c.faster) or '-')}</td></tr>")
    return (f"<p>Baseline: <code>{esc(comparison.base)}</code>. Gate: {esc(', '.join(comparison.gate))}.</p>"
            + wide(f'<table id="comparison"><thead><tr><th>script</th><th{_TEXT_CLASS}>verdict</th><th{_TEXT_CLASS}>'
                   f"slower phases</th><th{_TEXT_CLASS}>faster phases</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"))


_PROGRAM_ROWS = 500  # a huge batch's report lists the first programs; the result files hold every one
def _figure_column(index: int) -> Callable[["ProgramView"], tuple[object, object]]:
    return lambda p: p.figures[index][::-1]  # (text shown, value sorted by)


_PROGRAM_COLUMNS: tuple[tuple[str, Callable[["ProgramView"], tuple[object, object]], bool], ...] = (
    ("script", lambda p: (p.script, p.script), True),
    ("program", lambda p: (p.program, p.program), True),
    ("built", lambda p: (p.builds, p.builds), True),
    *((figure.label, _figure_column(i), False) for i, figure in enumerate(PROGRAM_FIGURES)),  # results/program_figures.py
    ("fingerprint", lambda p: (p.fingerprint_text, p.fingerprint), True),
    ("compiled for", lambda p: (p.device_text, p.device_text), True),
    ("note", lambda p: (p.note, p.note or ""), True),
)


def _programs(batch: "BatchResult", view: "BatchView") -> str:
    """What XLA knows about each program (one row each: present/view/program_rows.py), sortable."""
    from itertools import islice

    from jaxrun.present.view import program_views

    every = program_views(batch, view)
    views = list(islice(every, _PROGRAM_ROWS))
    left = sum(1 for _ in every)  # counted, not held: the report says how many it leaves out
    if not views:
        return "<p>No script compiled a JAX program.</p>"
    rows = []
    for program in views:
        cells = []
        for _, cell, text in _PROGRAM_COLUMNS:
            shown, raw = cell(program)
            cells.append(f'<td class="{"text" if text else ""}" data-value="{esc("" if raw is None else raw)}">'
                         f"{breakable(shown) if text else esc(shown)}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    head = "".join(f"<th{_TEXT_CLASS if text else ''}>{esc(c)}</th>" for c, _, text in _PROGRAM_COLUMNS)
    more = (f"<caption>The first {_PROGRAM_ROWS} programs{left_out(left, 'more, not shown here')}: every one "
            "is in script_results/.</caption>" if left else
            "<caption>FLOPs and bytes accessed per call, device memory per device (inputs included), as XLA's "
            "analyses of the last executable built or loaded.</caption>")
    return wide(f'<table id="programs" class="sortable">{more}<thead><tr>{head}</tr></thead>'
                f"<tbody>{''.join(rows)}</tbody></table>")


def _transfers(batch: "BatchResult", view: "BatchView") -> str:
    """Implicit host<->device copies and live arrays, one row a script that used JAX."""
    from jaxrun.present.view import transfer_views

    rows = [f"<tr><td class='text'>{breakable(t.script)}</td><td>{esc(t.host_to_device)}</td><td>{esc(t.device_to_host)}</td>"
            f"<td>{esc(t.device_to_device)}</td><td>{esc(t.live_arrays)}</td><td class='text'>{esc(t.note)}</td></tr>"
            for t in transfer_views(batch, view)]
    if not rows:
        return ""
    head = "".join(f"<th{_TEXT_CLASS if text else ''}>{esc(c)}</th>" for c, text in (
        ("script", True), ("host to device", False), ("device to host", False), ("device to device", False),
        ("live arrays at the end", False), ("note", True)))
    return wide(f'<table id="transfers"><caption>Implicit copies JAX made (count, bytes); explicit device_put and '
                f"device_get are not counted.</caption><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _recompiles(batch: "BatchResult", view: "BatchView") -> str:
    """Per script, each program traced more than once, with JAX's reasons (repeats counted)."""
    blocks = []
    for r, shown in zip(batch.script_results, view.scripts):
        items = []
        for program, stats in r.compiles.items():
            if not stats.recompile_reasons:
                continue
            counted = Counter(stats.recompile_reasons)
            reasons = "".join(f"<li>{esc(reason)}{f' (x{n})' if n > 1 else ''}</li>" for reason, n in counted.items())
            items.append(f"<li><code>{esc(program)}</code>: traced {plural(stats.traces, 'time')}, compiled {stats.count}, "
                         f"loaded from the cache {stats.cache_hits}<ul>{reasons}</ul></li>")
        if items:
            blocks.append(f"<details><summary><b>{esc(shown.label)}</b>: {plural(len(items), 'program')} traced again"
                          f"</summary><ul>{''.join(items)}</ul></details>")
    return "".join(blocks) if blocks else "<p>No program was traced more than once.</p>"


def _cells(batch: "BatchResult", view: "BatchView") -> str:
    """Per notebook, each code cell's seconds and outcome (empty when the run had no notebook)."""
    from jaxrun.present.view import cell_outcome, cells_ran

    blocks = []
    for r, shown in zip(batch.script_results, view.scripts):
        if not r.cells:
            continue
        rows = "".join(
            f"<tr><td>{c.index}</td><td class='text'><code>{esc(c.source)}</code></td><td>{esc(fmt_seconds(c.seconds))}</td>"
            f"<td class='text'>{esc(cell_outcome(c))}</td></tr>"
            for c in r.cells)
        blocks.append(f"<details open><summary><b>{esc(shown.label)}</b>: {esc(cells_ran(r.cells))}</summary>"
                      + wide("<table class='cells'><thead><tr><th>In [N]</th><th class='text'>first line</th>"
                             f"<th>seconds</th><th class='text'>outcome</th></tr></thead><tbody>{rows}</tbody></table>")
                      + "</details>")
    return f"<section><h2>Notebook cells</h2>{''.join(blocks)}</section>" if blocks else ""


def _log_tail(path: str | None) -> str:
    if not path:
        return ""
    try:
        with open_regular(Path(path)) as handle:  # a FIFO or a device in its place is never read
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - _LOG_TAIL_BYTES))
            text = handle.read().decode("utf-8", errors="replace")
    except NotRegularFileError as exc:
        return f"(the log is {exc.problem}: not read)"
    except OSError:
        return "(the log is gone)"
    lines = text.splitlines()
    what = "earlier lines: the whole log is the file"
    if size > _LOG_TAIL_BYTES:  # only its end was read: how many lines came before is not known
        lines = lines[1:]  # the first line read may be the end of a longer one
        what = "earlier lines, and more before them: the whole log is the file"
    return listed(lines, _LOG_TAIL_LINES, "\n", last=_LOG_TAIL_LINES, what=what)


def _failures(view: "BatchView") -> str:
    failed = [s for s in view.scripts if s.status == "failed"]
    if not failed:
        return "<p>Every script succeeded.</p>"
    return "".join(
        f"<h3>{esc(s.label)}: {esc(s.error_class)}</h3><pre>{esc(s.error_full)}</pre>"
        + (f"<p>at <code>{esc(s.location)}</code></p>" if s.location else "")
        + f"<p><i>hint:</i> {esc(s.hint)}</p><p>log: <code>{esc(s.log)}</code></p><pre>{esc(_log_tail(s.log))}</pre>"
        for s in failed)


def _sweeps(view: "BatchView", plot: Callable[[Any, str], str]) -> str:
    """A section per script run as a sweep: its table (the cells the terminal writes), its notes,
    and its plot of a figure against a numeric parameter (present/reports/sweep_section.py)."""
    from jaxrun.present.reports.sweep_section import sweep_figure, sweep_table

    sections = []
    for n, sweep in enumerate(view.sweeps, start=1):
        notes = "".join(f"<p class='note'>{esc(note)}</p>" for note in sweep.notes)
        figure, why_not = sweep_figure(sweep)
        shown = plot(figure, f"sweep-{n}") if figure is not None else f"<p class='note no-plot'>{esc(why_not)}</p>"
        sections.append(f'<section id="sweep-{n}" class="sweep"><h2>Sweep: {esc(sweep.script)}</h2>'
                        f"<p>{plural(len(sweep.points), 'point')}; click a column to sort.</p>"
                        f"{wide(sweep_table(sweep, f'sweep-table-{n}'))}{notes}{shown}</section>")
    return "".join(sections)


def render_report(batch: "BatchResult", comparison: "ComparisonReport | None" = None,
                  base: "BatchResult | None" = None) -> str:
    """The report as one HTML document, plotly.js included once, inline: the view of the run
    (jaxrun/view) laid out, with the figures of its phases, memory, benchmark runs and baseline;
    ``base``: a ``jaxrun ab`` folder's BASE side, shown beside NEW pair by pair
    (present/reports/sides_section.py)."""
    import plotly.io as pio

    from jaxrun.present.view.batch_view import view_batch

    view = view_batch(batch, comparison)
    meta = batch.metadata
    drawn: list[str] = []

    def plot(figure: Any, name: str) -> str:
        """The figure's div; plotly.js goes inline with the first one on the page, once."""
        figure.update_layout(template="plotly_white", height=420, margin=dict(t=50, b=80))
        drawn.append(name)
        return pio.to_html(figure, full_html=False, include_plotlyjs="inline" if len(drawn) == 1 else False,
                           div_id=f"figure-{name}", config={"displaylogo": False})

    sweeps = _sweeps(view, plot)
    plots = [f'<section id="plot-{name}">{plot(figure, name)}</section>'
             for name, figure in _figures(batch, view, comparison)]
    comparison_html = (f"<section><h2>Against the baseline</h2>{_comparison_table(view, comparison)}</section>"
                       if comparison else "")
    if base is not None and comparison is not None and comparison.paired and comparison.scripts:
        from jaxrun.present.reports.sides_section import sides_section

        comparison_html += sides_section(base, batch, comparison, {s.name: s.label for s in view.scripts}, plot)
    notes = "".join(f"<p class='note'>{esc(n)}</p>" for n in view.notes)
    skipped = "".join(f"<p class='note'>skipped: {esc(s.label)}: {esc(s.reason)}</p>" for s in view.skipped)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>jaxrun report: {esc(meta.results_dir)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>jaxrun report</h1><p class='heading'>{esc(view.heading)}</p>"
        f"<div class='sub'>{esc(meta.results_dir)} · {esc(meta.execution_timestamp)} · jaxrun {esc(meta.jaxrun_version)}"
        f" · jax {esc(meta.jax_version)} · {esc(meta.host)}</div>"
        f"{_cards(view)}<section><h2>Scripts</h2><p>Click a column to sort.</p>{_table(view)}{notes}{skipped}</section>"
        f"{sweeps}{''.join(plots)}{comparison_html}"
        f"<section><h2>Programs</h2>{_programs(batch, view)}{_transfers(batch, view)}</section>"
        f"<section><h2>Recompilations</h2>{_recompiles(batch, view)}</section>{_cells(batch, view)}"
        f"<section><h2>Failures</h2>{_failures(view)}</section>"
        f"<script>{_SORT_JS}</script></body></html>\n"
    )
