"""Counting JAX compilations in-process, per program, from ``jax.monitoring`` duration events.

The events and their program keys (``jit(loss)``, ``jit(grad(loss))``, ``pmap(step)``) come from
:mod:`jaxrun.probe.programs`, the same that name a script's ``compiles`` under ``jaxrun run``. Its
one listener per process fans events out to the counters that are active: registering and
removing JAX listeners per call would mutate JAX's listener list while another thread may be
iterating over it, and older JAX versions cannot unregister at all.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field, replace
from typing import Iterator

from jaxrun.probe import programs
from jaxrun.probe.programs import CompileEvent

_lock = threading.Lock()
_active: list["CompileCounter"] = []
_subscribed = False


@dataclass
class CompileCounter:
    """Compilations seen while active, per program.

    ``counts`` holds *lowerings* per program: every lowering builds one executable, whether XLA
    compiled it or loaded it from the persistent cache (a retrace and relowering is the cost a
    recompilation guard is about). ``backend_compiles`` and ``cache_loads`` split them;
    ``reasons`` holds JAX's explanation of each retrace, when explanations were on.
    """

    thread: int | None = None  # only events from this thread, when set
    events: list[CompileEvent] = field(default_factory=list)  # .program is the key: see program_key
    _sources: dict[str, str | None] = field(default_factory=dict, repr=False)

    def _add(self, event: CompileEvent) -> None:
        if self.thread is None or event.thread == self.thread:
            key = programs.program_key(event.program, event.source, self._sources)
            self.events.append(event if key == event.program else replace(event, program=key))

    def _per_program(self, phase: str, cached: bool | None = None) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.events:
            if e.phase == phase and (cached is None or e.cached == cached):
                out[e.program] = out.get(e.program, 0) + 1
        return out

    @property
    def counts(self) -> dict[str, int]:
        """Executables built per program (lowerings)."""
        return self._per_program(programs.LOWER)

    @property
    def total(self) -> int:
        return sum(1 for e in self.events if e.phase == programs.LOWER)

    @property
    def traces(self) -> dict[str, int]:
        return self._per_program(programs.TRACE)

    @property
    def backend_compiles(self) -> dict[str, int]:
        """XLA compilations per program (absent when the executable came from a cache)."""
        return self._per_program(programs.COMPILE, cached=False)

    @property
    def cache_loads(self) -> int:
        """Executables loaded from the persistent compilation cache instead of compiled."""
        return sum(1 for e in self.events if e.phase == programs.COMPILE and e.cached)

    @property
    def seconds(self) -> dict[str, float]:
        """Trace + lower + compile seconds per program (cache loads not included)."""
        out: dict[str, float] = {}
        for e in self.events:
            if not e.cached:
                out[e.program] = out.get(e.program, 0.0) + e.seconds
        return out

    @property
    def reasons(self) -> dict[str, list[str]]:
        """Per program, JAX's explanation of each retrace (needs :func:`programs.explaining`)."""
        out: dict[str, list[str]] = {}
        for e in self.events:
            if e.phase == programs.TRACE and e.reason is not None:
                out.setdefault(e.program, []).append(e.reason)
        return out

    def __repr__(self) -> str:
        return f"CompileCounter(total={self.total}, counts={self.counts})"


def _on_event(event: CompileEvent) -> None:
    with _lock:
        counters = list(_active)
    for counter in counters:
        counter._add(event)


def _subscribe() -> None:
    global _subscribed
    with _lock:
        if _subscribed:
            return
        _subscribed = True
    programs.subscribe(_on_event)


@contextlib.contextmanager
def counting(counter: CompileCounter) -> Iterator[CompileCounter]:
    _subscribe()
    with _lock:
        _active.append(counter)
    try:
        yield counter
    finally:
        with _lock:
            _active.remove(counter)


def count_compiles(*, this_thread_only: bool = False) -> contextlib.AbstractContextManager[CompileCounter]:
    """Count JAX compilations inside a ``with`` block, per program.

    >>> import jax, jax.numpy as jnp
    >>> from jaxrun.bench import count_compiles
    >>> def double(x):
    ...     return 2 * x
    >>> f = jax.jit(double)
    >>> x3, x4 = jnp.ones(3), jnp.ones(4)
    >>> with count_compiles() as c:
    ...     _ = f(x3); _ = f(x3); _ = f(x4)  # the third call compiles again: a new shape
    >>> c.counts["jit(double)"], c.total
    (2, 2)

    ``counts`` are lowerings per program (``jit(double)``, ``jit(grad(loss))``: the keys of a
    script's ``compiles`` under ``jaxrun run``); ``seconds`` the trace+lower+compile time per
    program. Events from every thread are counted unless ``this_thread_only`` is set.
    """
    return counting(CompileCounter(thread=threading.get_ident() if this_thread_only else None))
