"""Every setting's key: which options a config file, a per-script table, a script's header comment
and a ``JAXRUN_*`` variable may set, the executor API's names for them, and the executor API's settings a
runner cannot honour (each with the closest real option).

A key is an option's name (:class:`~jaxrun.config.options.RunOptions`, :class:`~jaxrun.config.options.BatchOptions`)
plus one the CLI reads itself (``quiet``) and ``skip``, which only a script's own
settings may hold.
"""

from __future__ import annotations

import os
import typing
from typing import Any, Callable

from jaxrun.config.option_spec import ENV_PREFIX, env_name, flag_of  # noqa: F401 - the keys' variables
from jaxrun.config.options import BatchOptions, RunOptions
from jaxrun.errors import UsageError, closest  # noqa: F401 - closest: settings' messages use it from here

# Options of the batch (not the script list itself, which the command line or the API gives).
BATCH_KEYS: tuple[str, ...] = tuple(n for n in BatchOptions.fields if n not in ("paths", "run", "rules", "config_file"))
RUN_KEYS: tuple[str, ...] = tuple(RunOptions.fields)
# Settings of what the CLI prints: read by `jaxrun run`, never options.
DISPLAY_KEYS: dict[str, str] = {"quiet": "no live view (--quiet)"}
TOP_KEYS: tuple[str, ...] = tuple(dict.fromkeys((*BATCH_KEYS, *RUN_KEYS, *DISPLAY_KEYS)))
# What one script's settings (a [scripts."glob"] table, its header comment) may set.
SCRIPT_KEYS: tuple[str, ...] = (*RUN_KEYS, "skip")
# What a [devices.<name>] table may set: the run options of a script on that device.
DEVICE_KEYS: tuple[str, ...] = tuple(k for k in RUN_KEYS if k != "device")


# --- the executor API's configuration blocks (JAX_EXEC_CONFIG, DEVICE_CONFIG,
# MONITORING_CONFIG) --------------------------------------------------------------------------


def _parallel(value: Any) -> dict[str, Any]:
    if not isinstance(value, bool):
        raise UsageError(f"parallel_execution must be true or false, got {value!r} (or set jobs = N)")
    return {"jobs": (os.cpu_count() or 1) if value else 1}


def _memory_limit(value: Any) -> dict[str, Any]:
    return {"memory_limit": None if value == "auto" else value}  # the executor API's "auto": no limit


def _always(name: str, what: str) -> Callable[[Any], dict[str, Any]]:
    def accept(value: Any) -> dict[str, Any]:
        if value is not True:
            raise UsageError(f"{name} = {value!r} is not possible: jaxrun always {what}")
        return {}
    return accept


def _log_level(value: Any) -> dict[str, Any]:
    levels = ("DEBUG", "INFO", "WARNING", "ERROR")
    if str(value).upper() not in levels:
        raise UsageError(f"level must be one of {', '.join(levels)}, got {value!r}")
    return {"verbose": str(value).upper() == "DEBUG"}


# Executor-API key -> a function of its value giving jaxrun keys (the executor API's own spelling of option names
# that jaxrun.core.aliases already maps, like timeout_seconds, pass through as they are).
EXECUTOR_KEYS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "device_selection": lambda v: {"device": v},
    "parallel_execution": _parallel,
    "measurement_runs": lambda v: {"benchmark_runs": v},
    "memory_limit": _memory_limit,
    "cleanup_temp_files": _always("cleanup_temp_files", "removes its temporary files (outputs stay in outputs/)"),
    "platform_name": lambda v: {},  # checked against its [devices.<name>] table by the reader
    # MONITORING_CONFIG.logging and .benchmarking
    "level": _log_level,
    "console_output": lambda v: {"quiet": not v} if isinstance(v, bool) else {"quiet": v},
    "file_output": _always("file_output", "writes jax_execution_log.txt"),
    "performance_summary": _always("performance_summary", "writes the performance summary"),
    "statistical_analysis": _always("statistical_analysis", "computes the statistics of benchmark runs"),
}

