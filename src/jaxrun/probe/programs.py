"""Which program a JAX compile event belongs to (:mod:`.program_names`), why JAX traced it again,
and whether its executable was compiled or loaded from the persistent cache.

Why a program was traced again is JAX's own explanation (``jax_explain_cache_misses``, logged by
``jax._src.interpreters.partial_eval`` just before it traces): it is paired with the next trace
event of the same function on the same thread.

Which program a lowering or a compilation belongs to is JAX's own identity of it, not its name:
the jaxpr being lowered and the MLIR module being compiled (locals of JAX's cached lowering and
compilation functions, :class:`_Identities`). ``jit(loss)`` compiled again for a second device
(no trace, no lowering: JAX reuses its module) is ``jit(loss)``, whatever was traced last. Where
those frames cannot be found (another JAX version, another path), the program is the one last
traced under that name on the thread.

One listener per process (:func:`subscribe`) serves the probe and ``jaxrun.bench`` alike, so a
script run by jaxrun that also uses the bench guards sees the same program keys twice.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from jaxrun.probe.jax_internals import (
    COMPILING_FRAME,
    COMPILING_LOCALS,
    EXPLAIN_LOGGERS,
    LOWERING_FRAME,
    LOWERING_LOCALS,
    caller_locals,
)
from jaxrun.probe.program_names import (
    base_name,
    describe,
    function_name,
    program_key,
    set_jax_dir,
    traced_callable,
)

__all__ = [
    "COMPILE", "LOWER", "TRACE", "CompileEvent", "base_name", "explain", "explain_off", "explain_on",
    "explaining", "persistent_cache_misses", "program_key", "subscribe", "unsubscribe",
]

TRACE, LOWER, COMPILE = "trace", "lower", "compile"
_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": TRACE,
    "/jax/core/compile/jaxpr_to_mlir_module_duration": LOWER,
    "/jax/core/compile/backend_compile_duration": COMPILE,
}
_CACHE_HIT = "/jax/compilation_cache/cache_hits"
_CACHE_MISS = "/jax/compilation_cache/cache_misses"


@dataclass(frozen=True)
class CompileEvent:
    phase: str  # TRACE | LOWER | COMPILE
    program: str  # e.g. "jit(grad(loss))"; two functions may share one (see program_key)
    seconds: float
    thread: int
    source: str | None = None  # "path:line" of the user's function; None for JAX's own
    reason: str | None = None  # TRACE: why JAX traced again (None on a first trace, or unexplained)
    cached: bool = False  # COMPILE: the executable was loaded from the persistent cache
    # COMPILE: what JAX built, for a subscriber that reads XLA's analyses of it (probe/xla_facts.py);
    # None where JAX's frames could not be read. Not kept by the tracker.
    built: tuple[Any, Any, Any] | None = None  # (executable, the module compiled, its devices)


# --- JAX's explanations of cache misses ------------------------------------------------------------

_NEVER_SEEN = re.compile(r"never seen function:\s*\n\s*(?P<name>.+?) id=\d+ defined at (?P<src>\S+)")
# Those of a retrace, compiled at the first (_compile_retrace_patterns): this module is imported
# as every JAX script imports jax, whose import time compiling them (~1 ms) would count in.
_RETRACE_PATTERNS = {
    "_SEEN": (r"\n\s*for (?P<name>.+?) defined at (?P<src>\S+)", 0),
    "_CHANGE": (
        r"^\s*\*\s*at (?P<where>.+?), now (?P<new>.+?) and before (?P<old>.+?)(?:, so (?P<why>.+))?\s*$", 0),
    "_PYTREE_META": (r"<class '[^']+'> with pytree metadata ", 0),
    # JAX appends its weak-type documentation link to the last change, without a space or newline.
    "_GLUED_URL": (r"(?<=\S)(https?://\S+)$", re.MULTILINE),
}
_SEEN: re.Pattern[str]
_CHANGE: re.Pattern[str]
_PYTREE_META: re.Pattern[str]
_GLUED_URL: re.Pattern[str]


def _compile_retrace_patterns() -> None:
    if "_GLUED_URL" not in globals():
        globals().update({name: re.compile(*pattern) for name, pattern in _RETRACE_PATTERNS.items()})
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
    _compile_retrace_patterns()
    seen = _SEEN.search(message)
    if not seen:
        return None
    changes = []
    links = _GLUED_URL.findall(message)
    for line in _GLUED_URL.sub("", message).splitlines():
        m = _CHANGE.match(line)
        if m:
            old, new = _PYTREE_META.sub("", m["old"]), _PYTREE_META.sub("", m["new"])
            why = f" ({m['why']})" if m["why"] else ""
            if not why and "weak_type=" in line and links:
                why = f" (a Python scalar is weakly typed: {links[0]})"
            changes.append(f"argument {m['where']} changed {old} -> {new}{why}")
    if changes:
        return seen["name"], "; ".join(changes)
    body = message[seen.end():].replace("all previously seen cache keys differ.", "")
    body = body.replace("For the closest previous key:", "")
    return seen["name"], " ".join(body.split())[:400] or "JAX gave no explanation"


_BOOKKEEPING = ("Writing %s to persistent compilation cache", "Not writing persistent cache entry")


def _cache_bookkeeping(record: logging.LogRecord) -> bool:
    return isinstance(record.msg, str) and record.msg.startswith(_BOOKKEEPING)


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
            # With explanations on, JAX also raises its persistent cache's bookkeeping ("Writing
            # jit_f to persistent compilation cache ...") from DEBUG to WARNING: jaxrun's doing,
            # not the script's, so it stays out of the script's stderr as the explanations do.
            return not (self.hide and record.levelno == logging.WARNING and _cache_bookkeeping(record))

        explained = explain(message)
        if explained is not None:
            self.tracker.pending().append(explained)
            self.tracker.explained += 1
        return not self.hide


# --- JAX's identity of a program ----------------------------------------------------------------

class _Identities:
    """Program of each jaxpr and MLIR module JAX lowered, by object identity, for as long as the
    object lives (JAX caches them weakly too; a dead object's id may be reused, so each entry
    keeps a weak reference to check)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._programs: dict[int, tuple[Any, tuple[str, str | None]]] = {}

    def get(self, obj: Any) -> tuple[str, str | None] | None:
        if obj is None:
            return None
        with self._lock:
            entry = self._programs.get(id(obj))
        return entry[1] if entry is not None and entry[0]() is obj else None

    def put(self, obj: Any, program: tuple[str, str | None]) -> None:
        if obj is None:
            return
        key = id(obj)
        try:
            ref = weakref.ref(obj, lambda _, key=key: self._forget(key))
        except TypeError:
            return  # not weakly referenceable: this JAX keeps no identity we can use
        with self._lock:
            self._programs[key] = (ref, program)

    def _forget(self, key: int) -> None:
        with self._lock:
            entry = self._programs.get(key)
            if entry is not None and entry[0]() is None:
                del self._programs[key]


