"""A stand-in GPU for tests of the failure policy: this machine has none.

``FakeAttempt`` replaces one attempt (``run_attempts(..., attempt=...)``): it answers with
a crafted out-of-memory or success per GPU id and records every call; ``gpu_facts`` are device
facts that list GPUs 0..n-1 beside the real CPU. Everything else (the runner's policy loop, the
failure table, placements, executors, sinks) is the real code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jaxrun.core.timestamps import now_iso
from jaxrun.results.models import DeviceEntry, DeviceInfo, PlatformInfo
from jaxrun.run.reading.classify import classification
from jaxrun.run.process.process_watch import ProcessOutcome
from jaxrun.run.reading.attempt_run import AttemptRun


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
