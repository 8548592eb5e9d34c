"""In-process benchmarking of JAX functions: ``from jaxrun import bench``.

Unlike ``jaxrun run``, which times whole scripts in child processes, this package times one
function inside the caller's process, the way a JAX user tunes a training step:

* :func:`measure` - trace / lower / compile seconds, first call, steady-state statistics,
  XLA's FLOPs and bytes, and a roofline against the device's measured peaks;
* :func:`batch_scaling` - a vmapped function at several batch sizes (time per item, items/s);
* :func:`speedup` - sustained speed-up of one implementation over another, after a numerical check;
* :func:`count_compiles`, :func:`no_recompile`, :func:`assert_max_compiles` - recompilation
  counting and guards whose errors name the argument that changed;
* :func:`pytree_nbytes`, :func:`pytree_breakdown` - memory held by a pytree, leaf by leaf;
* :func:`device_peaks`, :func:`roofline` - measured device peaks (cached) and the roofline model;
* :func:`fits` - whether a function's program fits in its device's free memory, without running it.

jax is imported when a function here is first called, not when the package is imported.
"""

from __future__ import annotations

from jaxrun.bench._compiles import CompileCounter, count_compiles
from jaxrun.bench.fit import fits
from jaxrun.bench.measure import measure
from jaxrun.bench.pytree import breakdown_table, pytree_breakdown, pytree_nbytes
from jaxrun.bench.recompile import RecompileError, assert_max_compiles, no_recompile
from jaxrun.bench.records import (
    BatchScaling,
    DevicePeaks,
    FitCheck,
    LeafBytes,
    Measurement,
    Roofline,
    Speedup,
    TimedCall,
)
from jaxrun.bench.roofline import device_peaks, roofline
from jaxrun.bench.scaling import batch_scaling
from jaxrun.bench.speedup import NumericalMismatchError, speedup

__all__ = [
    "measure",
    "Measurement",
    "batch_scaling",
    "BatchScaling",
    "speedup",
    "Speedup",
    "TimedCall",
    "NumericalMismatchError",
    "count_compiles",
    "CompileCounter",
    "no_recompile",
    "assert_max_compiles",
    "RecompileError",
    "pytree_nbytes",
    "pytree_breakdown",
    "breakdown_table",
    "LeafBytes",
    "device_peaks",
    "DevicePeaks",
    "roofline",
    "Roofline",
    "fits",
    "FitCheck",
]
