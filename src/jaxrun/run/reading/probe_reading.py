"""What the probe's event file says (a :class:`ProbeReading`: its events read into one object),
and with what the parent measured, the result fields made of it."""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from jaxrun.core.defaults import MONITOR_INTERVAL, MiB
from jaxrun.probe import events as ev
from jaxrun.results.models import CellTiming, CompileStats, WarmCall
from jaxrun.run.process.process_watch import ProcessOutcome
from jaxrun.run.reading.compiles import add_event, add_program


class ProbeReading(msgspec.Struct):
    """What the probe's event file says: every event of one process, read (:func:`read_probe_events`)."""

    jax_loaded: bool = False
    body_time: float | None = None
    import_time: float | None = None
    compile_wall_time: float = 0.0  # wall seconds of JIT work outside imports (nesting counted once)
    run_time: float | None = None  # the rest of the body (probe/phases.py: the three partition it)
    drain_time: float | None = None  # waited after the last line for the script's device work
    ended_by: str | None = None  # how the body ended (END event); None: stopped from outside
    phases_notes: list[str] = msgspec.field(default_factory=list)
    cpu_time: float | None = None
    peak_rss_bytes: int | None = None  # the probe process's own peak RSS (VmHWM)
    device: dict[str, Any] | None = None
    compiles: dict[str, CompileStats] = msgspec.field(default_factory=dict)  # per program
    input_fingerprints: dict[str, set[str]] = msgspec.field(default_factory=dict)  # per program: its variants
    compile_environment: dict[str, Any] | None = None  # what JAX's cache key took from the process
    compile_cache: dict[str, Any] | None = None  # {enabled, misses}: the persistent cache at the end
    # JAX stores a cached program's compile time in whole seconds, so its "saved" figure is
    # (floor of the original compile time) - (retrieval time): a lower bound, negative for
    # sub-second compilations. Negative values count as 0.
    compile_time_saved: float = 0.0
    results: dict[str, Any] = msgspec.field(default_factory=dict)
    calls: list[WarmCall] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)
    traceback: str | None = None  # of the last exception the probe captured
    # For profiles: perf_counter of the body's start, the outermost imports, each JIT phase
    # (kind, start, end, program), and the probe's PROFILE event.
    body_start: float | None = None
    # (start, end, module, statements, seconds): statements > 1 for a block of short ones, whose
    # seconds are less than end - start
    imports: list[tuple[float, float, str | None, int, float]] = msgspec.field(default_factory=list)
    jit_phases: list[tuple[str, float, float, str]] = msgspec.field(default_factory=list)
    profile: dict[str, Any] | None = None
    transfer_guard_set: str | None = None  # the script set JAX's transfer guard itself: how
    cells: dict[int, CellTiming] | None = None  # a notebook's code cells, by number (CELL events)
    cell_starts: dict[int, float] = msgspec.field(default_factory=dict)  # perf_counter at each cell's start


def _compile(reading: ProbeReading, event: ev.Compile) -> None:
    add_event(reading.compiles, event)
    at, seconds = float(event["at"]), float(event.get("s") or 0.0)
    phase = "cache_load" if event.get("cached") else str(event["phase"])
    reading.jit_phases.append((phase, at - seconds, at, str(event["fun"])))


def _body(reading: ProbeReading, event: ev.Body) -> None:
    if reading.body_start is None:
        reading.body_start = event["at"]


def _record(reading: ProbeReading, event: ev.Record) -> None:
    if isinstance(event.get("values"), dict):
        reading.results.update(event["values"])


def _call(reading: ProbeReading, event: ev.Call) -> None:
    live = event.get("live_array_bytes")
    reading.calls.append(WarmCall(index=int(event["index"]), seconds=float(event["seconds"]),
                                 compile_time=float(event["compile_time"]),
                                 live_array_bytes=int(live) if live is not None else None))


def _notebook(reading: ProbeReading, event: ev.Notebook) -> None:
    """Every code cell, "not run" until a CELL event starts it."""
    reading.cells = {index: CellTiming(index=index, source=str(source), outcome="not run")
                    for index, source in enumerate(event["cells"], 1)}


