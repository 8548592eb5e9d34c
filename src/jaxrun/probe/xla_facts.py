"""What XLA knows about each program a script compiles, read in the script's process as JAX builds
(or loads) its executable: cost analysis (loops counted by their trip counts), memory analysis, a
fingerprint of the optimized program and of the program JAX handed to XLA, the device kind and
count; and, at the end, what JAX's persistent-cache key takes from the process.

Each figure is read on its own: one that this backend or JAX version cannot give is null, and
``reason`` says which and why; nothing here may fail the script. The JAX internals used are
:mod:`.jax_internals`'.
"""

from __future__ import annotations

import hashlib
from typing import Any

from jaxrun.probe import jax_internals
from jaxrun.probe.loop_costs import has_loops, xla_cost
from jaxrun.probe.memory_fit import memory_of

__all__ = ["compile_environment", "program_facts"]

def first_devices(devices: Any) -> list[Any]:
    """The devices a program was compiled for (JAX holds them as a numpy array of objects)."""
    return list(devices.flat) if hasattr(devices, "flat") else list(devices)


def _fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def program_facts(executable: Any, computation: Any, devices: Any) -> dict[str, Any]:
    """The facts of one executable: ``cost``, ``memory``, ``fingerprint``, ``input_fingerprint``,
    ``device_kind``, ``device_count``, and ``reason`` for what is missing (the seconds spent are
    timed by the caller, probe/jax_hooks.py, around everything it does for the executable)."""
    facts: dict[str, Any] = {}
    missing: list[str] = []
    platform, client = None, None
    try:
        flat = first_devices(devices)
        facts["device_count"] = len(flat)
        facts["device_kind"] = str(flat[0].device_kind)
        platform, client = flat[0].platform, flat[0].client
    except Exception as error:
        missing.append(f"devices: {_short(error)}")
    try:
        memory = memory_of(executable.get_compiled_memory_stats())
        if memory is None:
            missing.append("memory: this backend gives no memory analysis")
        else:
            facts["memory"] = memory
    except Exception as error:
        missing.append(f"memory: {_short(error)}")
    text = None
    try:
        text = jax_internals.optimized_text(executable)
        facts["fingerprint"] = _fingerprint(text)
    except Exception as error:
        missing.append(f"fingerprint: {_short(error)}")
    try:
        facts["input_fingerprint"] = jax_internals.input_fingerprint(computation)
    except Exception as error:
        missing.append(f"input fingerprint: {_short(error)}")
    facts["cost"] = _cost(executable, text, client, platform)
    if missing:
        facts["reason"] = "; ".join(missing)
    return facts


def _cost(executable: Any, fingerprint_text: str | None, client: Any, platform: str | None) -> dict[str, Any]:
    try:
        raw = executable.cost_analysis()
    except Exception:  # not implemented on this backend / version
        raw = None
    text = fingerprint_text
    if text is not None and has_loops(text):
        # The trip counts XLA proved are in the loops' backend configs, which the fingerprint's
        # text leaves out: the full text, only for a program with a loop.
        try:
            text = "\n".join(module.to_string() for module in executable.hlo_modules())
        except Exception:
            text = None
    try:
        cost = xla_cost(raw, text, client, platform or "unknown")
    except Exception as error:  # never fail the script over a figure
        return {"flops": None, "bytes_accessed": None, "transcendentals": None, "source": None,
                "reason": f"XLA's cost analysis could not be read: {_short(error)}"}
    return {**cost.figures, "source": cost.source, "reason": cost.reason}


def cache_dir() -> str | None:
    """The persistent compilation cache's folder, None when it is off (jax imported)."""
    import jax

    directory = jax.config.jax_compilation_cache_dir
    enabled = bool(directory) and bool(getattr(jax.config, "jax_enable_compilation_cache", True))
    return str(directory) if enabled else None


# JAX settings that change the program JAX lowers (its dtypes, its precision attributes, its RNG
# and partitioning ops): they enter the persistent cache's key through the program.
PROGRAM_SETTINGS = ("jax_enable_x64", "jax_default_matmul_precision", "jax_threefry_partitionable",
                    "jax_default_prng_impl", "jax_use_shardy_partitioner")


_ABSENT = object()


def compile_environment() -> dict[str, Any]:
    """What JAX's persistent-cache key takes from this process besides the program (see
    jax/_src/cache_key.py ``get``): versions, backend, XLA flags, the cache folder; and the JAX
    settings that shape the program."""
    environment: dict[str, Any] = {}
    try:
        import jax
        import jaxlib

        environment["jax_version"] = jax.__version__
        environment["jaxlib_version"] = getattr(jaxlib, "__version__", None)
        environment["cache_dir"] = cache_dir()
        settings = {}
        for name in PROGRAM_SETTINGS:
            value = getattr(jax.config, name, _ABSENT)
            if value is not _ABSENT:
                settings[name] = str(getattr(value, "value", value))  # an enum setting: its value
        environment["jax_config"] = settings
    except Exception:
        pass
    try:
        environment["xla_flags"] = jax_internals.cache_key_xla_flags()
    except Exception:
        pass
    try:
        if jax_internals.backends_initialized():
            import jax

            backend = jax.devices()[0].client
            environment["backend"] = backend.platform
            environment["platform_version"] = str(backend.platform_version)
    except Exception:
        pass
    return environment


def _short(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 200 else text[:197] + "..."

