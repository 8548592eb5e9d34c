"""Whether a warm entry's calls reach a steady state, and from which call: changepoint analysis of
the per-call times, rather than trusting that every call after the first is steady.

A fixed warm-up assumes a steady state that often never comes: calls keep getting slower (a cache
or a list that grows), or faster, for the whole run. The series of one process's calls (the
first, which traces and compiles, left out) is cut where its level changes, by binary
segmentation on the logarithm of the seconds (a change is a ratio): a cut is kept when it explains
more of the spread than a penalty of ``PENALTY * noise**2 * ln(n)`` (``noise``: the calls'
call-to-call jitter, at least ``MIN_NOISE``) and the levels on its two sides differ by at least
``MIN_STEP`` (a machine's load moves a call's time by a few per cent for a while: that is not the
program changing speed), each segment at least ``MIN_SEGMENT`` calls. Then, as Barrett et al. classify
process executions ("Virtual Machine Warmup Blows Hot and Cold", OOPSLA 2017):

* ``flat``: one level from the second call on;
* ``warmup``: the last level is the fastest, reached after some calls;
* ``slowdown``: the last level is slower than an earlier one;
* ``none`` (no steady state): the last level is too short (under a quarter of the calls), or it
  still drifts (by more than ``MAX_DRIFT`` from its start to its end, and steadily so);
* ``unknown``: too few calls to tell (fewer than ``MIN_CALLS`` after the first).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

MIN_CALLS = 8
MIN_SEGMENT = 3
MIN_NOISE = 0.02  # log-seconds: a 2 % jitter at least
MIN_STEP = math.log(1.15)  # levels 15 % apart at least
PENALTY = 3.0
MAX_DRIFT = math.log(1.15)  # 15 % over the last level
KINDS = ("flat", "warmup", "slowdown", "none", "unknown")


@dataclass(frozen=True)
class SteadyState:
    kind: str  # one of KINDS
    start: int | None  # position in the series where the steady level starts; None: none, or unknown
    cuts: tuple[int, ...] = ()  # positions where a new level starts


def steady_state(seconds: Sequence[float]) -> SteadyState:
    """The steady state of one process's calls after the first (``seconds``, in call order)."""
    if len(seconds) < MIN_CALLS or any(not (s > 0 and math.isfinite(s)) for s in seconds):
        return SteadyState("unknown", None)
    x = [math.log(s) for s in seconds]
    noise = max(MIN_NOISE, _jitter(x))
    cuts = sorted(_split(x, 0, len(x), PENALTY * noise * noise * math.log(len(x))))
    bounds = [0, *cuts, len(x)]
    levels = [statistics.fmean(x[a:b]) for a, b in zip(bounds, bounds[1:])]
    last = bounds[-2]
    tail = x[last:]
    if len(tail) * 4 < len(x) or _drifts(tail, noise):
        return SteadyState("none", None, tuple(cuts))
    if not cuts:
        return SteadyState("flat", 0)
    kind = "warmup" if levels[-1] <= min(levels) else "slowdown"
    return SteadyState(kind, last, tuple(cuts))


def _jitter(x: list[float]) -> float:
    """The call-to-call noise: the robust spread of successive differences (a level change or a
    trend moves few of them), divided by sqrt(2) as a difference holds two calls' noise."""
    diffs = [b - a for a, b in zip(x, x[1:])]
    middle = statistics.median(diffs)
    return 1.4826 * statistics.median(abs(d - middle) for d in diffs) / math.sqrt(2)


def _split(x: list[float], a: int, b: int, penalty: float) -> list[int]:
    """The cuts of ``x[a:b]`` (binary segmentation on the squared error of the means)."""
    n = b - a
    if n < 2 * MIN_SEGMENT:
        return []
    total = sum(x[a:b])
    best, where = 0.0, None
    left = sum(x[a:a + MIN_SEGMENT - 1])
    for k in range(a + MIN_SEGMENT, b - MIN_SEGMENT + 1):
        left += x[k - 1]
        m = k - a
        step = left / m - (total - left) / (n - m)
        # The drop in squared error from splitting at k: m (n - m) / n (mean left - mean right)^2.
        gain = m * (n - m) / n * step ** 2
        if gain > best and abs(step) >= MIN_STEP:
            best, where = gain, k
    if where is None or best <= penalty:
        return []
    return [*_split(x, a, where, penalty), where, *_split(x, where, b, penalty)]


def _drifts(x: list[float], noise: float) -> bool:
    """Whether a level still moves: its least-squares line changes by more than MAX_DRIFT from its
    first call to its last, and the slope stands out of the noise (|t| > 3)."""
    n = len(x)
    if n < MIN_SEGMENT:
        return False
    mean_i, mean_x = (n - 1) / 2, statistics.fmean(x)
    sxx = sum((i - mean_i) ** 2 for i in range(n))
    slope = sum((i - mean_i) * (v - mean_x) for i, v in enumerate(x)) / sxx
    residual = sum((v - mean_x - slope * (i - mean_i)) ** 2 for i, v in enumerate(x)) / max(1, n - 2)
    spread = math.sqrt(max(residual, noise * noise / 4) / sxx)
    return abs(slope) * (n - 1) > MAX_DRIFT and abs(slope) > 3 * spread
