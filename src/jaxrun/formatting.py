"""Figures as people read them, with their units: shared by the CLI's tables (cli/tables.py) and
the exports people paste elsewhere (sinks/exports.py), so that both show a figure the same way.
Pure text, no rich; unknown is "-"."""

from __future__ import annotations

__all__ = ["fmt_seconds", "fmt_p", "fmt_metric", "fmt_ratio", "fmt_ratio_ci", "phase_label"]


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


def fmt_metric(metric: str, value: float | None) -> str:
    """A median of ``metric`` with its unit: MB for memory, seconds otherwise."""
    if metric == "memory_peak":
        return "-" if value is None else f"{value:.4g} MB"
    return fmt_seconds(value)


def fmt_ratio(value: float | None) -> str:
    """A NEW / BASE ratio, as ``jaxrun compare`` prints it."""
    return "-" if value is None else f"{value:.3f}"


def fmt_ratio_ci(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"{low:.3f} – {high:.3f}"


def phase_label(metric: str, gate: bool = False) -> str:
    """``run_time`` -> ``run``, ``memory_peak`` -> ``memory``; `` *`` marks a phase of the gate."""
    return metric.removesuffix("_time").removesuffix("_peak") + (" *" if gate else "")
