"""The energy a job used, from the hardware's own counters, read when it starts and when it ends:
the NVIDIA GPUs' total-energy counter (NVML, Volta or newer: discover/nvml.py's sampler reads it
beside the utilisation) and the host's CPU packages' RAPL counters (Linux's powercap, read here).
Joules are the counters' difference, watts that over the seconds between the two readings. Where a
counter is missing or unreadable the figure is null with the reason: never 0, never a guess.

A RAPL counter is the whole package's: every process on the machine adds to it, so a host figure
of jobs that ran at once (``--jobs 2``) counts each one's neighbours too.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import NamedTuple, Sequence

RAPL_ROOT = Path("/sys/class/powercap")


class Energy(NamedTuple):
    """What one counter says of a job: joules, mean watts, or why neither is known."""

    joules: float | None
    watts: float | None
    reason: str | None = None


class JobEnergy(NamedTuple):
    """A job's energy: its GPUs' (with the mean of NVML's power readings, a check of it) and the
    host's."""

    device: Energy
    device_sampled_watts: float | None
    host: Energy

    def fields(self) -> dict[str, object]:
        """As the script's result holds it."""
        return {"device_energy": self.device.joules, "device_power": self.device.watts,
                "device_power_sampled": self.device_sampled_watts, "device_energy_reason": self.device.reason,
                "host_energy": self.host.joules, "host_power": self.host.watts, "host_energy_reason": self.host.reason}


def not_on_gpu(platform: str | None) -> Energy:
    return unknown(f"GPU energy is measured on NVIDIA GPUs only (the job ran on {platform or 'no device'})")


def unknown(reason: str) -> Energy:
    return Energy(None, None, reason)


def counter_delta(start: int, end: int, wrap: int | None) -> int | None:
    """How far a counter moved from ``start`` to ``end``: once past its range (``wrap``) it
    starts again from 0 (RAPL's 32-bit registers wrap within minutes under load); None when it went
    back and its range is unknown."""
    if end >= start:
        return end - start
    if wrap is None or wrap <= 0:
        return None
    return end + wrap - start


def energy_between(start: Sequence[int], end: Sequence[int], seconds: float, *, scale: float,
                   wraps: Sequence[int | None] | None = None) -> Energy:
    """The energy of several counters (GPUs, packages) between two readings, in joules (each
    counter's unit times ``scale``: 1e-3 for NVML's millijoules, 1e-6 for RAPL's microjoules), and
    the mean power over ``seconds``."""
    if len(start) != len(end) or not start:
        return unknown("the counters read at the start and at the end differ")
    total = 0
    for i, (first, last) in enumerate(zip(start, end)):
        moved = counter_delta(first, last, wraps[i] if wraps is not None else None)
        if moved is None:
            return unknown("an energy counter went back between its two readings (it was reset)")
        total += moved
    joules = total * scale
    return Energy(joules, joules / seconds if seconds > 0 else None)


def rapl_packages(root: Path = RAPL_ROOT) -> list[Path]:
    """The top-level RAPL domains (one a CPU package: ``intel-rapl:0``, ``intel-rapl:1``; their
    subzones, ``intel-rapl:0:0``, are parts of them, never added again). AMD's processors use the
    same interface."""
    try:
        return sorted((p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1),
                      key=lambda p: int(p.name.split(":")[1]) if p.name.split(":")[1].isdigit() else 0)
    except OSError:
        return []


def _read_int(path: Path) -> int:
    return int(path.read_text().strip())


def read_rapl(packages: Sequence[Path]) -> tuple[list[int], list[int | None]] | str:
    """Each package's energy counter (microjoules) and range, or why they cannot be read."""
    if not packages:
        return (f"no RAPL counters ({RAPL_ROOT} has no intel-rapl package: a virtual machine, a container "
                "without it, or a CPU or kernel without them)")
    energies, ranges = [], []
    for package in packages:
        try:
            energies.append(_read_int(package / "energy_uj"))
        except PermissionError:
            return (f"the RAPL counters are not readable ({package / 'energy_uj'}: permission denied; Linux lets "
                    "only root read them)")
        except (OSError, ValueError) as exc:
            return f"the RAPL counter {package / 'energy_uj'} could not be read ({exc})"
        try:
            ranges.append(_read_int(package / "max_energy_range_uj"))
        except (OSError, ValueError):
            ranges.append(None)
    return energies, ranges


class HostEnergy:
    """The host's RAPL counters around one job: :meth:`start` before it, :meth:`stop` after."""

    def __init__(self, root: Path = RAPL_ROOT) -> None:
        self.packages = rapl_packages(root)
        self._first: tuple[list[int], list[int | None]] | str = "not started"
        self._started = 0.0

    def start(self) -> "HostEnergy":
        self._first, self._started = read_rapl(self.packages), time.monotonic()
        return self

    @property
    def problem(self) -> str | None:
        """Why the counters could not be read at the start (None: they were)."""
        return self._first if isinstance(self._first, str) else None

    def stop(self) -> Energy:
        seconds = time.monotonic() - self._started
        if isinstance(self._first, str):
            return unknown(self._first)
        last = read_rapl(self.packages)
        if isinstance(last, str):
            return unknown(last)
        return energy_between(self._first[0], last[0], seconds, scale=1e-6, wraps=self._first[1])
