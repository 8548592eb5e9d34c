"""Every figure jaxrun keeps per run and shows, declared once, as an option is declared once in
:mod:`jaxrun.config.options`.

A :class:`ScriptFigure` is a figure of a script's run (a :class:`~jaxrun.results.models.ScriptResult`
field). Made from its declaration: its :class:`~jaxrun.results.models.RunSample` field (one per
benchmark run), the benchmarked result's headline figure (the median of the counted runs), and,
when it is ``sampled``, its statistics, its column of the history's ``samples`` table, its name for
``--metric`` and the comparison of its samples by ``jaxrun compare`` and the history's check;
its label and formatter are what every surface writes of it.

A :class:`ProgramFigure` is a figure of one compiled program (a ``compiles`` entry of a result),
read from its :class:`~jaxrun.results.models.CompileStats` (and the script's result, for a share of
it): the program tables of the HTML report and of ``jaxrun run -v`` have one column per declaration.

Plain Python, no pydantic: the option checks of ``--metric`` read it on the way to the first script.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Literal, NamedTuple, Optional

from jaxrun.core.formatting import fmt_bytes, fmt_kind, joined

if TYPE_CHECKING:
    from jaxrun.results.models import CompileStats, ScriptResult

Kind = Literal["seconds", "mib", "bytes", "count", "ratio"]

# The unit each kind of figure is held in, as statistics and exports name it.
UNITS: dict[str, str] = {"seconds": "s", "mib": "MiB", "bytes": "B", "count": "", "ratio": ""}
_UNIT_NAMES: dict[str, str] = {"seconds": "seconds", "mib": "MiB (2^20 bytes)", "bytes": "bytes", "count": "a count",
                               "ratio": "a ratio"}


class ScriptFigure(NamedTuple):  # a NamedTuple: a frozen dataclass costs 1 ms more on the way to the first script
    """One figure of a script's run."""

    name: str  # its RunSample field, history column and --metric name
    field: str  # the ScriptResult field a run holds it in
    kind: Kind
    label: str  # short, in tables: "run", "memory"
    description: str  # of its RunSample field
    # Its samples' statistics, history column and comparisons; a figure that is only kept per
    # run (a RunSample field, the median put back) has none of these.
    sampled: bool = True
    judged: bool = False  # judged with every comparison (else only when --metric names it)
    gate: int = 0  # its place in the default gate (0: not in it): a slower verdict of a gate phase is a regression
    aliases: tuple[str, ...] = ()  # older names of it (files and databases written before a rename)
    # A benchmarked result's figure, of its counted runs: their median, or for a whole number
    # (bytes) the lower middle one, a value some run had (never half a byte).
    aggregate: Literal["median", "median_low"] = "median"

    @property
    def unit(self) -> str:
        return UNITS[self.kind]

    @property
    def unit_name(self) -> str:
        """Its unit in words, as descriptions say it: seconds, MiB (2^20 bytes), bytes, a count."""
        return _UNIT_NAMES[self.kind]

    def format(self, value: float | None) -> str:
        return fmt_kind(self.kind, value)


SCRIPT_FIGURES: tuple[ScriptFigure, ...] = (
    ScriptFigure("wall_time", "execution_time", "seconds", "wall", "Seconds, whole process", judged=True),
    ScriptFigure("body_time", "body_time", "seconds", "body", "Seconds, script body"),
    ScriptFigure("import_time", "import_time", "seconds", "import", "Seconds of the body spent importing modules",
                 judged=True),
    ScriptFigure("compile_time", "jit_compile_time", "seconds", "compile", "Seconds of trace+lower+compile",
                 judged=True, gate=2),
    ScriptFigure("run_time", "run_time", "seconds", "run",
                 "Seconds of the script's own work: body minus imports minus compilation", judged=True, gate=1,
                 aliases=("steady_time",)),
    ScriptFigure("memory_peak", "memory_peak", "mib", "memory", "MiB (2^20 bytes), peak RSS of the process tree",
                 judged=True),
    ScriptFigure("cpu_time", "cpu_time", "seconds", "cpu", "Seconds of CPU (user+sys) of the process tree",
                 sampled=False),
    ScriptFigure("live_array_bytes", "live_array_bytes", "bytes", "live arrays",
                 "Bytes of the jax.Arrays alive when the body ended (jax.live_arrays()); null without JAX",
                 aggregate="median_low"),
)

FIGURES: dict[str, ScriptFigure] = {f.name: f for f in SCRIPT_FIGURES}
# Metrics whose samples are described, kept in the history and compared, in this order.
SAMPLE_METRICS: tuple[str, ...] = tuple(f.name for f in SCRIPT_FIGURES if f.sampled)
# Each RunSample figure and the ScriptResult field it is read from: a sample is made from a
# result through it, a benchmarked result's headline figures are its samples' medians put back
# through it, and compare reads a plain run's value through it.
RESULT_FIELDS: dict[str, str] = {f.name: f.field for f in SCRIPT_FIGURES}
# Names older files and databases used: ``steady_time`` (body minus compile) became ``run_time``.
METRIC_ALIASES: dict[str, str] = {old: f.name for f in SCRIPT_FIGURES for old in f.aliases}
# What every comparison judges, and the default gate: the code's own phases.
PHASES: tuple[str, ...] = tuple(f.name for f in SCRIPT_FIGURES if f.sampled and f.judged)
DEFAULT_GATE: tuple[str, ...] = tuple(f.name for f in sorted(SCRIPT_FIGURES, key=lambda f: f.gate)
                                      if f.sampled and f.gate)


def metric_unit(metric: str) -> str:
    return FIGURES[METRIC_ALIASES.get(metric, metric)].unit


def format_metric(metric: str, value: float | None) -> str:
    """A value of ``metric`` (a sample metric's name) with its unit."""
    return FIGURES[METRIC_ALIASES.get(metric, metric)].format(value)


def metric_label(metric: str, gate: bool = False) -> str:
    """``run_time`` -> ``run``, ``memory_peak`` -> ``memory``; `` *`` marks a phase of the gate."""
    figure = FIGURES.get(METRIC_ALIASES.get(metric, metric))
    return (figure.label if figure is not None else metric) + (" *" if gate else "")


def metrics_text() -> str:
    """``wall_time, ... or live_array_bytes``: the names ``--metric`` takes."""
    return joined(SAMPLE_METRICS, "or")


# --- per program -----------------------------------------------------------------------------------

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
