"""Roofline: a computation's achieved FLOP/s and bytes/s against the device's *measured* peaks.

Datasheet peaks are out of reach on CPUs (the numbers depend on the SIMD width XLA uses, the
thread count, turbo) and optimistic elsewhere, so the peaks are measured: the best matmul FLOP/s
over a few sizes, in float32 and bfloat16, and the bandwidth of a large elementwise copy (bytes
read + written). Measuring takes a second or two, so the result is cached per device kind,
platform, device count, JAX version and host, as JSON under :func:`jaxrun.discover.devices.cache_dir`
(``JAXRUN_CACHE_DIR`` moves it).

Each peak is the *fastest* per-call time seen (the best the device did), while
:func:`jaxrun.bench.measure` reports the *median*. A peak measured while other programs loaded
the machine comes out low; so peaks only ever go up: measuring again (``refresh=True``, which
``measure`` does when a function beats the cached FLOP/s peak) keeps the better of the old and
new figure. Delete the cache file to start over.

A peak is the most the device was seen to do, so a function is never held against less than its
own fastest call: :func:`roofline`'s peak is the higher of the device's measured peak and the
rate of the function's fastest call (a copy of 256 MiB cannot show what data that fits in the
caches moves at; a matmul peak measured under load is low). No fraction of a peak exceeds 1, and
``peak_flops_source`` / ``peak_bandwidth_source`` say what each peak is, with a warning when it
is the function's own call.
"""

from __future__ import annotations

import hashlib
import json
import socket
import time
from pathlib import Path
from typing import Any

import numpy as np

from jaxrun.bench._timing import block, sample
from jaxrun.bench.records import DevicePeaks, PeakTrial, Roofline
from jaxrun.core.timestamps import now_iso
from jaxrun.discover.devices import cache_dir
from jaxrun.results.result_files import DamagedFileError, read_model

__all__ = ["device_peaks", "roofline", "compute_dtype"]

# Matrix sides tried per platform: big enough to saturate the units, small enough to stay cheap.
_MATMUL_SIZES = {"cpu": (1024, 1536), "gpu": (4096, 8192), "tpu": (4096, 8192)}
_COPY_BYTES = 256 * 2**20
_TRIAL_SECONDS = 0.25  # per workload, spread over _ROUNDS rounds
_ROUNDS = 4
_PEAK_DTYPES = ("float32", "bfloat16")

_memo: dict[str, DevicePeaks] = {}


def _cache_key(device: Any) -> tuple[str, dict[str, Any]]:
    import jax

    facts = {
        "platform": device.platform,
        "device_kind": device.device_kind,
        "device_count": jax.device_count(device.platform),
        "jax_version": jax.__version__,
        "host": socket.gethostname(),
    }
    digest = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]
    return digest, facts


def _cache_path(key: str) -> Path:
    return cache_dir() / f"device_peaks_{key}.json"


class _Trial:
    """One workload of the peak measurement: a compiled call and the work one call does."""

    def __init__(self, kind: str, dtype: str, size: int, call: Any, flops: float = 0.0, nbytes: float = 0.0):
        self.kind, self.dtype, self.size, self.call = kind, dtype, size, call
        self.flops, self.nbytes = flops, nbytes
        self.inner: int | None = None
        self.samples: list[float] = []

    def result(self) -> PeakTrial:
        best, median = min(self.samples), float(np.median(self.samples))
        return PeakTrial(
            kind=self.kind, dtype=self.dtype, size=self.size, best_seconds=best, median_seconds=median,  # type: ignore[arg-type]
            flops_per_s=self.flops / best if self.flops else None,
            bytes_per_s=self.nbytes / best if self.nbytes else None,
        )


def _matmul(device: Any, size: int, dtype: str) -> _Trial:
    import jax
    import jax.numpy as jnp

    keys = jax.random.split(jax.random.key(0))
    a = jax.device_put(jax.random.normal(keys[0], (size, size), dtype=dtype), device)
    b = jax.device_put(jax.random.normal(keys[1], (size, size), dtype=dtype), device)
    f = jax.jit(jnp.matmul)
    block(f(a, b))
    return _Trial("matmul", dtype, size, lambda: f(a, b), flops=2.0 * size**3)


