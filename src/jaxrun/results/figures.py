"""Every figure jaxrun keeps per run and shows, declared once, as an option is declared once in
:mod:`jaxrun.config.options`.

A :class:`ScriptFigure` is a figure of a script's run (a :class:`~jaxrun.results.models.ScriptResult`
field). Made from its declaration: its :class:`~jaxrun.results.models.RunSample` field (one per
benchmark run), the benchmarked result's headline figure (the median of the counted runs), and,
when it is ``sampled``, its statistics, its column of the history's ``samples`` table, its name for
``--metric`` and the comparison of its samples by ``jaxrun compare`` and the history's check;
its label and formatter are what every surface writes of it.

The figures of one compiled program are declared in results/program_figures.py.

Plain Python, no pydantic: the option checks of ``--metric`` read it on the way to the first script.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from jaxrun.core.formatting import fmt_kind, joined

Kind = Literal["seconds", "mib", "bytes", "count", "ratio", "joules", "watts"]

# The unit each kind of figure is held in, as statistics and exports name it.
UNITS: dict[str, str] = {"seconds": "s", "mib": "MiB", "bytes": "B", "count": "", "ratio": "", "joules": "J",
                         "watts": "W"}
_UNIT_NAMES: dict[str, str] = {"seconds": "seconds", "mib": "MiB (2^20 bytes)", "bytes": "bytes", "count": "a count",
                               "ratio": "a ratio", "joules": "joules", "watts": "watts"}


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
    # Energy, from the hardware's counters read at the job's start and end (discover/energy.py).
    ScriptFigure("device_energy", "device_energy", "joules", "GPU energy",
                 "Joules the job's GPUs used while it ran (NVML's total-energy counter, Volta or newer; their sum); "
                 "null where there is none"),
    ScriptFigure("device_power", "device_power", "watts", "GPU power",
                 "Watts, the job's GPUs' mean power: device_energy over the seconds between its two readings",
                 sampled=False),
    ScriptFigure("host_energy", "host_energy", "joules", "host energy",
                 "Joules the host's CPU packages used while the job ran (RAPL, Linux's powercap: the whole "
                 "packages', other processes' work included); null where unreadable"),
    ScriptFigure("host_power", "host_power", "watts", "host power",
                 "Watts, the host's CPU packages' mean power while the job ran: host_energy over its seconds",
                 sampled=False),
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
