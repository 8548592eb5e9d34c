"""Change points of a series: where its level moved, and by how much, deterministically.

The method is E-divisive means (Matteson and James, 2014) with the practical changes of Hunter
(Fleming et al., ICPE 2023; Apache Otava): Student's t-test instead of permutations for the
significance (no randomness: the same series always gives the same answer), and two steps.

1. **Split.** Overlapping windows of ``window`` points (a step of half a window) are each cut
   recursively where the energy statistic between the part before and the part after is
   largest, while the t-test between those parts has p < ``10 * alpha``: "weak" candidates.
   Windows keep a change late in a long series from being drowned by everything after it.
2. **Merge.** Each candidate is tested between its neighbours (the segment from the previous
   candidate to it, against the segment from it to the next); the weakest (largest p, or the
   smallest change once every p is below ``alpha``) is dropped and its neighbours tested again,
   until every change point left has p < ``alpha`` and a relative change of at least
   ``min_change``. That p is the t-test's times the cuts between the neighbours (Bonferroni):
   the split chose the cut where the sides differ most, and the plain p of the most different
   of ~50 cuts through noise is below 0.001 far more often than once in a thousand (on
   benchmarks/bench_changes.py's series: false alarms near every large step without it).

No segment is shorter than ``min_segment`` points: a single slow run is an outlier, never a change.
A change point's index is the first point after the change; its size is the relative change of
the segment means, with a confidence interval (Welch's, at ``confidence``, on the difference of
the means, divided by the mean before).
"""

from __future__ import annotations

import math
from typing import Sequence

import msgspec
import numpy as np

TEST_NAME = "Student's t-test"  # what a help text names (tests/interfaces/test_help.py)
WINDOW = 50
ALPHA = 0.001
# The lower bar of a candidate: a change the series alone cannot prove, for a duet to decide.
CANDIDATE_ALPHA = 0.05
MIN_SEGMENT = 3
CONFIDENCE = 0.95
# The split step's threshold is this many times alpha: its candidates are tested again, together.
WEAK = 10.0


class ChangePoint(msgspec.Struct, frozen=True):
    """Where a series changed level: ``index`` is the first point of the new level."""

    index: int
    before: float  # the mean of the segment before (from the previous change point)
    after: float  # the mean of the segment after (to the next change point)
    change: float | None  # after / before - 1 (None: the mean before is 0)
    change_low: float | None  # the change's confidence interval (None: too few points to say)
    change_high: float | None
    p_value: float  # Student's t-test of the segment before against the one after, times the cuts it was chosen among
    points_before: int
    points_after: int


def change_points(values: Sequence[float], *, window: int = WINDOW, alpha: float = ALPHA,
                  min_segment: int = MIN_SEGMENT, min_change: float = 0.0,
                  confidence: float = CONFIDENCE) -> list[ChangePoint]:
    """The change points of ``values`` (finite numbers, in order), earliest first."""
    series = np.asarray(values, dtype=float)
    if series.ndim != 1 or not np.all(np.isfinite(series)):
        raise ValueError("a series is a sequence of finite numbers")
    if window < 2 * min_segment or min_segment < 2:
        raise ValueError(f"the window ({window}) must hold two segments of at least 2 points ({min_segment})")
    if len(series) < 2 * min_segment:
        return []
    candidates = _split(series, window, min(1.0, WEAK * alpha), min_segment)
    kept = _merge(series, candidates, alpha, min_change, min_segment)
    return [_described(series, bounds, confidence, min_segment) for bounds in _neighbours(kept, len(series))]


# -- split --------------------------------------------------------------------------------------


