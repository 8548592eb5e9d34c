"""FLOPs counted from a function's jaxpr, for backends whose compiled cost analysis says nothing
(on NVIDIA GPUs JAX 0.11 reports ``flops: -1``).

Matrix products and convolutions are counted exactly (2 x multiply-adds); every other primitive
that computes values counts one FLOP per output element (a reduction: one per input element);
moves, reshapes and indexing count nothing. Sub-programs (pjit, custom derivatives, remat) are
walked, a ``scan`` counts its body ``length`` times, a ``cond`` its costliest branch; a ``while``
loop's trip count is unknown, so its body counts once and the count is marked a lower bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# Primitives that only move, reinterpret or index data: no arithmetic.
_FREE = {
    "reshape", "broadcast_in_dim", "transpose", "squeeze", "expand_dims", "slice", "dynamic_slice",
    "dynamic_update_slice", "gather", "scatter", "concatenate", "pad", "rev", "select_n", "copy",
    "convert_element_type", "bitcast_convert_type", "iota", "device_put", "sharding_constraint", "stop_gradient",
    "split", "random_bits", "random_seed", "random_wrap", "random_unwrap", "threefry2x32",
    "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr",
    "remat", "checkpoint", "scan", "while", "cond", "shard_map", "xla_pmap", "argsort", "sort", "debug_callback",
}
# Work on the host or in foreign code, which the jaxpr does not show: the count is unknown.
_OPAQUE = {"pure_callback", "io_callback", "callback", "ffi_call", "custom_call"}
_REDUCTIONS = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
               "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"}


@dataclass
class JaxprCost:
    flops: float | None  # None: a host callback or foreign call hides part of the work
    exact: bool  # False when a while loop's trip count was unknown (a lower bound)


def _size(aval: Any) -> int:
    shape = getattr(aval, "shape", ())
    return int(math.prod(shape)) if shape else 1


def _dot_flops(eqn: Any) -> float:
    (lhs_contract, _), _ = eqn.params["dimension_numbers"]
    lhs = eqn.invars[0].aval.shape
    contracted = math.prod(lhs[d] for d in lhs_contract) if lhs_contract else 1
    return 2.0 * _size(eqn.outvars[0].aval) * contracted


def _conv_flops(eqn: Any) -> float:
    rhs = eqn.invars[1].aval.shape  # kernel: out features x in features/groups x spatial...
    numbers = eqn.params["dimension_numbers"]
    out_feature_dim = numbers.rhs_spec[0] if numbers is not None else 0
    per_output = math.prod(rhs) / rhs[out_feature_dim]
    return 2.0 * _size(eqn.outvars[0].aval) * per_output


def _sub_jaxprs(eqn: Any) -> list[Any]:
    found = []
    for value in eqn.params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            inner = getattr(item, "jaxpr", item)
            if hasattr(inner, "eqns"):
                found.append(inner)
    return found


def jaxpr_cost(jaxpr: Any) -> JaxprCost:
    """The FLOPs of a (closed) jaxpr, by the rules of this module."""
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    flops, exact = 0.0, True
    for eqn in inner.eqns:
        name = eqn.primitive.name
        subs = _sub_jaxprs(eqn)
        costs = [jaxpr_cost(s) for s in subs]
        if name in _OPAQUE or any(c.flops is None for c in costs):
            return JaxprCost(None, False)
        if name == "dot_general":
            flops += _dot_flops(eqn)
        elif name == "conv_general_dilated":
            flops += _conv_flops(eqn)
        elif name == "cond" and subs:
            flops += max(c.flops for c in costs)  # type: ignore[type-var]
            exact &= all(c.exact for c in costs)
        elif subs:
            times = int(eqn.params.get("length", 1)) if name == "scan" else 1
            flops += times * sum(c.flops for c in costs)  # type: ignore[misc]
            exact &= all(c.exact for c in costs) and name != "while"
        elif name in _REDUCTIONS:
            flops += sum(_size(v.aval) for v in eqn.invars)
        elif name not in _FREE:
            flops += sum(_size(v.aval) for v in eqn.outvars)
    return JaxprCost(flops, exact)
