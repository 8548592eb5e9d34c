"""``jaxrun report --history``: one self-contained HTML page of the history over commits (plotly.js
inlined, no network needed to view it).

First the change points, newest first, in the columns of ``jaxrun history --changes``
(present/view/changes_view.py: the same cells, their confirmations included); then a section per
series (a script's runs on one device, machine, mode and numerics: judge/history_changes.py), its
figure and its table of runs. The figure draws each run as the history holds it: its point is the
median of its counted samples (the point the change points cut), its band the distribution-free
95% CI of that median ([min, max] below 6 samples, which covers less), the level of each segment
between change points as a step, and each change point as a line before its first run, labelled
with its commit, its size and its confirmation. The x axis is the series' runs in the order they
were recorded, each labelled by its commit.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from jaxrun.core.formatting import fmt_change, fmt_commit, fmt_share, plural
from jaxrun.present.reports.html_text import esc, wide
from jaxrun.results.figures import FIGURES, format_metric, metric_label

if TYPE_CHECKING:
    from jaxrun.judge.history_changes import HistorySeries
    from jaxrun.results.models import HistoryRun, SeriesChange

HISTORY_PAGE_FILE = "jaxrun_history.html"

_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;background:#fafafa;overflow-wrap:break-word}
h1{margin:0 0 4px} .sub{color:#666;margin-bottom:16px} section{margin-bottom:28px}
table{border-collapse:collapse;background:#fff;margin:8px 0 24px;font-size:.875em}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:right} th{background:#f0f0f0}
td.text,th.text{text-align:left} td:not(.text){white-space:nowrap} .note{color:#444}
td.confirmed{color:#c0392b;font-weight:bold} td.refuted{color:#27ae60} .wide{max-width:100%;overflow-x:auto}
"""


def series_title(series: "HistorySeries") -> str:
    """``loop.py on cpu, machine 3f2a9c01d4e2 (vm), process``: what a series is the runs of."""
    run = series.runs[-1]
    machine = f"machine {run.machine_id} ({run.host})" if run.machine_id else f"host {run.host}"
    return f"{run.script_name} on {run.device_used or 'no device'}, {machine}, {run.mode}"


def run_band(run: "HistoryRun", metric: str) -> tuple[float | None, float | None]:
    """The 95% CI of a run's median of ``metric`` (distribution-free; [min, max] below 6 samples)."""
    from jaxrun.judge.benchmark_runs import metric_values
    from jaxrun.judge.stats import median_ci

    low, high, _ = median_ci(metric_values(run.samples, metric))
    return low, high


def change_label(change: "SeriesChange") -> str:
    """A change point as its line on the figure says it: its first commit, size, whether it is a
    candidate, its confirmation."""
    check = "" if change.check is None else f", {change.check.verdict}"
    candidate = ", candidate" if change.candidate else ""
    return f"{fmt_commit(change.first_after.git_commit)} {fmt_change(change.change)}{candidate}{check}"


def _levels(points: Sequence[float], changes: Sequence["SeriesChange"]) -> list[float]:
    """Each run's segment mean: the level between the change points around it."""
    import numpy as np

    edges = [0, *(len(points) - c.runs_since for c in changes), len(points)]
    levels: list[float] = []
    for a, b in zip(edges, edges[1:]):
        levels += [float(np.mean(points[a:b]))] * (b - a)
    return levels


def series_figure(series: "HistorySeries", metric: str) -> Any:
    import plotly.graph_objects as go

    runs, points = series.runs, series.points
    x = list(range(1, len(runs) + 1))
    bands = [run_band(run, metric) for run in runs]
    low = [b[0] if b[0] is not None else p for b, p in zip(bands, points)]
    high = [b[1] if b[1] is not None else p for b, p in zip(bands, points)]
    hover = [f"run {run.id} · {fmt_commit(run.git_commit, run.git_dirty)} · {run.recorded_at}" for run in runs]
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=x, y=high, mode="lines", line=dict(width=0), name="95% CI, high", showlegend=False,
                                hoverinfo="skip"))
    figure.add_trace(go.Scatter(x=x, y=low, mode="lines", line=dict(width=0), fill="tonexty",
                                fillcolor="rgba(42,157,143,0.2)", name="95% CI of each run's median", hoverinfo="skip"))
    figure.add_trace(go.Scatter(x=x, y=points, mode="lines+markers", name="each run's median", text=hover,
                                line=dict(color="#2a9d8f"), hovertemplate="%{text}<br>%{y}<extra></extra>"))
    figure.add_trace(go.Scatter(x=x, y=_levels(points, series.changes), mode="lines", name="level between changes",
                                line=dict(color="#264653", dash="dot", shape="hvh")))
    for change in series.changes:
        at = len(runs) - change.runs_since + 0.5  # between the last run before and the first after
        colour = {"confirmed": "#c0392b", "refuted": "#27ae60"}.get(change.check.verdict if change.check else "", "#e76f51")
        figure.add_vline(x=at, line=dict(color=colour, dash="dash"), annotation_text=change_label(change),
                         annotation_position="top left")
    figure.update_layout(
        title=series_title(series), xaxis=dict(title="runs in the order recorded (commit)", tickvals=x,
                                               ticktext=[fmt_commit(run.git_commit, run.git_dirty) for run in runs]),
        yaxis=dict(title=f"{metric_label(metric)} ({FIGURES[metric].unit})", rangemode="tozero"))
    return figure


