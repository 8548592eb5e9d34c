"""NVIDIA Management Library access (nvidia-ml-py, the ``gpu`` extra), used only when present.

Without NVML (no NVIDIA driver, or nvidia-ml-py missing) the status is reported as unusable with
the reason, and the utilisation of a script's GPUs is null rather than invented.
"""

from __future__ import annotations

from jaxrun.results.models import NvmlInfo


def nvml_status() -> NvmlInfo:
    try:
        import pynvml  # provided by nvidia-ml-py
    except ImportError:
        return NvmlInfo(usable=False, error="nvidia-ml-py is not installed (pip install 'jaxrun[gpu]')")
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


class UtilizationSampler:
    """Samples the utilisation of a job's GPUs with NVML while it runs, in a background thread.

    ``nvml`` is the ``pynvml`` module (injectable so the arithmetic can be tested with recorded
    readings on a machine without a GPU). ``result()`` gives the mean utilisation (0-1) over all
    samples and GPUs, or None with the reason it could not be measured.
    """

    def __init__(self, gpus: list[str] | None, *, interval: float = 0.1, nvml: object | None = None) -> None:
        import threading

        self._gpus, self._interval, self._nvml = gpus, interval, nvml
        self._samples: list[float] = []
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
                self._reason = "nvidia-ml-py is not installed (pip install 'jaxrun[gpu]')"
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
            while not self._stop.is_set():
                rates = [nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in handles]  # type: ignore[attr-defined]
                self._samples.append(sum(rates) / len(rates) / 100.0)
                self._stop.wait(self._interval)
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
