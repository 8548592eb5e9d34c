"""A stand-in GPU for tests: this machine has none.

``FakeAttempt`` replaces one attempt (``run_attempts(..., attempt=...)``): it answers with
a crafted out-of-memory or success per GPU id and records every call; ``gpu_facts`` are device
facts that list GPUs 0..n-1 beside the real CPU. Everything else (the runner's policy loop, the
failure table, placements, executors, sinks) is the real code. ``RecordedNvml`` stands in for the
pynvml module, replaying recorded readings.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

from jaxrun.core.timestamps import now_iso
from jaxrun.results.models import DeviceEntry, DeviceInfo, PlatformInfo
from jaxrun.run.process.process_watch import ProcessOutcome
from jaxrun.run.reading.attempt_run import AttemptRun
from jaxrun.run.reading.classify import classification


@dataclass
class FakeAttempt:
    """``outcomes``: gpu id -> error class of every attempt there (None: success); CPU attempts succeed."""

    outcomes: dict[int, str | None]
    calls: list[tuple[str, tuple[int, ...] | None]] = field(default_factory=list)

    def __call__(self, job, options, platform, slot, info, stop, compile_cache) -> AttemptRun:  # type: ignore[no-untyped-def]
        gpus = slot.gpus if slot is not None and slot.kind == "gpu" else None
        self.calls.append((platform, gpus))
        error = self.outcomes[(gpus or (0,))[0]] if platform == "gpu" else None
        outcome = ProcessOutcome(
            exit_code=0 if error is None else 1, signal=None, wall_time=0.01, cpu_time=0.01,
            maxrss_bytes=None, sampled_peak_rss_bytes=0, timed_out=False, interrupted=False,
            stdout_truncated=False, stderr_truncated=False,
        )
        failure = None if error is None else classification(error, f"RESOURCE_EXHAUSTED: out of memory on {platform}")
        return AttemptRun(outcome, failure)


@dataclass
class GpuFacts:
    """Device facts of a machine with ``gpus`` GPUs (and a CPU), as the device probe would report."""

    gpus: int = 1

    def __call__(self) -> DeviceInfo:
        cpu = PlatformInfo(name="cpu", available=True, backend="cpu",
                           devices=[DeviceEntry(id=0, platform="cpu", device_kind="cpu")])
        gpu = PlatformInfo(name="gpu", available=True, backend="cuda", devices=[
            DeviceEntry(id=i, platform="gpu", device_kind="Fake GPU") for i in range(self.gpus)
        ])
        return DeviceInfo(jax_available=True, jax_version="0", python_version="3", python_executable="python",
                          default_backend="gpu", platforms={"cpu": cpu, "gpu": gpu}, probed_at=now_iso())


class NVMLError_NotSupported(Exception):  # pynvml's name for a query the GPU cannot answer
    pass


class RecordedNvml:
    """The pynvml calls jaxrun makes, replaying recorded readings of GPUs by NVML index: their
    utilisation (``readings``, percent, one a sample, the last one repeated), the power each draws
    (``watts``; its readings in milliwatts) and the total-energy counter that power gives (millijoules;
    ``counters=False``: a GPU without one, NotSupported). The counter grows with real time, or with
    the recording's own ``now`` once a test sets it (and moves it on): given to a sampler as its
    ``clock``, a counter and its time are then one reading. ``sampling`` is set at the first
    utilisation sample, which comes after the sampler's first reading of the counters."""

    def __init__(self, readings: dict[int, list[int]] | None = None, uuids: dict[str, int] | None = None, *,
                 watts: dict[int, float] | None = None, counters: bool = True) -> None:
        self.watts = watts or {}
        readings = readings if readings is not None else {gpu: [50] for gpu in self.watts}
        self.readings = {gpu: list(values) for gpu, values in readings.items()}
        self.uuids = uuids or {}
        self.counters, self.started, self.now = counters, time.monotonic(), None
        self.initialised = self.shut_down = False
        self.queried: list[int] = []
        self.sampling = threading.Event()

    def nvmlInit(self) -> None:
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.shut_down = True

    def nvmlDeviceGetCount(self) -> int:
        return len(self.readings)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        return self.uuids[uuid]

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        self.sampling.set()
        self.queried.append(handle)
        values = self.readings[handle]
        return SimpleNamespace(gpu=values.pop(0) if len(values) > 1 else values[0], memory=0)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return int(self.watts[handle] * 1000)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        if not self.counters:
            raise NVMLError_NotSupported("Not Supported")
        return round(7_000_000 + self.watts[handle] * self.clock() * 1000)

    def clock(self) -> float:
        return time.monotonic() - self.started if self.now is None else self.now
