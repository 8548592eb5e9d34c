"""Which program a JAX compile event belongs to, why JAX traced it again, and whether its
executable was compiled or loaded from the persistent cache.

``jax.monitoring`` names a compile event by the Python function's name only: ``jit(loss)``,
``jit(grad(loss))`` and ``jit(vmap(loss))`` are all ``loss``, and ``pmap(f)`` is ``_fun``. So when
the trace event fires, we look one level up the stack for the callable JAX is tracing and unwrap
it (JAX's transformation wrappers, ``functools.partial``, nested ``jit``) into a program name such
as ``jit(grad(loss))`` and the source location of the user's function. That is JAX-internal
territory: whatever cannot be recognised falls back to ``jit(<name>)``, never to an error.

Why a program was traced again is JAX's own explanation (``jax_explain_cache_misses``, logged by
``jax._src.interpreters.partial_eval`` just before it traces): it is paired with the next trace
event of the same function on the same thread.

One listener per process (:func:`subscribe`) serves the probe and ``jaxrun.bench`` alike, so a
script run by jaxrun that also uses the bench guards sees the same program keys twice.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator

TRACE, LOWER, COMPILE = "trace", "lower", "compile"
_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": TRACE,
    "/jax/core/compile/jaxpr_to_mlir_module_duration": LOWER,
    "/jax/core/compile/backend_compile_duration": COMPILE,
}
_CACHE_HIT = "/jax/compilation_cache/cache_hits"
_CACHE_MISS = "/jax/compilation_cache/cache_misses"
# Lowering and compiling report `jit(f)` / `pmap(f)` while tracing reports `f`.
_WRAPPED = re.compile(r"^(?:jit|pjit|pmap|xla_pmap|shard_map)\((.*)\)$")

# Where JAX logs its cache-miss explanations ("TRACING CACHE MISS"; with a persistent cache also
# "PERSISTENT COMPILATION CACHE MISS").
EXPLAIN_LOGGERS = (
    "jax._src.interpreters.partial_eval",
    "jax._src.pjit",
    "jax._src.linear_util",
    "jax._src.util",
    "jax._src.compiler",
    "jax._src.compilation_cache",
)


_LAYERED = re.compile(r"^[A-Za-z_][\w.]*\((.*)\)$")


def base_name(program: str) -> str:
    """The function's own name in a program key: ``jit(grad(loss)) @ m.py:4`` -> ``loss``."""
    name = program.split(" @ ", 1)[0]
    while True:
        match = _LAYERED.match(name)
        if not match:
            return name
        name = match.group(1)


def function_name(raw: object) -> str:
    """``jit(f)`` -> ``f``: the name a trace event gives for a lowering or compile event's name."""
    name = str(raw) if raw is not None else "<unknown>"
    match = _WRAPPED.match(name)
    return match.group(1) if match else name


@dataclass(frozen=True)
class CompileEvent:
    phase: str  # TRACE | LOWER | COMPILE
    program: str  # e.g. "jit(grad(loss))"; two functions may share one (see program_key)
    seconds: float
    thread: int
    source: str | None = None  # "path:line" of the user's function; None for JAX's own
    reason: str | None = None  # TRACE: why JAX traced again (None on a first trace, or unexplained)
    cached: bool = False  # COMPILE: the executable was loaded from the persistent cache


def program_key(program: str, source: str | None, seen: "dict[str, str | None]") -> str:
    """The key of ``program`` among those in ``seen`` (key -> source, updated): the program itself,
    or ``program @ file:line`` when another function of the same name took the plain key first."""
    key = program
    if seen.setdefault(program, source) != source and source is not None:
        path, _, line = source.rpartition(":")
        key = f"{program} @ {os.path.basename(path)}:{line}"
        seen.setdefault(key, source)
    return key


# --- naming the program ----------------------------------------------------------------------------

_JAX_DIR = os.sep + "jax" + os.sep  # replaced by jax's own folder when the listener is installed
# JAX's wrappers, by (file stem, code name) or code name: what the user wrote.
_LAYERS = {
    "grad_f": "grad", "vmap_f": "vmap", "value_and_grad_f": "value_and_grad", "fun_remat": "checkpoint",
    "jacfun": "jac", "hessian": "hessian", ("pmap", "_fun"): "pmap", ("shard_map", "wrapped"): "shard_map",
}
_TRANSPARENT = {"reraise_with_filtered_traceback"}  # api_boundary: the real wrapper is in its closure


