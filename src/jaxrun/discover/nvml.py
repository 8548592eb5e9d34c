"""NVIDIA Management Library access (nvidia-ml-py, the ``gpu`` extra), used only when present.

Without NVML (no NVIDIA driver, or nvidia-ml-py missing) the status is reported as unusable with
the reason, and the utilisation of a script's GPUs is null rather than invented.
"""

from __future__ import annotations

import time
from typing import Callable

from jaxrun.discover.energy import Energy, energy_between, unknown
from jaxrun.results.models import NvmlInfo

# NVML's Python binding, whatever JAX build is installed (jaxrun's cuda12 and cuda13 extras both bring it).
NVML_MISSING = "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
# JAX's CUDA builds, newest first, each with the oldest CUDA a driver must support to run it
# (jax's own extras; jaxrun's extras of the same names add NVML to them).
CUDA_BUILDS = ((13, "cuda13"), (12, "cuda12"))


def driver_cuda_version() -> tuple[int, int] | None:
    """The newest CUDA the NVIDIA driver supports (the "CUDA Version" in nvidia-smi's header), as
    (major, minor), from the driver's own libcuda (cuDriverGetVersion needs no GPU and no CUDA
    context); None where no NVIDIA driver is installed."""
    import ctypes  # only where the advice is given: a GPU platform JAX could not find

    try:
        library = ctypes.CDLL("libcuda.so.1")
        found = ctypes.c_int(0)
        if library.cuDriverGetVersion(ctypes.byref(found)) != 0 or found.value <= 0:
            return None
    except (OSError, AttributeError):
        return None
    return found.value // 1000, found.value % 1000 // 10


def cuda_build(version: tuple[int, int] | None) -> str | None:
    """The CUDA build of JAX for a driver that supports CUDA ``version``: cuda13 from 13.x,
    cuda12 for 12.x; None for an older driver, or none."""
    if version is None:
        return None
    return next((build for major, build in CUDA_BUILDS if version[0] >= major), None)


def cuda_install_advice(version: tuple[int, int] | None) -> str:
    """What to install for JAX's GPU backend on a machine whose NVIDIA driver supports CUDA
    ``version`` (:func:`driver_cuda_version`; None: no driver found): the one place jaxrun's advice
    picks a CUDA build, as the README does."""
    build = cuda_build(version)
    if build is not None:
        assert version is not None
        return f"pip install 'jax[{build}]': the NVIDIA driver supports CUDA {version[0]}.{version[1]}"
    if version is not None:
        oldest = CUDA_BUILDS[-1][0]
        return (f"the NVIDIA driver supports CUDA {version[0]}.{version[1]}, older than JAX's CUDA builds need "
                f"({oldest}.x or newer): update the driver")
    choices = ", ".join(f"'jax[{build}]' for {major}.x{' or newer' if i == 0 else ''}"
                        for i, (major, build) in enumerate(CUDA_BUILDS))
    return (f"no NVIDIA driver found; on an NVIDIA machine, pip install the build of nvidia-smi's CUDA Version: "
            f"{choices}")


