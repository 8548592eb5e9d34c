"""The view of a parameter sweep (``--param``): per script, one row per point with the parameters'
values as columns and the figures a sweep is run for (time with its CI when benchmarked, compile
time, compilations and persistent-cache loads, memory, FLOPs, and what the script recorded). The
terminal, Markdown and the HTML report (its table and plot) lay out this one view."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional, Sequence

import msgspec

from jaxrun.core.formatting import fmt_count, fmt_kind, listed, plural
from jaxrun.discover.script_labels import relative_path, script_label
from jaxrun.present.view.script_rows import compiles_text
from jaxrun.probe.sweep_point import value_text
from jaxrun.results.figures import FIGURES

if TYPE_CHECKING:
    from jaxrun.results.models import BatchResult, ScriptResult


def _sampled(metric: str, label: str) -> tuple[str, str, str, Optional[str]]:
    """A sampled figure as results/figures.py declares it (its field and kind), under a sweep's label."""
    figure = FIGURES[metric]
    return figure.field, label, figure.kind, metric


# What a reader sees of each point: (key, label, kind, the sampled figure whose CI a benchmark gives).
_FIGURES: tuple[tuple[str, str, str, Optional[str]], ...] = (
    _sampled("wall_time", "time"),
    _sampled("compile_time", "compile"),
    _sampled("memory_peak", "RSS"),
    ("device_memory_peak", "device memory", "mib", None),
    ("flops", "FLOPs", "count", None),
    _sampled("device_energy", "GPU energy"),
    _sampled("host_energy", "host energy"),
)
# Numeric figures a script recorded shown as the table's columns (the first ones recorded); the
# others are in the report's plot, and a note names them.
RECORDED_SHOWN = 4


class SweepColumn(msgspec.Struct, frozen=True):
    key: str  # a parameter's name, a figure's ScriptResult field, or "results.<name>"
    label: str
    kind: str  # "param", or a figure's kind (seconds, mib, count)


class SweepPoint(msgspec.Struct, frozen=True):
    label: str  # the job's label: train.py[batch=64,devices=2]
    name: str  # its script_name (files, compare)
    params: dict[str, Any]  # its parameters (and its device, when the sweep ran on several)
    status: str  # "ok", or the failure class
    values: dict[str, Optional[float]]  # figure key -> value (None: unknown)
    ci: dict[str, tuple[float, float]]  # figure key -> the CI of a benchmarked figure's median
    compiled: Optional[int]  # XLA compilations
    loaded: Optional[int]  # executables loaded from the persistent compilation cache
    started_at: Optional[str] = None
    # Its programs (JAX's input to XLA, the persistent cache's key): the ones it compiled, and
    # the ones it loaded from the cache with how many executables.
    compiled_programs: frozenset[str] = frozenset()
    loaded_programs: tuple[tuple[str, int], ...] = ()

    def text(self, column: SweepColumn) -> str:
        """The cell of ``column``, as every table writes it."""
        if column.kind == "param":
            return value_text(self.params.get(column.key, "-"))
        if column.kind == "status":
            return self.status
        value = self.values.get(column.key)
        if column.key == "compiles":
            return compiles_text(self.compiled, self.loaded)
        shown = fmt_kind(column.kind, value) if column.kind != "count" else fmt_count(value)
        low_high = self.ci.get(column.key)
        if low_high is not None and value is not None:
            shown += f" ({fmt_kind(column.kind, low_high[0])}–{fmt_kind(column.kind, low_high[1])})"
        return shown


class SweepView(msgspec.Struct, frozen=True):
    script: str  # the script's path under the folder searched (train.py)
    params: list[str]  # the swept parameters, in the sweep's order
    columns: list[SweepColumn]
    points: list[SweepPoint]
    notes: list[str] = msgspec.field(default_factory=list)
    more: list[SweepColumn] = msgspec.field(default_factory=list)  # recorded figures past the table's columns

    def numeric(self, param: str) -> bool:
        """Whether every point's ``param`` is a number (it can be a plot's x axis)."""
        return all(as_number(p.params.get(param)) is not None for p in self.points)

    def powers_of_two(self, param: str) -> bool:
        """Whether ``param``'s values are all powers of two, more than two of them (a log2 axis)."""
        values = {as_number(p.params.get(param)) for p in self.points}
        return len(values) > 2 and all(v is not None and v > 0 and math.log2(v).is_integer() for v in values)


