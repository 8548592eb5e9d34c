"""The child's environment and command line, built from the run options: the one place where
an option that must reach the script becomes an environment variable or a probe flag.

Which of the user's variables reach a script (README, "The script's environment"): all of them,
unless ``isolate_env``, which keeps only what a process needs to start and find its devices
(``ISOLATED_NAMES``, ``ISOLATED_PREFIXES``: ``JAX_*`` and ``XLA_*`` always). On top come the
``env`` option (``--env KEY=VALUE``, per-script ``env``), then jaxrun's own: the device
(``JAX_PLATFORMS``, a GPU slot's ``CUDA_VISIBLE_DEVICES``), the numerics options, the
compilation cache, JAX's transfer guard in its logging mode (``JAX_TRANSFER_GUARD=log``, unless
the user's variables set a level), ``JAXRUN_OUTPUT_DIR`` and the event channel.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from jaxrun.config.options import RunOptions
from jaxrun.core.defaults import JAX_PLATFORMS_VALUE
from jaxrun.core.environ import environment
from jaxrun.core.interpreters import importable_by, is_other
from jaxrun.core.paths import make_jaxrun_importable
from jaxrun.core.validate import split_device
from jaxrun.plan.job import Job
from jaxrun.probe.arguments import ProbeArguments
from jaxrun.probe.channel import EVENTS_ENV
from jaxrun.probe.jax_hooks import DEFAULT_DEVICE_ENV
from jaxrun.probe.lifeline import SCRIPTS_LOCK_ENV, SCRIPTS_LOCK_FILE
from jaxrun.probe.memory_fit import MEMORY_LIMIT_ENV
from jaxrun.probe.sweep_point import point_env
from jaxrun.run.process.placement import Slot, merge_xla_flags
from jaxrun.run.process.transfers import guard_env

if TYPE_CHECKING:
    from jaxrun.discover.devices import Facts
    from jaxrun.results.models import Numerics


# --randomize-setup: a variable of random length (0..MAX bytes) in the script's environment. The
# environment's size shifts where the process's stack starts, and with it the alignment of what a
# program puts there: a bias that one fixed setup bakes into every run (Mytkowicz et al., ASPLOS 2009).
SETUP_PADDING_ENV = "JAXRUN_SETUP_PADDING"
# Set in a process that runs jobs for a scheduler (a Slurm task): its scripts outlive the jaxrun run
# that submitted them by design and hold no scripts lock; that run's executor follows them itself.
SCHEDULED_ENV = "JAXRUN_SCHEDULED_TASK"
MAX_SETUP_PADDING = 4096


def setup_padding(env: dict[str, str]) -> int | None:
    """The bytes of padding ``env`` holds, or None when it was not randomised."""
    padding = env.get(SETUP_PADDING_ENV)
    return None if padding is None else len(padding)


def child_env(
    job: Job, options: RunOptions, platform: str, facts: "Facts | None", events_path: Path,
    slot: Slot | None = None, compile_cache: Path | None = None,
) -> dict[str, str]:
    """The script's environment: the user's, plus what selects the device and opens the channel.

    ``compile_cache`` overrides ``options.compile_cache`` (a cold-cache benchmark run gets an
    empty folder of its own).
    """
    env = isolated(os.environ) if options.isolate_env else environment()
    env.update(options.env or {})
    if options.xla_flags:
        env["XLA_FLAGS"] = override_xla_flags(env.get("XLA_FLAGS"), options.xla_flags.split())
    backend = None
    if facts is not None and platform in facts.platforms:
        backend = facts.platforms[platform].backend
    env["JAX_PLATFORMS"] = backend or JAX_PLATFORMS_VALUE[platform]
    if platform == "gpu":
        # Several scripts (and jaxrun's own probes) may share the GPU: grab memory as needed.
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    # What the user made visible (their variables, --env): a slot's or a chosen device's ids are
    # JAX's, which number those entries from 0.
    user_visible = env.get("CUDA_VISIBLE_DEVICES")
    if slot is not None and slot.kind == platform:
        for key, value in slot.env().items():
            # The slot decides which GPUs a job sees; thread counts are only a default.
            if key == "CUDA_VISIBLE_DEVICES":
                env[key] = ",".join(visible_index(g, user_visible) for g in slot.gpus)
            elif key not in env:
                env[key] = value
    env.update(chosen_device_env(platform, chosen_index(options.device, platform), backend,
                                 {**env, "CUDA_VISIBLE_DEVICES": user_visible}))
    if options.host_devices is not None:
        # A flag JAX leaves out of its persistent cache key (jax/_src/cache_key.py).
        env["XLA_FLAGS"] = merge_xla_flags(
            env.get("XLA_FLAGS"), [f"--xla_force_host_platform_device_count={options.host_devices}"])
    cache = compile_cache or options.compile_cache
    if cache is not None:
        # Thresholds at 0: JAX's defaults (1 s, and a size floor) would leave most real
        # compilations of small and medium programs uncached.
        env.setdefault("JAX_COMPILATION_CACHE_DIR", str(cache))
        env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
        env.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
        if options.compile_cache_max_size is not None:
            # JAX evicts the least recently used executables past it (its LRUCache, with filelock).
            env.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(options.compile_cache_max_size))
    if options.debug_nans:
        env["JAX_DEBUG_NANS"] = "True"
    if options.debug_infs:
        env["JAX_DEBUG_INFS"] = "True"
    if options.check_tracer_leaks:
        env["JAX_CHECK_TRACER_LEAKS"] = "True"
    if options.log_compiles:
        env["JAX_LOG_COMPILES"] = "True"
    if options.x64:
        env["JAX_ENABLE_X64"] = "True"
    if options.matmul_precision is not None:
        env["JAX_DEFAULT_MATMUL_PRECISION"] = options.matmul_precision
    if options.disable_jit:
        env["JAX_DISABLE_JIT"] = "True"
    if options.memory_limit is not None:
        # What the probe's fit check (probe/memory_fit.py) holds a CPU program against, with a
        # cgroup holding the limit or without one (jaxrun's sampling).
        env[MEMORY_LIMIT_ENV] = str(options.memory_limit)
    guard_env(env)  # implicit transfers counted (run/process/transfers.py), unless the user set a guard level
    env["JAXRUN_OUTPUT_DIR"] = str(job.output_dir)
    env[EVENTS_ENV] = str(events_path)
    # The probe holds a shared lock on it while it lives: a later run waits until it is gone.
    if not env.pop(SCHEDULED_ENV, None):
        env[SCRIPTS_LOCK_ENV] = str(job.results_dir / SCRIPTS_LOCK_FILE)
    env["PYTHONUNBUFFERED"] = "1"
    if options.params:
        env.update(point_env(options.params))  # a sweep's point: jaxrun.params() reads it back
    if options.randomize_setup:
        # os.urandom, not secrets or random: either imports hashlib on the way to the first script.
        env[SETUP_PADDING_ENV] = "x" * (int.from_bytes(os.urandom(4), "little") % (MAX_SETUP_PADDING + 1))
    if options.python is not None and is_other(options.python):
        # Another environment (--python): jaxrun alone made importable there, never this one's packages.
        return importable_by(env, options.python)
    return make_jaxrun_importable(env)  # the probe must be importable, from a source tree too


# --- one chosen device (--device gpu:1): README, "Choosing a device" ---------------------------------

# The variable that makes a GPU backend's devices visible; JAX numbers what it lets through from 0.
_GPU_VISIBLE = {"cuda": "CUDA_VISIBLE_DEVICES", "rocm": "HIP_VISIBLE_DEVICES"}


def chosen_index(device: str, platform: str | None) -> int | None:
    """The id of the one device asked for (``gpu:1`` -> 1) when the run is on its platform; None
    when any device of the platform will do, or after a fallback to another platform."""
    asked, index = split_device(device)
    return index if asked == platform else None


def visible_index(index: int, user_value: str | None) -> str:
    """What a ``*_VISIBLE_DEVICES`` variable must say for JAX's device ``index``: the index-th
    entry of what the user already made visible (JAX numbered those from 0), else ``index``."""
    entries = [e.strip() for e in (user_value or "").split(",") if e.strip()]
    return entries[index] if index < len(entries) else str(index)


def chosen_device_env(platform: str, index: int | None, backend: str | None,
                      user_env: "dict[str, str | None]") -> dict[str, str]:
    """The variables that show the child only device ``index`` of ``platform`` (nothing for None).
    GPU and TPU: the driver's visibility variables, so the script sees one device (its
    ``jax.devices()`` is that one, id 0); CPU: the simulated devices all stay (sharding code
    needs them) and the probe makes device ``index`` JAX's default (probe/jax_hooks.py)."""
    if index is None:
        return {}
    if platform == "gpu":
        name = _GPU_VISIBLE.get(backend or "cuda", "CUDA_VISIBLE_DEVICES")
        return {name: visible_index(index, user_env.get(name))}
    if platform == "tpu":
        # One chip to one process (Cloud TPU's recipe; jax/_src/test_multiprocess.py sets the same).
        return {"TPU_VISIBLE_CHIPS": visible_index(index, user_env.get("TPU_VISIBLE_CHIPS")),
                "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1", "TPU_PROCESS_BOUNDS": "1,1,1",
                "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}  # other jobs may hold the other chips
    return {DEFAULT_DEVICE_ENV: str(index)} if index > 0 else {}  # cpu:0 is JAX's default already


# --isolate-env keeps these of the user's variables: enough to run Python, find the GPU driver
# and libraries, and honour the user's JAX / XLA settings.
ISOLATED_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TMPDIR", "TZ",
    "LD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX",
})
ISOLATED_PREFIXES = ("JAX_", "XLA_", "LC_", "CUDA_", "NVIDIA_", "TPU_", "ROCR_", "HIP_", "TF_CPP_")
# XLA flags about placement, not numerics: simulated devices (jaxrun's --host-devices) and XLA's CPU
# thread pool (a user's; jaxrun once added it to --jobs N's one-core shares, and no longer does).
_PLACEMENT_FLAGS = ("--xla_force_host_platform_device_count", "--xla_cpu_multi_thread_eigen")
_TRUE = {"1", "true", "t", "yes", "y", "on"}


