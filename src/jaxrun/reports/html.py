"""``jaxrun report``: one self-contained HTML file of a results folder (no network needed).

Summary cards; a table of every script, sortable by any column; plotly figures (plotly.js inlined
once): where each script's time went (import, trace, lower, compile, run, stacked), its peak
memory, the distribution of its benchmark runs (box plots, when there are samples), and the ratio
to a baseline run (``--baseline``) with the verdicts of ``jaxrun compare``; then the recompile
reasons and each failure with its hint and the tail of its stderr log.
"""

from __future__ import annotations

import html
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..models import BatchResult, ComparisonReport, ScriptResult

_LOG_TAIL_LINES = 30
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
td:first-child,th:first-child,td.text{text-align:left}
tr.failed td{background:#fdecea} pre{background:#fff;border:1px solid #ddd;padding:8px;overflow:auto;max-height:20em}
section{margin-bottom:28px}
"""

# Sorts the table by the clicked column: numbers as numbers ("-" last), text as text.
_SORT_JS = """
document.querySelectorAll('table.sortable th').forEach(function (th, col) {
  th.addEventListener('click', function () {
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


def _esc(value: object) -> str:
    return html.escape("-" if value is None else str(value))


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


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


def _cards(batch: "BatchResult") -> str:
    meta, summary = batch.metadata, batch.performance_summary
    peaks = [r.memory_peak for r in batch.script_results if r.memory_peak is not None]
    cards = [
        ("scripts", meta.scripts_executed, ""),
        ("succeeded", meta.scripts_successful, "good"),
        ("failed", meta.scripts_failed, "bad" if meta.scripts_failed else ""),
        ("total time", f"{_num(summary.total_execution_time, 1)} s", ""),
        ("largest peak", f"{_num(max(peaks) if peaks else None, 0)} MB", ""),
        ("device", meta.device_used or "-", ""),
    ]
    return '<div class="cards">' + "".join(
        f'<div class="card {cls}"><b>{_esc(value)}</b>{_esc(label)}</div>' for label, value, cls in cards) + "</div>"


def _table(batch: "BatchResult") -> str:
    columns = ("script", "status", "device", "wall s", "import s", "compile s", "run s", "compiles", "peak MB")
    rows = []
    for r in batch.script_results:
        status = "ok" if r.success else str(r.error_class)
        cells = [(r.script_name, r.script_name, "text"), (status, status, "text"), (r.device_used, r.device_used, "text"),
                 (_num(r.execution_time), r.execution_time, ""), (_num(r.import_time), r.import_time, ""),
                 (_num(r.jit_compile_time), r.jit_compile_time, ""), (_num(r.run_time), r.run_time, ""),
                 (_esc(r.compile_count), r.compile_count, ""), (_num(r.memory_peak, 0), r.memory_peak, "")]
        tds = "".join(f'<td class="{cls}" data-value="{_esc("" if raw is None else raw)}">{_esc(shown)}</td>'
                      for shown, raw, cls in cells)
        rows.append(f'<tr class="{"" if r.success else "failed"}" data-script="{_esc(r.script_name)}">{tds}</tr>')
    head = "".join(f"<th>{_esc(c)}</th>" for c in columns)
    return f'<table id="scripts" class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _figures(batch: "BatchResult", comparison: "ComparisonReport | None") -> list[tuple[str, Any]]:
    import plotly.graph_objects as go

    results = batch.script_results
    names = [r.script_name for r in results]
    figures = []
    phases = [_phase_seconds(r) for r in results]
    time_fig = go.Figure([go.Bar(name=p, x=names, y=[s[p] for s in phases], marker_color=_COLORS[p]) for p in _PHASES])
    time_fig.update_layout(barmode="stack", yaxis_title="seconds", title="Where the time went (script body)")
    figures.append(("time", time_fig))
    memory_fig = go.Figure([go.Bar(name="host peak (MB)", x=names, y=[r.memory_peak for r in results])])
    device_peaks = [r.device_memory_peak for r in results]
    if any(p is not None for p in device_peaks):
        memory_fig.add_bar(name="device peak (MB)", x=names, y=device_peaks)
    memory_fig.update_layout(barmode="group", yaxis_title="MB", title="Peak memory")
    figures.append(("memory", memory_fig))
    benchmarks = [b for b in batch.benchmarking.benchmarks if any(s.success for s in b.samples)]
    if benchmarks:
        box = go.Figure([go.Box(name=b.script_name, boxpoints="all",
                                y=[s.wall_time for s in b.samples if s.success and s.wall_time is not None])
                         for b in benchmarks])
        box.update_layout(yaxis_title="seconds", title="Benchmark runs: wall time of every counted run")
        figures.append(("benchmarks", box))
    if comparison is not None and comparison.scripts:
        gate = comparison.gate[0] if comparison.gate else "wall_time"
        ratios = [(s.script_name, s.phases.get(gate)) for s in comparison.scripts]
        ratio_fig = go.Figure([go.Bar(
            x=[n for n, _ in ratios], y=[p.ratio if p else None for n, p in ratios],
            text=[p.verdict if p else "" for n, p in ratios],
            error_y=dict(type="data", symmetric=False,
                         array=[(p.ratio_ci_high - p.ratio) if p and p.ratio and p.ratio_ci_high else 0 for _, p in ratios],
                         arrayminus=[(p.ratio - p.ratio_ci_low) if p and p.ratio and p.ratio_ci_low else 0 for _, p in ratios]),
        )])
        ratio_fig.add_hline(y=1.0, line_dash="dot")
        ratio_fig.update_layout(yaxis_title=f"{gate}: this run / baseline", title="Against the baseline (median ratio, 95% CI)")
        figures.append(("comparison", ratio_fig))
    return figures


def _comparison_table(comparison: "ComparisonReport") -> str:
    rows = "".join(
        f"<tr><td>{_esc(s.script_name)}</td><td class='text'>{_esc(s.verdict)}</td>"
        f"<td class='text'>{_esc(', '.join(s.slower) or '-')}</td><td class='text'>{_esc(', '.join(s.faster) or '-')}</td></tr>"
        for s in comparison.scripts)
    return (f"<p>Baseline: <code>{_esc(comparison.base)}</code>. Gate: {_esc(', '.join(comparison.gate))}.</p>"
            f'<table id="comparison"><thead><tr><th>script</th><th>verdict</th><th>slower phases</th>'
            f"<th>faster phases</th></tr></thead><tbody>{rows}</tbody></table>")


def _recompiles(batch: "BatchResult") -> str:
    """Per script, each program traced more than once, with JAX's reasons (repeats counted)."""
    blocks = []
    for r in batch.script_results:
        items = []
        for program, stats in r.compiles.items():
            if not stats.recompile_reasons:
                continue
            counted = Counter(stats.recompile_reasons)
            reasons = "".join(f"<li>{_esc(reason)}{f' (x{n})' if n > 1 else ''}</li>" for reason, n in counted.items())
            items.append(f"<li><code>{_esc(program)}</code>: traced {stats.traces} times, compiled {stats.count}, "
                         f"loaded from the cache {stats.cache_hits}<ul>{reasons}</ul></li>")
        if items:
            blocks.append(f"<details><summary><b>{_esc(r.script_name)}</b>: {len(items)} program(s) traced again"
                          f"</summary><ul>{''.join(items)}</ul></details>")
    return "".join(blocks) if blocks else "<p>No program was traced more than once.</p>"


def _log_tail(path: str | None) -> str:
    if not path:
        return ""
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(the log is gone)"
    return "\n".join(lines[-_LOG_TAIL_LINES:])


def _failures(batch: "BatchResult") -> str:
    failed = [r for r in batch.script_results if not r.success]
    if not failed:
        return "<p>Every script succeeded.</p>"
    return "".join(
        f"<h3>{_esc(r.script_name)}: {_esc(r.error_class)}</h3><p>{_esc(r.error_message)}</p>"
        f"<p><i>hint:</i> {_esc(r.hint)}</p><pre>{_esc(_log_tail(r.stderr_log))}</pre>" for r in failed)


def render_report(batch: "BatchResult", comparison: "ComparisonReport | None" = None) -> str:
    """The report as one HTML document, plotly.js included once, inline."""
    import plotly.io as pio

    meta = batch.metadata
    plots = []
    for index, (name, figure) in enumerate(_figures(batch, comparison)):
        figure.update_layout(template="plotly_white", height=420, margin=dict(t=50, b=80))
        plots.append(f'<section id="plot-{name}">' + pio.to_html(
            figure, full_html=False, include_plotlyjs="inline" if index == 0 else False,
            div_id=f"figure-{name}", config={"displaylogo": False}) + "</section>")
    state = "" if meta.complete else " (interrupted before the end)"
    comparison_html = f"<section><h2>Against the baseline</h2>{_comparison_table(comparison)}</section>" if comparison else ""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>jaxrun report: {_esc(meta.results_dir)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>jaxrun report{_esc(state)}</h1>"
        f"<div class='sub'>{_esc(meta.results_dir)} · {_esc(meta.execution_timestamp)} · jaxrun {_esc(meta.jaxrun_version)}"
        f" · jax {_esc(meta.jax_version)} · {_esc(meta.host)}</div>"
        f"{_cards(batch)}<section><h2>Scripts</h2><p>Click a column to sort.</p>{_table(batch)}</section>"
        f"{''.join(plots)}{comparison_html}"
        f"<section><h2>Recompilations</h2>{_recompiles(batch)}</section>"
        f"<section><h2>Failures</h2>{_failures(batch)}</section>"
        f"<script>{_SORT_JS}</script></body></html>\n"
    )
