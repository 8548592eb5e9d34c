"""Device facts: what JAX sees on this machine (read by a child process)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from jaxrun.results.base_model import SCHEMA_VERSION, MappingModel


class DeviceEntry(MappingModel):
    id: int
    platform: str
    device_kind: str
    process_index: int = 0
    memory_bytes: int | None = Field(
        None, description="JAX's allocator limit on the device (bytes_limit: on GPUs 75% of it by default), when the backend tells"
    )
    compute_capability: str | None = None


class PlatformInfo(MappingModel):
    name: Literal["cpu", "gpu", "tpu"]
    available: bool
    installed: bool | None = Field(
        None, description="Whether its JAX backend is installed (false: libtpu or the CUDA/ROCm plugin is missing)"
    )
    backend: str | None = Field(None, description="JAX backend name behind it (cuda, rocm, tpu, cpu)")
    devices: list[DeviceEntry] = []
    error: str | None = Field(None, description="Why the platform did not initialise")


class NvmlInfo(MappingModel):
    usable: bool
    driver_version: str | None = None
    gpu_count: int | None = None
    error: str | None = None


class AvailableDevice(MappingModel):
    """One device as the executor API lists them (``get_jax_device_info()["available_devices"]``)."""

    name: str = Field(description="The device kind (e.g. 'NVIDIA H100 80GB HBM3'); for CPU devices the processor")
    platform: str
    id: int
    memory_gb: float | None = Field(
        None, description="GiB of device memory (NVIDIA GPUs: the card's, from NVML; else JAX's bytes_limit); "
        "for CPU devices the host's RAM, which they share"
    )
    compute_capability: str | None = Field(None, description="CUDA compute capability (NVIDIA GPUs)")
    driver_version: str | None = Field(None, description="NVIDIA driver version (NVIDIA GPUs, via NVML)")


class DeviceInfo(MappingModel):
    """Device facts read by a short-lived child process (the parent never imports jax)."""

    schema_version: int = SCHEMA_VERSION
    jax_available: bool
    jax_version: str | None = None
    jaxlib_version: str | None = None
    python_version: str
    python_executable: str
    default_backend: str | None = None
    platforms: dict[str, PlatformInfo] = {}
    error: str | None = Field(None, description="Why JAX could not be imported or probed")
    probed_at: str
    probe_seconds: float | None = None
    available_devices: list[AvailableDevice] = Field([], description="Every device of every available platform")
    # The executor API's top-level description of "the device": the default device of this machine, or in a
    # results file the first device of the platform the batch used.
    name: str | None = Field(None, description="Name of the device used (see available_devices)")
    memory_gb: float | None = Field(None, description="Its memory in GiB (for CPU: the host's RAM)")
    compute_capability: str | None = None
    driver_version: str | None = None

    def describing(self, platform: str | None, index: int | None = None) -> "DeviceInfo":
        """These facts, the top-level name / memory_gb / compute_capability / driver_version
        describing the first device of ``platform`` (the one a batch used; ``index``: the one it
        chose); all null when it has none."""
        first = next((d for d in self.available_devices
                      if d.platform == platform and index in (None, d.id)), None)
        fields = ("name", "memory_gb", "compute_capability", "driver_version")
        return self.model_copy(update={f: getattr(first, f) if first else None for f in fields})

    @property
    def available_platforms(self) -> list[str]:
        return [name for name, p in self.platforms.items() if p.available]

    @property
    def device_count(self) -> int:
        return sum(len(p.devices) for p in self.platforms.values() if p.available)
