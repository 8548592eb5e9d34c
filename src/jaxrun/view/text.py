"""How a figure is written wherever a person reads it (terminal, Markdown, HTML, progress lines):
one function per kind of value, so that every surface writes the same figure the same way."""

from __future__ import annotations

from typing import Optional

ELLIPSIS = "…"


def fmt(value: Optional[float], digits: int = 2) -> str:
    """A number with ``digits`` decimals; unknown is "-", never 0."""
    return "-" if value is None else f"{value:.{digits}f}"


def fmt_seconds(value: Optional[float]) -> str:
    """Seconds with a unit that keeps 3 significant figures (µs for sub-millisecond values)."""
    if value is None:
        return "-"
    if abs(value) < 1e-3:
        return f"{value * 1e6:.3g} µs"
    if abs(value) < 1:
        return f"{value * 1e3:.3g} ms"
    return f"{value:.3g} s"


def fmt_p(value: Optional[float]) -> str:
    if value is None:
        return "-"
    return f"{value:.2g}" if value >= 1e-4 else f"{value:.1e}"


def fmt_metric(metric: str, value: Optional[float]) -> str:
    """A figure of ``metric`` with its unit: MB for memory, seconds otherwise."""
    if metric == "memory_peak":
        return "-" if value is None else f"{value:.4g} MB"
    return fmt_seconds(value)


def one_line(text: Optional[str]) -> Optional[str]:
    """A message on one line (a multi-line JAX error would break one-line-per-event output): its
    first non-empty line, and how many more the full text has."""
    if text is None:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    more = len(lines) - 1
    return lines[0] + (f" (+{more} more line{'s' if more > 1 else ''})" if more else "")


def shorten_middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut in the middle (the start and the end of a path
    or a name say most: ``gnn_pipeline/…/tiger_pomdp.py``)."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    if width == 1:
        return ELLIPSIS
    keep = width - 1
    head = (keep + 1) // 2
    return text[:head] + ELLIPSIS + text[len(text) - (keep - head):]


def plural(n: int, word: str, words: Optional[str] = None) -> str:
    return f"{n} {word if n == 1 else (words or word + 's')}"
