"""Will a compiled program fit? XLA's memory analysis of the program against what its device can
still give: a program that will not fit is said before the out-of-memory, not after it.

Layer 0, and it runs inside the script's process: the standard library only at import; jax is
never imported here (the caller hands over the compiled stats and the device). Used by the
probe's compile hook (a warning as a program compiles), by ``jaxrun.bench.fits`` (the same
question in-process, without running the function) and by the parent (run/reading/result.py), which
adds the warnings to an out-of-memory failure's hint (:func:`with_fit_evidence`).

What a device can give:

* GPU / TPU: ``device.memory_stats()``'s ``bytes_limit`` minus ``bytes_in_use`` (JAX's allocator;
  memory other processes hold on the same GPU is not in it).
* CPU (``memory_stats()`` is None): the host memory this process may still take, the tightest of
  its cgroup's memory limit (v2 ``memory.max`` / ``memory.current``, v1 ``memory.limit_in_bytes``
  / ``memory.usage_in_bytes``, the group and each ancestor; reclaimable page cache, the
  ``inactive_file`` of ``memory.stat``, counted as free), jaxrun's sampled ``--memory-limit``
  (:data:`MEMORY_LIMIT_ENV`, against this process's RSS) and ``/proc/meminfo``'s MemAvailable.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

__all__ = [
    "FIT_MARKER", "MEMORY_LIMIT_ENV", "MEMORY_FIELDS", "Available", "memory_of", "available", "host_available",
    "fit_warning", "device_label", "fit_evidence", "with_fit_evidence",
]

# Every fit warning contains it: the parent finds them among a result's warnings by it.
FIT_MARKER = "will likely run out of memory"
# jaxrun's --memory-limit in bytes (run/process/environment.py: child_env), set whether or not a cgroup holds it.
MEMORY_LIMIT_ENV = "JAXRUN_MEMORY_LIMIT_BYTES"

# models.results.ProgramMemory's fields <- CompiledMemoryStats's attributes.
MEMORY_FIELDS: dict[str, str] = {
    "argument_bytes": "argument_size_in_bytes",
    "output_bytes": "output_size_in_bytes",
    "alias_bytes": "alias_size_in_bytes",
    "temp_bytes": "temp_size_in_bytes",
    "generated_code_bytes": "generated_code_size_in_bytes",
}
# A v1 cgroup without a limit reads 2^63 rounded down to a page; anything this large is no limit.
_NO_LIMIT = 2**62


class Available(NamedTuple):
    """What a device can still give a program, and where the figures come from."""

    limit_bytes: int  # the most the program's device (or this process, on CPU) may hold
    in_use_bytes: int  # held now (JAX's allocator on an accelerator; on CPU the group's or the process's)
    free_bytes: int  # limit - in use (never below 0)
    source: str  # where the figures come from, e.g. "bytes_limit of memory_stats()", "cgroup v2 memory.max"


def memory_of(stats: Any) -> dict[str, int] | None:
    """The fields of ``models.results.ProgramMemory`` (a plain dict) from a ``CompiledMemoryStats``
    (``compiled.memory_analysis()``, or the executable's ``get_compiled_memory_stats()``); None
    when the backend gives none (None, or a figure missing or negative)."""
    if stats is None:
        return None
    out: dict[str, int] = {}
    for key, attr in MEMORY_FIELDS.items():
        value = getattr(stats, attr, None)
        if not isinstance(value, int) or value < 0:
            return None
        out[key] = value
    out["total_bytes"] = (out["argument_bytes"] + out["output_bytes"] - out["alias_bytes"] + out["temp_bytes"]
                          + out["generated_code_bytes"])
    return out


def _of(limit: int, in_use: int, source: str) -> Available:
    return Available(limit, in_use, max(0, limit - in_use), source)


def available(device: Any, needed: int | None = None) -> Available | None:
    """What ``device`` (a ``jax.Device``) can still give; None when nothing says (an accelerator
    whose ``memory_stats()`` has no ``bytes_limit``). ``needed``: the bytes the caller will hold
    against it, which spares reading a cgroup's reclaimable page cache where it fits without it
    (``memory.stat`` costs ~0.1 ms)."""
    try:
        stats = device.memory_stats()
    except Exception:  # a backend that does not implement it
        stats = None
    if isinstance(stats, dict) and isinstance(stats.get("bytes_limit"), int):
        return _of(int(stats["bytes_limit"]), int(stats.get("bytes_in_use") or 0), "bytes_limit of memory_stats()")
    if getattr(device, "platform", None) == "cpu":
        return host_available(needed=needed)
    return None


def host_available(proc: str = "/proc", cgroup_root: str = "/sys/fs/cgroup",
                   environ: Any = None, needed: int | None = None) -> Available | None:
    """The host memory this process may still take: the tightest of its cgroups' limits, jaxrun's
    sampled ``--memory-limit`` and MemAvailable; None when none can be read. ``proc`` and
    ``cgroup_root`` are parameters for tests over recorded files."""
    env = os.environ if environ is None else environ
    found: list[Available] = list(_cgroup_limits(proc, cgroup_root, needed))
    rss = _rss(proc)
    limit = env.get(MEMORY_LIMIT_ENV, "")
    if limit.isdigit() and rss is not None:
        found.append(_of(int(limit), rss, "--memory-limit"))
    mem_available = _meminfo(proc, "MemAvailable")
    if mem_available is not None and rss is not None:
        found.append(Available(mem_available + rss, rss, mem_available, "MemAvailable of /proc/meminfo"))
    return min(found, key=lambda a: a.free_bytes) if found else None


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as file:
            return file.read()
    except (OSError, ValueError):
        return None


def _int(path: str) -> int | None:
    text = _read(path)
    return int(text) if text is not None and text.strip().isdigit() else None


def _stat(path: str, key: str) -> int:
    for line in (_read(path) or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def _rss(proc: str) -> int | None:
    text = _read(f"{proc}/self/statm")
    try:
        return int(text.split()[1]) * os.sysconf("SC_PAGE_SIZE") if text else None
    except (IndexError, ValueError, OSError):
        return None


def _meminfo(proc: str, key: str) -> int | None:
    for line in (_read(f"{proc}/meminfo") or "").splitlines():
        name, _, value = line.partition(":")
        if name == key:
            parts = value.split()
            return int(parts[0]) * 1024 if parts and parts[0].isdigit() else None
    return None


# /proc/self/cgroup's text -> the groups of it that have a memory limit: (folder, limit, usage
# file, reclaimable key of memory.stat, source). A process's groups and their limits are set before
# its script runs; only the usage is read again at each call.
_limited: dict[tuple[str, str], list[tuple[str, int, str, str, str]]] = {}


def _limited_groups(text: str, cgroup_root: str) -> list[tuple[str, int, str, str, str]]:
    found: list[tuple[str, int, str, str, str]] = []
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2) if line.count(":") >= 2 else ("", "-", "")
        if controllers == "":  # v2: one unified hierarchy
            mounts = [cgroup_root, os.path.join(cgroup_root, "unified")]
            files, version = ("memory.max", "memory.current", "inactive_file"), "v2"
        elif "memory" in controllers.split(","):
            mounts = [os.path.join(cgroup_root, "memory")]
            files, version = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"), "v1"
        else:
            continue
        for mount in mounts:
            folder = os.path.normpath(mount + "/" + path.strip().lstrip("/"))
            if not os.path.exists(os.path.join(folder, files[1])):
                # A cgroup namespace shows its own group as the mount's root.
                folder = mount
                if not os.path.exists(os.path.join(folder, files[1])):
                    continue
            while folder.startswith(mount):
                limit = _int(os.path.join(folder, files[0]))
                if limit is not None and limit < _NO_LIMIT:
                    found.append((folder, limit, files[1], files[2], f"cgroup {version} {files[0]} of {folder}"))
                if folder == mount:
                    break
                folder = os.path.dirname(folder)
            break
    return found


def _cgroup_limits(proc: str, cgroup_root: str, needed: int | None = None) -> list[Available]:
    """Each memory limit of this process's cgroup and its ancestors (the tightest one binds); the
    reclaimable page cache counts as free where ``needed`` would not fit without it."""
    text = _read(f"{proc}/self/cgroup") or ""
    key = (text, cgroup_root)
    if key not in _limited:
        _limited[key] = _limited_groups(text, cgroup_root)
    found: list[Available] = []
    for folder, limit, usage_file, reclaimable, source in _limited[key]:
        usage = _int(os.path.join(folder, usage_file))
        if usage is not None:
            if needed is None or limit - usage < needed:
                usage -= min(usage, _stat(os.path.join(folder, "memory.stat"), reclaimable))
            found.append(_of(limit, usage, source))
    return found


def _fmt(value: int) -> str:
    from jaxrun.core.formatting import fmt_bytes

    return fmt_bytes(value)


def fit_warning(program: str, memory: dict[str, int] | None, device_label: str, avail: Available | None) -> str | None:
    """A warning when ``program`` (its :func:`memory_of`) cannot fit in what ``avail`` says its
    device can give: what it allocates besides its inputs (assumed already resident) is more than
    the free memory, or all it needs, inputs included, is more than the limit. None when it fits
    or when either side is unknown. Starts with ``program`` and contains :data:`FIT_MARKER`."""
    if memory is None or avail is None:
        return None
    beyond = memory["total_bytes"] - memory["argument_bytes"]
    over_free = beyond > avail.free_bytes
    if not over_free and memory["total_bytes"] <= avail.limit_bytes:
        return None
    parts = ", ".join(f"{name} {_fmt(memory[key])}" for name, key in
                      (("temporaries", "temp_bytes"), ("outputs", "output_bytes"), ("code", "generated_code_bytes"))
                      if memory.get(key))
    if memory.get("alias_bytes"):
        parts += f"{', ' if parts else ''}less {_fmt(memory['alias_bytes'])} of donated inputs reused"
    has = (f"{_fmt(avail.free_bytes)} free ({avail.source}: {_fmt(avail.limit_bytes)} - "
           f"{_fmt(avail.in_use_bytes)} in use)")
    if over_free:
        return (f"{program} needs {_fmt(beyond)} on {device_label} ({parts}{'; ' if parts else ''}beyond its "
                f"{_fmt(memory['argument_bytes'])} of inputs) but the device has {has}: it {FIT_MARKER}")
    return (f"{program} needs {_fmt(memory['total_bytes'])} on {device_label} with its "
            f"{_fmt(memory['argument_bytes'])} of inputs ({parts}) but the device has {has}: it {FIT_MARKER}")


def device_label(device: Any) -> str:
    """``cuda:0``, ``cpu:0``: a device as the fit warnings name it."""
    return f"{getattr(device, 'platform', '?')}:{getattr(device, 'id', '?')}"


def fit_evidence(warnings: list[str] | tuple[str, ...]) -> list[str]:
    """The fit warnings among a result's warnings."""
    return [w for w in warnings if FIT_MARKER in w]


def with_fit_evidence(hint: str | None, warnings: list[str] | tuple[str, ...]) -> str | None:
    """An out-of-memory failure's hint with the fit warnings jaxrun raised as the programs compiled."""
    evidence = fit_evidence(warnings)
    if not evidence:
        return hint
    from jaxrun.core.failures import as_sentences

    return as_sentences("jaxrun warned at compile time: " + "; ".join(evidence), hint)
