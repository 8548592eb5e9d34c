"""Memory held by a pytree: total bytes and a per-leaf breakdown (the "memory per state" table).

Sizes are logical (``size * itemsize`` of each array leaf): what the values need, not what an
allocator rounded them up to. A sharded ``jax.Array`` counts its global size once. Leaves that are
neither arrays nor numbers (strings, functions in a static field) have no size: they appear in
the breakdown with ``nbytes=None`` and are left out of the total.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxrun.bench.format import fmt_bytes, text_table
from jaxrun.bench.records import LeafBytes
from jaxrun.core.formatting import plural

__all__ = ["pytree_nbytes", "pytree_breakdown", "breakdown_table"]


def _leaf_bytes(path: str, leaf: Any) -> LeafBytes:
    if isinstance(leaf, (bool, int, float, complex, np.generic)):
        import jax

        # A Python number becomes a JAX scalar of the canonical dtype (int32 unless x64 is on).
        dtype = jax.dtypes.canonicalize_dtype(np.asarray(leaf).dtype)
        return LeafBytes(path=path, shape=[], dtype=str(dtype), nbytes=int(dtype.itemsize))
    shape, dtype = getattr(leaf, "shape", None), getattr(leaf, "dtype", None)
    if shape is None or dtype is None:
        return LeafBytes(path=path, shape=None, dtype=None, nbytes=None)
    # jax.ShapeDtypeStruct has no nbytes; arrays do. Both have shape and dtype.
    size = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    nbytes = getattr(leaf, "nbytes", None)
    if nbytes is None:
        nbytes = size * np.dtype(dtype).itemsize
    return LeafBytes(path=path, shape=[int(d) for d in shape], dtype=str(dtype), nbytes=int(nbytes))


def pytree_breakdown(tree: Any) -> list[LeafBytes]:
    """Every leaf with its ``jax.tree_util.keystr`` path, shape, dtype and bytes, in tree order.

    >>> import jax.numpy as jnp
    >>> from jaxrun.bench import pytree_breakdown
    >>> state = {"w": jnp.zeros((3, 4)), "b": jnp.zeros(4, jnp.bfloat16), "step": 0}
    >>> [(leaf.path, leaf.shape, leaf.dtype, leaf.nbytes) for leaf in pytree_breakdown(state)]
    [("['b']", [4], 'bfloat16', 8), ("['step']", [], 'int32', 4), ("['w']", [3, 4], 'float32', 48)]
    """
    import jax

    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [_leaf_bytes(jax.tree_util.keystr(path), leaf) for path, leaf in flat]


def pytree_nbytes(tree: Any) -> int:
    """Total bytes of the array and number leaves of ``tree``.

    >>> import jax.numpy as jnp
    >>> from jaxrun.bench import pytree_nbytes
    >>> pytree_nbytes({"w": jnp.zeros((1024, 1024)), "b": jnp.zeros(1024)})
    4198400
    """
    return sum(leaf.nbytes for leaf in pytree_breakdown(tree) if leaf.nbytes is not None)


def breakdown_table(tree_or_leaves: Any, *, top: int | None = None) -> str:
    """A text table of a pytree's leaves, largest first, with each leaf's share of the total.

    Accepts a pytree or the list :func:`pytree_breakdown` returned; ``top`` keeps the largest
    ``top`` leaves (the rest are summed in one line).
    """
    leaves = tree_or_leaves
    if not (isinstance(leaves, list) and all(isinstance(x, LeafBytes) for x in leaves) and leaves):
        leaves = pytree_breakdown(tree_or_leaves)
    total = sum(x.nbytes for x in leaves if x.nbytes is not None)
    ordered = sorted(leaves, key=lambda x: -(x.nbytes if x.nbytes is not None else -1))
    shown = ordered if top is None else ordered[:top]
    rows = [
        [
            x.path or "(root)",
            "-" if x.shape is None else str(tuple(x.shape)),
            x.dtype or "-",
            fmt_bytes(x.nbytes),
            "-" if x.nbytes is None or total == 0 else f"{x.nbytes / total:.1%}",
        ]
        for x in shown
    ]
    rest = ordered[len(shown):]
    if rest:
        rest_bytes = sum(x.nbytes for x in rest if x.nbytes is not None)
        share = f"{rest_bytes / total:.1%}" if total else "-"
        rows.append([f"({plural(len(rest), 'more leaf', 'more leaves')})", "", "", fmt_bytes(rest_bytes), share])
    rows.append(["total", "", "", fmt_bytes(total), "100.0%" if total else "-"])
    return text_table(["leaf", "shape", "dtype", "bytes", "share"], rows)
