"""The child's environment and command line, built from the run options: the one place where
an option that must reach the script becomes an environment variable or a probe flag."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..config import JAX_PLATFORMS_VALUE, importable_pythonpath
from ..models import DeviceInfo
from ..options import RunOptions
from ..probe.channel import EVENTS_ENV
from .job import Job
from .placement import Slot, merge_xla_flags


def child_env(
    job: Job, options: RunOptions, platform: str, device_info: DeviceInfo | None, events_path: Path,
    slot: Slot | None = None, compile_cache: Path | None = None,
) -> dict[str, str]:
    """The script's environment: the user's, plus what selects the device and opens the channel.

    ``compile_cache`` overrides ``options.compile_cache`` (a cold-cache benchmark run gets an
    empty folder of its own).
    """
    env = dict(os.environ)
    env.update(options.env or {})
    backend = None
    if device_info is not None and platform in device_info.platforms:
        backend = device_info.platforms[platform].backend
    env["JAX_PLATFORMS"] = backend or JAX_PLATFORMS_VALUE[platform]
    if platform == "gpu":
        # Several scripts (and jaxrun's own probes) may share the GPU: grab memory as needed.
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    xla_flags: list[str] = []
    if slot is not None and slot.kind == platform:
        for key, value in slot.env().items():
            # The slot decides which GPUs a job sees; thread counts are only a default.
            if key == "CUDA_VISIBLE_DEVICES" or key not in env:
                env[key] = value
        xla_flags += slot.xla_cpu_flags()
    if options.host_devices is not None:
        xla_flags.append(f"--xla_force_host_platform_device_count={options.host_devices}")
    if xla_flags:
        env["XLA_FLAGS"] = merge_xla_flags(env.get("XLA_FLAGS"), xla_flags)
    cache = compile_cache or options.compile_cache
    if cache is not None:
        # Thresholds at 0: JAX's defaults (1 s, and a size floor) would leave most real
        # compilations of small and medium programs uncached.
        env.setdefault("JAX_COMPILATION_CACHE_DIR", str(cache))
        env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
        env.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    if options.debug_nans:
        env["JAX_DEBUG_NANS"] = "True"
    if options.debug_infs:
        env["JAX_DEBUG_INFS"] = "True"
    if options.log_compiles:
        env["JAX_LOG_COMPILES"] = "True"
    env["JAXRUN_OUTPUT_DIR"] = str(job.output_dir)
    env[EVENTS_ENV] = str(events_path)
    env["PYTHONUNBUFFERED"] = "1"
    # The probe must be importable even when jaxrun runs from a source tree.
    env["PYTHONPATH"] = importable_pythonpath(env.get("PYTHONPATH"))
    return env


def probe_command(script: Path, events_path: Path, options: RunOptions, profile_dir: Path | None = None) -> list[str]:
    """``python -m jaxrun.probe --events FILE [--entry NAME --warm-calls N] [--profile DIR] -- script [args]``."""
    command = [sys.executable, "-m", "jaxrun.probe", "--events", str(events_path)]
    if options.entry is not None:
        command += ["--entry", options.entry, "--warm-calls", str(options.warm_calls)]
    if options.enable_profiling and profile_dir is not None:
        command += ["--profile", str(profile_dir)]
    return [*command, "--", str(script), *(options.args or ())]
