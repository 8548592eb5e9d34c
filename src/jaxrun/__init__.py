"""jaxrun: run a folder of JAX programs on the best device and record what happened.

The public API is re-exported here explicitly. Names are resolved lazily so that ``import
jaxrun`` (done by every script that calls :func:`jaxrun.record`, inside the probe) stays cheap
and never imports jax, pydantic or the CLI until they are used.
"""

from __future__ import annotations

from .recording import record

# Every script's process imports this package (the probe is in it): typing is ~10 ms of CPU in a
# fresh interpreter, for type checkers only (probe/events.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_EXPORTS: dict[str, str] = {
    "find_jax_scripts": "jaxrun.discovery",
    "is_jax_available": "jaxrun.devices",
    "get_jax_device_info": "jaxrun.devices",
    "execute_jax_script": "jaxrun.api",
    "run_jax_scripts": "jaxrun.api",
    "RunOptions": "jaxrun.options",
    "BatchOptions": "jaxrun.options",
    "VerdictOptions": "jaxrun.options",
    "compare_results": "jaxrun.compare",
    "HistoryStore": "jaxrun.history",
    "JAXExecutionError": "jaxrun.errors",
    "UsageError": "jaxrun.errors",
    "InvalidDeviceError": "jaxrun.errors",
    "ScriptNotFoundError": "jaxrun.errors",
    "DeviceProbeError": "jaxrun.errors",
    "ScriptFailedError": "jaxrun.errors",
    "DeviceInfo": "jaxrun.models",
    "ScriptResult": "jaxrun.models",
    "BatchResult": "jaxrun.models",
    "CompileStats": "jaxrun.models",
    "ScriptBenchmark": "jaxrun.models",
    "ComparisonReport": "jaxrun.models",
    "Statistics": "jaxrun.models",
}

__all__ = ["record", "__version__", *_EXPORTS]

if TYPE_CHECKING:
    from . import bench
    from .api import execute_jax_script, run_jax_scripts
    from .compare import compare_results
    from .devices import get_jax_device_info, is_jax_available
    from .discovery import find_jax_scripts
    from .errors import (
        DeviceProbeError,
        InvalidDeviceError,
        JAXExecutionError,
        ScriptFailedError,
        ScriptNotFoundError,
        UsageError,
    )
    from .options import BatchOptions, RunOptions, VerdictOptions
    from .history import HistoryStore
    from .models import (
        BatchResult,
        CompileStats,
        ComparisonReport,
        DeviceInfo,
        ScriptBenchmark,
        ScriptResult,
        Statistics,
    )


def __getattr__(name: str) -> Any:
    if name == "bench":  # the in-process benchmarking API imports jax, so only on first use
        import importlib

        return importlib.import_module("jaxrun.bench")
    if name == "__version__":  # the installed distribution's (jaxrun/version.py): read on first use
        from .version import version

        globals()[name] = version()
        return globals()[name]
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'jaxrun' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
