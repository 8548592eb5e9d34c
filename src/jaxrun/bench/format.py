"""Plain text for jaxrun.bench's results (a table, figures with their units); no rich. Each
record's own text is written with these by bench/records.py."""

from __future__ import annotations

from jaxrun.core.formatting import fmt_bytes as _fmt_bytes
from jaxrun.core.formatting import fmt_count


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
