"""Why a warm persistent compilation cache compiled a program that an earlier run loaded from it.

JAX's persistent-cache key (jax/_src/cache_key.py, ``get``) hashes the program (its StableHLO,
debug info stripped), the jaxlib version, the backend's platform and platform version, the XLA
flags, the compile options (which hold the device assignment: how many devices, of which kind),
the accelerator's configuration, the compression and a custom hook. The history keeps for each
run the ingredients jaxrun can see (:class:`~jaxrun.models.CompileEnvironment`, and per program
its input fingerprint, device kind and count); :func:`explain_cache_miss` names those that changed
between the run that loaded the program and the run that compiled it. Pure: no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .models import CompileEnvironment, CompileStats

__all__ = ["explain_cache_miss", "flag_changes", "program_change", "compile_time_moved", "NOTHING_SEEN_CHANGED", "SAME_PROGRAM",
           "PROGRAM_CHANGED", "XLA_OUTPUT_CHANGED"]

NOTHING_SEEN_CHANGED = (
    "nothing jaxrun sees changed: the entry was evicted (the cache's size bound) or deleted, or a part of "
    "JAX's key jaxrun does not record changed (compile options, jax config)"
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


def explain_cache_miss(
    program: str,
    now_env: "CompileEnvironment | None",
    now_stats: "CompileStats",
    before_env: "CompileEnvironment | None",
    before_stats: "CompileStats",
) -> str:
    """What changed between a run that loaded ``program`` from the persistent cache (``before_*``)
    and one that compiled it (``now_*``), in the order of JAX's key: jax version, jaxlib version,
    backend and its platform version, XLA flags (each flag added, removed or given another value),
    device kind, device count, the program itself (its input fingerprint), the cache folder. Every
    ingredient that changed is said, joined by "; "; an ingredient unknown on either side is not
    compared. When none changed: :data:`NOTHING_SEEN_CHANGED`."""
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
    if before_input is not None and now_input is not None and before_input != now_input:
        reasons.append("the program changed (its StableHLO differs)")
    if now_env is not None and before_env is not None:
        reason = _changed("the cache folder", before_env.cache_dir, now_env.cache_dir)
        if reason:
            reasons.append(reason)
    return "; ".join(reasons) if reasons else NOTHING_SEEN_CHANGED


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