def nvml_status() -> NvmlInfo:
    try:
        import pynvml  # provided by nvidia-ml-py
    except ImportError:
        return NvmlInfo(usable=False, error=NVML_MISSING)
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return NvmlInfo(usable=False, error=f"NVML could not start: {exc}")
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        if isinstance(driver, bytes):
            driver = driver.decode()
        return NvmlInfo(usable=True, driver_version=str(driver), gpu_count=int(pynvml.nvmlDeviceGetCount()))
    except Exception as exc:
        return NvmlInfo(usable=False, error=f"NVML query failed: {exc}")
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def gpu_memory_totals() -> list[int] | None:
    """Each NVIDIA GPU's total memory in bytes (NVML's order), or None when NVML cannot tell."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        return [int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).total)
                for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def visible_gpus(cuda_visible_devices: str | None) -> list[str] | None:
    """The GPUs a process may use, from its ``CUDA_VISIBLE_DEVICES``: indices or UUIDs as given.

    None means unrestricted (every GPU); an empty list means none (``""`` or ``"-1"`` hide all).
    """
    if cuda_visible_devices is None:
        return None
    items = [item.strip() for item in cuda_visible_devices.split(",")]
    visible: list[str] = []
    for item in items:
        if not item or item == "-1":
            break  # CUDA stops at the first invalid entry
        visible.append(item)
    return visible


NO_ENERGY_COUNTER = "this GPU has no total-energy counter in NVML (Volta or newer has one)"


class UtilizationSampler:
    """Samples the utilisation and power of a job's GPUs with NVML while it runs, in a background
    thread, and reads their total-energy counters when it starts and when it stops
    (discover/energy.py's arithmetic).

    ``nvml`` is the ``pynvml`` module (injectable so the arithmetic can be tested with recorded
    readings on a machine without a GPU). ``result()`` gives the mean utilisation (0-1) over all
    samples and GPUs, or None with the reason it could not be measured; ``energy()`` the job's
    GPU energy and the mean of the power readings (watts, the GPUs' sum), a check of it.
    """

    def __init__(self, gpus: list[str] | None, *, interval: float = 0.1, nvml: object | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``clock``: the seconds the energy is divided by (injectable with ``nvml``, so that a
        recorded counter and its times are one reading)."""
        import threading

        self._gpus, self._interval, self._nvml, self._clock = gpus, interval, nvml, clock
        self._samples: list[float] = []
        self._powers: list[float] = []
        self._energy: Energy | None = None
        self._reason: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="jaxrun-nvml")

    def start(self) -> "UtilizationSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _handles(self, nvml: object) -> list[object]:
        if self._gpus is None:
            return [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]  # type: ignore[attr-defined]
        handles = []
        for gpu in self._gpus:
            if gpu.isdigit():
                handles.append(nvml.nvmlDeviceGetHandleByIndex(int(gpu)))  # type: ignore[attr-defined]
            else:
                handles.append(nvml.nvmlDeviceGetHandleByUUID(gpu))  # type: ignore[attr-defined]
        return handles

    def _run(self) -> None:
        nvml = self._nvml
        if nvml is None:
            try:
                import pynvml as nvml  # type: ignore[no-redef]
            except ImportError:
                self._reason = NVML_MISSING
                return
        try:
            nvml.nvmlInit()  # type: ignore[attr-defined]
        except Exception as exc:
            self._reason = f"NVML could not start: {exc}"
            return
        try:
            handles = self._handles(nvml)
            if not handles:
                self._reason = "the job could see no GPU"
                return
            first, started = energy_counters(nvml, handles), self._clock()
            power = True  # until a GPU says it cannot read its power
            while not self._stop.is_set():
                rates = [nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in handles]  # type: ignore[attr-defined]
                self._samples.append(sum(rates) / len(rates) / 100.0)
                if power:
                    try:
                        self._powers.append(sum(nvml.nvmlDeviceGetPowerUsage(h) for h in handles) / 1000.0)  # type: ignore[attr-defined]
                    except Exception:
                        power = False
                self._stop.wait(self._interval)
            last, seconds = energy_counters(nvml, handles), self._clock() - started
            reason = next((r for r in (first, last) if isinstance(r, str)), None)
            self._energy = unknown(reason) if reason is not None else energy_between(
                first, last, seconds, scale=1e-3)  # type: ignore[arg-type]
        except Exception as exc:
            self._reason = f"NVML query failed: {exc}"
        finally:
            try:
                nvml.nvmlShutdown()  # type: ignore[attr-defined]
            except Exception:
                pass

    def result(self) -> tuple[float | None, str | None]:
        if self._samples:
            return sum(self._samples) / len(self._samples), None
        return None, self._reason or "the script ended before NVML could take a sample"

    def energy(self) -> tuple[Energy, float | None]:
        """The job's GPU energy (NVML's counter), and the mean of the power readings taken
        through it (watts; None without any)."""
        sampled = sum(self._powers) / len(self._powers) if self._powers else None
        if self._energy is not None:
            return self._energy, sampled
        return unknown(self._reason or "the script ended before NVML could read the energy counter"), sampled


def energy_counters(nvml: object, handles: list[object]) -> list[int] | str:
    """Each GPU's total-energy counter (millijoules since the driver loaded), or why not."""
    try:
        return [int(nvml.nvmlDeviceGetTotalEnergyConsumption(h)) for h in handles]  # type: ignore[attr-defined]
    except Exception as exc:
        name = type(exc).__name__
        if "NotSupported" in name or "Not Supported" in str(exc) or isinstance(exc, AttributeError):
            return NO_ENERGY_COUNTER
        return f"NVML could not read the energy counter: {exc}"
