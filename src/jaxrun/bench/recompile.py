"""Recompilation guards: fail loudly, naming the argument, when a jitted function compiles again.

A jitted function that silently recompiles on every call (a shape that grows, a Python scalar that
flips dtype, a static argument in a loop) can be 100x slower than it should be and still give the
right answers. These guards turn that into an error that says which argument changed and how:

* :func:`no_recompile` wraps one function: it records each call's abstract signature (pytree
  structure, shapes, dtypes, weak types, static values) and, when a call after the first compiles,
  raises :class:`RecompileError` with the difference from the previous call;
* :func:`assert_max_compiles` guards a block of code: it counts compilations per function and asks
  JAX itself to explain each cache miss (``jax_explain_cache_misses``), since it never sees the
  arguments.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import types
from typing import Any, Callable, Iterator

from jaxrun.bench._compiles import CompileCounter, count_compiles, counting
from jaxrun.bench._signature import ArgSignature, call_signature, diff, explain
from jaxrun.errors import JAXExecutionError
from jaxrun.probe.programs import base_name, explaining

__all__ = ["RecompileError", "count_compiles", "no_recompile", "assert_max_compiles"]


class RecompileError(JAXExecutionError, AssertionError):
    """A guarded function compiled more often than allowed. The message names what changed."""

    def __init__(self, message: str, *, function: str, counts: dict[str, int] | None = None) -> None:
        super().__init__(message)
        self.function = function
        self.counts = dict(counts or {})


# --- no_recompile ---------------------------------------------------------------------------------


class _NoRecompile:
    """Callable wrapper returned by :func:`no_recompile`; other attributes come from the function."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._name = getattr(fn, "__name__", None) or repr(fn)
        self._lock = threading.Lock()
        self._calls = 0
        self._previous: dict[str, ArgSignature] | None = None
        try:
            self._signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):  # no introspectable signature: arguments get numbered names
            self._signature = None

    def __getattr__(self, name: str) -> Any:  # .lower, .trace, .eval_shape of a jitted function
        return getattr(self._fn, name)

    def __get__(self, instance: Any, owner: Any = None) -> Any:  # usable on methods
        return self if instance is None else types.MethodType(self, instance)

    @property
    def calls(self) -> int:
        return self._calls

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        signature = call_signature(self._fn, args, kwargs, self._signature)
        # Only this thread's compilations belong to this call.
        counter = CompileCounter(thread=threading.get_ident())
        with counting(counter), explaining():
            out = self._fn(*args, **kwargs)
        with self._lock:
            first = self._calls == 0
            previous = self._previous
            self._calls += 1
            self._previous = signature
        if not first and counter.total > 0:
            raise RecompileError(
                self._message(previous or {}, signature, counter), function=self._name, counts=counter.counts
            )
        return out

    def _message(
        self, previous: dict[str, ArgSignature], current: dict[str, ArgSignature], counter: CompileCounter
    ) -> str:
        changes = diff(previous, current)
        # A Python scalar passed as a traced argument changes value without recompiling; its value
        # is only the culprit when nothing else changed (then it must be static).
        telling = [c for c in changes if c.kind != "value"] or changes
        head = f"{self._name} was recompiled on call {self._calls}"
        if {base_name(p) for p in counter.counts} != {self._name}:  # say what compiled when it is not fn itself
            head += " (compiled: " + ", ".join(f"{f} x{n}" for f, n in sorted(counter.counts.items())) + ")"
        if telling:
            return f"{head}: {explain(telling)}"
        jax_says = list(dict.fromkeys(r for reasons in counter.reasons.values() for r in reasons))
        cause = f"; JAX says: {'; '.join(jax_says)}" if jax_says else ""
        return (
            f"{head} although no argument changed shape, dtype, pytree structure or static value since "
            f"the previous call{cause}; look for a closed-over or global value that changed, a new "
            "function object (jax.jit inside a loop, a fresh lambda or functools.partial per call), "
            "or a changed jax config"
        )

    def __repr__(self) -> str:
        return f"no_recompile({self._fn!r})"


def no_recompile(fn: Callable[..., Any]) -> Any:
    """Wrap ``fn`` so that any compilation after its first call raises :class:`RecompileError`.

    Use it on a jitted function (or on a function that calls jitted code). The error names the
    argument whose shape, dtype, weak type, pytree structure or static value changed since the
    previous call:

    >>> import jax, jax.numpy as jnp
    >>> from jaxrun.bench import no_recompile, RecompileError
    >>> @no_recompile
    ... @jax.jit
    ... def step(x):
    ...     return x * 2
    >>> a, b = jnp.ones(3), jnp.ones(4)
    >>> _ = step(a); _ = step(a)          # compiles once, then reuses the executable
    >>> try:
    ...     step(b)
    ... except RecompileError as e:
    ...     print(e)
    step was recompiled on call 3: argument 'x' changed shape from (3,) to (4,); keep shapes fixed (pad or bucket) or mark the argument static

    The error is raised after the call returns (the compilation is what proves it), so the
    computation itself did happen.
    """
    if isinstance(fn, _NoRecompile):
        return fn
    if not callable(fn):
        raise TypeError(f"no_recompile expects a function, got {type(fn).__name__}: {fn!r}")
    return _NoRecompile(fn)


# --- assert_max_compiles -------------------------------------------------------------------------


def _fun_name(fun: Callable[..., Any] | str | None) -> str | None:
    if fun is None or isinstance(fun, str):
        return fun
    return getattr(fun, "__name__", None) or repr(fun)


@contextlib.contextmanager
def assert_max_compiles(n: int, fun: Callable[..., Any] | str | None = None) -> Iterator[CompileCounter]:
    """Raise :class:`RecompileError` if, inside the block, a function compiles more than ``n`` times.

    Counts are per program (lowerings, as :func:`count_compiles` reports them: ``jit(loss)`` and
    ``jit(grad(loss))`` are two programs); with ``fun`` (a function or its name) only the programs
    of that function are checked. The error names each offending program, how often it compiled,
    and which argument changed, as JAX explains its cache misses:

    >>> import jax, jax.numpy as jnp
    >>> from jaxrun.bench import assert_max_compiles, RecompileError
    >>> def norm(v):
    ...     return jnp.sqrt(jnp.sum(v * v))
    >>> f = jax.jit(norm)
    >>> a, b = jnp.ones(3), jnp.ones(5)
    >>> try:
    ...     with assert_max_compiles(1):
    ...         _ = f(a); _ = f(b)
    ... except RecompileError as e:
    ...     print(e)
    jit(norm) compiled 2 times in the block (at most 1 allowed): argument v changed f32[3] -> f32[5]
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"assert_max_compiles needs a whole number of compilations >= 0, got {n!r}")
    name = _fun_name(fun)
    with explaining(), count_compiles() as counter:
        yield counter
    counts, reasons = counter.counts, counter.reasons
    offenders = {p: c for p, c in counts.items() if c > n and (name is None or name in (p, base_name(p)))}
    if not offenders:
        return
    parts = []
    for program, c in sorted(offenders.items(), key=lambda item: -item[1]):
        why = list(dict.fromkeys(reasons.get(program, [])))
        reason = "; ".join(why) if why else "JAX gave no explanation (a cache eviction, or explanations were unavailable)"
        parts.append(f"{program} compiled {c} times in the block (at most {n} allowed): {reason}")
    raise RecompileError("; ".join(parts), function=next(iter(offenders)), counts=counts)
