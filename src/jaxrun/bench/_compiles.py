"""Counting JAX compilations in-process, from ``jax.monitoring`` duration events.

JAX reports each JIT phase as a duration event keyed by ``fun_name`` (the same events the probe
turns into a script's ``compiles``; see :mod:`jaxrun.probe.jax_hooks`). One listener is installed
once per process and fans events out to the counters that are active: registering and removing
listeners per call would mutate JAX's listener list while another thread may be iterating over
it, and older JAX versions cannot unregister at all.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..probe.jax_hooks import function_name

TRACE = "/jax/core/compile/jaxpr_trace_duration"
LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE = "/jax/core/compile/backend_compile_duration"
# Fired (with a duration) when an executable is loaded from the persistent compilation cache; the
# backend-compile event still fires then, timing the load rather than a compilation.
CACHE_LOAD = "/jax/compilation_cache/cache_retrieval_time_sec"
_PHASES = {TRACE: "trace", LOWER: "lower", COMPILE: "compile", CACHE_LOAD: "cache_load"}

_lock = threading.Lock()
_active: list["CompileCounter"] = []
_installed = False


@dataclass
class CompileEvent:
    phase: str  # "trace" | "lower" | "compile" | "cache_load"
    fun: str
    seconds: float
    thread: int


@dataclass
class CompileCounter:
    """Compilations seen while active.

    ``counts`` holds *lowerings* per function name, as the probe counts them: every lowering yields
    one executable, whether XLA compiled it or loaded it from the persistent cache (which skips the
    backend-compile event). ``traces`` and ``backend_compiles`` count the other two phases.
    """

    thread: int | None = None  # only events from this thread, when set
    events: list[CompileEvent] = field(default_factory=list)

    def _add(self, event: CompileEvent) -> None:
        if self.thread is None or event.thread == self.thread:
            self.events.append(event)

    def _per_fun(self, phase: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.events:
            if e.phase == phase:
                out[e.fun] = out.get(e.fun, 0) + 1
        return out

    @property
    def counts(self) -> dict[str, int]:
        """Executables built per function name (lowerings)."""
        return self._per_fun("lower")

    @property
    def total(self) -> int:
        return sum(1 for e in self.events if e.phase == "lower")

    @property
    def traces(self) -> dict[str, int]:
        return self._per_fun("trace")

    @property
    def backend_compiles(self) -> dict[str, int]:
        """XLA compilations per function (absent when the executable came from a cache)."""
        return self._per_fun("compile")

    @property
    def cache_loads(self) -> int:
        """Executables loaded from the persistent compilation cache instead of compiled."""
        return sum(1 for e in self.events if e.phase == "cache_load")

    @property
    def seconds(self) -> dict[str, float]:
        """Trace + lower + compile seconds per function name."""
        out: dict[str, float] = {}
        for e in self.events:
            if e.phase != "cache_load":
                out[e.fun] = out.get(e.fun, 0.0) + e.seconds
        return out

    def __repr__(self) -> str:
        return f"CompileCounter(total={self.total}, counts={self.counts})"


def _on_duration(event: str, duration: float, **kwargs: Any) -> None:
    phase = _PHASES.get(event)
    if phase is None or not _active:
        return
    record = CompileEvent(phase, function_name(kwargs.get("fun_name")), float(duration), threading.get_ident())
    with _lock:
        counters = list(_active)
    for counter in counters:
        counter._add(record)


def _install() -> None:
    global _installed
    with _lock:
        if _installed:
            return
        import jax.monitoring

        jax.monitoring.register_event_duration_secs_listener(_on_duration)
        _installed = True


@contextlib.contextmanager
def counting(counter: CompileCounter) -> Iterator[CompileCounter]:
    _install()
    with _lock:
        _active.append(counter)
    try:
        yield counter
    finally:
        with _lock:
            _active.remove(counter)


def count_compiles(*, this_thread_only: bool = False) -> contextlib.AbstractContextManager[CompileCounter]:
    """Count JAX compilations inside a ``with`` block, per function name.

    >>> import jax, jax.numpy as jnp
    >>> from jaxrun.bench import count_compiles
    >>> def double(x):
    ...     return 2 * x
    >>> f = jax.jit(double)
    >>> x3, x4 = jnp.ones(3), jnp.ones(4)
    >>> with count_compiles() as c:
    ...     _ = f(x3); _ = f(x3); _ = f(x4)  # the third call compiles again: a new shape
    >>> c.counts["double"], c.total
    (2, 2)

    ``counts`` are lowerings per function (what ``jaxrun run`` reports as ``compile_count``);
    ``seconds`` the trace+lower+compile time per function. Events from every thread are counted
    unless ``this_thread_only`` is set.
    """
    return counting(CompileCounter(thread=threading.get_ident() if this_thread_only else None))