def _cell(reading: ProbeReading, event: ev.Cell) -> None:
    """A cell's start (its first line) or its end (seconds, outcome): one CellTiming a cell."""
    cells = reading.cells = reading.cells if reading.cells is not None else {}
    index = int(event["index"])
    cell = cells.get(index)
    if cell is None or cell.outcome == "not run":  # its start
        cell = CellTiming(index=index, source=str(event.get("source", cell.source if cell else "")),
                          outcome="not finished")
    reading.cell_starts.setdefault(index, float(event["at"]))
    if "s" in event:
        outputs = event.get("outputs")
        cell = cell.model_copy(update={
            "seconds": float(event["s"]), "outcome": str(event.get("outcome", "ok")),
            "error_line": event.get("error_line"),
            "outputs": [(str(name), str(text)) for name, text in outputs] if outputs is not None else None})
    cells[index] = cell


def _end(reading: ProbeReading, event: ev.End) -> None:
    reading.body_start = event["body_start"]
    reading.body_time = event["body_time"]
    reading.import_time = event["import_time"]
    reading.compile_wall_time = float(event["compile_wall_time"])
    reading.run_time = event["run_time"]
    reading.drain_time = event["drain_time"]
    reading.ended_by = event["ended_by"]
    reading.phases_notes = [str(note) for note in event["phases_notes"]]
    reading.cpu_time = event["cpu_time"]
    kb = event["peak_rss_kb"]
    reading.peak_rss_bytes = None if kb is None else int(kb) * 1024
    reading.device = event["device"]
    reading.compile_cache = event["compile_cache"]
    reading.compile_environment = event.get("compile_environment")
    reading.imports = [_import_block(item) for item in event.get("imports") or ()]


# What each event adds to the reading (their fields: probe/events.py). START, EXIT and the
# exception's type are the classifier's (run/reading/classify.py) and the process watcher's (run/process/process_watch.py).
_READERS: dict[str, Callable[[ProbeReading, Any], None]] = {
    ev.JAX_LOADED: lambda reading, event: setattr(reading, "jax_loaded", True),
    ev.COMPILE: _compile,
    ev.PROGRAM: lambda reading, event: add_program(reading.compiles, event, reading.input_fingerprints),
    ev.BODY: _body,
    ev.PROFILE: lambda reading, event: setattr(reading, "profile", event),
    ev.CACHE_SAVED: lambda reading, event: setattr(
        reading, "compile_time_saved", reading.compile_time_saved + max(0.0, float(event["s"]))),
    ev.RECORD: _record,
    ev.CALL: _call,
    ev.EXCEPTION: lambda reading, event: setattr(reading, "traceback", event["traceback"]),
    ev.PROBE_WARNING: lambda reading, event: reading.warnings.append(str(event["message"])),
    ev.END: _end,
    ev.TRANSFER_GUARD: lambda reading, event: setattr(reading, "transfer_guard_set", str(event["setting"])),
    ev.CELL: _cell,
    ev.NOTEBOOK: _notebook,
}


def read_probe_events(events: list[ev.Event]) -> ProbeReading:
    """The probe's events, folded into one reading. A line that does not match its definition
    (an older probe, a damaged file) is skipped, never a crash: the figures it held are unknown."""
    reading = ProbeReading()
    for event in events:
        reader = _READERS.get(str(event.get(ev.TYPE)))
        if reader is None:
            continue
        try:
            reader(reading, event)
        except (KeyError, TypeError, ValueError):
            reading.warnings.append(f"jaxrun could not read a {event.get(ev.TYPE)} event of the probe: {ev.problems(event) or 'bad values'}")  # type: ignore[arg-type]
    return reading


MEMORY_METHOD = (
    "max of the script process's own peak RSS (VmHWM, read by the probe at the end) and samples of "
    "its RSS + the USS of every descendant (children, and processes that left the tree) every "
    f"{MONITOR_INTERVAL:g} s"
)


