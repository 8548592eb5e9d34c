"""Rich tables the CLI prints. Values come straight from the models; unknown shows as "-"."""

from __future__ import annotations

from typing import Iterable

from rich.table import Table
from rich.text import Text

from ..models import (
    ComparisonReport,
    DeviceSpeedup,
    HistoryRun,
    RegressionCheck,
    ScriptBenchmark,
    ScriptResult,
    WarmSummary,
)


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def fmt_seconds(value: float | None) -> str:
    """Seconds with a unit that keeps 3 significant figures (µs for sub-millisecond values)."""
    if value is None:
        return "-"
    if abs(value) < 1e-3:
        return f"{value * 1e6:.3g} µs"
    if abs(value) < 1:
        return f"{value * 1e3:.3g} ms"
    return f"{value:.3g} s"


def fmt_p(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2g}" if value >= 1e-4 else f"{value:.1e}"


def _table(title: str, columns: Iterable[tuple[str, str]]) -> Table:
    table = Table(title=title, title_justify="left")
    for column, justify in columns:
        table.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    return table


def summary_table(results: list[ScriptResult]) -> Table:
    table = _table("jaxrun results", (
        ("script", "left"), ("status", "left"), ("device", "left"), ("time s", "right"),
        ("body s", "right"), ("import s", "right"), ("jit s", "right"), ("run s", "right"),
        ("compiles", "right"), ("peak RSS MB", "right"),
    ))
    for r in results:
        status = _status(r)
        device = r.device_used or "-"
        if r.fallback_reason:
            device += f" (fallback from {r.device_requested})"
        table.add_row(
            Text(r.script_name), status, Text(device), fmt(r.execution_time), fmt(r.body_time),
            fmt(r.import_time), fmt(r.jit_compile_time), fmt(r.run_time),
            "-" if r.compile_count is None else str(r.compile_count),
            fmt(r.memory_peak, 0),
        )
    return table


def _status(r: ScriptResult) -> Text:
    if r.outcome == "xfailed":
        return Text(f"xfail ({r.error_class})", style="yellow")
    if r.outcome == "xpassed":
        return Text("XPASS", style="yellow")
    return Text("ok", style="green") if r.success else Text(str(r.error_class), style="red")


def benchmark_table(benchmarks: list[ScriptBenchmark]) -> Table:
    table = _table("process benchmark (medians, 95% CI of the median)", (
        ("script", "left"), ("device", "left"), ("runs", "right"), ("wall", "right"),
        ("95% CI", "right"), ("body", "right"), ("import", "right"), ("compile", "right"), ("run", "right"),
        ("CV", "right"), ("history", "left"),
    ))
    for b in benchmarks:
        stats = b.statistics
        wall = stats.get("wall_time")
        ci = "-" if wall is None or wall.ci_low is None else f"{fmt_seconds(wall.ci_low)} – {fmt_seconds(wall.ci_high)}"
        table.add_row(
            Text(b.script_name), Text(_device_cell(b.device_used, b.device_requested)),
            f"{b.runs_completed}/{b.benchmark_runs}",
            fmt_seconds(wall.median if wall else None), ci,
            *(fmt_seconds(stats[m].median if m in stats else None)
              for m in ("body_time", "import_time", "compile_time", "run_time")),
            "-" if wall is None or wall.cv is None else f"{wall.cv:.1%}",
            Text(history_cell(b.history_check)),
        )
    return table


def _device_cell(used: str | None, requested: str) -> str:
    """The device a benchmark ran on; the request too when it was a specific other device."""
    if requested in ("auto", used):
        return used or "-"
    return f"{used or '-'} (asked {requested})"


def history_cell(check: RegressionCheck | None) -> str:
    """The history check in a few words: the verdict against N earlier runs, or why there is none
    ("not judged: 1 earlier run, needs 3")."""
    if check is None:
        return "-"
    if check.comparison is None:
        if check.reason:
            return check.reason
        if check.other_numerics:  # a check written before `reason` existed
            return f"not judged: {check.other_numerics} earlier run(s) with other numerics"
        return "first run" if not check.previous_runs else "not judged"
    from ..verdicts import describe_gate, too_few_note

    c = check.comparison
    text = f"{c.verdict} ({describe_gate(c) or ', '.join(c.gate)} vs {check.previous_runs} earlier)"
    need = too_few_note(c) if c.verdict == "too few runs to judge" else None
    if need and "at least" in need:
        text += f"; {need[need.find('at least'):]}"
    return text