# Seed settings that would need jaxrun to rewrite the user's script or the machine: the error
# says so and names the closest real option.
UNSUPPORTED: dict[str, str] = {
    "mixed_precision": "mixed precision is a change to the program (its dtypes), which jaxrun cannot make from "
    "outside; the closest option is matmul_precision = \"bfloat16\" (--matmul-precision bfloat16): float32 "
    "matmuls and convolutions computed in bfloat16",
    "checkpoint_gradients": "gradient checkpointing (jax.checkpoint / jax.remat) is a change to the program, which "
    "jaxrun cannot make from outside; to bound a script's memory use memory_limit (--memory-limit)",
    "thread_count": "jaxrun gives each CPU job its share of the cores (--jobs); to choose XLA's threads set "
    "xla_flags (--xla-flags) or env",
    "enable_peer_access": "peer access between GPUs is the driver's setting, not a runner's",
    "core_count": "a TPU's cores are all given to the script; choose fewer with env (TPU_VISIBLE_CHIPS)",
}

# DEVICE_CONFIG's device_id (`'gpu': {'device_id': 0}`): which device of the platform,
# read by config/resolve.py into the device (device = "gpu", device_id = 1 -> gpu:1).
DEVICE_ID_KEY = "device_id"


def device_id_value(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"device_id must be a device's id, a whole number >= 0 (as `jaxrun devices` lists them), "
                         f"got {value!r}")
    return value


# MONITORING_CONFIG.metrics: jaxrun measures all of them on every run, so only "true" is accepted.
MONITORING_METRICS = ("execution_time", "memory_usage", "cpu_utilization", "gpu_utilization", "jit_compile_time")


def monitoring_metrics(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UsageError(f"metrics must be a table of metric = true, got {value!r}")
    for name, on in value.items():
        if name not in MONITORING_METRICS:
            raise UsageError(f"unknown metric {name!r}: {closest(name, MONITORING_METRICS)}")
        if on is not True:
            raise UsageError(
                f"metric {name} = {on!r}: jaxrun measures every one of {', '.join(MONITORING_METRICS)} on every run "
                "(a figure it cannot measure is null); drop the line"
            )
    return {}


# --- values from environment variables -----------------------------------------------------------

_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


def _field_type(key: str) -> Any:
    fields = RunOptions.fields | BatchOptions.fields
    if key in DISPLAY_KEYS:
        return bool
    return fields[key].annotation


def _read_as_text(key: str) -> bool:
    field = (RunOptions.fields | BatchOptions.fields).get(key)
    flag = flag_of(field) if field is not None else None
    return flag is not None and flag.text


def _is_word(key: str, text: str) -> bool:
    field = (RunOptions.fields | BatchOptions.fields).get(key)
    return field is not None and field.is_word(text)


def from_text(key: str, text: str) -> Any:
    """A ``JAXRUN_<KEY>`` variable's text as the option's value: booleans (1/0, true/false,
    yes/no, on/off), numbers, ``args`` and ``env`` split like a shell (``env``: KEY=VALUE words),
    lists (``device``, ``include``, ``exclude``) by commas; an option whose flag takes text (a size
    such as ``8GB``) as its validator reads it."""
    kind = str(_field_type(key))
    if "bool" in kind:
        word = text.strip().lower()
        if word not in _TRUE | _FALSE:
            raise UsageError(f"must be 1/0, true/false, yes/no or on/off, got {text!r}")
        return word in _TRUE
    import shlex

    if key == "args":
        return shlex.split(text)
    if key == "env":
        return pairs(shlex.split(text))
    if key in ("device", "include", "exclude"):
        return [part.strip() for part in text.split(",") if part.strip()]
    if _read_as_text(key) or _is_word(key, text):  # a size ("8GB"), a word ("none"): read by the option's check
        return text
    if "int" in kind and "float" not in kind:
        try:
            return int(text)
        except ValueError:
            raise UsageError(f"must be a whole number, got {text!r}") from None
    return text


def pairs(items: typing.Iterable[str]) -> dict[str, str]:
    """``["A=1", "B=x y"]`` -> ``{"A": "1", "B": "x y"}`` (``--env``, ``JAXRUN_ENV``)."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or " " in name.strip():
            raise UsageError(f"environment settings are KEY=VALUE, got {item!r}")
        out[name.strip()] = value
    return out
