"""How a call is timed: pyperf-like calibration of inner loops, then as many samples as a time budget holds.

JAX dispatches asynchronously: a call returns before the device has finished, so every sample
ends with ``jax.block_until_ready`` on the last output. Calls within a sample are not blocked one
by one; what is measured is sustained throughput, as a training loop would see it. A sample runs
``inner`` calls so that it lasts long enough (>= 1 ms) for the clock and the scheduler's noise to
be small against it; the figure kept is seconds per call (sample / inner). How many samples: as
many as fit the time budget (about 1 s by default, ``DEFAULT_TIME_BUDGET``), never fewer than
``DEFAULT_MIN_SAMPLES``, enough for a distribution-free 95% CI of the median that is narrower than
[min, max], so jaxrun's own defaults never draw a "too few samples" warning.
"""

from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from jaxrun.errors import UsageError

MIN_SAMPLE_SECONDS = 1e-3
_MAX_INNER = 1_000_000
_MAX_GROWTH = 10.0


def block(tree: Any) -> Any:
    """Wait until every JAX array in ``tree`` is computed (other leaves pass through)."""
    import jax

    return jax.block_until_ready(tree)


def timed_call(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = block(call())
    return time.perf_counter() - start, out


def _run_sample(call: Callable[[], Any], inner: int) -> float:
    """Seconds for ``inner`` calls, the last one blocked; garbage collection held off meanwhile."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        out = None
        start = time.perf_counter()
        for _ in range(inner):
            out = call()
        block(out)
        return time.perf_counter() - start
    finally:
        if gc_was_enabled:
            gc.enable()


def sample_target(time_budget: float, max_samples: int) -> float:
    """How long one sample should last: >= 1 ms, and long enough that max_samples fill the budget."""
    return max(MIN_SAMPLE_SECONDS, time_budget / max(1, max_samples))


def calibrate(call: Callable[[], Any], target: float) -> tuple[int, float]:
    """Inner loops per sample so a sample lasts >= ``target`` (the runs double as warm-up), and the
    seconds the last run of that many loops took: what one sample is expected to last."""
    inner = 1
    while True:
        elapsed = _run_sample(call, inner)
        if elapsed >= target or inner >= _MAX_INNER:
            return inner, elapsed
        # Grow towards the target with a 20% margin, by 2x-10x per step so noise cannot stall it.
        growth = min(_MAX_GROWTH, max(2.0, 1.2 * target / max(elapsed, 1e-9)))
        inner = min(_MAX_INNER, int(math.ceil(inner * growth)))


@dataclass
class Sampled:
    inner: int
    samples: list[float] = field(default_factory=list)  # seconds per call
    total: float = 0.0  # seconds spent in samples


@dataclass
class Budgeted:
    """What a budgeted timing did: the samples of each call, and how their number was chosen."""

    timed: list[Sampled]
    rounds: int  # samples of each call
    rounds_from: str  # what set that number: time_budget, min_samples, max_samples or samples
    time_budget: float
    elapsed: float  # seconds spent calibrating and sampling, all calls together


def sample_count(time_left: float, seconds_per_round: float, min_samples: int, max_samples: int) -> tuple[int, str]:
    """Samples that fit ``time_left`` at ``seconds_per_round`` each, within [min_samples,
    max_samples], and which of the three set the number."""
    fits = int(time_left // seconds_per_round) if seconds_per_round > 0 else max_samples
    if fits < min_samples:
        return min_samples, "min_samples"
    if fits > max_samples:
        return max_samples, "max_samples"
    return fits, "time_budget"


def sample(
    calls: Sequence[Callable[[], Any]],
    *,
    time_budget: float,
    min_samples: int,
    max_samples: int,
    samples: int | None = None,
    inner: Sequence[int] | None = None,
    one_call: Sequence[float] | None = None,
) -> Budgeted:
    """Time each call in samples whose number fits ``time_budget`` seconds, as timeit's autorange
    and pytest-benchmark do: calibrate the calls per sample (a sample lasts >= 1 ms, and
    >= time_budget / max_samples), note how long one sample takes, then take as many samples as
    the rest of the budget holds (calibration counts in it), at least ``min_samples`` (which wins
    over the budget for a slow function) and at most ``max_samples``; past ``min_samples``,
    sampling also stops when the budget is spent (the machine got slower than calibrated). ``samples`` asks for
    exactly that many instead. ``one_call`` (seconds of one call of each, just timed, e.g. the
    warm-up) spares the calibration of a call that already lasts a sample. With ``inner`` given
    there is no calibration: the first sample of each call is timed, kept, and sets the count. Several calls are interleaved sample by sample
    (the same count each, the budget shared), so a drift in the machine's speed (thermal, a
    background job) hits all of them alike instead of biasing a comparison.
    """
    if samples is not None:
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
            raise ValueError(f"samples must be a whole number >= 1, got {samples!r}")
    elif min_samples < 1 or max_samples < min_samples:
        raise ValueError(
            f"need 1 <= min_samples <= max_samples, got min_samples={min_samples}, max_samples={max_samples}"
        )
    if not time_budget > 0:
        raise ValueError(f"time_budget must be > 0 seconds, got {time_budget}")
    start = time.perf_counter()
    target = sample_target(time_budget, max_samples)
    if inner is None:
        known = list(one_call) if one_call is not None else [0.0] * len(calls)
        calibrated = [(1, t) if t >= target else calibrate(call, target) for call, t in zip(calls, known)]
        results = [Sampled(n) for n, _ in calibrated]
        per_round = sum(seconds for _, seconds in calibrated)
    else:
        results = [Sampled(n) for n in inner]
        for call, r in zip(calls, results):
            _take(call, r)
        per_round = sum(r.total for r in results)
    if samples is None:
        time_left = time_budget - (time.perf_counter() - start)
        rounds, rounds_from = sample_count(time_left, per_round, min_samples, max_samples)
    else:
        rounds, rounds_from = samples, "samples"
    while any(len(r.samples) < rounds for r in results):
        for call, r in zip(calls, results):
            if len(r.samples) < rounds:
                _take(call, r)
        taken = min(len(r.samples) for r in results)
        if samples is None and min_samples <= taken < rounds and time.perf_counter() - start >= time_budget:
            # The machine slowed down after the calibration (a loaded box): the budget wins.
            rounds, rounds_from = taken, "time_budget"
            break
    return Budgeted(results, rounds, rounds_from, time_budget, time.perf_counter() - start)


def _take(call: Callable[[], Any], r: Sampled) -> None:
    elapsed = _run_sample(call, r.inner)
    r.total += elapsed
    r.samples.append(elapsed / r.inner)


def budget_of(time_budget: float | None, min_time: float | None, default: float) -> float:
    """The time budget a bench function was given: ``time_budget``, or its older name ``min_time``."""
    if time_budget is not None and min_time is not None:
        raise UsageError("give time_budget or min_time (its older name), not both")
    value = time_budget if time_budget is not None else min_time if min_time is not None else default
    name = "time_budget" if min_time is None else "min_time"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise UsageError(f"{name} must be a number of seconds > 0, got {value!r}")
    return float(value)


def clean_warnings(warnings: list[str]) -> list[str]:
    """Drop the process-level "below 1 ms, measure in-process" advice: these samples are in-process
    and each spans >= 1 ms of inner loops, so timer resolution is not an issue here."""
    return [w for w in warnings if "measure in-process instead" not in w]


def device_of(tree: Any) -> Any:
    """The device the computation will run on: that of the first committed array, else the default."""
    import jax

    for leaf in jax.tree_util.tree_leaves(tree):
        devices = getattr(leaf, "devices", None)
        if callable(devices) and isinstance(leaf, jax.Array):
            try:
                found = sorted(devices(), key=lambda d: d.id)
            except Exception:  # deleted or abstract array
                continue
            if found:
                return found[0]
    return jax.devices()[0]


def device_label(device: Any) -> str:
    return f"{device.platform}:{device.id} ({device.device_kind})"