def _split(series: np.ndarray, window: int, alpha: float, min_segment: int) -> list[int]:
    found: set[int] = set()
    step = max(1, window // 2)
    start = 0
    while True:
        end = min(start + window, len(series))
        _divide(series, start, end, alpha, min_segment, found)
        if end == len(series):
            return sorted(found)
        start += step


def _divide(series: np.ndarray, start: int, end: int, alpha: float, min_segment: int, found: set[int]) -> None:
    """Cut ``series[start:end]`` where its energy statistic is largest, while the cut is
    significant, then each side (E-divisive's hierarchical segmentation)."""
    stack = [(start, end)]
    while stack:
        s, e = stack.pop()
        if e - s < 2 * min_segment:
            continue
        cut = s + _best_cut(series[s:e], min_segment)
        if _p_value(series[s:cut], series[cut:e]) >= alpha:
            continue
        found.add(cut)
        stack.extend(((s, cut), (cut, e)))


def _best_cut(part: np.ndarray, min_segment: int) -> int:
    """The cut of ``part`` (at least ``min_segment`` points each side) where the energy distance
    between its two sides, scaled by n1 n2 / n (Q-hat, with exponent 1), is largest; the first of
    equals."""
    n = len(part)
    distances = np.abs(part[:, None] - part[None, :])
    above = np.triu(distances, 1).sum(axis=0)  # column t: the distances from t to the points before it
    rows = distances.sum(axis=1)
    within_left = np.concatenate(([0.0], np.cumsum(above)))  # index t: pairs among the first t points
    across = np.concatenate(([0.0], np.cumsum(rows - 2.0 * above)))  # index t: pairs across a cut at t
    within_right = above.sum() - within_left - across
    cuts = np.arange(min_segment, n - min_segment + 1)
    n1, n2 = cuts.astype(float), (n - cuts).astype(float)
    energy = (2.0 * across[cuts] / (n1 * n2)
              - within_left[cuts] / (n1 * (n1 - 1) / 2.0)
              - within_right[cuts] / (n2 * (n2 - 1) / 2.0))
    return int(cuts[int(np.argmax(n1 * n2 / n * energy))])


# -- merge --------------------------------------------------------------------------------------


def _merge(series: np.ndarray, candidates: list[int], alpha: float, min_change: float, min_segment: int) -> list[int]:
    kept = [c for c in candidates]
    # Dropping a candidate changes the tests of its two neighbours only: the others are kept by
    # their bounds (at the candidates' bar, a 1,000-point series has hundreds of them).
    tested: dict[tuple[int, int, int], tuple[float, float, int, int]] = {}
    while kept:
        tests = []
        for a, c, b in _neighbours(kept, len(series)):
            test = tested.get((a, c, b))
            if test is None:
                test = tested[(a, c, b)] = (_adjusted(series, a, c, b, min_segment),
                                            abs(_relative(series[a:c], series[c:b]) or 0.0), c - a, b - c)
            tests.append(test)
        # A segment shorter than min_segment (two candidates too close) first, then the weakest.
        short = [i for i, (_, _, left, right) in enumerate(tests) if min(left, right) < min_segment]
        if short:
            drop = max(short, key=lambda i: (tests[i][0], -i))
        else:
            drop = max(range(len(kept)), key=lambda i: (tests[i][0], -i))
            if tests[drop][0] < alpha:
                drop = min(range(len(kept)), key=lambda i: (tests[i][1], i))
                if tests[drop][1] >= min_change:
                    return kept
        del kept[drop]
    return kept


def _neighbours(kept: list[int], length: int) -> list[tuple[int, int, int]]:
    """Each change point with the previous one (or the start) and the next one (or the end)."""
    edges = [0, *kept, length]
    return [(edges[i - 1], edges[i], edges[i + 1]) for i in range(1, len(edges) - 1)]


# -- the test and the sizes ---------------------------------------------------------------------


def _p_value(left: np.ndarray, right: np.ndarray) -> float:
    """Student's t-test (two-sided, pooled variance) of two segments' means; 1.0 where it cannot
    tell (fewer than 3 points in all, or no variance on either side and equal means)."""
    from scipy import special

    n1, n2 = len(left), len(right)
    if n1 == 0 or n2 == 0 or n1 + n2 < 3:
        return 1.0
    m1, m2 = float(left.mean()), float(right.mean())
    pooled = ((n1 - 1) * float(left.var(ddof=1) if n1 > 1 else 0.0)
              + (n2 - 1) * float(right.var(ddof=1) if n2 > 1 else 0.0)) / (n1 + n2 - 2)
    if pooled == 0.0:
        return 1.0 if m1 == m2 else 0.0
    t = (m2 - m1) / math.sqrt(pooled * (1.0 / n1 + 1.0 / n2))
    return float(2.0 * special.stdtr(n1 + n2 - 2, -abs(t)))  # the t distribution's tail (stats.t.sf, without its checks)


def _adjusted(series: np.ndarray, a: int, c: int, b: int, min_segment: int) -> float:
    """The t-test's p of the cut at ``c`` between ``a`` and ``b``, times the cuts it was chosen
    among (Bonferroni): the split picked the cut where the two sides differ most, so the plain p
    of that cut overstates how rare such a difference is in noise."""
    cuts = max(1, (b - a) - 2 * min_segment + 1)
    return min(1.0, _p_value(series[a:c], series[c:b]) * cuts)


def _relative(left: np.ndarray, right: np.ndarray) -> float | None:
    before = float(left.mean())
    return None if before == 0.0 else float(right.mean()) / before - 1.0


def _described(series: np.ndarray, bounds: tuple[int, int, int], confidence: float, min_segment: int) -> ChangePoint:
    from scipy import stats

    a, c, b = bounds
    left, right = series[a:c], series[c:b]
    before, after = float(left.mean()), float(right.mean())
    low = high = None
    if before != 0.0 and len(left) > 1 and len(right) > 1:
        v1, v2 = float(left.var(ddof=1)) / len(left), float(right.var(ddof=1)) / len(right)
        spread = math.sqrt(v1 + v2)
        if spread > 0.0:
            freedom = (v1 + v2) ** 2 / ((v1 ** 2 / (len(left) - 1) if v1 else 0.0)
                                        + (v2 ** 2 / (len(right) - 1) if v2 else 0.0))
            half = float(stats.t.ppf(0.5 + confidence / 2.0, freedom)) * spread
        else:
            half = 0.0
        low, high = sorted(((after - before - half) / before, (after - before + half) / before))
    return ChangePoint(index=c, before=before, after=after, change=_relative(left, right), change_low=low,
                       change_high=high, p_value=_adjusted(series, a, c, b, min_segment), points_before=len(left),
                       points_after=len(right))


# -- what a series lets the detector see ---------------------------------------------------------

# The t-test's power at the smallest step: the detector itself (a split by energy, then the
# merge) finds such a step about 4 times in 5 (0.82-0.92 on series of 12-80 points at 0.5-2 % noise,
# benchmarks/bench_changes.py's calibration rows), a little less often than its t-test alone.
POWER = 0.95


def noise(values: Sequence[float]) -> float | None:
    """The spread of a series' points around their level, relative to its median: the standard
    deviation estimated from successive differences (1.4826 MAD of the differences / sqrt 2), so
    that a step between two levels moves one difference, not the estimate. None below 3 points or
    at a median of 0."""
    series = np.asarray(values, dtype=float)
    if len(series) < 3 or float(np.median(series)) == 0.0:
        return None
    steps = np.diff(series)
    spread = 1.4826 * float(np.median(np.abs(steps - np.median(steps)))) / math.sqrt(2.0)
    return spread / abs(float(np.median(series)))


def smallest_step(points: int, relative_noise: float | None, *, alpha: float = ALPHA, window: int = WINDOW,
                  min_segment: int = MIN_SEGMENT, power: float = POWER) -> float | None:
    """The smallest relative step that :func:`change_points` finds about 4 times in 5 in a series
    of ``points`` points at ``relative_noise``, the step in its middle (its best place: a step
    nearer an end has fewer points on one side): the step at which the t-test of the two halves
    has ``power`` against the bar the merge sets (alpha over the cuts the split chose among).
    None where no step can be found (too few points) or the noise is unknown."""
    from scipy import stats

    n = min(points, window)
    if relative_noise is None or n < 2 * min_segment:
        return None
    cuts = max(1, n - 2 * min_segment + 1)
    freedom = n - 2
    needed = float(stats.t.ppf(1.0 - alpha / cuts / 2.0, freedom) + stats.t.ppf(power, freedom))
    return needed * relative_noise * math.sqrt(4.0 / n)
