"""Lengths of unions and intersections of time intervals, for the phases of a run: JIT phases nest
(tracing an outer function traces the inner ones) and library code may import modules while it
compiles, so the time spent compiling is a union, and its part inside imports an intersection."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time (probe/events.py says why)
if TYPE_CHECKING:
    from typing import Iterable

Interval = tuple[float, float]


def merged(intervals: Iterable[Interval]) -> list[Interval]:
    """Disjoint, sorted intervals covering the same time."""
    out: list[Interval] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def length(intervals: Iterable[Interval]) -> float:
    return sum(end - start for start, end in merged(intervals))


def overlap(a: Iterable[Interval], b: Iterable[Interval]) -> float:
    """Length of the time covered by both ``a`` and ``b``."""
    left, right = merged(a), merged(b)
    total, i, j = 0.0, 0, 0
    while i < len(left) and j < len(right):
        start, end = max(left[i][0], right[j][0]), min(left[i][1], right[j][1])
        if end > start:
            total += end - start
        if left[i][1] < right[j][1]:
            i += 1
        else:
            j += 1
    return total


def weighted_overlap(blocks: Iterable[tuple[float, float, float]], mask: Iterable[Interval]) -> tuple[float, float]:
    """``(seconds, uncertainty)``: how much of the ``blocks``' time lies inside ``mask``.

    A block ``(start, end, seconds)`` holds ``seconds`` of time somewhere in ``[start, end]``
    (``seconds == end - start``: all of it; less: several intervals kept as one, the gaps between
    them unknown). Blocks are disjoint and in time order. A block the mask covers wholly counts
    all its seconds, one it misses nothing; one it covers in part counts its seconds in
    proportion, somewhere between ``seconds - uncovered`` and ``min(seconds, covered)``: the
    widths of those ranges are the uncertainty (0 when every such block is a single interval)."""
    parts = merged(mask)
    total = spread = 0.0
    j = 0
    for start, end, seconds in blocks:
        while j < len(parts) and parts[j][1] <= start:
            j += 1
        covered, k = 0.0, j
        while k < len(parts) and parts[k][0] < end:
            covered += min(end, parts[k][1]) - max(start, parts[k][0])
            k += 1
        span = end - start
        if covered <= 0.0:
            continue
        if covered >= span:
            total += seconds
        elif seconds >= span:  # one interval: exactly what the mask covers of it
            total += covered
        else:
            low, high = max(0.0, seconds - (span - covered)), min(seconds, covered)
            total += seconds * covered / span
            spread += high - low
    return total, spread
