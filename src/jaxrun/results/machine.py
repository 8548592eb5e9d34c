"""The machine a run was measured on, as the history compares runs by it: what makes one
machine's timings not another's (the processor and how many of it the run could use, the memory,
the GPUs and their driver, the XLA flags that enter JAX's compile key), and a short fingerprint of
those facts. Runs of different fingerprints are different series: their times are not a change."""

from __future__ import annotations

import functools
import hashlib
import os
from typing import TYPE_CHECKING, Annotated

from msgspec import Meta

from jaxrun.results.base_model import MappingModel

if TYPE_CHECKING:
    from jaxrun.results.device_info import DeviceInfo

GiB = float(1 << 30)


class Machine(MappingModel):
    cpu_model: Annotated[str | None, Meta(description="The processor's model name (/proc/cpuinfo); null: unknown")] = None
    cpus: Annotated[int | None, Meta(description="Logical CPUs jaxrun's process could run on")] = None
    memory_gib: Annotated[float | None, Meta(description="The machine's RAM, GiB (2^30 bytes), to 0.1")] = None
    gpus: Annotated[list[str], Meta(description="Each GPU's model, as JAX names its devices")] = []
    gpu_driver: Annotated[str | None, Meta(description="The NVIDIA driver's version (NVML); null: none or unknown")] = None
    xla_flags: Annotated[list[str], Meta(description="The XLA flags JAX's compile key hashes, sorted")] = []

    @property
    def fingerprint(self) -> str:
        """12 hex digits of the SHA-256 of these facts (their JSON, keys in order)."""
        from jaxrun.results.model_json import json_text

        return hashlib.sha256(json_text(self, indent=0).encode("utf-8")).hexdigest()[:12]

    def differences(self, other: "Machine") -> list[str]:
        """The facts that differ from ``other``'s, each as ``name: mine vs other's``."""
        return [f"{name}: {getattr(self, name)!r} vs {getattr(other, name)!r}" for name in self.__struct_fields__
                if getattr(self, name) != getattr(other, name)]


def this_machine(facts: "DeviceInfo | None" = None, xla_flags: list[str] | None = None) -> Machine:
    """This machine's facts; ``facts``: the device facts (for the GPUs and their driver)."""
    gpus: list[str] = []
    driver = None
    if facts is not None:
        found = [d for d in facts.available_devices if d.platform == "gpu"]
        gpus = sorted(d.name for d in found)
        driver = next((d.driver_version for d in found if d.driver_version), None)
    return Machine(cpu_model=_cpu_model(), cpus=_cpus(), memory_gib=_memory_gib(), gpus=gpus, gpu_driver=driver,
                   xla_flags=sorted(xla_flags or []))


@functools.cache  # the same for the life of the process, asked once a benchmarked script
def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model"):
                    return " ".join(value.split()) or None
    except OSError:
        pass
    import platform

    return platform.processor() or None


def _cpus() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


@functools.cache
def _memory_gib() -> float | None:
    from jaxrun.core.host import host_memory_bytes

    total = host_memory_bytes()
    return None if total is None else round(total / GiB, 1)
