"""What this machine has: its RAM, and the memory a run may use under this process's cgroup."""

from __future__ import annotations

from pathlib import Path

from jaxrun.core.defaults import MiB


def host_memory_bytes() -> int | None:
    """The machine's RAM, or None when psutil cannot read it."""
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:
        return None


def available_memory_mb() -> float | None:
    """Memory a run may use, in MiB (2^20 bytes): the machine's RAM, or this process's cgroup (v2)
    limit when lower. None when neither can be read."""
    ram = host_memory_bytes()
    limits = [] if ram is None else [float(ram)]
    try:
        text = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if text != "max":
            limits.append(float(text))
    except (OSError, ValueError):
        pass
    return min(limits) / MiB if limits else None
