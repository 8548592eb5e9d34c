"""What one compiled program costs (FLOPs, bytes accessed, transcendentals), and where that comes from.

XLA's compiled cost analysis is the best source for what it counts: it sees the program XLA
runs, after fusion and simplification. But it counts the body of each loop once, whatever the
trip count, and almost every training loop is a ``scan``. So the figures are chosen in this order
(``Measurement.cost_source`` says which, a warning says why when it is not plain ``"xla"``):

* ``"xla"``: the analysis as it is, for a program with no loop left after compilation (or on a
  backend whose analysis counts every trip itself);
* ``"xla_trip_counts"``: the analysis with each loop's body and condition counted as often as
  they run, using XLA's own analysis of each loop and the trip count XLA proved (``_loop_costs``);
* ``"jaxpr"``: FLOPs counted from the jaxpr with its trip counts (``_flops``), where the backend
  has no analysis (GPUs) or XLA's per-loop figures cannot be read; bytes accessed are then the
  arguments plus the outputs, a lower bound, and transcendentals unknown;
* ``None``: unknown, e.g. a loop whose trip count depends on the data: one trip's figure would be
  a silent lower bound, so no figure is given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._flops import jaxpr_cost
from ._loop_costs import LoopCost, has_loops, loop_cost

__all__ = ["ProgramCost", "program_cost", "cost_figures"]

_UNKNOWN: dict[str, float | None] = {"flops": None, "bytes_accessed": None, "transcendentals": None}
_CURE = ("to get figures, give the loop static bounds (lax.scan, or lax.fori_loop with Python-int bounds), "
         "or measure its body alone and multiply by the trips you expect")


@dataclass
class ProgramCost:
    figures: dict[str, float | None]  # flops, bytes_accessed, transcendentals
    source: str | None  # "xla", "xla_trip_counts", "jaxpr" or None
    warnings: list[str] = field(default_factory=list)


def _number(value: Any) -> float | None:
    """XLA reports -1 for "could not analyse" (e.g. across a host callback): that is unknown."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


def cost_figures(cost: Any) -> dict[str, float | None]:
    """flops / bytes accessed / transcendentals from ``compiled.cost_analysis()``.

    Depending on the JAX version that is a dict, a list with one dict per computation, or None.
    XLA leaves out properties that are zero (a matmul has no "transcendentals" key), so a missing
    key in a valid analysis is 0; an analysis that is absent, empty or -1 is unknown (None).
    """
    if isinstance(cost, (list, tuple)):
        dicts = [c for c in cost if isinstance(c, dict)]
        cost = None if not dicts else {k: sum(float(d.get(k, 0.0)) for d in dicts) for k in set().union(*dicts)}
    if not isinstance(cost, dict) or not cost:
        return dict(_UNKNOWN)
    values = {key: _number(cost.get(xla_key, 0.0)) for key, xla_key in
              (("flops", "flops"), ("bytes_accessed", "bytes accessed"), ("transcendentals", "transcendentals"))}
    if any(_number(v) is None for v in cost.values() if isinstance(v, (int, float))):
        # One -1 means the analysis failed somewhere: totals would be silently short.
        return dict(_UNKNOWN)
    return values


def program_cost(compiled: Any, traced: Any, memory: dict[str, int | None], device: Any) -> ProgramCost:
    """The figures of one compiled program (see the module's docstring for the order of sources)."""
    try:
        xla = cost_figures(compiled.cost_analysis())
    except Exception:  # not implemented on this backend / version
        xla = dict(_UNKNOWN)
    if xla["flops"] is None:
        return _from_jaxpr(traced, memory, "XLA's cost analysis is unavailable for this function (on this backend, or "
                                           "across a host callback)")
    if not has_loops(compiled):
        return ProgramCost(xla, "xla")
    try:
        loops = loop_cost(compiled, xla, device)  # type: ignore[arg-type]
    except Exception as error:  # private jaxlib API moved, text not re-read: count from the jaxpr
        return _from_jaxpr(traced, memory, "XLA's cost analysis counts each loop body once, whatever its trip "
                                           f"count, and its per-loop figures could not be read ({error})")
    if loops.unbounded:
        return ProgramCost(dict(_UNKNOWN), None, [_unbounded_warning(loops, xla, traced)])
    if not loops.scaled:
        return ProgramCost(xla, "xla")
    return ProgramCost(loops.figures, "xla_trip_counts", [_scaled_warning(loops, xla)])


def _scaled_warning(loops: LoopCost, xla: dict[str, float | None]) -> str:
    shown = ", ".join(f"{label} x{trips}" for label, trips in loops.loops[:4])
    more = f" and {len(loops.loops) - 4} more" if len(loops.loops) > 4 else ""
    return (
        "XLA's cost analysis counts each loop body once, whatever its trip count: FLOPs, bytes accessed and "
        "transcendentals here are XLA's, with each loop's body analysed on its own and counted by its trip count "
        f"({shown}{more}; cost_source 'xla_trip_counts'). XLA's one-trip figure was {xla['flops']:.4g} FLOPs and "
        f"{xla['bytes_accessed']:.4g} bytes per device"
    )


def _unbounded_warning(loops: LoopCost, xla: dict[str, float | None], traced: Any) -> str:
    what = f"XLA found no static trip count for loop {', '.join(loops.unbounded[:3])}"
    try:  # the jaxpr knows the loop's source line, which XLA's op name lacks
        reason = jaxpr_cost(traced.jaxpr).unknown_because
        if reason and "while loop" in reason:
            what = reason
    except Exception:
        pass
    return (
        f"{what}: FLOPs, bytes accessed and transcendentals are unknown (None). XLA's cost analysis counts the "
        f"loop's body once, so its {xla['flops']:.4g} FLOPs are only a lower bound; {_CURE}"
    )


def _from_jaxpr(traced: Any, memory: dict[str, int | None], why: str) -> ProgramCost:
    """FLOPs counted from the jaxpr; the bytes are the arguments and outputs, the least the
    function must move (a lower bound)."""
    try:
        counted = jaxpr_cost(traced.jaxpr)
    except Exception as error:
        return ProgramCost(dict(_UNKNOWN), None, [f"{why}, and counting FLOPs from the jaxpr failed ({error}): "
                                                  "FLOPs and the roofline are unknown"])
    if counted.flops is None:
        cure = f"; {_CURE}" if "while loop" in (counted.unknown_because or "") else ""
        return ProgramCost(dict(_UNKNOWN), None, [f"{why}, and FLOPs cannot be counted from the jaxpr either: "
                                                  f"{counted.unknown_because}: FLOPs and the roofline are unknown{cure}"])
    args, outs = memory.get("argument_bytes"), memory.get("output_bytes")
    moved = float(args + outs) if args is not None and outs is not None else None
    warning = (
        f"{why}: FLOPs counted from the jaxpr (matrix products and convolutions exactly, other arithmetic one "
        "per element, loop bodies times their trip counts), bytes_accessed = arguments + outputs (a lower "
        "bound, so the arithmetic intensity is an upper bound)"
    )
    return ProgramCost({"flops": counted.flops, "bytes_accessed": moved, "transcendentals": None}, "jaxpr", [warning])