def _unwrapped(value: Any) -> Any:
    """A callable, or the Python function inside a ``linear_util.WrappedFun``; else None."""
    if hasattr(value, "transforms") and callable(getattr(value, "f", None)):
        return value.f
    return value if callable(value) and not isinstance(value, type) else None


def _inner(fn: Any) -> Any:
    """The callable a JAX wrapper closes over (its free variable ``fun``, ``f`` or ``fn``, or its
    only callable one), else its ``__wrapped__``."""
    code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None) or ()
    if code is not None:
        values = {}
        for name, cell in zip(code.co_freevars, cells):
            try:
                value = _unwrapped(cell.cell_contents)
            except ValueError:  # an empty cell
                continue
            if value is not None:
                values[name] = value
        for name in ("fun", "f", "fn"):
            if name in values:
                return values[name]
        if len(values) == 1:
            return next(iter(values.values()))
    return getattr(fn, "__wrapped__", None)


def _in_jax(fn: Any) -> bool:
    code = getattr(fn, "__code__", None)
    return code is not None and _JAX_DIR in code.co_filename


def _layer(fn: Any) -> str | None:
    code = fn.__code__
    stem = os.path.splitext(os.path.basename(code.co_filename))[0]
    return _LAYERS.get((stem, code.co_name)) or _LAYERS.get(code.co_name)


def describe(fun: Any) -> tuple[str, str | None]:
    """``(program, source)`` for the callable JAX traces for ``jit``: ``("jit(grad(loss))", "m.py:4")``."""
    layers: list[str] = []
    fn = fun
    for _ in range(16):
        if isinstance(fn, functools.partial):
            fn = fn.func
            continue
        if type(fn).__name__ == "PjitFunction":
            layers.append("jit")
            fn = getattr(fn, "__wrapped__", None)
            continue
        if not _in_jax(fn):
            break  # the user's function (or something we do not know): its name is the program's
        inner, wrapped = _inner(fn), getattr(fn, "__wrapped__", None)
        if fn.__code__.co_name in _TRANSPARENT:
            # JAX's API boundary around a transformation of the user's function: the boundary's
            # __wrapped__ is that function, its closure the transformation (grad_f, vmap_f, ...).
            layer = _layer(inner) if _in_jax(inner) else None
            if layer is not None and wrapped is not None and not _in_jax(wrapped):
                layers.append(layer)
                fn = wrapped
            else:
                fn = inner or wrapped
            continue
        if inner is None:
            break
        layer = _layer(fn)
        if layer is not None:
            layers.append(layer)
        fn = inner
    base_code = getattr(fn, "__code__", None)
    name = getattr(fn, "__name__", None) or type(fn).__name__  # as JAX names it; the source tells apart
    source = None
    if base_code is not None and _JAX_DIR not in base_code.co_filename:
        source = f"{base_code.co_filename}:{base_code.co_firstlineno}"
    if layers[:2] == ["shard_map", "pmap"]:
        layers = layers[1:]  # pmap is implemented with shard_map: the user wrote pmap
    if not layers or layers[0] not in ("pmap", "shard_map"):
        layers.insert(0, "jit")  # the event came from tracing for jit
    program = name
    for layer in reversed(layers):
        program = f"{layer}({program})"
    return program, source


def _traced_callable() -> Any:
    """The callable JAX was tracing when the trace event fired: a local ``fun`` a few frames up."""
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return None
        if _JAX_DIR in frame.f_code.co_filename and "fun" in frame.f_code.co_varnames:
            fun = frame.f_locals.get("fun")
            if fun is not None:
                return getattr(fun, "f", fun) if hasattr(fun, "transforms") else fun  # lu.WrappedFun
        frame = frame.f_back
    return None


# --- JAX's explanations of cache misses ------------------------------------------------------------

