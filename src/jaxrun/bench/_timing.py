"""How a call is timed: pyperf-like calibration of inner loops, then samples until a minimum time.

JAX dispatches asynchronously: a call returns before the device has finished, so every sample
ends with ``jax.block_until_ready`` on the last output. Calls within a sample are not blocked one
by one; what is measured is sustained throughput, as a training loop would see it. A sample runs
``inner`` calls so that it lasts long enough (>= 1 ms) for the clock and the scheduler's noise to
be small against it; the figure kept is seconds per call (sample / inner).
"""

from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

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


def sample_target(min_time: float, max_samples: int) -> float:
    """How long one sample should last: >= 1 ms, and long enough that max_samples fill min_time."""
    return max(MIN_SAMPLE_SECONDS, min_time / max(1, max_samples))


def calibrate(call: Callable[[], Any], target: float) -> int:
    """Inner loops per sample so a sample lasts >= ``target`` (the runs double as warm-up)."""
    inner = 1
    while inner < _MAX_INNER:
        elapsed = _run_sample(call, inner)
        if elapsed >= target:
            return inner
        # Grow towards the target with a 20% margin, by 2x-10x per step so noise cannot stall it.
        growth = min(_MAX_GROWTH, max(2.0, 1.2 * target / max(elapsed, 1e-9)))
        inner = min(_MAX_INNER, int(math.ceil(inner * growth)))
    return inner


@dataclass
class Sampled:
    inner: int
    samples: list[float] = field(default_factory=list)  # seconds per call
    total: float = 0.0  # seconds spent in samples


def sample(
    calls: Sequence[Callable[[], Any]],
    *,
    min_time: float,
    min_samples: int,
    max_samples: int,
    inner: Sequence[int] | None = None,
) -> list[Sampled]:
    """Time each call until it has ``min_samples`` samples *and* ``min_time`` seconds of them
    (or ``max_samples`` samples). Several calls are interleaved sample by sample, so a drift in
    the machine's speed (thermal, a background job) hits all of them alike instead of biasing a
    comparison.
    """
    if min_samples < 1 or max_samples < min_samples:
        raise ValueError(
            f"need 1 <= min_samples <= max_samples, got min_samples={min_samples}, max_samples={max_samples}"
        )
    if min_time < 0:
        raise ValueError(f"min_time must be >= 0 seconds, got {min_time}")
    target = sample_target(min_time, max_samples)
    loops = list(inner) if inner is not None else [calibrate(call, target) for call in calls]
    results = [Sampled(n) for n in loops]

    def done(r: Sampled) -> bool:
        return len(r.samples) >= max_samples or (len(r.samples) >= min_samples and r.total >= min_time)

    while not all(done(r) for r in results):
        for call, r in zip(calls, results):
            if done(r):
                continue
            elapsed = _run_sample(call, r.inner)
            r.total += elapsed
            r.samples.append(elapsed / r.inner)
    return results


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
