"""``jaxrun.bench.fits``: will this function's program fit on the device? Answered from XLA's
memory analysis of the compiled program against what the device can still give
(probe/memory_fit.py, the same check the probe makes as a script's programs compile), without
running the function: its arguments go to the compiler as abstract shapes, so a batch size that
cannot be allocated can be asked about (``jax.ShapeDtypeStruct`` arguments)."""

from __future__ import annotations

from typing import Any, Callable

from jaxrun.bench.records import FitCheck
from jaxrun.errors import UsageError
from jaxrun.probe.memory_fit import available, memory_of
from jaxrun.results.models import ProgramMemory

__all__ = ["fits"]

PLATFORMS = ("cpu", "gpu", "cuda", "rocm", "tpu")


def _device(device: Any) -> Any:
    import jax

    if device is None:
        return jax.devices()[0]
    if isinstance(device, str):
        if device not in PLATFORMS:
            raise UsageError(f"device must be a jax.Device or one of {', '.join(PLATFORMS)}, got {device!r}")
        try:
            return jax.devices(device)[0]
        except RuntimeError as exc:
            raise UsageError(f"no {device} device here ({exc}); this process has {jax.devices()}") from None
    if not hasattr(device, "platform"):
        raise UsageError(f"device must be a jax.Device such as jax.devices()[0] or a platform name "
                         f"({', '.join(PLATFORMS)}), got {device!r}")
    return device


def _program_name(fn: Any) -> str:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return f"jit({name})"


def fits(fn: Callable[..., Any], *args: Any, device: Any = None, **kwargs: Any) -> FitCheck:
    """Whether ``fn(*args, **kwargs)`` fits in the memory ``device`` can still give, without running it.

    >>> import jax, jax.numpy as jnp
    >>> from jaxrun import bench
    >>> bench.fits(lambda x: x @ x, jax.ShapeDtypeStruct((1024, 1024), jnp.float32)).fits
    True

    ``fn`` is a jitted function or a plain one (jitted here); ``args`` and ``kwargs`` are arrays,
    ``jax.ShapeDtypeStruct``s or anything ``jax.jit`` takes (Python scalars stay static values of
    the trace only if ``fn`` says so). ``device`` is a ``jax.Device`` or a platform name ("cpu",
    "gpu", "tpu"); default: JAX's first device. The program is compiled for it (the arguments as
    abstract shapes placed there), never run.

    What a call must allocate is the program's total (inputs, outputs, temporaries, code, less
    donated inputs it reuses) less the inputs already on that device (arrays given there); it
    fits when that is at most the device's free memory (accelerators: ``memory_stats()``'s
    ``bytes_limit`` - ``bytes_in_use``; CPU: the tightest of the process's cgroup limit,
    jaxrun's ``--memory-limit`` and MemAvailable) and the total at most its limit. ``fits`` is
    None, with ``reason``, when the backend gives no memory analysis or the device no limit.
    """
    import jax

    if not callable(fn):
        raise UsageError(f"fits needs a function as first argument, got {type(fn).__name__}: {fn!r}")
    dev = _device(device)
    sharding = jax.sharding.SingleDeviceSharding(dev)
    resident = 0

    def abstract(leaf: Any) -> Any:
        nonlocal resident
        if isinstance(leaf, jax.Array):
            try:
                resident += sum(s.data.nbytes for s in leaf.addressable_shards if s.device == dev)
            except Exception:  # deleted, or an abstract array inside a trace
                pass
        if isinstance(leaf, jax.ShapeDtypeStruct) or hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding)
        return leaf

    shapes, kw_shapes = jax.tree_util.tree_map(abstract, (args, kwargs))
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    program = _program_name(fn)
    label = f"{dev.platform}:{dev.id} ({dev.device_kind})"
    compiled = jitted.lower(*shapes, **kw_shapes).compile()
    try:
        analysis = compiled.memory_analysis()
    except Exception:  # not implemented on this backend
        analysis = None
    memory = memory_of(analysis)
    avail = available(dev)
    check: dict[str, Any] = {"program": program, "device": label}
    if avail is not None:
        check.update(free_bytes=avail.free_bytes, limit_bytes=avail.limit_bytes, in_use_bytes=avail.in_use_bytes,
                     source=avail.source)
    if memory is None:
        return FitCheck(fits=None, reason=f"the {dev.platform} backend gives no memory analysis of the program",
                        **check)
    resident = min(resident, memory["argument_bytes"])
    needed = memory["total_bytes"] - resident
    check.update(memory=ProgramMemory(**memory), needed_bytes=needed, resident_bytes=resident)
    if avail is None:
        return FitCheck(fits=None, reason=f"{label} says no memory limit (its memory_stats() has no bytes_limit)",
                        **check)
    from jaxrun.core.formatting import fmt_bytes

    if needed > avail.free_bytes:
        reason = (f"it needs {fmt_bytes(needed)} but the device has {fmt_bytes(avail.free_bytes)} free: it would "
                  "likely run out of memory")
    elif memory["total_bytes"] > avail.limit_bytes:
        reason = (f"it needs {fmt_bytes(memory['total_bytes'])} with its inputs, more than the device's limit of "
                  f"{fmt_bytes(avail.limit_bytes)}")
    else:
        return FitCheck(fits=True, **check)
    return FitCheck(fits=False, reason=reason, **check)