def as_number(value: Any) -> Optional[float]:
    """``value`` as a float when it is a finite number (not a boolean), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _flops(result: "ScriptResult") -> Optional[float]:
    """FLOPs of one call of each program the script compiled, summed (None: XLA gave none)."""
    known = [s.cost.flops for s in (result.compiles or {}).values() if s.cost is not None and s.cost.flops is not None]
    return float(sum(known)) if known else None


def _point(result: "ScriptResult", label: str, recorded: Sequence[str], device: Optional[str]) -> SweepPoint:
    values: dict[str, Optional[float]] = {key: getattr(result, key, None) for key, *_ in _FIGURES if key != "flops"}
    values["flops"] = _flops(result)
    ci: dict[str, tuple[float, float]] = {}
    programs = list((result.compiles or {}).values())
    bench = result.benchmark
    for key, _, _, metric in _FIGURES:
        stats = bench.statistics.get(metric) if bench is not None and metric is not None else None
        if stats is not None and stats.ci_low is not None and stats.ci_high is not None:
            ci[key] = (stats.ci_low, stats.ci_high)
    for name in recorded:
        values[f"results.{name}"] = as_number((result.results or {}).get(name))
    return SweepPoint(
        label=label, name=result.script_name,
        params={**(result.params or {}), **({"device": device} if device else {})},
        status="ok" if result.success else str(result.error_class or "failed"), values=values, ci=ci,
        compiled=result.compile_count, loaded=result.cache_hits, started_at=result.started_at,
        compiled_programs=frozenset(c.input_fingerprint for c in programs if c.count and c.input_fingerprint),
        loaded_programs=tuple((c.input_fingerprint, c.cache_hits) for c in programs
                              if c.cache_hits and c.input_fingerprint))


def _recorded(results: Sequence["ScriptResult"]) -> list[str]:
    names: dict[str, None] = {}
    for result in results:
        for name, value in (result.results or {}).items():
            if as_number(value) is not None and name not in (result.params or {}):
                names.setdefault(name)
    return list(names)


def _cache_note(points: list[SweepPoint]) -> Optional[str]:
    """Whether the points shared the persistent compilation cache: the executables a point loaded
    that an earlier point of the sweep had compiled (the same program: points that change only
    what the program computes with, not its shapes or devices), apart from ones cached before."""
    compiled: set[str] = set()
    shared: dict[str, int] = {}  # point name -> executables it loaded that an earlier point compiled
    before = 0
    for point in sorted(points, key=lambda p: p.started_at or ""):
        for program, hits in point.loaded_programs:
            if program in compiled:
                shared[point.name] = shared.get(point.name, 0) + hits
            else:
                before += hits
        compiled |= point.compiled_programs
    if not shared and not before:
        return None
    parts = []
    if shared:
        parts.append(f"the points shared the persistent compilation cache: {len(shared)} of {len(points)} loaded "
                     f"{plural(sum(shared.values()), 'executable')} an earlier point had compiled instead of "
                     "compiling them")
    if before:
        parts.append(f"{plural(before, 'executable')} came from the cache as earlier runs left it")
    return "; ".join(parts)


def sweep_views(batch: "BatchResult") -> list[SweepView]:
    """One view per script that ran as a sweep, in batch order."""
    search = batch.metadata.search_paths if batch.metadata is not None else []
    from jaxrun.results.held_results import having

    by_script: dict[str, list["ScriptResult"]] = {}
    for _, result in having(batch.script_results, "params"):  # the others are never read again
        by_script.setdefault(result.script_path, []).append(result)
    views = []
    for path, results in by_script.items():
        params = list(dict.fromkeys(name for r in results for name in (r.params or {})))
        recorded = _recorded(results)
        several = len({r.script_name for r in results}) < len(results)  # each point on several devices
        points = [_point(r, script_label(path, search, r.device_requested if several else None, r.params), recorded,
                         r.device_requested if several else None) for r in results]
        columns = [SweepColumn(name, name, "param") for name in params]
        if several:
            columns.append(SweepColumn("device", "device", "param"))
        columns.append(SweepColumn("status", "status", "status"))
        for key, label, kind, _ in _FIGURES:
            if any(p.values.get(key) is not None for p in points):
                columns.append(SweepColumn(key, label, kind))
            if key == "jit_compile_time":
                columns.append(SweepColumn("compiles", "compiles", "count"))
        figures = [SweepColumn(f"results.{name}", name, "count") for name in recorded]
        columns += figures[:RECORDED_SHOWN]
        more = figures[RECORDED_SHOWN:]
        note = _cache_note(points)
        notes = [note] if note else []
        if more:
            notes.append(f"recorded figures in the report's plot and each result's results, not in this table: "
                         f"{listed([c.label for c in more], 5)}")
        views.append(SweepView(script=relative_path(path, search), params=params, columns=columns, points=points,
                               notes=notes, more=more))
    return views
