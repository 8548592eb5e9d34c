"""How long the script spends importing modules: the ``import_time`` phase of a run.

``builtins.__import__`` is wrapped while the script runs. ``import_time`` is the time during which
at least one import statement ran, in any thread: the length of the union of every thread's
outermost import. Four threads that import jax at the same moment and wait 1 s on each other's
module lock spend 1 s importing, not 4. A module that imports others is counted once, with
everything it pulls in (``import jax`` includes jaxlib, numpy, the plugins it loads). JIT
compilation that happens during an import (a module-level jitted call) is import time: the
probe's phases subtract the overlap from compilation (probe/phases.py). ``importlib.import_module``
calls made by the script itself, outside any import statement, are not seen.

Each interval of the union keeps the name of the module its outermost import statement named
(``import jax.numpy`` -> ``jax.numpy``; ``from . import x`` resolved against the importing
package): what ``--profile``'s timeline shows for each import. Several threads importing at once
make one interval with every name (``jax, numpy``).
"""

from __future__ import annotations

import builtins
import collections
import threading
import time
from typing import Any

# Imported here, never in _joined: an import there would run under _lock, inside the wrapped
# __import__ that takes it (a deadlock). Standard library only, as the probe must be.
from ..formatting import listed

_real_import = builtins.__import__
_state = threading.local()  # depth: this thread is inside an import statement
_lock = threading.Lock()
_active = 0  # threads inside an import statement right now
_opened = 0.0  # perf_counter when _active went from 0 to 1
_closed_seconds = 0.0  # length of the union intervals that have closed
# The union's latest intervals (start, end), for the overlap with compilation. Bounded: a script
# that imports inside a hot loop makes one short interval per call. ``dropped`` says whether the
# oldest were let go (probe/phases.py then says the split of the overlap is approximate).
recent: collections.deque[tuple[float, float]] = collections.deque(maxlen=50_000)
# The modules imported in each interval of ``recent`` (same length, same order).
recent_modules: collections.deque[str] = collections.deque(maxlen=50_000)
dropped = False
_names: list[str] = []  # the modules of the interval open now
MAX_NAMES = 8  # per interval; more threads importing at once are counted ("and 3 more")


def _enter(module: str) -> None:
    global _active, _opened
    now = time.perf_counter()
    with _lock:
        if _active == 0:
            _opened = now
            _names.clear()
        _active += 1
        _names.append(module)


def _joined(names: list[str]) -> str:
    return listed(dict.fromkeys(names), MAX_NAMES)


def _leave() -> None:
    global _active, _closed_seconds, dropped
    now = time.perf_counter()
    with _lock:
        _active -= 1
        if _active == 0:
            _closed_seconds += now - _opened
            dropped = dropped or len(recent) == recent.maxlen
            recent.append((_opened, now))
            recent_modules.append(_names[0] if len(_names) == 1 else _joined(_names))


def _module_name(name: str, globals: Any, level: int) -> str:
    """The absolute name of the module an import statement names."""
    if level <= 0:
        return name
    package = globals.get("__package__") if isinstance(globals, dict) else None
    if not package:
        return "." * level + name
    base = package.rsplit(".", level - 1)[0]
    return f"{base}.{name}" if name else base


def _timed_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    if getattr(_state, "depth", 0):
        return _real_import(name, globals, locals, fromlist, level)
    _state.depth = 1
    _enter(_module_name(name, globals, level))
    try:
        return _real_import(name, globals, locals, fromlist, level)
    finally:
        _state.depth = 0
        _leave()


def start() -> None:
    builtins.__import__ = _timed_import


def stop() -> None:
    builtins.__import__ = _real_import


def spans(until: float) -> tuple[float, list[tuple[float, float]], bool]:
    """``(seconds, intervals, open)`` of the union of imports up to ``until``: an import still
    running then (another thread's, when the body ended) counts up to ``until``."""
    with _lock:
        seconds, intervals, still_open = _closed_seconds, list(recent), _active > 0
        if still_open and until > _opened:
            seconds += until - _opened
            intervals.append((_opened, until))
    return seconds, intervals, still_open


def named_spans(until: float) -> list[tuple[float, float, str]]:
    """The union's intervals up to ``until`` (as :func:`spans`), each with the modules imported in it."""
    with _lock:
        named = [(a, b, m) for (a, b), m in zip(recent, recent_modules)]
        if _active > 0 and until > _opened:
            named.append((_opened, until, _joined(_names)))
    return named
