"""The energy of one program's calls, for ``measure``: the counter of the device it runs on (an
NVIDIA GPU's total-energy counter through NVML; on the CPU, the host's RAPL packages) read around
enough steady calls to last :data:`MIN_SECONDS`, so that the counters' own steps (a millisecond
for RAPL, up to tens for NVML) are a small part of it. The arithmetic is discover/energy.py's;
null with the reason where the device has no counter jaxrun can read."""

from __future__ import annotations

import math
import os
import time
from typing import Any, Callable, NamedTuple

from jaxrun.discover.energy import RAPL_ROOT, Energy, HostEnergy, energy_between
from jaxrun.discover.nvml import energy_counters

MIN_SECONDS = 0.5
MAX_CALLS = 1_000_000


class ProgramEnergy(NamedTuple):
    joules_per_call: float | None
    watts: float | None
    calls: int  # the calls read between the two readings (0: none made)
    source: str | None  # "nvml" or "rapl"
    reason: str | None  # why the figures are null


def _gpu_handle(device: Any, nvml: Any) -> tuple[Any, Any] | str:
    """NVML and its handle of the GPU ``device`` is, or why there is none: the device's id is
    the index among the GPUs the process sees (CUDA_VISIBLE_DEVICES), which NVML numbers among all."""
    from jaxrun.discover.nvml import NVML_MISSING, visible_gpus

    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return NVML_MISSING
    try:
        nvml.nvmlInit()
        visible = visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"))
        which = str(device.id) if visible is None else visible[device.id]
        return nvml, (nvml.nvmlDeviceGetHandleByIndex(int(which)) if which.isdigit()
                      else nvml.nvmlDeviceGetHandleByUUID(which))
    except Exception as exc:
        return f"NVML could not find the GPU: {exc}"


def program_energy(call: Callable[[], Any], seconds_per_call: float | None, device: Any, *,
                   run: Callable[[Callable[[], Any], int], float], nvml: Any = None,
                   rapl_root: Any = RAPL_ROOT) -> ProgramEnergy:
    """Joules a call of ``call`` uses on ``device`` and the device's mean power meanwhile:
    ``run(call, n)`` makes n calls, the last one blocked (bench/_timing.py's sample). No call is
    made for it where the device has no counter to read."""
    platform = getattr(device, "platform", None)
    calls = min(MAX_CALLS, max(1, math.ceil(MIN_SECONDS / seconds_per_call))) if seconds_per_call else 1
    if platform == "cpu":
        host = HostEnergy(rapl_root).start()
        if host.problem is not None:
            return ProgramEnergy(None, None, 0, None, host.problem)
        run(call, calls)
        return _per_call(host.stop(), calls, "rapl")
    if platform != "gpu":
        return ProgramEnergy(None, None, 0, None, f"no energy counter jaxrun reads on {platform or 'this device'}")
    found = _gpu_handle(device, nvml)
    if isinstance(found, str):
        return ProgramEnergy(None, None, 0, None, found)
    nvml, handle = found
    first, started = energy_counters(nvml, [handle]), time.monotonic()
    if isinstance(first, str):
        return ProgramEnergy(None, None, 0, None, first)
    run(call, calls)
    last, seconds = energy_counters(nvml, [handle]), time.monotonic() - started
    if isinstance(last, str):
        return ProgramEnergy(None, None, calls, None, last)
    return _per_call(energy_between(first, last, seconds, scale=1e-3), calls, "nvml")


def _per_call(used: Energy, calls: int, source: str) -> ProgramEnergy:
    if used.joules is None:
        return ProgramEnergy(None, None, calls, None, used.reason)
    return ProgramEnergy(used.joules / calls, used.watts, calls, source, None)