def isolated(environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """The user's variables that ``isolate_env`` keeps."""
    return {k: v for k, v in environ.items() if k in ISOLATED_NAMES or k.startswith(ISOLATED_PREFIXES)}


def override_xla_flags(existing: str | None, flags: list[str]) -> str:
    """``flags`` added to an XLA_FLAGS value, replacing the user's value of a flag they both set."""
    names = {f.split("=", 1)[0] for f in flags}
    kept = [f for f in (existing or "").split() if f.split("=", 1)[0] not in names]
    return " ".join([*kept, *flags])


def numerics_of(env: dict[str, str]) -> "Numerics":
    """The numerics a script starts with, read from its environment: jaxrun's options and the
    user's own ``JAX_*`` / ``XLA_FLAGS`` alike (an exported ``JAX_ENABLE_X64=1`` counts)."""
    def flag(name: str) -> bool:
        return env.get(name, "").strip().lower() in _TRUE

    xla = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(_PLACEMENT_FLAGS)]
    from jaxrun.results.models import Numerics

    return Numerics(
        x64=flag("JAX_ENABLE_X64"),
        matmul_precision=env.get("JAX_DEFAULT_MATMUL_PRECISION") or None,
        debug_nans=flag("JAX_DEBUG_NANS"),
        debug_infs=flag("JAX_DEBUG_INFS"),
        disable_jit=flag("JAX_DISABLE_JIT"),
        xla_flags=" ".join(xla) or None,
    )


def probe_command(script: Path, events_path: Path, options: RunOptions, profile_dir: Path | None = None) -> list[str]:
    """``python -c ENTRY --events FILE [...] -- script [args]`` (probe/arguments.py), under
    ``options.python`` when given (another environment's interpreter)."""
    return ProbeArguments(
        events=str(events_path),
        script_argv=(str(script), *(options.args or ())),
        entry=options.entry,
        warm_calls=options.warm_calls if options.entry is not None else 1,
        profile=str(profile_dir) if options.enable_profiling and profile_dir is not None else None,
        xla_analysis=int(options.xla_analysis),
        cell_outputs=int(options.save_notebooks),
    ).command(options.python)
