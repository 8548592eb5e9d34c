"""Device facts: what JAX sees on this machine (read by a child process)."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from jaxrun.results.base_model import SCHEMA_VERSION, MappingModel


class DeviceEntry(MappingModel):
    id: int
    platform: str
    device_kind: str
    process_index: int = 0
    memory_bytes: Annotated[int | None, Meta(description=(
        "JAX's allocator limit on the device (bytes_limit: on GPUs 75% of it by default), when the backend tells"
    ))] = None
    compute_capability: str | None = None


class PlatformInfo(MappingModel):
    name: Literal["cpu", "gpu", "tpu"]
    available: bool
    installed: Annotated[bool | None, Meta(description=(
        "Whether its JAX backend is installed (false: libtpu or the CUDA/ROCm plugin is missing)"
    ))] = None
    backend: Annotated[str | None, Meta(description="JAX backend name behind it (cuda, rocm, tpu, cpu)")] = None
    devices: list[DeviceEntry] = []
    error: Annotated[str | None, Meta(description="Why the platform did not initialise")] = None


class NvmlInfo(MappingModel):
    usable: bool
    driver_version: str | None = None
    gpu_count: int | None = None
    error: str | None = None


class AvailableDevice(MappingModel):
    """One device as the executor API lists them (``get_jax_device_info()["available_devices"]``)."""

    name: Annotated[str, Meta(description=(
        "The device kind (e.g. 'NVIDIA H100 80GB HBM3'); for CPU devices the processor"
    ))]
    platform: str
    id: int
    memory_gb: Annotated[float | None, Meta(description=(
        "GiB of device memory (NVIDIA GPUs: the card's, from NVML; else JAX's bytes_limit); "
        "for CPU devices the host's RAM, which they share"
    ))] = None
    compute_capability: Annotated[str | None, Meta(description="CUDA compute capability (NVIDIA GPUs)")] = None
    driver_version: Annotated[str | None, Meta(description="NVIDIA driver version (NVIDIA GPUs, via NVML)")] = None


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
    error: Annotated[str | None, Meta(description="Why JAX could not be imported or probed")] = None
    probed_at: str
    probe_seconds: float | None = None
    available_devices: Annotated[list[AvailableDevice], Meta(description=(
        "Every device of every available platform"
    ))] = []
    # The executor API's top-level description of "the device": the default device of this machine, or in a
    # results file the first device of the platform the batch used.
    name: Annotated[str | None, Meta(description="Name of the device used (see available_devices)")] = None
    memory_gb: Annotated[float | None, Meta(description="Its memory in GiB (for CPU: the host's RAM)")] = None
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
