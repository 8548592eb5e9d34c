"""Plain-text rendering of jaxrun.bench results (tables, one-line figures with units); no rich."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jaxrun.core.formatting import fmt_bytes as _fmt_bytes
from jaxrun.core.formatting import plural
from jaxrun.core.formatting import fmt_count

if TYPE_CHECKING:
    from jaxrun.bench.records import BatchScaling, FitCheck, Measurement, Speedup
    from jaxrun.results.models import Statistics


def text_table(headers: list[str], rows: list[list[str]]) -> str:
    """Plain-text table, names (first column) left-aligned, figures right-aligned; no rich needed."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(headers), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


def fmt_seconds(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(value) >= scale:
            return f"{value / scale:.4g} {unit}"
    return f"{value / 1e-9:.4g} ns"


def fmt_rate(value: float | None, unit: str) -> str:
    return fmt_count(value, unit, digits=4)


def fmt_bytes(value: float | None) -> str:
    return _fmt_bytes(value, digits=4)


def measurement_text(m: "Measurement") -> str:
    s = m.steady
    ci = f" [{fmt_seconds(s.ci_low)}, {fmt_seconds(s.ci_high)}]" if s.ci_low is not None else ""
    lines = [
        f"{m.name} on {m.device or 'unknown device'}",
        f"  trace {fmt_seconds(m.trace_time)}, lower {fmt_seconds(m.lower_time)}, "
        f"compile {fmt_seconds(m.compile_time)}{' (cached)' if m.compile_cached else ''}, "
        f"first call {fmt_seconds(m.first_call)}",
        f"  steady {fmt_seconds(s.median)}{ci} median of {plural(s.n, 'sample')} x {plural(m.inner_loops, 'call')}"
        + (f" in {fmt_seconds(m.sampling_time)} (budget {fmt_seconds(m.time_budget)})"
           if m.sampling_time is not None and m.time_budget is not None else ""),
    ]
    if m.flops is not None:
        lines.append(
            f"  {m.flops:.4g} FLOPs, {fmt_bytes(m.bytes_accessed)} accessed: "
            f"{fmt_rate(m.achieved_flops_per_s, 'FLOP/s')}, {fmt_rate(m.achieved_bytes_per_s, 'B/s')}"
        )
    if m.fraction_of_peak_flops is not None:
        bandwidth = m.fraction_of_peak_bandwidth
        lines.append(
            f"  {m.fraction_of_peak_flops:.1%} of peak {m.peak_dtype} FLOP/s, "
            f"{'-' if bandwidth is None else f'{bandwidth:.1%}'} of peak bandwidth"
            + (f": {m.bound}-bound" if m.bound else "")
        )
        peaks = [f"{fmt_rate(rate, unit)} ({source})" for rate, unit, source in (
            (m.peak_flops_per_s, "FLOP/s", m.peak_flops_source), (m.peak_bytes_per_s, "B/s", m.peak_bandwidth_source))
            if rate is not None and source]
        if peaks:
            lines.append(f"  peaks: {', '.join(peaks)}")
    lines += [f"  warning: {w}" for w in m.warnings + s.warnings]
    return "\n".join(lines)


def batch_scaling_table(b: "BatchScaling") -> str:
    headers = ["batch", "time/call", "time/item", "items/s", f"speedup/item vs {b.baseline_size}"]
    rows = [
        [
            str(r.size),
            fmt_seconds(r.time),
            fmt_seconds(r.per_item),
            "-" if r.items_per_s is None else f"{r.items_per_s:,.0f}",
            "-" if r.speedup_per_item is None else f"{r.speedup_per_item:.2f}x",
        ]
        for r in b.rows
    ]
    return f"{b.name} on {b.device or 'unknown device'}\n" + text_table(headers, rows)


def speedup_table(sp: "Speedup") -> str:
    def ci(s: "Statistics") -> str:
        return "-" if s.ci_low is None else f"[{fmt_seconds(s.ci_low)}, {fmt_seconds(s.ci_high)}]"

    rows = [
        [t.name, fmt_seconds(t.steady.median), ci(t.steady), str(t.steady.n)]
        for t in (sp.fast, sp.reference)
    ]
    text = text_table(["function", "median/call", "95% CI", "samples"], rows)
    if sp.ratio is not None:
        interval = "" if sp.ci_low is None else f" (95% CI {sp.ci_low:.3g}x - {sp.ci_high:.3g}x)"
        text += f"\nspeed-up of {sp.fast.name} over {sp.reference.name}: {sp.ratio:.3g}x{interval}"
    return text


def fit_text(f: "FitCheck") -> str:
    verdict = {True: "fits", False: "does not fit", None: "unknown whether it fits"}[f.fits]
    lines = [f"{f.program} on {f.device}: {verdict}"]
    m = f.memory
    if m is not None:
        lines.append(
            f"  needs {fmt_bytes(f.needed_bytes)}: inputs {fmt_bytes(m.argument_bytes)} "
            f"({fmt_bytes(f.resident_bytes)} already on the device), outputs {fmt_bytes(m.output_bytes)}, "
            f"temporaries {fmt_bytes(m.temp_bytes)}, code {fmt_bytes(m.generated_code_bytes)}"
            + (f", less {fmt_bytes(m.alias_bytes)} of donated inputs" if m.alias_bytes else "")
        )
    if f.free_bytes is not None:
        lines.append(f"  free {fmt_bytes(f.free_bytes)} = limit {fmt_bytes(f.limit_bytes)} - "
                     f"{fmt_bytes(f.in_use_bytes)} in use ({f.source})")
    if f.reason:
        lines.append(f"  {f.reason}")
    return "\n".join(lines)
