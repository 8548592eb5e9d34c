"""The report of a ``jaxrun ab`` folder: both sides, pair by pair. The verdict of a paired
comparison is the median of the pairs' ratios, so a reader checks it against both distributions
and the ratios themselves: per gate phase, every counted run of BASE and NEW side by side (box
plots with every run), each pair's ratio NEW / BASE, and per script the table of its pairs (pair
i is BASE's counted run i and NEW's, as ``base/`` and ``new/`` of the folder hold them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from jaxrun.core.formatting import fmt_ratio, plural
from jaxrun.present.reports.html_text import esc, wide
from jaxrun.results.figures import FIGURES, format_metric, metric_label

if TYPE_CHECKING:
    from jaxrun.results.models import BatchResult, ComparisonReport, RunSample

Pair = tuple["RunSample | None", "RunSample | None"]


def pairs_of(base: "BatchResult", new: "BatchResult", script: str) -> list[Pair]:
    """Script ``script``'s pairs: BASE's and NEW's counted samples of the same index, in order."""
    def counted(batch: "BatchResult") -> dict[int, "RunSample"]:
        found = next((b for b in batch.benchmarking.benchmarks if b.script_name == script), None) \
            if batch.benchmarking is not None else None
        return {} if found is None else {s.index: s for s in found.samples if not s.warmup}

    a, b = counted(base), counted(new)
    return [(a.get(i), b.get(i)) for i in sorted(a.keys() | b.keys())]


def _value(sample: "RunSample | None", metric: str) -> float | None:
    if sample is None or not sample.success:
        return None
    return getattr(sample, metric, None)


def pair_ratio(pair: Pair, metric: str) -> float | None:
    """NEW / BASE of one pair (None: a side not measured, or BASE 0)."""
    before, after = _value(pair[0], metric), _value(pair[1], metric)
    return None if before is None or after is None or before == 0 else after / before


def sides_section(base: "BatchResult", new: "BatchResult", comparison: "ComparisonReport",
                  labels: dict[str, str], plot: Callable[[Any, str], str]) -> str:
    """The section's HTML: its figures (through ``plot``) and each script's table of pairs."""
    import plotly.graph_objects as go

    scripts = [c.script_name for c in comparison.scripts]
    pairs = {name: pairs_of(base, new, name) for name in scripts}
    gate = [m for m in comparison.gate if any(m in c.gate for c in comparison.scripts)]  # measured by one at least
    shown = {name: labels.get(name, name) for name in scripts}
    parts = []
    for metric in gate:
        unit = FIGURES[metric].unit if metric in FIGURES else ""
        figure = go.Figure()
        for side, at in (("BASE", 0), ("NEW", 1)):
            xs, ys = [], []
            for name in scripts:
                for pair in pairs[name]:
                    value = _value(pair[at], metric)
                    if value is not None:
                        xs.append(shown[name])
                        ys.append(value)
            figure.add_trace(go.Box(name=side, x=xs, y=ys, boxpoints="all", jitter=0.3))
        figure.update_layout(boxmode="group", title=f"{metric_label(metric)}: every counted run of BASE and NEW",
                             yaxis_title=f"{metric_label(metric)} ({unit})")
        parts.append(plot(figure, f"sides-{metric}"))
    ratios = go.Figure()
    for metric in gate:
        xs, ys = [], []
        for name in scripts:
            for pair in pairs[name]:
                ratio = pair_ratio(pair, metric)
                if ratio is not None:
                    xs.append(shown[name])
                    ys.append(ratio)
        ratios.add_trace(go.Box(name=metric_label(metric), x=xs, y=ys, boxpoints="all", jitter=0.3))
    ratios.add_hline(y=1.0, line_dash="dot")
    ratios.update_layout(boxmode="group", yaxis_title="NEW / BASE of each pair",
                         title="Each pair's ratio NEW / BASE (the verdict's estimate is their median)")
    parts.append(plot(ratios, "pair-ratios"))
    for number, name in enumerate(scripts, start=1):
        parts.append(f"<h3>{esc(shown[name])}</h3>{wide(_pairs_table(pairs[name], gate, number))}")
    how = "both runs of a pair at once, on two halves of the machine (a duet)" if comparison.duet else \
        "the runs of a pair one after the other, in alternating order"
    return (f"<section id='both-sides'><h2>BASE and NEW, pair by pair</h2><p class='note'>BASE: "
            f"{esc(comparison.base)}; NEW: {esc(comparison.new)}. {esc(plural(comparison.pairs or 0, 'pair'))} "
            f"asked for per script, {esc(how)}.</p>{''.join(parts)}</section>")


def _pairs_table(pairs: list[Pair], gate: list[str], number: int) -> str:
    head = "<th>pair</th>" + "".join(f"<th>{esc(metric_label(m))}: BASE</th><th>NEW</th><th>NEW / BASE</th>" for m in gate)
    rows = []
    for i, pair in enumerate(pairs, start=1):
        cells = "".join(f"<td>{esc(format_metric(m, _value(pair[0], m)))}</td><td>{esc(format_metric(m, _value(pair[1], m)))}"
                        f"</td><td>{esc(fmt_ratio(pair_ratio(pair, m)))}</td>" for m in gate)
        rows.append(f"<tr><td>{i}</td>{cells}</tr>")
    return f"<table id='pairs-{number}'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
