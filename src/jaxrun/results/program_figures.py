"""Every figure of one compiled program, declared once: a :class:`ProgramFigure` is read from the
program's :class:`~jaxrun.results.script_result.CompileStats` (a ``compiles`` entry of a result,
and the script's result, for a share of it); the program tables of the HTML report and of
``jaxrun run -v`` have one column per declaration. Plain Python, no pydantic, as
results/figures.py (a script's figures, of which these are the programs' counterpart).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, NamedTuple, Optional

from jaxrun.core.formatting import fmt_bytes, fmt_kind
from jaxrun.results.figures import Kind

if TYPE_CHECKING:
    from jaxrun.results.script_result import CompileStats, ScriptResult

ProgramValue = Callable[["CompileStats", "Optional[ScriptResult]"], Optional[float]]


class ProgramFigure(NamedTuple):
    """One figure of one compiled program, a column of every program table."""

    name: str
    label: str  # its column's header
    kind: Kind
    value: ProgramValue  # from the program's statistics (and the script's result, which may be absent)
    # Its cell where the figure alone does not say enough ("12 MiB (temp 4 MiB)"); default: fmt_kind.
    text: Optional[Callable[["CompileStats", Optional[float]], str]] = None

    def cell(self, stats: "CompileStats", result: "Optional[ScriptResult]" = None) -> tuple[Optional[float], str]:
        """``(value, text)`` of this figure for one program."""
        value = self.value(stats, result)
        return value, (self.text(stats, value) if self.text is not None else fmt_kind(self.kind, value))


def jit_seconds(stats: "CompileStats") -> float:
    """Seconds of JIT work for a program: trace + lower + compile + loads from the persistent cache."""
    return stats.trace_time + stats.lower_time + stats.compile_time + stats.cache_load_time


def _cost(name: str) -> ProgramValue:
    return lambda stats, _: getattr(stats.cost, name) if stats.cost is not None else None


def _intensity(stats: "CompileStats", _: "Optional[ScriptResult]") -> Optional[float]:
    cost = stats.cost
    if cost is None or cost.flops is None or not cost.bytes_accessed:
        return None
    return cost.flops / cost.bytes_accessed


def _compile_share(stats: "CompileStats", result: "Optional[ScriptResult]") -> Optional[float]:
    body = result.body_time if result is not None else None
    return jit_seconds(stats) / body if body else None


def _memory_text(stats: "CompileStats", value: Optional[float]) -> str:
    memory = stats.memory
    if memory is None:
        return "-"
    return fmt_bytes(memory.total_bytes) + (f" (temp {fmt_bytes(memory.temp_bytes)})" if memory.temp_bytes else "")


PROGRAM_FIGURES: tuple[ProgramFigure, ...] = (
    ProgramFigure("jit", "JIT", "seconds", lambda stats, _: jit_seconds(stats)),
    # What share of the script's body its JIT work took (compile-bound or run-bound at a glance).
    ProgramFigure("compile_share", "JIT share", "ratio", _compile_share,
                  text=lambda stats, v: "-" if v is None else f"{v:.1%}"),
    ProgramFigure("flops", "FLOPs", "count", _cost("flops")),
    ProgramFigure("bytes_accessed", "bytes accessed", "bytes", _cost("bytes_accessed")),
    # FLOPs per byte read or written, XLA's counts per call: the roofline's arithmetic intensity.
    ProgramFigure("intensity", "FLOP/byte", "ratio", _intensity),
    ProgramFigure("memory", "device memory", "bytes",
                  lambda stats, _: stats.memory.total_bytes if stats.memory is not None else None, text=_memory_text),
)
