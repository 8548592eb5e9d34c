"""``speedup``: sustained speed of one implementation against another, once they agree numerically.

A speed-up is only meaningful between two functions that compute the same thing, so the outputs
are compared leaf by leaf first (``np.allclose`` semantics, NaNs in the same places count as
equal), and a mismatch raises :class:`NumericalMismatchError` naming the leaf. Both functions are
then timed in steady state, sample by sample in alternation (see :mod:`jaxrun.bench._timing`): the
first call of each, which for a jitted function includes compiling, is the numerical check and is
never timed. The ratio is median(reference) / median(fast), with a bootstrap CI.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from jaxrun.bench._timing import block, budget_of, clean_warnings, sample
from jaxrun.bench.records import Speedup, TimedCall
from jaxrun.core.defaults import (
    DEFAULT_MAX_SAMPLES,
    DEFAULT_MIN_SAMPLES,
    DEFAULT_TIME_BUDGET,
)
from jaxrun.core.formatting import listed, plural
from jaxrun.errors import JAXExecutionError
from jaxrun.judge.stats import describe, ratio_of_medians_ci

__all__ = ["speedup", "NumericalMismatchError", "check_close"]


class NumericalMismatchError(JAXExecutionError, AssertionError):
    """Two implementations that were to be compared give different numbers."""

    def __init__(self, message: str, *, leaf: str | None = None) -> None:
        super().__init__(message)
        self.leaf = leaf


def _leaves(tree: Any) -> tuple[list[tuple[str, Any]], Any]:
    import jax

    flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
    return [(jax.tree_util.keystr(path) or "(output)", leaf) for path, leaf in flat], treedef


def check_close(fast_out: Any, reference_out: Any, *, rtol: float, atol: float, names: tuple[str, str] = ("fast", "reference")) -> tuple[int, float, float]:
    """Compare two output pytrees leaf-wise; return (leaves, max abs error, max rel error).

    Raises :class:`NumericalMismatchError` naming the first leaf (by ``keystr`` path) whose values,
    shape or presence differ. Containers may differ in kind (a tuple against a list) as long as
    the leaf paths line up: a NumPy reference often returns lists where JAX returns tuples.
    """
    a_leaves, _ = _leaves(fast_out)
    b_leaves, _ = _leaves(reference_out)
    a_paths = [p for p, _ in a_leaves]
    b_paths = [p for p, _ in b_leaves]
    if a_paths != b_paths:
        only_a = [p for p in a_paths if p not in b_paths]
        only_b = [p for p in b_paths if p not in a_paths]
        raise NumericalMismatchError(
            f"{names[0]} and {names[1]} return different structures: {plural(len(a_paths), 'leaf', 'leaves')} "
            f"[{listed(a_paths, 5)}] against {plural(len(b_paths), 'leaf', 'leaves')} [{listed(b_paths, 5)}]"
            + (f"; only in {names[0]}: [{listed(only_a, 5)}]" if only_a else "")
            + (f"; only in {names[1]}: [{listed(only_b, 5)}]" if only_b else ""),
            leaf=(only_a or only_b or [None])[0],
        )
    max_abs = 0.0
    max_rel = 0.0
    for (path, a), (_, b) in zip(a_leaves, b_leaves):
        x, y = np.asarray(a), np.asarray(b)
        if x.shape != y.shape:
            raise NumericalMismatchError(
                f"output leaf {path} has shape {x.shape} from {names[0]} but {y.shape} from {names[1]}", leaf=path
            )
        if x.size == 0:
            continue
        wide = np.complex128 if np.iscomplexobj(x) or np.iscomplexobj(y) else np.float64
        try:  # bfloat16 (ml_dtypes) is not an np.number but converts fine
            xf, yf = x.astype(wide), y.astype(wide)
        except (TypeError, ValueError):  # strings, objects: must be equal
            if not np.array_equal(x, y):
                raise NumericalMismatchError(f"output leaf {path} differs: {x!r} against {y!r}", leaf=path) from None
            continue
        both_nan = np.isnan(xf) & np.isnan(yf)
        err = np.where(both_nan, 0.0, np.abs(xf - yf))
        err = np.where(np.isnan(err), np.inf, err)  # NaN on one side only: infinitely wrong
        rel = err / np.maximum(np.abs(yf), np.finfo(np.float64).tiny)
        leaf_abs, leaf_rel = float(np.max(err)), float(np.max(np.where(err == 0, 0.0, rel)))
        max_abs, max_rel = max(max_abs, leaf_abs), max(max_rel, leaf_rel)
        if not np.allclose(xf, yf, rtol=rtol, atol=atol, equal_nan=True):
            worst = np.unravel_index(int(np.argmax(err - (atol + rtol * np.abs(yf)))), err.shape) if err.ndim else ()
            bad = int(np.sum(~np.isclose(xf, yf, rtol=rtol, atol=atol, equal_nan=True)))
            at = f" at index {tuple(int(i) for i in worst)}" if worst else ""
            raise NumericalMismatchError(
                f"{names[0]} and {names[1]} differ at output leaf {path}: {bad} of {x.size} values beyond "
                f"rtol={rtol:g}, atol={atol:g}; max abs error {leaf_abs:.3g}, max rel error {leaf_rel:.3g}; "
                f"worst{at}: {names[0]} gives {x[worst].tolist()!r}, {names[1]} gives {y[worst].tolist()!r}",
                leaf=path,
            )
    return len(a_leaves), max_abs, max_rel


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def speedup(
    fast: Callable[..., Any],
    reference: Callable[..., Any],
    *args: Any,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    time_budget: float | None = None,
    samples: int | None = None,
    min_samples: int = DEFAULT_MIN_SAMPLES,
    max_samples: int = DEFAULT_MAX_SAMPLES,
    min_time: float | None = None,
    names: tuple[str, str] | None = None,
    **kwargs: Any,
) -> Speedup:
    """Sustained speed-up of ``fast`` over ``reference`` on ``(*args, **kwargs)``, after checking
    that both give the same numbers.

    >>> import jax, jax.numpy as jnp, numpy as np
    >>> from jaxrun.bench import speedup
    >>> def gelu(x):
    ...     return 0.5 * x * (1 + jnp.tanh(0.79788456 * (x + 0.044715 * x**3)))
    >>> x = jnp.linspace(-3, 3, 100_000)
    >>> s = speedup(jax.jit(gelu), gelu, x, rtol=1e-5, atol=1e-6)   # jitted vs op by op
    >>> s.ratio > 1, s.ci_low <= s.ratio <= s.ci_high
    (True, True)
    >>> s.fast.steady.median < s.reference.steady.median
    True

    ``reference`` may be NumPy code returning NumPy arrays (pass NumPy-compatible inputs); lists
    against tuples are fine as long as the leaves line up. A mismatch raises
    :class:`NumericalMismatchError` naming the leaf and the largest errors. Each function is called
    once for the check (for a jitted ``fast`` that call compiles), then both are timed like
    :func:`~jaxrun.bench.measure` does, interleaved, as many samples of each as ``time_budget``
    seconds hold (default 1 s for both together; at least ``min_samples``, at most ``max_samples``,
    or exactly ``samples``; ``min_time`` is its older name).
    ``names`` overrides the two labels; other keyword arguments go to both functions.
    """
    for role, fn in (("fast", fast), ("reference", reference)):
        if not callable(fn):
            raise TypeError(f"speedup needs two functions; {role} is {type(fn).__name__}: {fn!r}")
    budget = budget_of(time_budget, min_time, DEFAULT_TIME_BUDGET)
    labels = names or (_name(fast), _name(reference))
    if labels[0] == labels[1]:
        labels = (f"{labels[0]} (fast)", f"{labels[1]} (reference)")

    fast_out = block(fast(*args, **kwargs))
    reference_out = block(reference(*args, **kwargs))
    leaves, max_abs, max_rel = check_close(fast_out, reference_out, rtol=rtol, atol=atol, names=labels)
    del fast_out, reference_out

    timed = sample(
        [lambda: fast(*args, **kwargs), lambda: reference(*args, **kwargs)],
        time_budget=budget, samples=samples, min_samples=min_samples, max_samples=max_samples,
    ).timed
    stats = []
    for timed_call in timed:
        summary = describe(timed_call.samples)
        summary.warnings = clean_warnings(summary.warnings)
        stats.append(summary)
    ratio, low, high = ratio_of_medians_ci(timed[1].samples, timed[0].samples)
    warnings: list[str] = []
    if ratio is not None and low is not None and high is not None and low <= 1 <= high:
        warnings.append(f"the 95% CI of the speed-up [{low:.3g}, {high:.3g}] includes 1: no clear difference")
    return Speedup(
        fast=TimedCall(name=labels[0], steady=stats[0], samples=timed[0].samples, inner_loops=timed[0].inner),
        reference=TimedCall(name=labels[1], steady=stats[1], samples=timed[1].samples, inner_loops=timed[1].inner),
        ratio=ratio,
        ci_low=low,
        ci_high=high,
        rtol=rtol,
        atol=atol,
        leaves_checked=leaves,
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        warnings=warnings,
    )
