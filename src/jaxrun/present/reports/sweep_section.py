"""The report's section of a parameter sweep (``jaxrun run train.py --param batch=32,64``): the
sweep's table (present/view/sweep_view.py: the cells the terminal and Markdown write) and a plotly
figure of one figure against a numeric parameter, the figure picked from a dropdown.

The x axis is the first parameter that takes only numbers, and more than one of them; one the
script itself reads goes before one jaxrun applies (``devices``), since the script's own knob
(batch size, width) is what a sweep is usually about and ``devices`` then tells the lines apart.
Every combination of the other parameters' values is a line (``devices=2``). A point that failed
is a gap in its line, never a 0; a benchmarked point has its median's CI as an error bar. The x axis is
logarithmic with the values themselves as ticks when they are powers of two (32, 64, 128: evenly
spaced), and a figure whose values span more than two decades gets a log y axis when picked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from jaxrun.config.sweeps import SPECIAL
from jaxrun.present.reports.html_text import esc
from jaxrun.present.view.sweep_view import as_number
from jaxrun.probe.sweep_point import value_text

if TYPE_CHECKING:
    from jaxrun.present.view.sweep_view import SweepColumn, SweepPoint, SweepView

_UNITS = {"seconds": "s", "mib": "MiB (2^20 bytes)", "count": ""}
_TEXT = ' class="text"'
_LOG_Y_SPAN = 100.0  # max / min beyond which a figure's y axis is logarithmic


def x_parameter(view: "SweepView") -> Optional[str]:
    """The parameter the plot has on its x axis (see the module's docstring), or None: none takes
    only numbers, more than one of them."""
    candidates = [name for name in view.params if view.numeric(name)
                  and len({p.params.get(name) for p in view.points}) > 1]
    own = [name for name in candidates if name not in SPECIAL]
    return (own or candidates or [None])[0]


def _sort_value(point: "SweepPoint", column: "SweepColumn") -> object:
    if column.kind == "param":
        return point.params.get(column.key, "")
    if column.kind == "status":
        return point.status
    if column.key == "compiles":
        return point.compiled
    return point.values.get(column.key)


def sweep_table(view: "SweepView", table_id: str) -> str:
    """The sweep's table, sortable like the scripts table: a row per point, the texts the view gives."""
    texts = {c.key for c in view.columns if c.kind == "status" or (c.kind == "param" and not view.numeric(c.key))}
    head = "".join(f"<th{_TEXT if c.key in texts else ''}>{esc(c.label)}</th>" for c in view.columns)
    rows = []
    for point in view.points:
        cells = []
        for column in view.columns:
            raw = _sort_value(point, column)
            text = column.key in texts
            level = " bad" if column.kind == "status" and point.status != "ok" else ""
            cells.append(f'<td class="{"text" if text else ""}{level}" data-value="{esc("" if raw is None else raw)}">'
                         f"{esc(point.text(column))}</td>")
        rows.append(f'<tr class="{"" if point.status == "ok" else "failed"}" data-point="{esc(point.name)}">'
                    f"{''.join(cells)}</tr>")
    return (f'<table id="{esc(table_id)}" class="sortable sweep"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def _plotted(view: "SweepView") -> list["SweepColumn"]:
    """The figures the dropdown offers: those some point that succeeded has a value of."""
    return [c for c in [*view.columns, *view.more] if c.kind not in ("param", "status") and c.key != "compiles"
            and any(p.status == "ok" and p.values.get(c.key) is not None for p in view.points)]


def _axis_title(column: "SweepColumn") -> str:
    unit = _UNITS.get(column.kind, "")
    return f"{column.label} ({unit})" if unit else column.label


def _lines(view: "SweepView", x: str) -> list[tuple[str, list["SweepPoint"]]]:
    """A line per combination of the other parameters' values (first seen first), its points by x."""
    others = [c.key for c in view.columns if c.kind == "param" and c.key != x]
    lines: dict[str, list["SweepPoint"]] = {}
    for point in view.points:
        name = ", ".join(f"{k}={value_text(point.params.get(k, '-'))}" for k in others) or view.script
        lines.setdefault(name, []).append(point)
    return [(name, sorted(points, key=lambda p: as_number(p.params.get(x)) or 0.0)) for name, points in lines.items()]


def _series(points: list["SweepPoint"], column: "SweepColumn") -> dict[str, Any]:
    """One line's y values, error bars and hover texts for ``column`` (a failed point: null)."""
    y, plus, minus, text = [], [], [], []
    for point in points:
        value = point.values.get(column.key) if point.status == "ok" else None
        low_high = point.ci.get(column.key) if value is not None else None
        y.append(value)
        plus.append(None if low_high is None else max(low_high[1] - value, 0.0))  # type: ignore[operator]
        minus.append(None if low_high is None else max(value - low_high[0], 0.0))  # type: ignore[operator]
        text.append(f"{point.label}<br>{column.label}: {point.text(column)}"
                    + ("" if point.status == "ok" else f" ({point.status}: not plotted)"))
    return {"y": y, "plus": plus, "minus": minus, "text": text, "ci": any(v is not None for v in plus)}


def _y_type(series: list[dict[str, Any]]) -> str:
    values = [v for s in series for v in s["y"] if v is not None]
    positive = [v for v in values if v > 0]
    wide = len(positive) == len(values) and positive and max(positive) / min(positive) > _LOG_Y_SPAN
    return "log" if wide else "linear"


def sweep_figure(view: "SweepView") -> tuple[Any, Optional[str]]:
    """The sweep's plotly figure, or None and why there is none."""
    x = x_parameter(view)
    if x is None:
        return None, (f"No plot: no parameter ({', '.join(view.params)}) takes only numbers, more than one of them, "
                      "so none can be an x axis; the table has every point.")
    columns = _plotted(view)
    if not columns:
        return None, "No plot: no point that succeeded has a figure to plot; the table has every point."
    import plotly.graph_objects as go

    lines = _lines(view, x)
    by_column = {c.key: [_series(points, c) for _, points in lines] for c in columns}
    first = columns[0]
    traces = []
    for (name, points), series in zip(lines, by_column[first.key]):
        traces.append(go.Scatter(
            name=name, x=[as_number(p.params.get(x)) for p in points], y=series["y"], text=series["text"],
            mode="lines+markers", connectgaps=False, hovertemplate="%{text}<extra></extra>",
            error_y=dict(type="data", symmetric=False, array=series["plus"], arrayminus=series["minus"],
                         visible=series["ci"])))
    title = "{label} against " + x + (" (error bars: the median's CI over the benchmark runs)" if any(
        s["ci"] for c in columns for s in by_column[c.key]) else "")
    buttons = []
    for column in columns:
        series = by_column[column.key]
        buttons.append(dict(label=column.label, method="update", args=[
            {"y": [s["y"] for s in series], "text": [s["text"] for s in series],
             "error_y.array": [s["plus"] for s in series], "error_y.arrayminus": [s["minus"] for s in series],
             "error_y.visible": [s["ci"] for s in series]},
            {"yaxis.title.text": _axis_title(column), "yaxis.type": _y_type(series),
             "title.text": title.format(label=column.label)}]))
    figure = go.Figure(traces)
    xaxis: dict[str, Any] = dict(title=x)
    if view.powers_of_two(x):  # evenly spaced doublings, each labelled with its value
        values = sorted({as_number(p.params.get(x)) for p in view.points})  # type: ignore[type-var]
        xaxis.update(type="log", tickvals=values, ticktext=[value_text(p) for p in _as_given(view, x, values)])
    figure.update_layout(
        title=title.format(label=first.label), xaxis=xaxis,
        yaxis=dict(title=_axis_title(first), type=_y_type(by_column[first.key]),
                   exponentformat="SI"),  # 50G, as the table writes it, not plotly's 50B
        legend_title_text=", ".join(c.key for c in view.columns if c.kind == "param" and c.key != x) or None,
        title_x=0.5,  # the dropdown sits left, the tool bar right
        updatemenus=[dict(type="dropdown", buttons=buttons, active=0, showactive=True, x=0.0, xanchor="left",
                          y=1.1, yanchor="bottom", pad=dict(l=50))],
        annotations=[dict(text="figure:", x=0.0, xref="paper", xanchor="left", y=1.1, yref="paper",
                          yanchor="bottom", yshift=6, showarrow=False)])
    return figure, None


def _as_given(view: "SweepView", x: str, values: list[float]) -> list[Any]:
    """Each tick's value as the sweep gave it (64, not 64.0)."""
    given = {as_number(p.params.get(x)): p.params.get(x) for p in view.points}
    return [given.get(v, v) for v in values]