def warm_table(rows: list[tuple[str, WarmSummary]]) -> Table:
    table = _table("warm mode: entry called repeatedly in one process", (
        ("script", "left"), ("entry", "left"), ("calls", "right"), ("first call", "right"),
        ("steady median", "right"), ("steady 95% CI", "right"),
        ("compile+first-call overhead ratio", "right"),
    ))
    for name, warm in rows:
        steady = warm.steady
        ci = "-" if steady is None or steady.ci_low is None else f"{fmt_seconds(steady.ci_low)} – {fmt_seconds(steady.ci_high)}"
        ratio = warm.compile_first_call_overhead_ratio
        table.add_row(
            Text(name), Text(warm.entry), str(len(warm.calls)), fmt_seconds(warm.first_call),
            fmt_seconds(steady.median if steady else None), ci,
            "-" if ratio is None else f"{ratio:.1f}",
        )
    return table


def speedup_table(rows: list[DeviceSpeedup]) -> Table:
    table = _table("cross-device speed-up (baseline median / device median)", (
        ("script", "left"), ("baseline", "left"), ("device", "left"), ("speed-up", "right"),
        ("95% CI", "right"), ("note", "left"),
    ))
    for row in rows:
        ci = "-" if row.ci_low is None else f"{row.ci_low:.3f} – {row.ci_high:.3f}"
        table.add_row(
            Text(row.script_name), row.baseline_device, Text(f"{row.device} (ran on {row.device_used})"),
            "-" if row.speedup is None else f"x{row.speedup:.3f}", ci,
            Text(row.note or "real comparison"),
        )
    return table


def fmt_metric(metric: str, value: float | None) -> str:
    """A median of ``metric`` with its unit: MB for memory, seconds otherwise."""
    if metric == "memory_peak":
        return "-" if value is None else f"{value:.4g} MB"
    return fmt_seconds(value)


def compare_table(report: ComparisonReport) -> Table:
    gate = " + ".join(report.gate)
    table = _table(
        f"NEW vs BASE per phase (ratio of medians; alpha={report.alpha:g}, min effect={report.min_effect:.0%}; "
        f"* = gate phase, by default {gate})",
        (
            ("script", "left"), ("device", "left"), ("phase", "left"), ("base", "right"), ("new", "right"),
            ("ratio", "right"), ("95% CI", "right"), ("p", "right"), ("n", "right"), ("verdict", "left"),
        ),
    )
    # "too few runs to judge" is not "no significant change": the samples could not have shown one.
    styles = {"slower": "red", "faster": "green", "too few runs to judge": "yellow"}
    for c in report.scripts:
        # A note that several phases share ("with 3 and 3 samples no test can reach...") is said once.
        notes = [p.note for p in c.phases.values() if p.note]
        shared = list(dict.fromkeys(n for n in notes if notes.count(n) > 1))
        note = "; ".join(([c.note] if c.note else []) + shared)
        for i, (metric, phase) in enumerate(c.phases.items()):
            ci = "-" if phase.ratio_ci_low is None else f"{phase.ratio_ci_low:.3f} – {phase.ratio_ci_high:.3f}"
            own = phase.note if phase.note and phase.note not in shared else None
            verdict = Text(phase.verdict + (f" ({own})" if own else ""), style=styles.get(phase.verdict, ""))
            name = Text(c.script_name + (f" → {c.verdict}" if c.verdict != "no significant change" else ""),
                        style=styles.get(c.verdict, "")) if i == 0 else Text("")
            table.add_row(
                name, Text(c.device or "-") if i == 0 else Text(""),
                Text(metric.removesuffix("_time").removesuffix("_peak") + (" *" if metric in c.gate else "")),
                fmt_metric(metric, phase.base_median), fmt_metric(metric, phase.new_median),
                "-" if phase.ratio is None else f"{phase.ratio:.3f}", ci, fmt_p(phase.p_value),
                f"{phase.base_n}/{phase.new_n}", verdict,
                end_section=not note and i == len(c.phases) - 1,
            )
        if note:
            table.add_row(Text(""), Text(""), Text("note"), "", "", "", "", "", "", Text(note), end_section=True)
    return table


def history_scripts_table(rows: list) -> Table:
    table = _table("benchmark history", (
        ("script", "left"), ("path", "left"), ("runs", "right"), ("last recorded", "left"),
    ))
    for row in rows:
        table.add_row(Text(row.script_name), Text(row.script_path), str(row.n_runs), row.last_recorded_at)
    return table


def history_runs_table(title: str, runs: list[HistoryRun], metric_medians: list[float | None], flags: dict[int, str]) -> Table:
    table = _table(title, (
        ("run", "right"), ("recorded", "left"), ("git", "left"), ("device", "left"),
        ("host", "left"), ("mode", "left"), ("n", "right"), ("median", "right"), ("check", "left"),
    ))
    for run, median in zip(runs, metric_medians):
        commit = "-" if run.git_commit is None else run.git_commit[:10] + ("+dirty" if run.git_dirty else "")
        counted = sum(1 for s in run.samples if not s.warmup and s.success)
        table.add_row(
            str(run.id), run.recorded_at, commit, Text(run.device_used or "-"), Text(run.host),
            Text(run.mode), str(counted), fmt_seconds(median), Text(flags.get(run.id or -1, "")),
        )
    return table
