"""FLOPs counted from a function's jaxpr, loops counted as often as they run.

``measure`` uses this count where XLA's compiled cost analysis cannot give the figure: backends
whose analysis says nothing (on NVIDIA GPUs JAX 0.11 reports ``flops: -1``), and programs whose
loops XLA's per-loop figures could not be read for (see ``_loop_costs``).

Matrix products and convolutions are counted exactly (2 x multiply-adds); every other primitive
that computes values counts one FLOP per output element (a reduction: one per input element);
moves, reshapes and indexing count nothing. Sub-programs (pjit, custom derivatives, remat) are
walked, a ``cond`` counts its costliest branch. Loops count their body once per trip: a ``scan``
(``lax.scan``, and ``fori_loop`` with Python-int bounds) ``length`` times; a ``while``
(``while_loop``, ``fori_loop`` with traced bounds) as many times as the jaxpr proves it runs: its
condition compares an integer carry with a constant, or with a carry the body passes on unchanged
that starts as a constant, and its body adds a constant step to that carry, which starts as a
constant. A ``while`` whose end depends on the data has no static trip count: the count is then
unknown (``flops`` None, with the reason), never the one-trip figure, which would be a silent
lower bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

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
# `bound < i` is `i > bound`: a test is turned round so that the counter is on the left.
_TURNED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


@dataclass
class JaxprCost:
    flops: float | None  # None: part of the work cannot be counted, `unknown_because` says why
    unknown_because: str | None = None


def _size(aval: Any) -> int:
    shape = getattr(aval, "shape", ())
    return int(math.prod(shape)) if shape else 1


def _where(eqn: Any) -> str:
    """The user's source line of an equation, for messages ("model.py:12 (step)")."""
    try:
        from jaxrun.probe.jax_internals import source_info_util

        return source_info_util().summarize(eqn.source_info)
    except Exception:
        return "an unknown source line"


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
    flops = 0.0
    for eqn in inner.eqns:
        cost = _eqn_cost(eqn)
        if cost.flops is None:
            return cost
        flops += cost.flops
    return JaxprCost(flops)


def _eqn_cost(eqn: Any) -> JaxprCost:
    name = eqn.primitive.name
    if name in _OPAQUE:
        return JaxprCost(None, f"{name} at {_where(eqn)} runs host or foreign code, whose work the jaxpr does not show")
    if name == "while":
        return _while_cost(eqn)
    subs = [jaxpr_cost(s) for s in _sub_jaxprs(eqn)]
    unknown = next((c for c in subs if c.flops is None), None)
    if unknown is not None:
        return unknown
    counted = [c.flops for c in subs if c.flops is not None]
    if name == "dot_general":
        return JaxprCost(_dot_flops(eqn))
    if name == "conv_general_dilated":
        return JaxprCost(_conv_flops(eqn))
    if name == "cond" and counted:
        return JaxprCost(max(counted))
    if counted:
        trips = int(eqn.params.get("length", 1)) if name == "scan" else 1
        return JaxprCost(trips * sum(counted))
    if name in _REDUCTIONS:
        return JaxprCost(float(sum(_size(v.aval) for v in eqn.invars)))
    if name in _FREE:
        return JaxprCost(0.0)
    return JaxprCost(float(sum(_size(v.aval) for v in eqn.outvars)))


def _while_cost(eqn: Any) -> JaxprCost:
    body, cond = jaxpr_cost(eqn.params["body_jaxpr"]), jaxpr_cost(eqn.params["cond_jaxpr"])
    for part in (body, cond):
        if part.flops is None:
            return part
    trips = while_trip_count(eqn)
    if trips is None:
        return JaxprCost(None, f"the while loop at {_where(eqn)} has no static trip count (its end depends on the "
                               "data, or on a value the jaxpr does not fix)")
    # The condition is tested once more than the body runs: the test that ends the loop.
    return JaxprCost(trips * body.flops + (trips + 1) * cond.flops)  # type: ignore[operator]


def _integer(var: Any) -> int | None:
    """The value of a scalar integer literal; None for a variable or anything else."""
    from jax.extend.core import Literal

    if not isinstance(var, Literal):
        return None
    value = np.asarray(var.val)
    if value.shape != () or not np.issubdtype(value.dtype, np.integer):
        return None
    return int(value)


def while_trip_count(eqn: Any) -> int | None:
    """How many times a ``while`` equation runs its body, where its jaxpr proves it; else None."""
    params = eqn.params
    cond, body = params["cond_jaxpr"].jaxpr, params["body_jaxpr"].jaxpr
    n_cond, n_body = params["cond_nconsts"], params["body_nconsts"]
    cond_consts, init = eqn.invars[:n_cond], eqn.invars[n_cond + n_body:]
    test = next((e for e in cond.eqns if cond.outvars[0] in e.outvars), None)
    if test is None or test.primitive.name not in _TURNED:
        return None

    def carry_of(var: Any) -> int | None:  # which carry a condition operand is, if it is one
        position = cond.invars.index(var) if var in cond.invars else -1
        return position - n_cond if position >= n_cond else None

    def constant(var: Any) -> int | None:  # the operand's value, if it is fixed before the loop
        if var in cond.invars[:n_cond]:
            return _integer(cond_consts[cond.invars.index(var)])
        carry = carry_of(var)
        if carry is not None:  # a carry the body hands on untouched keeps its initial value
            passed_on = body.outvars[carry] is body.invars[n_body + carry]
            return _integer(init[carry]) if passed_on else None
        return _integer(var)

    direction = test.primitive.name
    left, right = test.invars
    for counter_var, bound_var, turn in ((left, right, False), (right, left, True)):
        counter, bound = carry_of(counter_var), constant(bound_var)
        if counter is None or bound is None:
            continue
        start, step = _integer(init[counter]), _step(body, n_body, counter)
        if start is not None and step is not None:
            return _trips(start, step, bound, _TURNED[direction] if turn else direction)
    return None


def _step(body: Any, n_body: int, carry: int) -> int | None:
    """The constant the body adds to a carry each trip (``i + 1``, ``i - 2``), if that is all it does."""
    new, old = body.outvars[carry], body.invars[n_body + carry]
    update = next((e for e in body.eqns if new in e.outvars), None)
    if update is None or update.primitive.name not in ("add", "sub"):
        return None
    a, b = update.invars
    if a is old and _integer(b) is not None:
        return _integer(b) if update.primitive.name == "add" else -_integer(b)  # type: ignore[operator]
    if b is old and update.primitive.name == "add" and _integer(a) is not None:
        return _integer(a)
    return None


def _trips(start: int, step: int, bound: int, direction: str) -> int | None:
    """Trips of ``i = start; while i <direction> bound: i += step``; None if it only ends by overflow."""
    if direction in ("lt", "le") and step > 0:
        span = bound - start + (1 if direction == "le" else 0)
    elif direction in ("gt", "ge") and step < 0:
        span, step = start - bound + (1 if direction == "ge" else 0), -step
    else:  # the counter moves away from its bound
        return None
    return max(0, -(-span // step))