def _changes_table(changes: Sequence["SeriesChange"]) -> str:
    from jaxrun.present.view.changes_view import CHANGE_COLUMNS, change_cells

    head = "".join(f"<th class='{'num' if numeric else 'text'}'>{esc(name)}</th>" for name, numeric, _ in CHANGE_COLUMNS)
    rows = []
    for change in changes:
        verdict = change.check.verdict if change.check is not None else ""
        cells = "".join(f"<td class='{'num' if numeric else 'text'}{' ' + verdict if name == 'confirmation' else ''}'>"
                        f"{esc(cell)}</td>" for (name, numeric, _), cell in zip(CHANGE_COLUMNS, change_cells(change)))
        rows.append(f"<tr>{cells}</tr>")
    return f"<table id='changes'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _runs_table(series: "HistorySeries", metric: str, number: int) -> str:
    from jaxrun.judge.benchmark_runs import metric_values

    head = ("<th class='num'>#</th><th class='num'>run</th><th class='text'>recorded</th><th class='text'>commit</th>"
            "<th class='num'>samples</th><th class='num'>median</th><th class='num'>95% CI of the median</th>")
    rows = []
    for i, (run, point) in enumerate(zip(series.runs, series.points), start=1):
        low, high = run_band(run, metric)
        band = "-" if low is None else f"{format_metric(metric, low)} – {format_metric(metric, high)}"
        rows.append(f"<tr><td>{i}</td><td>{run.id}</td><td class='text'>{esc(run.recorded_at)}</td>"
                    f"<td class='text'>{esc(fmt_commit(run.git_commit, run.git_dirty))}</td>"
                    f"<td>{len(metric_values(run.samples, metric))}</td><td>{esc(format_metric(metric, point))}</td>"
                    f"<td>{esc(band)}</td></tr>")
    return f"<table id='runs-{number}'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def render_history_page(series: Sequence["HistorySeries"], metric: str, where: str, since: str | None,
                        written_at: str) -> str:
    """The page as one HTML document, plotly.js included once, inline."""
    import plotly.io as pio

    from jaxrun.present.view.changes_view import changes_heading, no_change_line

    changes = sorted((c for s in series for c in s.changes), key=lambda c: c.first_after.recorded_at, reverse=True)
    drawn: list[str] = []
    sections = []
    for number, each in enumerate(series, start=1):
        figure = series_figure(each, metric)
        figure.update_layout(template="plotly_white", height=420, margin=dict(t=60, b=80))
        drawn.append(str(number))
        plot = pio.to_html(figure, full_html=False, include_plotlyjs="inline" if len(drawn) == 1 else False,
                           div_id=f"figure-series-{number}", config={"displaylogo": False})
        said = (f"{plural(len(each.runs), 'run')}; noise {fmt_share(each.summary.noise)}, smallest step found "
                f"{fmt_share(each.summary.smallest_step)}; {plural(len(each.changes), 'change point')}"
                f"{': ' + ', '.join(change_label(c) for c in each.changes) if each.changes else ''}")
        sections.append(f"<section id='series-{number}'><h2>{esc(series_title(each))}</h2><p class='note'>{esc(said)}</p>"
                        f"{plot}{wide(_runs_table(each, metric, number))}</section>")
    latest = (f"<h2>{esc(changes_heading(metric, where, since))}</h2>{wide(_changes_table(changes))}" if changes
              else f"<p class='note' id='no-change'>{esc(no_change_line(metric, where, since))}</p>")
    runs = sum(len(s.runs) for s in series)
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>jaxrun history: {esc(where)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>jaxrun history</h1><div class='sub'>{esc(where)} · {esc(metric)} · "
            f"{plural(len(series), 'series', 'series')}, {plural(runs, 'run')}"
            f"{' since ' + esc(since) if since else ''} · written {esc(written_at)}</div>"
            f"<section id='latest'>{latest}</section>{''.join(sections)}</body></html>\n")


def write_history_page(database: Path, output: Path, *, metric: str = "run_time", since: str | None = None,
                       script: str | None = None) -> Path:
    """The page of the history at ``database`` written to ``output`` (atomically); its path."""
    from jaxrun.core.extras import require
    from jaxrun.core.timestamps import now_iso
    from jaxrun.errors import UsageError
    from jaxrun.judge.history import HistoryStore
    from jaxrun.judge.history_db import shown_location
    from jaxrun.results.benchmark_result import resolve_metric
    from jaxrun.results.result_files import atomic_write_text, check_output_file

    require("report")
    check_output_file(output, "the history page (--output)")
    metric = resolve_metric(metric)
    with HistoryStore(database, create=False) as store:
        if script is not None and not store.match_scripts(script):
            raise UsageError(f"no benchmarked runs of {script!r} in the history {str(store.path)!r}")
        series = store.series(script, metric=metric, since=since)
    atomic_write_text(output, render_history_page(series, metric, shown_location(database), since, now_iso()))
    return output
