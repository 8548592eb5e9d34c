"""Profiling (``--profile`` / ``enable_profiling``): ``jax_profiling/memory_profile.json`` and
``jax_profiling/timing_profile.json``, one entry per script. Times are seconds, memory MiB (2^20 bytes)."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from jaxrun.results.base_model import SCHEMA_VERSION, MappingModel


class ScriptMemoryProfile(MappingModel):
    """One script's memory over time."""

    interval: Annotated[float, Meta(description="Seconds between host samples (the monitor's period)")]
    host: Annotated[list[tuple[float, float]], Meta(description=(
        "[seconds since the process started, MiB (2^20 bytes)]: the script's process tree, shared "
        "pages once"
    ))] = []
    host_peak_mb: Annotated[float | None, Meta(description="MiB (2^20 bytes), the script's memory_peak")] = None
    device: Annotated[dict[str, list[tuple[float, float]]], Meta(description=(
        "Per device ('gpu:0'): [seconds since the process started, MiB (2^20 bytes) in use] "
        "(memory_stats)"
    ))] = {}
    device_peak_mb: Annotated[dict[str, float | None], Meta(description=(
        "Per device: MiB (2^20 bytes), peak_bytes_in_use at the end (the backend's own peak)"
    ))] = {}
    device_reason: Annotated[str | None, Meta(description=(
        "Why there are no device samples, when there are none"
    ))] = None
    device_memory_profile: Annotated[str | None, Meta(description=(
        "pprof file of the live device buffers at the end (jax.profiler.save_device_memory_profile)"
    ))] = None
    device_memory_profile_reason: str | None = None


class TimelineEvent(MappingModel):
    kind: Literal["body", "import", "trace", "lower", "compile", "cache_load"]
    start: Annotated[float, Meta(description="Seconds since the script body started")]
    end: float
    program: Annotated[str | None, Meta(description="The compiled program (jit(loss), ...) for JIT phases")] = None
    module: Annotated[str | None, Meta(description=(
        "For an import: the module its outermost import statement named (jax.numpy, ...); "
        "several, comma-separated, when threads imported at once or for a block of statements (the first 8)"
    ))] = None
    statements: Annotated[int | None, Meta(description=(
        "For an import that is a block: how many consecutive short import statements (of "
        "modules already loaded, a few microseconds each) it holds; null for one statement"
    ))] = None
    seconds: Annotated[float | None, Meta(description=(
        "For an import block: the seconds its statements took, somewhere between start and "
        "end (the gaps between them are not import time); null for one statement, which took end - start"
    ))] = None


class ScriptTimingProfile(MappingModel):
    """One script's phases and every compile event on one timeline."""

    execution_time: Annotated[float | None, Meta(description="Seconds, whole process")] = None
    body_time: float | None = None
    import_time: float | None = None
    jit_compile_time: float | None = None
    run_time: float | None = None
    events: Annotated[list[TimelineEvent], Meta(description=(
        "The body, each outermost import and JIT phase, in time order"
    ))] = []
    events_dropped: Annotated[int, Meta(description="Events beyond the cap (10,000) that were left out")] = 0
    trace_dir: Annotated[str | None, Meta(description=(
        "The jax.profiler trace folder (open in Perfetto or XProf)"
    ))] = None
    trace_reason: Annotated[str | None, Meta(description="Why there is no trace, when there is none")] = None


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
