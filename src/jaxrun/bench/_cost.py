"""What one compiled program costs (FLOPs, bytes accessed, transcendentals), and where that comes from.

XLA's compiled cost analysis is the best source for what it counts: it sees the program XLA
runs, after fusion and simplification. But it counts the body of each loop once, whatever the
trip count, and almost every training loop is a ``scan``. So the figures are chosen in this order
(``Measurement.cost_source`` says which, a warning says why when it is not plain ``"xla"``):

* ``"xla"`` and ``"xla_trip_counts"``: XLA's analysis, with each loop counted by the trip count
  XLA proved (:func:`jaxrun.probe.loop_costs.xla_cost`, what the probe reports for every program
  of a script too);
* ``"jaxpr"``: FLOPs counted from the jaxpr with its trip counts (``_flops``), where the backend
  has no analysis (GPUs) or XLA's per-loop figures cannot be read; bytes accessed are then the
  arguments plus the outputs, a lower bound, and transcendentals unknown;
* ``None``: unknown, e.g. a loop whose trip count depends on the data: one trip's figure would be
  a silent lower bound, so no figure is given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jaxrun.bench._flops import jaxpr_cost
from jaxrun.probe.loop_costs import CURE, XlaCost, cost_figures, xla_cost

__all__ = ["ProgramCost", "program_cost", "cost_figures"]

_UNKNOWN: dict[str, float | None] = {"flops": None, "bytes_accessed": None, "transcendentals": None}


@dataclass
class ProgramCost:
    figures: dict[str, float | None]  # flops, bytes_accessed, transcendentals
    source: str | None  # "xla", "xla_trip_counts", "jaxpr" or None
    warnings: list[str] = field(default_factory=list)


def program_cost(compiled: Any, traced: Any, memory: dict[str, int | None], device: Any) -> ProgramCost:
    """The figures of one compiled program (see the module's docstring for the order of sources)."""
    try:
        raw = compiled.cost_analysis()
    except Exception:  # not implemented on this backend / version
        raw = None
    try:
        text: str | None = compiled.as_text()
        client = compiled.runtime_executable().client
    except Exception:
        text, client = None, None
    xla = xla_cost(raw, text, client, device.platform)
    if xla.countable_elsewhere:
        return _from_jaxpr(traced, memory, xla.reason or "XLA's cost analysis is unavailable")
    if xla.unbounded:
        return ProgramCost(dict(_UNKNOWN), None, [_unbounded_warning(xla, traced)])
    return ProgramCost(xla.figures, xla.source, [xla.reason] if xla.reason else [])


def _unbounded_warning(xla: XlaCost, traced: Any) -> str:
    assert xla.reason is not None
    try:  # the jaxpr knows the loop's source line, which XLA's op name lacks
        reason = jaxpr_cost(traced.jaxpr).unknown_because
        if reason and "while loop" in reason:
            return reason + xla.reason[xla.reason.index(":"):]
    except Exception:
        pass
    return xla.reason


def _from_jaxpr(traced: Any, memory: dict[str, int | None], why: str) -> ProgramCost:
    """FLOPs counted from the jaxpr; the bytes are the arguments and outputs, the least the
    function must move (a lower bound)."""
    try:
        counted = jaxpr_cost(traced.jaxpr)
    except Exception as error:
        return ProgramCost(dict(_UNKNOWN), None, [f"{why}, and counting FLOPs from the jaxpr failed ({error}): "
                                                  "FLOPs and the roofline are unknown"])
    if counted.flops is None:
        cure = f"; {CURE}" if "while loop" in (counted.unknown_because or "") else ""
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
