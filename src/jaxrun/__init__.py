"""jaxrun: run a folder of JAX scripts on the best device and record what happened.

The public API is re-exported here explicitly. Names are resolved lazily so that ``import
jaxrun`` (done by every script that calls :func:`jaxrun.record`, inside the probe) stays cheap
and never imports jax, the result models or the CLI until they are used.
"""

from __future__ import annotations

from jaxrun.probe.recording import record

# Every script's process imports this package (the probe is in it): typing is ~10 ms of CPU in a
# fresh interpreter, for type checkers only (probe/events.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_EXPORTS: dict[str, str] = {
    "find_jax_scripts": "jaxrun.discover.scripts",
    "is_jax_available": "jaxrun.discover.devices",
    "get_jax_device_info": "jaxrun.discover.devices",
    "execute_jax_script": "jaxrun.interfaces.api",
    "run_jax_scripts": "jaxrun.interfaces.api",
    "params": "jaxrun.probe.sweep_point",
    "RunOptions": "jaxrun.config.options",
    "BatchOptions": "jaxrun.config.options",
    "VerdictOptions": "jaxrun.config.options",
    "compare_results": "jaxrun.judge.compare",
    "HistoryStore": "jaxrun.judge.history",
    "confirm_changes": "jaxrun.ab.confirm",
    "ConfirmOptions": "jaxrun.config.ab_options",
    "JAXExecutionError": "jaxrun.errors",
    "UsageError": "jaxrun.errors",
    "InvalidDeviceError": "jaxrun.errors",
    "ScriptNotFoundError": "jaxrun.errors",
    "DeviceProbeError": "jaxrun.errors",
    "ScriptFailedError": "jaxrun.errors",
    "DeviceInfo": "jaxrun.results.models",
    "ScriptResult": "jaxrun.results.models",
    "BatchResult": "jaxrun.results.models",
    "CompileStats": "jaxrun.results.models",
    "ScriptBenchmark": "jaxrun.results.models",
    "ComparisonReport": "jaxrun.results.models",
    "SeriesChange": "jaxrun.results.models",
    "Statistics": "jaxrun.results.models",
}

__all__ = ["record", "__version__", *_EXPORTS]

if TYPE_CHECKING:
    from jaxrun import bench
    from jaxrun.ab.confirm import confirm_changes
    from jaxrun.config.ab_options import ConfirmOptions
    from jaxrun.config.options import BatchOptions, RunOptions, VerdictOptions
    from jaxrun.discover.devices import get_jax_device_info, is_jax_available
    from jaxrun.discover.scripts import find_jax_scripts
    from jaxrun.errors import (
        DeviceProbeError,
        InvalidDeviceError,
        JAXExecutionError,
        ScriptFailedError,
        ScriptNotFoundError,
        UsageError,
    )
    from jaxrun.interfaces.api import execute_jax_script, run_jax_scripts
    from jaxrun.judge.compare import compare_results
    from jaxrun.judge.history import HistoryStore
    from jaxrun.probe.sweep_point import params
    from jaxrun.results.models import (
        BatchResult,
        ComparisonReport,
        CompileStats,
        DeviceInfo,
        ScriptBenchmark,
        ScriptResult,
        SeriesChange,
        Statistics,
    )


def __getattr__(name: str) -> Any:
    if name == "bench":  # the in-process benchmarking API imports jax, so only on first use
        import importlib

        return importlib.import_module("jaxrun.bench")
    if name == "__version__":  # the installed distribution's (jaxrun/core/version.py): read on first use
        from jaxrun.core.version import version

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
