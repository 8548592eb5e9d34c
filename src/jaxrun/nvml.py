"""NVIDIA Management Library access (nvidia-ml-py, the ``gpu`` extra), used only when present.

This machine has no NVIDIA GPU: the status is reported as unusable with the reason, and the
utilisation of a script's GPUs is null rather than invented.
"""

from __future__ import annotations

from .models import NvmlInfo


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
