"""The probe's compile events -> per-program statistics, totals, and the recompilation warning.

A program is what :mod:`jaxrun.probe.programs` names (``jit(loss)``, ``jit(grad(loss))``,
``pmap(step)``). An executable loaded from the persistent compilation cache is a cache hit with
its load time, not a compilation. A program traced more than once carries JAX's reason for each
retrace, and the run's warnings summarise them ("jit(f) compiled 40 times: argument x took 40
different values: f32[1] -> f32[2] -> f32[3] -> ... -> f32[39] -> f32[40]").
"""

from __future__ import annotations

import re
from typing import Any

from jaxrun.core.formatting import listed, plural
from jaxrun.probe import events as ev
from jaxrun.probe.programs import program_key
from jaxrun.results.models import (
    MAX_RECOMPILE_REASONS,
    CompileStats,
    ProgramCost,
    ProgramMemory,
)

NO_EXPLANATION = "JAX gave no explanation"
_CHANGE = re.compile(r"^argument (?P<arg>.+?) changed (?P<old>.+?) -> (?P<new>.+?)(?P<why> \(.+\))?$")
_SHOWN = 3


def add_event(compiles: dict[str, CompileStats], event: ev.Compile) -> None:
    """Fold one COMPILE event (probe/events.py) into the per-program statistics."""
    source = str(event["source"]) if event.get("source") else None
    seen = {key: stats.source for key, stats in compiles.items()}
    stats = compiles.setdefault(program_key(str(event.get("fun")), source, seen), CompileStats(source=source))
    seconds = float(event.get("s") or 0.0)
    phase = event.get("phase")
    if phase == ev.PHASE_TRACE:
        stats.trace_time += seconds
        stats.traces += 1
        if stats.traces > 1 and len(stats.recompile_reasons) < MAX_RECOMPILE_REASONS:
            stats.recompile_reasons.append(str(event.get("reason") or NO_EXPLANATION))
    elif phase == ev.PHASE_LOWER:
        stats.lower_time += seconds
    elif phase == ev.PHASE_COMPILE:
        if event.get("cached"):
            stats.cache_hits += 1
            stats.cache_load_time += seconds
        else:
            stats.count += 1
            stats.compile_time += seconds


# A PROGRAM event's facts that are CompileStats fields of the same name, taken as the probe sent
# them (a fact the probe adds under a CompileStats field's name needs nothing here); the others
# are folded above and below.
_AS_SENT: tuple[str, ...] = tuple(sorted(
    set(ev.Program.__annotations__) & set(CompileStats.model_fields) - {"source", "cost", "memory"}))


def add_program(compiles: dict[str, CompileStats], event: ev.Program, inputs: dict[str, set[str]]) -> None:
    """Fold one PROGRAM event (what XLA knows about the executable just built) into its program:
    the figures are the last executable's; ``inputs`` collects each program's input fingerprints
    (its ``variants``)."""
    source = str(event["source"]) if event.get("source") else None
    seen = {key: stats.source for key, stats in compiles.items()}
    key = program_key(str(event.get("fun")), source, seen)
    stats = compiles.setdefault(key, CompileStats(source=source))
    stats.analysis_time += float(event.get("s") or 0.0)
    cost = event.get("cost")
    stats.cost = ProgramCost.model_validate(cost) if isinstance(cost, dict) else None
    memory = event.get("memory")
    stats.memory = ProgramMemory.model_validate(memory) if isinstance(memory, dict) else None
    for name in _AS_SENT:  # the last executable's, null when this one's is unknown
        setattr(stats, name, event.get(name))
    if stats.input_fingerprint is not None:
        inputs.setdefault(key, set()).add(stats.input_fingerprint)
    stats.variants = len(inputs.get(key, ())) or stats.variants + 1
    stats.analysis_reason = event.get("reason")


def totals(
    jax_loaded: bool, compiles: dict[str, CompileStats], cache: dict[str, Any] | None
) -> tuple[float | None, int | None, int | None, int | None]:
    """``(jit_compile_time, compile_count, cache_hits, cache_misses)``: null without jax; the cache
    figures null when the persistent cache was off (or its state unknown)."""
    if not jax_loaded:
        return None, None, None, None
    # Loading an executable from the persistent cache is this run's compile phase for it.
    seconds = sum(s.trace_time + s.lower_time + s.compile_time + s.cache_load_time for s in compiles.values())
    count = sum(s.count for s in compiles.values())
    if not cache or not cache.get("enabled"):
        return seconds, count, None, None
    hits = sum(s.cache_hits for s in compiles.values())
    misses = cache.get("misses")
    return seconds, count, hits, int(misses) if misses is not None else None


def _grouped(reasons: list[str]) -> list[str]:
    """Changes of one argument said once, with every value it took in order: JAX compares each
    miss with the *closest* earlier key, so consecutive reasons need not chain."""
    groups: dict[tuple[str, str], list[str]] = {}
    out: list[str | tuple[str, str]] = []
    for reason in reasons:
        changes = reason.split("; argument ")
        m = _CHANGE.match(reason) if len(changes) == 1 else None
        if len(changes) > 1:  # several arguments changed at once: say how many, show the first
            out.append(f"{len(changes)} arguments changed at once, e.g. {changes[0]}")
            continue
        if not m:
            out.append(reason)
            continue
        key = (m["arg"], m["why"] or "")
        if key not in groups:
            groups[key] = [m["old"]]
            out.append(key)
        values = groups[key]
        if m["new"] not in values:
            values.append(m["new"])
    text = []
    for item in dict.fromkeys(out):
        if isinstance(item, str):
            text.append(item)
            continue
        values = groups[item]
        took = f"took {len(values)} different values" if len(values) > 2 else "changed"
        text.append(f"argument {item[0]} {took}: {listed(values, 5, ' -> ', last=2)}{item[1]}")
    return text


def recompile_warnings(compiles: dict[str, CompileStats]) -> list[str]:
    """One warning per program of the script's own built more than once, with JAX's reasons."""
    warnings = []
    built = {key: s.count + s.cache_hits for key, s in compiles.items()}
    for key, stats in sorted(compiles.items(), key=lambda item: -built[item[0]]):
        # JAX's own programs (jnp.ones on a new shape, ...) compile per shape by design.
        if built[key] < 2 or not stats.recompile_reasons or stats.source is None:
            continue
        parts = _grouped(stats.recompile_reasons)
        # An executable loaded from the cache was not compiled: "compiled 3 times (3 loaded)" said both.
        what = (f"needed {built[key]} executables ({stats.count} compiled, {stats.cache_hits} loaded from the "
                f"persistent cache)" if stats.cache_hits else f"compiled {plural(built[key], 'time')}")
        warnings.append(f"{key} {what}: {listed(parts, _SHOWN, '; ', what='other reasons')}")
    return warnings
