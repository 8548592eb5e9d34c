"""What the probe learns from JAX: compile events while the script runs, device facts at the end.

Listeners are attached the moment the script imports jax (an import hook), not before: importing
jax in the probe up front would cost ~0.4 s for scripts that never use it and would freeze
``JAX_PLATFORMS`` before a script had the chance to set it.
"""

from __future__ import annotations

import os
import sys
import time

from jaxrun.probe import cluster, events
from jaxrun.probe.transfer_guard import watch_transfer_guard

TYPE_CHECKING = False  # typing is not imported at run time (probe/events.py says why)
if TYPE_CHECKING:
    from typing import Any, Callable

    from jaxrun.probe.channel import EventWriter

_CACHE_SAVED = "/jax/compilation_cache/compile_time_saved_sec"
# --device cpu:K (K > 0): the CPU device the script's work goes to by default (run/process/environment.py).
DEFAULT_DEVICE_ENV = "JAXRUN_DEFAULT_DEVICE"

_jit_seconds = 0.0
# (start, end) of every JIT phase of the script's. Phases nest (tracing an outer function traces
# the inner jitted ones) and may run inside imports; probe/phases.py makes them one partition.
_intervals: list[tuple[float, float]] = []
# While the probe drains the devices after the body (probe/drain.py), its own tiny program's
# compilation is not the script's.
_ignoring = False


def compile_intervals() -> list[tuple[float, float]]:
    return list(_intervals)


def ignore_compiles(value: bool) -> None:
    global _ignoring
    _ignoring = value


def jit_seconds() -> float:
    """Trace+lower+compile seconds seen so far in this process (warm mode attributes them to calls)."""
    return _jit_seconds


def block_until_ready(value: Any) -> Any:
    """Wait for JAX's asynchronous dispatch to finish, so a timed call includes its computation."""
    if "jax" not in sys.modules:
        return value
    import jax

    return jax.block_until_ready(value)


def attach_listeners(writer: EventWriter, analyse: bool = True) -> None:
    """``analyse``: read XLA's analyses of each executable built (probe/xla_facts.py)."""
    import jax.monitoring as monitoring

    from jaxrun.probe import (
        programs,  # here, not at the top: logging and re are not needed without jax
    )

    def on_compile(event: "programs.CompileEvent") -> None:
        global _jit_seconds
        if _ignoring:
            return
        duration = event.seconds
        end = time.perf_counter()
        compiled = events.Compile(type=events.COMPILE, phase=event.phase, fun=event.program, s=duration, at=end)
        if event.source is not None:
            compiled["source"] = event.source
        if event.reason is not None:
            compiled["reason"] = event.reason
        if event.cached:
            compiled["cached"] = True
        writer.send(compiled)
        _jit_seconds += duration
        _intervals.append((end - duration, end))
        if analyse and event.phase == programs.COMPILE:
            # Reading XLA's analyses is JIT work too (the compile phase's wall time, not the
            # script's run): its interval is exactly the seconds the PROGRAM event says (its
            # analysis_time), so that the compile wall is at most JAX's phases plus these.
            started = time.perf_counter()
            said = _program_facts(event)
            ended = time.perf_counter()
            _jit_seconds += ended - started
            _intervals.append((started, ended))
            if said[0]["type"] == events.PROGRAM:
                said[0]["s"] = ended - started
            for sent in said:
                writer.send(sent)

    def on_duration(event: str, duration: float, **kwargs: Any) -> None:
        if event == _CACHE_SAVED:
            writer.send(events.CacheSaved(type=events.CACHE_SAVED, s=duration))

    programs.subscribe(on_compile)
    programs.explain_on()  # for the whole run: a recompile's reason is part of the result
    monitoring.register_event_duration_secs_listener(on_duration)
    writer.send(events.JaxLoaded(type=events.JAX_LOADED))
    try:
        watch_transfer_guard(writer)
    except Exception as exc:  # noqa: BLE001 - the counts would not be known to be jaxrun's
        writer.send(events.TransferGuard(type=events.TRANSFER_GUARD, setting=f"unknown (jaxrun could not watch it: {exc!r})"))


