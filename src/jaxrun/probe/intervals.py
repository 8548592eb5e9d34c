"""Lengths of unions and intersections of time intervals, for the phases of a run: JIT phases nest
(tracing an outer function traces the inner ones) and library code may import modules while it
compiles, so the time spent compiling is a union, and its part inside imports an intersection."""

from __future__ import annotations

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