_NEVER_SEEN = re.compile(r"never seen function:\s*\n\s*(?P<name>.+?) id=\d+ defined at (?P<src>\S+)")
_SEEN = re.compile(r"\n\s*for (?P<name>.+?) defined at (?P<src>\S+)")
_CHANGE = re.compile(
    r"^\s*\*\s*at (?P<where>.+?), now (?P<new>.+?) and before (?P<old>.+?)(?:, so (?P<why>.+))?\s*$"
)
_PYTREE_META = re.compile(r"<class '[^']+'> with pytree metadata ")
# JAX explains a miss by comparing the new key with every key it has cached for the function, so
# explanations cost time that grows with the number of recompilations (measured here: 200 retraces
# of one function added 1.5 s of trace time). jaxrun stops asking after this many.
MAX_EXPLAINED = 100
NOT_EXPLAINED = (
    f"not explained: jaxrun asks JAX for at most {MAX_EXPLAINED} explanations per process (their cost "
    "grows with every recompilation)"
)
RECREATED = (
    "the function is a new object on every call (jax.jit, a lambda or functools.partial created "
    "inside a loop?), so JAX cannot reuse its cache"
)


def explain(message: str) -> tuple[str, str | None] | None:
    """``(function name, reason)`` from one TRACING CACHE MISS message; reason None for a function
    JAX has never seen (a first trace, unless the same program was traced before: see RECREATED)."""
    if "TRACING CACHE MISS" not in message:
        return None
    never = _NEVER_SEEN.search(message)
    if never:
        return never["name"], None
    seen = _SEEN.search(message)
    if not seen:
        return None
    changes = []
    for line in message.splitlines():
        m = _CHANGE.match(line)
        if m:
            old, new = _PYTREE_META.sub("", m["old"]), _PYTREE_META.sub("", m["new"])
            why = f" ({m['why']})" if m["why"] else ""
            changes.append(f"argument {m['where']} changed {old} -> {new}{why}")
    if changes:
        return seen["name"], "; ".join(changes)
    body = message[seen.end():].replace("all previously seen cache keys differ.", "")
    body = body.replace("For the closest previous key:", "")
    return seen["name"], " ".join(body.split())[:400] or "JAX gave no explanation"


class _MissLog(logging.Filter):
    """Collects cache-miss explanations from JAX's loggers; hides them from the script's stderr
    when jaxrun (not the script) turned them on."""

    def __init__(self, tracker: "_Tracker") -> None:
        super().__init__()
        self.tracker = tracker
        self.hide = False

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "CACHE MISS" not in message:
            return True
        explained = explain(message)
        if explained is not None:
            self.tracker.pending().append(explained)
            self.tracker.explained += 1
        return not self.hide


# --- the one listener ------------------------------------------------------------------------------


class _Tracker:
    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self._traced: set[tuple[str, str | None]] = set()
        self.subscribers: list[Callable[[CompileEvent], None]] = []
        self.cache_misses = 0
        self.explained = 0  # explanations JAX gave
        self.capped = False  # jaxrun turned explanations off after MAX_EXPLAINED

    def pending(self) -> list[tuple[str, str | None]]:
        if not hasattr(self._local, "pending"):
            self._local.pending = []
        return self._local.pending

    def _programs(self) -> dict[str, tuple[str, str | None]]:  # trace name -> this thread's last program
        if not hasattr(self._local, "programs"):
            self._local.programs = {}
        return self._local.programs

    def on_trace(self, name: str) -> tuple[str, str | None, str | None, bool]:
        """(program, source, reason, explained): the program traced, and JAX's word on why."""
        try:
            fun = _traced_callable()
            program, source = describe(fun) if fun is not None else (f"jit({name})", None)
        except Exception:  # JAX internals changed shape: fall back to the name
            program, source = f"jit({name})", None
        self._programs()[name] = (program, source)
        pending = self.pending()
        for i in range(len(pending) - 1, -1, -1):
            if pending[i][0] == name:
                reason = pending.pop(i)[1]
                return program, source, reason, True
        del pending[:-32]  # explanations nobody traced (a cache hit after all): keep the list short
        return program, source, None, False

    def program_for(self, raw_name: object) -> tuple[str, str | None]:
        """The program a lowering or compile event belongs to: the last one traced by that name."""
        name = function_name(raw_name)
        return self._programs().get(name) or (str(raw_name) if raw_name is not None else f"jit({name})", None)

    def on_duration(self, event: str, duration: float, **kwargs: Any) -> None:
        phase = _EVENTS.get(event)
        if phase is None or not self.subscribers:
            return
        try:
            thread = threading.get_ident()
            reason, cached = None, False
            if phase == TRACE:
                key, source, reason, explained = self.on_trace(function_name(kwargs.get("fun_name")))
                with self._lock:
                    again = (key, source) in self._traced
                    self._traced.add((key, source))
                if explained and reason is None and again:
                    reason = RECREATED
                elif not explained and again and self.capped:
                    reason = NOT_EXPLAINED
                if self.explained >= MAX_EXPLAINED and not self.capped:
                    _stop_explaining()
            else:
                key, source = self.program_for(kwargs.get("fun_name"))
                if phase == COMPILE:
                    cached = bool(getattr(self._local, "cache_hit", False))
                    self._local.cache_hit = False
            record = CompileEvent(phase, key, float(duration), thread, source, reason, cached)
        except Exception:  # never break the script over bookkeeping
            return
        for subscriber in list(self.subscribers):
            try:
                subscriber(record)
            except Exception:
                pass

    def on_event(self, event: str, **kwargs: Any) -> None:
        if event == _CACHE_HIT:
            self._local.cache_hit = True  # the next backend-compile event on this thread is a load
        elif event == _CACHE_MISS:
            self.cache_misses += 1