def memory_peak_mb(outcome: ProcessOutcome, reading: ProbeReading) -> float | None:
    """Peak host memory of the script's processes, shared pages counted once (:data:`MEMORY_METHOD`)."""
    # Not outcome.maxrss_bytes: the kernel's ru_maxrss survives fork+exec, so it would report the
    # parent's own peak (a jaxrun holding 800 MiB would make every script "use" 800 MiB).
    candidates = [outcome.sampled_peak_rss_bytes or None, reading.peak_rss_bytes]
    known = [c for c in candidates if c]
    return max(known) / MiB if known else None


def device_memory(reading: ProbeReading) -> tuple[float | None, str | None]:
    """Peak device memory over the devices the script used, or why it is unknown."""
    if not reading.jax_loaded:
        return None, "the script did not import jax"
    device = reading.device
    if device is None:
        return None, "the script ended before the probe could read device memory"
    if not device.get("initialized"):
        return None, "the script imported jax but never used a device"
    peaks = [p for p in device.get("peak_bytes_per_device") or [] if p is not None]
    if not peaks:
        return None, f"the {device.get('backend')} backend does not report memory statistics"
    return max(peaks) / MiB, None


def phases(reading: ProbeReading, outcome: ProcessOutcome | None) -> tuple[float | None, float | None, float | None, str | None]:
    """``(body_time, import_time, run_time, phases_note)``. The probe measures the partition
    (probe/phases.py); a process stopped from outside before its END event (a timeout, a kill)
    has its body measured here, from its BODY event to the process's end, its split unknown."""
    notes = list(reading.phases_notes)
    if reading.body_time is not None:
        run = reading.run_time
        if run is None and reading.import_time is not None:  # an END event of an older probe
            run = reading.body_time - reading.import_time - reading.compile_wall_time
        return reading.body_time, reading.import_time, run, "; ".join(notes) or None
    if reading.body_start is None or outcome is None:
        return None, None, None, None
    ended = outcome.started + outcome.wall_time
    how = "stopped at the time limit" if outcome.timed_out else (
        f"killed by signal {outcome.signal}" if outcome.signal is not None else "ended without reporting")
    note = (f"the process was {how} before the probe could report its phases: body_time measured by "
            "jaxrun up to the process's end; import and run time unknown")
    return max(0.0, ended - float(reading.body_start)), None, None, note


def cell_timings(reading: ProbeReading, outcome: ProcessOutcome | None) -> list[CellTiming] | None:
    """A notebook's cells as they ran. A cell the process was stopped in from outside (a
    timeout, a kill: no end of its own) ran from its start to the process's end, as the body
    is measured then (:func:`phases`); null only when that end is unknown."""
    if reading.cells is None:
        return None
    ended = outcome.started + outcome.wall_time if outcome is not None else None
    cells = []
    for index, cell in reading.cells.items():
        start = reading.cell_starts.get(index)
        if cell.seconds is None and ended is not None and start is not None:
            cell = cell.model_copy(update={"seconds": max(0.0, ended - start)})
        cells.append(cell)
    return cells


def live_array_bytes(reading: ProbeReading) -> int | None:
    """Bytes of the jax.Arrays alive when the body ended; None without JAX or when the probe could
    not read them (the body did not end in the probe's hands)."""
    if not reading.jax_loaded or not isinstance(reading.device, dict):
        return None
    live = reading.device.get("live_array_bytes")
    if live is None and reading.device.get("initialized") is False:
        return 0  # no backend was started: no array existed
    return int(live) if isinstance(live, (int, float)) else None


def _import_block(item: list[Any]) -> tuple[float, float, str | None, int, float]:
    """``[start, end, module]`` (one import statement), or a block ``[..., statements, seconds]``."""
    start, end, *rest = item
    module = str(rest[0]) if rest and rest[0] is not None else None
    if len(rest) >= 3:
        return float(start), float(end), module, int(rest[1]), float(rest[2])
    return float(start), float(end), module, 1, float(end) - float(start)