def live_array_bytes() -> int | None:
    """Bytes of the jax.Arrays alive now (deleted and donated ones hold nothing); None without JAX.
    0 when no backend was started: no array exists (asking would start one)."""
    if "jax" not in sys.modules:
        return None
    try:
        from jaxrun.probe.jax_internals import backends_initialized

        if not backends_initialized():
            return 0
        import jax

        total = 0
        for array in jax.live_arrays():
            try:
                if not array.is_deleted():
                    total += int(array.nbytes)
            except Exception:  # noqa: BLE001 - deleted meanwhile (another thread)
                continue
        return total
    except Exception:  # noqa: BLE001 - unknown, never a broken end
        return None


# Programs already warned about (a program compiled again for new shapes warns once).
_fit_warned: set[str] = set()


def _program_facts(event: Any) -> list[Any]:
    """The events that say what XLA knows about the executable just built (a PROGRAM event
    first); a warning when it cannot fit in what its device has free (probe/memory_fit.py), to be
    written before the script runs it out of memory. Made here, sent by the caller, whose clock
    times them."""
    from jaxrun.probe.xla_facts import program_facts

    if event.built is None:  # JAX's frame did not hold the executable: say why the figures are null
        from jaxrun.probe.jax_internals import COMPILING_FRAME, MOVED

        return [events.Program(type=events.PROGRAM, fun=event.program, s=0.0,
                               reason=MOVED.format(what=f"the locals of pxla.{COMPILING_FRAME}"))]
    try:
        facts = program_facts(*event.built)
        warning = _fit_warning(event, facts.get("memory"))
    except Exception as exc:  # a figure is never worth the script
        return [events.ProbeWarning(type=events.PROBE_WARNING, message=f"could not read XLA's analyses: {exc!r}")]
    program = events.Program(type=events.PROGRAM, fun=event.program, s=0.0, **facts)  # s: the caller's clock
    if event.source is not None:
        program["source"] = event.source
    if warning is None:
        return [program]
    return [program, events.ProbeWarning(type=events.PROBE_WARNING, message=warning)]


def _fit_warning(event: Any, memory: dict[str, int] | None) -> str | None:
    """Once per program: a warning when it cannot fit on the first of its devices."""
    if memory is None or event.program in _fit_warned:
        return None
    from jaxrun.probe.memory_fit import available, device_label, fit_warning
    from jaxrun.probe.xla_facts import first_devices

    device = first_devices(event.built[2])[0]
    warning = fit_warning(event.program, memory, device_label(device),
                          available(device, needed=memory["total_bytes"] - memory["argument_bytes"]))
    if warning is not None:
        _fit_warned.add(event.program)
    return warning


def compile_environment() -> dict[str, Any] | None:
    """What JAX's persistent-cache key takes from the process (None: the script never imported jax)."""
    if "jax" not in sys.modules:
        return None
    from jaxrun.probe.xla_facts import compile_environment as read

    try:
        return read()
    except Exception:
        return None


def compile_cache_facts() -> dict[str, Any] | None:
    """Whether the persistent compilation cache was on at the end, and JAX's count of its misses."""
    if "jax" not in sys.modules:
        return None
    try:
        from jaxrun.probe import programs
        from jaxrun.probe.xla_facts import cache_dir

        enabled = cache_dir() is not None
    except Exception:
        return None
    return {"enabled": enabled, "misses": programs.persistent_cache_misses()}


# Plain classes, not importlib.abc's: the import system needs only these methods, and importlib.abc
# (its ABCs) would be imported at every probe's start for scripts that never import jax.
class _NotifyingLoader:
    """Runs the real loader, then tells the probe that the module exists."""

    def __init__(self, inner: Any, on_loaded: Callable[[], None]) -> None:
        self._inner = inner
        self._on_loaded = on_loaded

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        self._on_loaded()

    def __getattr__(self, name: str) -> Any:  # resource readers etc. stay the real loader's
        return getattr(self._inner, name)


# A forked child of a prestarted interpreter that imported jax (--prestart jax, probe/fork_server.py)
# holds jax's package here, out of sys.modules, until the script imports it: its `import jax` then
# finds it through JaxImportWatcher as an exec'd script's import finds it on disk (the listeners
# attached then, the figures of a script that never imports jax null, as they are exec'd).
_preloaded: Any = None


def hold_preloaded_jax() -> None:
    """Take ``jax`` (the package; its modules stay) out of sys.modules until the script imports it."""
    global _preloaded
    _preloaded = sys.modules.pop("jax", None)