def _copy(device: Any) -> _Trial:
    import jax
    import jax.numpy as jnp

    limit = None
    try:
        stats = device.memory_stats() or {}
        limit = stats.get("bytes_limit")
    except Exception:  # CPU devices have no memory stats
        pass
    nbytes = _COPY_BYTES if not limit else min(_COPY_BYTES, int(limit) // 8)
    n = nbytes // 4
    # x + 1 reads and writes every element (a bare copy could be elided by XLA). The input is
    # donated and the output fed back, so the timed loop writes into memory it already owns: a
    # fresh output array per call would time the kernel's page faults (about 3.7 GB/s here,
    # against 35 GB/s for the copy itself).
    f = jax.jit(lambda v: v + 1.0, donate_argnums=0)
    state = [jax.device_put(jnp.ones((n,), jnp.float32), device)]

    def step() -> Any:
        state[0] = f(state[0])
        return state[0]

    block(step())
    return _Trial("copy", "float32", n, step, nbytes=2.0 * n * 4)


def _measure(device: Any, facts: dict[str, Any]) -> DevicePeaks:
    start = time.perf_counter()
    trials: list[_Trial] = []
    sizes = _MATMUL_SIZES.get(device.platform, _MATMUL_SIZES["gpu"])
    for dtype in _PEAK_DTYPES:
        for size in sizes:
            try:
                trials.append(_matmul(device, size, dtype))
            except Exception:  # a dtype the backend cannot multiply: that peak stays unknown
                continue
    trials.append(_copy(device))
    # Round-robin in short slices rather than one block per workload: when other programs load
    # the machine in bursts, every workload gets its chance at the quiet moments.
    for _ in range(_ROUNDS):
        for t in trials:
            (done,) = sample([t.call], time_budget=_TRIAL_SECONDS / _ROUNDS, min_samples=2, max_samples=50,
                             inner=None if t.inner is None else [t.inner]).timed
            t.inner = done.inner
            t.samples += done.samples
    results = [t.result() for t in trials]

    def best(dtype: str) -> float | None:
        rates = [r.flops_per_s for r in results if r.kind == "matmul" and r.dtype == dtype and r.flops_per_s]
        return max(rates) if rates else None

    return DevicePeaks(
        **facts,
        flops_per_s_float32=best("float32"),
        flops_per_s_bfloat16=best("bfloat16"),
        bytes_per_s=next(r.bytes_per_s for r in results if r.kind == "copy"),
        trials=results,
        measured_at=now_iso(),
        measure_seconds=time.perf_counter() - start,
    )


def _read(path: Path) -> DevicePeaks | None:
    try:
        return read_model(path, DevicePeaks)
    except (OSError, DamagedFileError):  # absent, unreadable, damaged or from an older schema: measure again
        return None


def _best_of(old: DevicePeaks, new: DevicePeaks) -> DevicePeaks:
    """Per figure, the higher of two measurements (a loaded machine only ever makes peaks lower)."""

    def higher(a: float | None, b: float | None) -> float | None:
        return b if a is None else a if b is None else max(a, b)

    # Keep the fastest trial per (kind, dtype, size), so the file says where each peak came from.
    best: dict[tuple[str, str, int], PeakTrial] = {}
    for t in old.trials + new.trials:
        key = (t.kind, t.dtype, t.size)
        if key not in best or t.best_seconds < best[key].best_seconds:
            best[key] = t
    return new.model_copy(
        update={
            "flops_per_s_float32": higher(old.flops_per_s_float32, new.flops_per_s_float32),
            "flops_per_s_bfloat16": higher(old.flops_per_s_bfloat16, new.flops_per_s_bfloat16),
            "bytes_per_s": higher(old.bytes_per_s, new.bytes_per_s),
            "trials": list(best.values()),
        }
    )


def device_peaks(device: Any = None, refresh: bool = False) -> DevicePeaks:
    """Measured matmul FLOP/s (float32, bfloat16) and copy bandwidth of ``device``, cached.

    >>> from jaxrun.bench import device_peaks
    >>> peaks = device_peaks()           # ~2 s the first time on a CPU, then read from the cache
    >>> peaks.flops_per_s_float32 > 0 and peaks.bytes_per_s > 0
    True

    ``device`` is a ``jax.Device`` (default: the first device); ``refresh=True`` measures again
    and keeps, per figure, the better of the cached and the new measurement.
    """
    import jax

    if device is None:
        device = jax.devices()[0]
    elif not hasattr(device, "platform"):
        raise TypeError(f"device must be a jax.Device such as jax.devices()[0], got {device!r}")
    key, facts = _cache_key(device)
    path = _cache_path(key)
    memo = str(path)  # by file, so a different JAXRUN_CACHE_DIR is a different cache
    if not refresh:
        if memo in _memo and path.exists():
            return _memo[memo]
        peaks = _read(path)
        if peaks is not None:
            _memo[memo] = peaks
            return peaks
    peaks = _measure(device, facts)
    previous = _memo.get(memo) or _read(path)
    if previous is not None:
        peaks = _best_of(previous, peaks)
    try:
        from jaxrun.results.result_files import atomic_write_text

        atomic_write_text(path, peaks.model_dump_json(indent=2) + "\n")
    except OSError:  # a read-only cache folder costs a re-measurement next time, nothing more
        pass
    _memo[memo] = peaks
    return peaks


def compute_dtype(tree: Any) -> str:
    """Which peak fits a computation on ``tree``: bfloat16 if every floating input is 16-bit."""
    import jax

    floating = [
        np.dtype(leaf.dtype)
        for leaf in jax.tree_util.tree_leaves(tree)
        if hasattr(leaf, "dtype") and jax.numpy.issubdtype(leaf.dtype, jax.numpy.floating)
    ]
    if floating and all(d.itemsize == 2 for d in floating):
        return "bfloat16"
    return "float32"


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


OWN_CALL = "this function's fastest call"


def _trial_text(trial: PeakTrial) -> str:
    if trial.kind == "matmul":
        return f"matmul {trial.size}x{trial.size} {trial.dtype}, measured"
    mib = trial.size * 4 / 2**20
    return f"copy of {mib:.4g} MiB {trial.dtype}, measured"


def peak_source(peaks: DevicePeaks, what: str, dtype: str = "float32") -> str:
    """Which measurement a device peak is (``what``: ``"flops"`` or ``"bytes"``): the fastest
    trial behind it, e.g. ``"matmul 1536x1536 float32, measured"``."""
    if what == "flops":
        kind, wanted = "matmul", "bfloat16" if dtype in ("bfloat16", "float16") else "float32"
        value = peaks.flops_per_s(dtype)
        trials = [t for t in peaks.trials if t.kind == kind and t.dtype == wanted and t.flops_per_s]
        best = max(trials, key=lambda t: t.flops_per_s or 0.0, default=None)
    else:
        value = peaks.bytes_per_s
        trials = [t for t in peaks.trials if t.kind == "copy" and t.bytes_per_s]
        best = max(trials, key=lambda t: t.bytes_per_s or 0.0, default=None)
    if best is None or value is None:
        return "given with the device peaks (no trial recorded)"
    return _trial_text(best)


def _peak(measured: float | None, fastest: float | None, source: str) -> tuple[float | None, str | None]:
    """The device's measured peak, or the function's fastest rate where that is higher."""
    if measured is None:
        return None, None
    if fastest is not None and fastest > measured:
        return fastest, OWN_CALL
    return measured, source


def roofline(
    flops: float | None,
    bytes_accessed: float | None,
    seconds: float | None,
    peaks: DevicePeaks | None,
    dtype: str = "float32",
    *,
    best_seconds: float | None = None,
) -> Roofline:
    """Achieved rates, fractions of the peaks, and compute- or memory-bound.

    >>> from jaxrun.bench import roofline
    >>> from jaxrun.bench.records import DevicePeaks
    >>> peaks = DevicePeaks(platform="cpu", device_kind="cpu", device_count=1, jax_version="x",
    ...                     host="h", flops_per_s_float32=1e11, bytes_per_s=1e10, measured_at="now")
    >>> r = roofline(2 * 1024**3, 12 * 2**20, 0.05, peaks)
    >>> round(r.fraction_of_peak_flops, 3), r.bound
    (0.429, 'compute')
    >>> fast = roofline(2 * 1024**3, 12 * 2**20, 0.01, peaks, best_seconds=0.008)
    >>> fast.fraction_of_peak_flops, fast.peak_flops_source
    (0.8, "this function's fastest call")

    ``seconds`` is the time of the call the fractions describe (``measure`` gives the median),
    ``best_seconds`` the fastest call seen (default: ``seconds``). Each peak is the device's
    measured peak, or the rate of the fastest call where that is higher (then with a warning): a
    peak is the most the device was seen to do, so no fraction exceeds 1. ``peak_flops_source``
    and ``peak_bandwidth_source`` say which.
    The arithmetic intensity is FLOPs per byte accessed; the ridge point is peak FLOP/s over peak
    bytes/s. At or above the ridge the function is ``"compute"``-bound, below it ``"memory"``-bound.
    Every figure whose inputs are unknown is None (never 0). ``flops`` and ``bytes_accessed`` must
    count every loop iteration, as :func:`~jaxrun.bench.measure`'s do: ``compiled.cost_analysis()``
    counts a loop body once, whatever its trip count, and would make every rate here too low.
    """
    if dtype not in _PEAK_DTYPES:
        dtype = "bfloat16" if dtype == "float16" else "float32"
    fastest = best_seconds if best_seconds is not None and (seconds is None or best_seconds < seconds) else seconds
    measured_flops = peaks.flops_per_s(dtype) if peaks else None
    measured_bw = peaks.bytes_per_s if peaks else None
    peak_flops, flops_source = _peak(measured_flops, _ratio(flops, fastest),
                                     peak_source(peaks, "flops", dtype) if peaks else "")
    peak_bw, bw_source = _peak(measured_bw, _ratio(bytes_accessed, fastest), peak_source(peaks, "bytes") if peaks else "")
    achieved_flops = _ratio(flops, seconds)
    achieved_bw = _ratio(bytes_accessed, seconds)
    intensity = _ratio(flops, bytes_accessed)
    ridge = _ratio(peak_flops, peak_bw)
    bound = None
    if intensity is not None and ridge is not None:
        bound = "compute" if intensity >= ridge else "memory"
    result = Roofline(
        dtype=dtype,
        achieved_flops_per_s=achieved_flops,
        achieved_bytes_per_s=achieved_bw,
        peak_flops_per_s=peak_flops,
        peak_bytes_per_s=peak_bw,
        fraction_of_peak_flops=_ratio(achieved_flops, peak_flops),
        fraction_of_peak_bandwidth=_ratio(achieved_bw, peak_bw),
        arithmetic_intensity=intensity,
        ridge_point=ridge,
        bound=bound,
        peak_flops_source=flops_source,
        peak_bandwidth_source=bw_source,
    )
    if flops_source == OWN_CALL:
        assert peak_flops is not None and measured_flops is not None
        result.warnings.append(
            f"the fastest call did {peak_flops / measured_flops:.2f}x the measured {dtype} matmul peak "
            f"({measured_flops:.4g} FLOP/s; measured under heavier load, or at other sizes): the FLOP/s peak is "
            "that call's rate, so fraction_of_peak_flops is this call's against the function's fastest"
        )
    if bw_source == OWN_CALL:
        assert peak_bw is not None and measured_bw is not None
        result.warnings.append(
            f"the fastest call moved {peak_bw / measured_bw:.2f}x the measured copy bandwidth "
            f"({measured_bw:.4g} B/s): XLA's 'bytes accessed' counts every operand read, and data that fits in the "
            "caches moves faster than the large copy that measured it; the bandwidth peak is that call's rate"
        )
    return result