# --- the one listener ------------------------------------------------------------------------------


class _Tracker:
    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self._traced: set[tuple[str, str | None]] = set()
        self.subscribers: list[Callable[[CompileEvent], None]] = []
        self.identities = _Identities()
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
            fun = traced_callable()
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
        """The program last traced under this name on this thread (what a lowering or compile event
        belongs to when JAX's own identity of it cannot be read)."""
        name = function_name(raw_name)
        return self._programs().get(name) or (str(raw_name) if raw_name is not None else f"jit({name})", None)

    def lowered(self, raw_name: object) -> tuple[str, str | None]:
        """The program being lowered: its jaxpr's, when that jaxpr was lowered before (a new
        lowering of a cached trace), else the last traced by name; its module is remembered."""
        found = caller_locals(LOWERING_FRAME, LOWERING_LOCALS)
        jaxpr, lowering = found if found is not None else (None, None)
        program = self.identities.get(jaxpr) or self.program_for(raw_name)
        self.identities.put(jaxpr, program)
        self.identities.put(getattr(lowering, "module", None), program)
        return program

    def compiled(self, raw_name: object) -> tuple[tuple[str, str | None], tuple[Any, Any, Any] | None]:
        """The program being compiled (the one its module was lowered for), and what JAX built:
        (executable, module, devices), None where its frame could not be read."""
        found = caller_locals(COMPILING_FRAME, COMPILING_LOCALS)
        if found is None:
            return self.program_for(raw_name), None
        computation, executable, devices = found
        program = self.identities.get(computation) or self.program_for(raw_name)
        return program, ((executable, computation, devices) if executable is not None else None)

    def on_duration(self, event: str, duration: float, **kwargs: Any) -> None:
        phase = _EVENTS.get(event)
        if phase is None or not self.subscribers:
            return
        try:
            thread = threading.get_ident()
            reason, cached, built = None, False, None
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
            elif phase == LOWER:
                key, source = self.lowered(kwargs.get("fun_name"))
            else:
                (key, source), built = self.compiled(kwargs.get("fun_name"))
                cached = bool(getattr(self._local, "cache_hit", False))
                self._local.cache_hit = False
            record = CompileEvent(phase, key, float(duration), thread, source, reason, cached, built)
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
    _tell_config_watchers(name, value)
    if name == "jax_explain_cache_misses":
        with _install_lock:
            _explain_before = bool(value)
            _miss_log.hide = False


def _install() -> None:
    global _installed, _set_config
    with _install_lock:
        if _installed:
            return
        import jax
        import jax.monitoring as monitoring

        set_jax_dir(jax.__file__)
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


# The script's own jax.config.update calls, told to whoever watches them (probe/jax_hooks.py: the
# transfer guard's level, which makes jaxrun's count of transfers no longer its own).
_config_watchers: list[Callable[[str, Any], None]] = []


def watch_config(callback: Callable[[str, Any], None]) -> None:
    """Call ``callback(name, value)`` on each ``jax.config.update`` the script makes from now on."""
    _config_watchers.append(callback)


def _tell_config_watchers(name: str, value: Any) -> None:
    for callback in list(_config_watchers):
        try:
            callback(name, value)
        except Exception:  # noqa: BLE001 - a watcher never breaks the script's own call
            pass
