"""``batch_scaling``: how a function's cost per item falls as ``vmap`` batches more items per call.

Each batch size is a separate executable (a new shape compiles again), timed by
:func:`~jaxrun.bench.measure`; the table reports time per batched call, time per item, items per
second, and the per-item speed-up relative to the smallest batch (batch 1 when measured): the
"efficiency vs batch 1" of the executor API's scaling table, as a ratio (> 1: batching makes each item cheaper;
``size`` itself would be perfect scaling, when a batch costs as much as one item).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from jaxrun.bench._timing import budget_of
from jaxrun.bench.measure import measure
from jaxrun.bench.records import BatchScaling, BatchScalingRow
from jaxrun.errors import UsageError

__all__ = ["batch_scaling"]

_SIZE_BUDGET = 0.2  # seconds of timing per batch size


def _check_leading_axis(inputs: Any, size: int) -> None:
    import jax

    for path, leaf in jax.tree_util.tree_flatten_with_path(inputs)[0]:
        shape = getattr(leaf, "shape", None)
        if shape is None:
            continue
        if len(shape) == 0 or shape[0] != size:
            raise UsageError(
                f"make_inputs({size}) returned leaf args{jax.tree_util.keystr(path)} with shape {tuple(shape)}; "
                f"every array input needs a leading batch axis of length {size}"
            )


def _shapes(tree: Any) -> str:
    import jax

    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return ", ".join(
        f"args{jax.tree_util.keystr(path)}: {tuple(leaf.shape)}" for path, leaf in leaves if hasattr(leaf, "shape")
    ) or "no arrays"


def _check_takes_one_item(fn: Any, label: str, in_axes: Any, args: tuple[Any, ...], size: int) -> None:
    """Trace ``vmap(fn)`` once (no compiling): a function written for a whole batch fails there on
    one item. When it does, and ``fn`` traces on the whole batch, say so in one UsageError; any
    other failure is the function's own and is raised as it is."""
    import jax

    items: list[Any] = []

    def one_item(*item_args: Any) -> Any:
        items.append(jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), item_args))
        return fn(*item_args)

    try:
        jax.eval_shape(jax.vmap(one_item, in_axes=in_axes), *args)
    except Exception as error:
        try:
            jax.eval_shape(fn, *args)
        except Exception:
            raise error from None
        item = _shapes(items[0]) if items else "one item of each argument"
        reason = f"{type(error).__name__}: {str(error).splitlines()[0]}" if str(error) else type(error).__name__
        raise UsageError(
            f"batch_scaling: fn {label!r} must take ONE item (batch_scaling vmaps it over the batch); given one "
            f"item ({item}) it raised {reason}, while given the whole batch of {size} ({_shapes(args)}) it runs: "
            "it was written for a batch. Write fn for a single item (without the batch axis), or time the "
            "batched function with bench.measure"
        ) from None


def batch_scaling(
    fn: Callable[..., Any],
    make_inputs: Callable[[int], Any],
    sizes: Sequence[int] = (1, 16, 64, 256, 1024),
    *,
    in_axes: Any = 0,
    time_budget: float | None = None,
    min_time: float | None = None,
    name: str | None = None,
) -> BatchScaling:
    """Time ``jit(vmap(fn, in_axes))`` at each batch size; per-size time, per-item time, items/s.

    ``fn`` takes ONE item: batch_scaling vmaps it over the batch, so with ``in_axes=0`` it is
    called with each argument's leading (batch) axis removed. A function written for a whole
    batch raises a :class:`~jaxrun.errors.UsageError` saying so (time such a function with
    :func:`~jaxrun.bench.measure` instead). ``make_inputs(n)`` returns the tuple of batched
    arguments for batch size ``n`` (a single non-tuple value is taken as the only argument); with
    the default ``in_axes=0`` every array leaf needs a leading axis of length ``n``.
    ``time_budget`` is :func:`~jaxrun.bench.measure`'s, per batch size (default 0.2 s, so the five
    default sizes take about 1 s; ``min_time`` is its older name).

    >>> import jax.numpy as jnp
    >>> from jaxrun.bench import batch_scaling
    >>> def step(x):                        # ONE item: a 64-vector (vmapped over the batch)
    ...     return jnp.tanh(x) * 2.0
    >>> table = batch_scaling(step, lambda n: (jnp.ones((n, 64)),), sizes=(1, 16, 256), time_budget=0.05)
    >>> [row.size for row in table.rows]
    [1, 16, 256]
    >>> table.rows[-1].items_per_s > table.rows[0].items_per_s
    True
    >>> print(table)                        # doctest: +SKIP
    step on cpu:0 (cpu)
    batch  time/call  time/item     items/s  speedup/item vs 1
    ...
    """
    import jax

    if not callable(fn) or not callable(make_inputs):
        raise UsageError("batch_scaling(fn, make_inputs, sizes): fn and make_inputs must be functions")
    sizes = [int(s) for s in sizes]
    if not sizes or any(s < 1 for s in sizes):
        raise UsageError(f"sizes must be positive batch sizes, got {list(sizes)}")
    if len(set(sizes)) != len(sizes):
        raise UsageError(f"sizes has duplicates: {list(sizes)}")
    budget = budget_of(time_budget, min_time, _SIZE_BUDGET)
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    batched = jax.jit(jax.vmap(fn, in_axes=in_axes))

    rows: list[BatchScalingRow] = []
    warnings: list[str] = []
    device = None
    for size in sorted(sizes):
        inputs = make_inputs(size)
        args = inputs if isinstance(inputs, tuple) else (inputs,)
        if in_axes == 0:
            _check_leading_axis(args, size)
        if not rows:
            _check_takes_one_item(fn, label, in_axes, args, size)
        m = measure(batched, *args, time_budget=budget, peaks=False, name=f"{label}[batch={size}]")
        device = device or m.device
        warnings += [f"batch {size}: {w}" for w in m.warnings if "XLA's cost analysis" not in w]
        t = m.steady.median
        rows.append(
            BatchScalingRow(
                size=size, time=t, ci_low=m.steady.ci_low, ci_high=m.steady.ci_high,
                per_item=t / size if t else None, items_per_s=size / t if t else None,
                compile_time=m.compile_time, steady=m.steady,
            )
        )
        del inputs, args
    baseline = rows[0]
    for row in rows:
        if baseline.per_item and row.per_item:
            row.speedup_per_item = baseline.per_item / row.per_item
    return BatchScaling(name=label, device=device, baseline_size=baseline.size, rows=rows, warnings=warnings)