class _PreloadedLoader:
    """Gives back the package imported before the fork, as it was (its spec and loader kept)."""

    def __init__(self, module: Any) -> None:
        self._module = module
        self._spec, self._loader = module.__spec__, module.__loader__

    def create_module(self, spec: Any) -> Any:
        return self._module

    def exec_module(self, module: Any) -> None:
        module.__spec__, module.__loader__ = self._spec, self._loader  # what the import system set, undone


class JaxImportWatcher:
    def __init__(self, on_loaded: Callable[[], None]) -> None:
        self._on_loaded = on_loaded

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        global _preloaded
        if fullname != "jax":
            return None
        sys.meta_path.remove(self)  # once only; the real finders take it from here
        if _preloaded is not None:
            module, _preloaded = _preloaded, None
            spec = sys.modules["_frozen_importlib"].ModuleSpec("jax", _NotifyingLoader(_PreloadedLoader(module),
                                                                                      self._on_loaded))
            return spec
        # importlib.machinery's PathFinder, from the import system itself: nothing to import here.
        spec = sys.modules["_frozen_importlib_external"].PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _NotifyingLoader(spec.loader, self._on_loaded)
        return spec


def choose_default_device() -> None:
    """--device cpu:K: device K of the (simulated) CPU devices becomes JAX's default, as the
    script imports jax. The backend starts here rather than at the script's first operation."""
    index = os.environ.get(DEFAULT_DEVICE_ENV)
    if index:
        import jax

        jax.config.update("jax_default_device", jax.devices("cpu")[int(index)])


def watch_jax_import(writer: EventWriter, hooks: list[Callable[[], None]] | None = None, *,
                     analyse: bool = True) -> None:
    """Attach the listeners when the script imports jax, then run ``hooks`` (the profiler's start)."""

    def on_loaded() -> None:
        if cluster.in_job():  # --processes N: before the script can call jax.distributed.initialize()
            try:
                cluster.register()
            except Exception as exc:  # noqa: BLE001 - the script's initialize() then says what is missing
                writer.send(events.ProbeWarning(type=events.PROBE_WARNING, message=(
                    f"could not register jaxrun's cluster environment: {exc!r}; jax.distributed.initialize() "
                    "needs num_processes and process_id (JAXRUN_PROCESS_COUNT, JAXRUN_PROCESS_ID)")))
        try:
            choose_default_device()
        except Exception as exc:  # noqa: BLE001 - said in the result; the script runs on JAX's default
            writer.send(events.ProbeWarning(type=events.PROBE_WARNING,
                                            message=f"could not make cpu:{os.environ.get(DEFAULT_DEVICE_ENV)} "
                                            f"the default device: {exc!r}"))
        try:
            attach_listeners(writer, analyse)
        except Exception as exc:  # listeners are a bonus; never break the script over them
            writer.send(events.ProbeWarning(type=events.PROBE_WARNING, message=f"could not attach jax listeners: {exc!r}"))
        for hook in hooks or ():
            try:
                hook()
            except Exception as exc:
                writer.send(events.ProbeWarning(type=events.PROBE_WARNING, message=f"could not start profiling: {exc!r}"))

    if "jax" in sys.modules:
        on_loaded()
        return
    sys.meta_path.insert(0, JaxImportWatcher(on_loaded))


def peak_bytes_in_use(stats: Any) -> int | None:
    """``peak_bytes_in_use`` of one device's ``memory_stats()``; None where the backend keeps no
    statistics (CPU returns None) or does not track the peak."""
    if not isinstance(stats, dict) or stats.get("peak_bytes_in_use") is None:
        return None
    return int(stats["peak_bytes_in_use"])


def device_facts() -> dict[str, Any] | None:
    """Which backend the script really used and its peak device memory; None if JAX was unused."""
    if "jax" not in sys.modules:
        return None
    try:
        from jaxrun.probe.jax_internals import backends_initialized

        if not backends_initialized():
            return {"initialized": False}
        import jax

        devices = jax.local_devices()
        peaks: list[int | None] = []
        for device in devices:
            try:
                stats = device.memory_stats()
            except Exception:
                stats = None
            peaks.append(peak_bytes_in_use(stats))
        return {
            "initialized": True,
            "backend": jax.default_backend(),
            "platform": devices[0].platform if devices else None,
            "device_count": jax.device_count(),
            "peak_bytes_per_device": peaks,
            "live_array_bytes": live_array_bytes(),
        }
    except Exception as exc:
        return {"initialized": None, "error": repr(exc)}
