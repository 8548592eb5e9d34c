"""Why a warm persistent compilation cache compiled a program that an earlier run left in it.

JAX's persistent-cache key (jax/_src/cache_key.py, ``get``) hashes the program (its StableHLO,
debug info stripped), the jaxlib version, the backend's platform and platform version, the XLA
flags, the compile options (which hold the device assignment: how many devices, of which kind),
the accelerator's configuration, the compression and a custom hook. JAX's own settings (x64, the
default matmul precision, ...) enter through the program they shape. The history keeps for each
run the ingredients jaxrun can see (:class:`~jaxrun.results.models.CompileEnvironment`, and per program
its input fingerprint, device kind and count); :func:`explain_cache_miss` names those that changed
between an earlier run after which the cache held the program (it loaded it, or compiled it and
so wrote it) and the run that compiled it; :func:`nearest_miss` picks, among several such runs,
the entry closest to the run that missed. Pure: no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence, TypeVar

if TYPE_CHECKING:
    from jaxrun.results.models import CompileEnvironment, CompileStats

__all__ = ["explain_cache_miss", "cache_miss_reasons", "nearest_miss", "flag_changes", "program_change",
           "compile_time_moved", "NOTHING_SEEN_CHANGED", "SAME_PROGRAM", "PROGRAM_CHANGED", "XLA_OUTPUT_CHANGED"]

NOTHING_SEEN_CHANGED = (
    "nothing jaxrun sees changed: the entry was evicted (the cache's size bound) or deleted, or a part of "
    "JAX's key jaxrun does not record changed (compile options, other JAX settings)"
)


def _flag_name(flag: str) -> str:
    return flag.split("=", 1)[0]


def flag_changes(before: list[str], now: list[str]) -> list[str]:
    """``["--a=1 added", "--b removed", "--c=false -> --c=true"]``: how the flag list ``now``
    differs from ``before`` (a flag given a new value is one change, not one added and one removed)."""
    old, new = set(before), set(now)
    added = sorted(new - old)
    removed = sorted(old - new)
    removed_by_name = {_flag_name(f): f for f in removed}
    changes, changed_names = [], set()
    for flag in added:
        name = _flag_name(flag)
        if name in removed_by_name and name not in changed_names:
            changes.append(f"{removed_by_name[name]} -> {flag}")
            changed_names.add(name)
        else:
            changes.append(f"{flag} added")
    changes += [f"{flag} removed" for flag in removed if _flag_name(flag) not in changed_names]
    return changes


def _changed(label: str, before: object, now: object) -> str | None:
    """``"<label> changed: A -> B"`` when both are known and differ (unknown on a side says nothing)."""
    if before is None or now is None or before == now:
        return None
    return f"{label} changed: {before} -> {now}"


def _config_changes(before_env: "CompileEnvironment | None", now_env: "CompileEnvironment | None") -> list[str]:
    """``["jax_enable_x64 False -> True"]``: JAX settings known on both sides that differ."""
    if before_env is None or now_env is None:
        return []
    before, now = before_env.jax_config, now_env.jax_config
    return [f"{name} {before[name]} -> {now[name]}" for name in sorted(set(before) & set(now)) if before[name] != now[name]]


def cache_miss_reasons(
    now_env: "CompileEnvironment | None",
    now_stats: "CompileStats",
    before_env: "CompileEnvironment | None",
    before_stats: "CompileStats",
) -> list[str]:
    """Each ingredient of the key that changed between a run after which the cache held a program
    (``before_*``) and one that compiled it (``now_*``), in this order: jax version, jaxlib version,
    backend and its platform version, XLA flags (each flag added, removed or given another value),
    device kind, device count, the program itself (its input fingerprint, with the JAX settings
    that changed and so changed it), the cache folder. An ingredient unknown on either side is
    not compared."""
    reasons: list[str] = []
    if now_env is not None and before_env is not None:
        for label, field in (("jax version", "jax_version"), ("jaxlib version", "jaxlib_version"),
                             ("backend", "backend"), ("backend's platform version", "platform_version")):
            reason = _changed(label, getattr(before_env, field), getattr(now_env, field))
            if reason:
                reasons.append(reason)
        flags = flag_changes(list(before_env.xla_flags), list(now_env.xla_flags))
        if flags:
            reasons.append("XLA_FLAGS changed: " + ", ".join(flags))
    for label, field in (("device kind", "device_kind"), ("device count", "device_count")):
        reason = _changed(label, getattr(before_stats, field), getattr(now_stats, field))
        if reason:
            reasons.append(reason)
    before_input, now_input = before_stats.input_fingerprint, now_stats.input_fingerprint
    settings = _config_changes(before_env, now_env)
    if before_input is not None and now_input is not None:
        if before_input != now_input:
            # A JAX setting can only change the key through the program: said with it, never alone.
            reasons.append("the program changed (its StableHLO differs)" + (f": {', '.join(settings)}" if settings else ""))
    elif settings:
        reasons.append("JAX settings that shape the program changed: " + ", ".join(settings))
    if now_env is not None and before_env is not None:
        reason = _changed("the cache folder", before_env.cache_dir, now_env.cache_dir)
        if reason:
            reasons.append(reason)
    return reasons


def explain_cache_miss(
    program: str,
    now_env: "CompileEnvironment | None",
    now_stats: "CompileStats",
    before_env: "CompileEnvironment | None",
    before_stats: "CompileStats",
) -> str:
    """What changed between a run after which the persistent cache held ``program`` (``before_*``)
    and one that compiled it (``now_*``): :func:`cache_miss_reasons` joined by "; ", or
    :data:`NOTHING_SEEN_CHANGED` when none changed."""
    return "; ".join(cache_miss_reasons(now_env, now_stats, before_env, before_stats)) or NOTHING_SEEN_CHANGED


class _Earlier(Protocol):
    @property
    def environment(self) -> "CompileEnvironment | None": ...
    @property
    def stats(self) -> "CompileStats": ...
    @property
    def loaded(self) -> bool: ...


E = TypeVar("E", bound=_Earlier)


def nearest_miss(now_env: "CompileEnvironment | None", now_stats: "CompileStats",
                 earlier: Sequence[E]) -> tuple[E, str] | None:
    """Which of the ``earlier`` runs (newest first) left the entry closest to the one a run that
    compiled the program looked for, and what changed since: the run with the fewest changed
    ingredients, the newest of those. A run that loaded it and differs in nothing jaxrun sees
    gives :data:`NOTHING_SEEN_CHANGED` (the entry was evicted or deleted...); one that only
    compiled it and differs in nothing gives None: JAX may never have written that entry (a
    program with host callbacks, one under its thresholds), so nothing can be said."""
    best: tuple[int, E, list[str]] | None = None
    for run in earlier:
        reasons = cache_miss_reasons(now_env, now_stats, run.environment, run.stats)
        if best is None or len(reasons) < best[0]:
            best = (len(reasons), run, reasons)
    if best is None:
        return None
    _, run, reasons = best
    if not reasons and not run.loaded:
        return None
    return run, "; ".join(reasons) or NOTHING_SEEN_CHANGED


SAME_PROGRAM = "same program"
PROGRAM_CHANGED = "the program changed"
XLA_OUTPUT_CHANGED = "XLA's output changed (same input: compiler or flags)"


def program_change(before: "CompileStats", now: "CompileStats") -> str | None:
    """Whether a program of two runs is the same: :data:`SAME_PROGRAM`, :data:`PROGRAM_CHANGED`
    (the StableHLO JAX handed XLA differs), :data:`XLA_OUTPUT_CHANGED` (same input, another
    optimized program: the compiler or its flags); None when a fingerprint it needs is unknown."""
    if before.input_fingerprint is not None and now.input_fingerprint is not None:
        if before.input_fingerprint != now.input_fingerprint:
            return PROGRAM_CHANGED
        if before.fingerprint is not None and now.fingerprint is not None and before.fingerprint != now.fingerprint:
            return XLA_OUTPUT_CHANGED
        return SAME_PROGRAM
    if before.fingerprint is not None and now.fingerprint is not None and before.fingerprint == now.fingerprint:
        return SAME_PROGRAM  # the same optimized program: the same input (or one XLA made the same)
    return None


# A program's compile time "moved" between two runs when it changed by more than both of these.
MOVED_FRACTION = 0.20
MOVED_SECONDS = 0.010


def compile_time_moved(before: float | None, now: float | None) -> bool:
    """Whether a program's compile time moved between two runs: by more than 20% of the earlier
    time and more than 10 ms (unknown on either side: not moved)."""
    if before is None or now is None:
        return False
    change = abs(now - before)
    return change > MOVED_SECONDS and change > MOVED_FRACTION * before
