"""Profiling (``--profile`` / ``enable_profiling``): ``jax_profiling/memory_profile.json`` and
``jax_profiling/timing_profile.json``, one entry per script. Times are seconds, memory MiB (2^20 bytes)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from jaxrun.results.base_model import SCHEMA_VERSION, MappingModel


class ScriptMemoryProfile(MappingModel):
    """One script's memory over time."""

    interval: float = Field(description="Seconds between host samples (the monitor's period)")
    host: list[tuple[float, float]] = Field(
        [], description="[seconds since the process started, MiB (2^20 bytes)]: the script's process tree, shared "
        "pages once"
    )
    host_peak_mb: float | None = Field(None, description="MiB (2^20 bytes), the script's memory_peak")
    device: dict[str, list[tuple[float, float]]] = Field(
        {}, description="Per device ('gpu:0'): [seconds since the process started, MiB (2^20 bytes) in use] "
        "(memory_stats)"
    )
    device_peak_mb: dict[str, float | None] = Field(
        {}, description="Per device: MiB (2^20 bytes), peak_bytes_in_use at the end (the backend's own peak)"
    )
    device_reason: str | None = Field(None, description="Why there are no device samples, when there are none")
    device_memory_profile: str | None = Field(
        None, description="pprof file of the live device buffers at the end (jax.profiler.save_device_memory_profile)"
    )
    device_memory_profile_reason: str | None = None


class TimelineEvent(MappingModel):
    kind: Literal["body", "import", "trace", "lower", "compile", "cache_load"]
    start: float = Field(description="Seconds since the script body started")
    end: float
    program: str | None = Field(None, description="The compiled program (jit(loss), ...) for JIT phases")
    module: str | None = Field(
        None, description="For an import: the module its outermost import statement named (jax.numpy, ...); "
        "several, comma-separated, when threads imported at once or for a block of statements (the first 8)")
    statements: int | None = Field(
        None, description="For an import that is a block: how many consecutive short import statements (of "
        "modules already loaded, a few microseconds each) it holds; null for one statement")
    seconds: float | None = Field(
        None, description="For an import block: the seconds its statements took, somewhere between start and "
        "end (the gaps between them are not import time); null for one statement, which took end - start")


class ScriptTimingProfile(MappingModel):
    """One script's phases and every compile event on one timeline."""

    execution_time: float | None = Field(None, description="Seconds, whole process")
    body_time: float | None = None
    import_time: float | None = None
    jit_compile_time: float | None = None
    run_time: float | None = None
    events: list[TimelineEvent] = Field([], description="The body, each outermost import and JIT phase, in time order")
    events_dropped: int = Field(0, description="Events beyond the cap (10,000) that were left out")
    trace_dir: str | None = Field(None, description="The jax.profiler trace folder (open in Perfetto or XProf)")
    trace_reason: str | None = Field(None, description="Why there is no trace, when there is none")


class MemoryProfile(MappingModel):
    """``jax_profiling/memory_profile.json``."""

    schema_version: int = SCHEMA_VERSION
    generated_at: str
    scripts: dict[str, ScriptMemoryProfile] = {}


class TimingProfile(MappingModel):
    """``jax_profiling/timing_profile.json``."""

    schema_version: int = SCHEMA_VERSION
    generated_at: str
    scripts: dict[str, ScriptTimingProfile] = {}


class ScriptProfile(MappingModel):
    """What one profiled run produced (carried on ScriptResult.profile, not written there)."""

    memory: ScriptMemoryProfile
    timing: ScriptTimingProfile