_tracker = _Tracker()
_install_lock = threading.RLock()
_installed = False
_miss_log = _MissLog(_tracker)
_explaining = 0  # explain_on() calls not yet matched by explain_off()
_explain_before: Any = None  # the setting before jaxrun turned explanations on
_set_config: Callable[[str, Any], Any] | None = None  # jax.config.update itself


def _on_config_update(name: str, value: Any) -> None:
    """The script set ``jax_explain_cache_misses`` itself: its setting wins, and what it asked for
    it sees in its log."""
    global _explain_before
    if name == "jax_explain_cache_misses":
        with _install_lock:
            _explain_before = bool(value)
            _miss_log.hide = False


def _install() -> None:
    global _installed, _JAX_DIR, _set_config
    with _install_lock:
        if _installed:
            return
        import jax
        import jax.monitoring as monitoring

        _JAX_DIR = os.path.dirname(os.path.abspath(jax.__file__)) + os.sep
        for name in EXPLAIN_LOGGERS:
            logging.getLogger(name).addFilter(_miss_log)
        monitoring.register_event_duration_secs_listener(_tracker.on_duration)
        monitoring.register_event_listener(_tracker.on_event)
        _set_config = original = jax.config.update

        def update(name: str, value: Any, *args: Any, **kwargs: Any) -> Any:
            _on_config_update(name, value)
            return original(name, value, *args, **kwargs)

        try:  # to tell the script's own jax.config.update calls from jaxrun's
            jax.config.update = update  # type: ignore[method-assign]
        except (AttributeError, TypeError):
            pass
        _installed = True


def _set_explain(value: bool) -> None:
    assert _set_config is not None
    _set_config("jax_explain_cache_misses", value)


def subscribe(callback: Callable[[CompileEvent], None]) -> None:
    """Call ``callback`` with every compile event from now on (imports jax; one listener per process)."""
    _install()
    with _install_lock:
        _tracker.subscribers.append(callback)


def unsubscribe(callback: Callable[[CompileEvent], None]) -> None:
    with _install_lock:
        if callback in _tracker.subscribers:
            _tracker.subscribers.remove(callback)


def explain_on() -> None:
    """Ask JAX to explain its tracing-cache misses from now on (they become the trace events'
    ``reason``), until a matching :func:`explain_off`. Explanations jaxrun asked for stay out of
    the script's log; a script that sets ``jax_explain_cache_misses`` itself decides and sees them."""
    import jax

    global _explaining, _explain_before
    _install()
    with _install_lock:
        if _explaining == 0:  # a new budget of explanations (see MAX_EXPLAINED)
            _tracker.explained, _tracker.capped = 0, False
            _explain_before = jax.config.jax_explain_cache_misses
            if not _explain_before:
                _set_explain(True)
                _miss_log.hide = True
        _explaining += 1


def _stop_explaining() -> None:
    """The explanation budget is spent: turn them off if jaxrun turned them on."""
    with _install_lock:
        _tracker.capped = True
        if _explaining and not _explain_before:
            _set_explain(False)


def explain_off() -> None:
    global _explaining
    with _install_lock:
        _explaining -= 1
        if _explaining == 0 and not _explain_before:
            _set_explain(False)
            _miss_log.hide = False


@contextlib.contextmanager
def explaining() -> Iterator[None]:
    """:func:`explain_on` for the block."""
    explain_on()
    try:
        yield
    finally:
        explain_off()


def persistent_cache_misses() -> int:
    """Persistent-cache lookups that found nothing, as JAX counted them in this process."""
    return _tracker.cache_misses
