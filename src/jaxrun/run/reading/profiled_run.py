"""A profiled run (``--profile``) -> its memory profile, its timeline, and the executor API's
``performance_metrics``.

One clock: ``time.perf_counter`` is the system's monotonic clock on Linux, the same in the parent
(host memory samples, launch start) and the child (body start, imports, JIT phases, device
samples), so memory is placed in seconds since launch and the timeline in seconds since the body
started.
"""

from __future__ import annotations

from typing import Any

from jaxrun.core.defaults import MONITOR_INTERVAL, MiB
from jaxrun.results.models import (
    ScriptMemoryProfile,
    ScriptProfile,
    ScriptResult,
    ScriptTimingProfile,
    TimelineEvent,
)
from jaxrun.run.process.process_watch import ProcessOutcome
from jaxrun.run.reading.probe_reading import ProbeReading

MAX_EVENTS = 10_000


def _memory(outcome: ProcessOutcome, reading: ProbeReading, result: ScriptResult) -> ScriptMemoryProfile:
    t0 = outcome.started
    host = [(round(t - t0, 4), round(b / MiB, 3)) for t, b in outcome.memory_series or ()]
    profile = reading.profile or {}
    device = {
        name: [(round(float(t) - t0, 4), round(float(mb), 3)) for t, mb in samples]
        for name, samples in (profile.get("device_samples") or {}).items()
    }
    peaks: dict[str, float | None] = {}
    facts = reading.device or {}
    if facts.get("initialized"):
        platform = facts.get("platform") or "device"
        for i, peak in enumerate(facts.get("peak_bytes_per_device") or []):
            peaks[f"{platform}:{i}"] = None if peak is None else peak / MiB
    reason = None
    if not device:
        if not reading.jax_loaded:
            reason = "the script did not import jax"
        elif not facts.get("initialized"):
            reason = "the script imported jax but never used a device"
        else:
            reason = f"the {facts.get('backend')} backend does not report memory statistics (memory_stats)"
    return ScriptMemoryProfile(
        interval=MONITOR_INTERVAL, host=host, host_peak_mb=result.memory_peak, device=device,
        device_peak_mb=peaks, device_reason=reason,
        device_memory_profile=profile.get("memory_profile"),
        device_memory_profile_reason=profile.get("memory_profile_reason") if profile else
        "the probe did not finish (the script was stopped or crashed)",
    )


def _timing(reading: ProbeReading, result: ScriptResult) -> ScriptTimingProfile:
    profile = reading.profile or {}
    events: list[TimelineEvent] = []
    start = reading.body_start
    if start is not None:
        if reading.body_time is not None:
            events.append(TimelineEvent(kind="body", start=0.0, end=reading.body_time))
        events += [TimelineEvent(kind="import", start=a - start, end=b - start, module=module,
                                 **({"statements": statements, "seconds": seconds} if statements > 1 else {}))
                   for a, b, module, statements, seconds in reading.imports]
        events += [TimelineEvent(kind=kind, start=a - start, end=b - start, program=program)  # type: ignore[arg-type]
                   for kind, a, b, program in reading.jit_phases]
    events.sort(key=lambda e: (e.start, -e.end))
    dropped = max(0, len(events) - MAX_EVENTS)
    return ScriptTimingProfile(
        execution_time=result.execution_time, body_time=result.body_time, import_time=result.import_time,
        jit_compile_time=result.jit_compile_time, run_time=result.run_time, events=events[:MAX_EVENTS],
        events_dropped=dropped, trace_dir=profile.get("trace_dir"),
        trace_reason=profile.get("trace_reason") if profile else "the probe did not finish (the script was stopped or crashed)",
    )


def script_profile(outcome: ProcessOutcome, reading: ProbeReading, result: ScriptResult) -> ScriptProfile:
    return ScriptProfile(memory=_memory(outcome, reading, result), timing=_timing(reading, result))


def profile_metrics(result: ScriptResult, profile: ScriptProfile, files: dict[str, str]) -> dict[str, Any]:
    """The executor API's ``performance_metrics``: the run's figures and where its profiles are."""
    return {
        "execution_time": result.execution_time,
        "body_time": result.body_time,
        "import_time": result.import_time,
        "jit_compile_time": result.jit_compile_time,
        "run_time": result.run_time,
        "cpu_time": result.cpu_time,
        "memory_peak": result.memory_peak,
        "device_memory_peak": result.device_memory_peak,
        "device_utilization": result.device_utilization,
        "compile_count": result.compile_count,
        "host_memory_samples": len(profile.memory.host),
        "trace_dir": profile.timing.trace_dir,
        "device_memory_profile": profile.memory.device_memory_profile,
        **files,
    }
