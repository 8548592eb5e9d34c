"""How long the script spends importing modules: the ``import_time`` phase of a run.

``builtins.__import__`` is wrapped while the script runs. ``import_time`` is the time during which
at least one import statement ran, in any thread: the length of the union of every thread's
outermost import. Four threads that import jax at the same moment and wait 1 s on each other's
module lock spend 1 s importing, not 4. A module that imports others is counted once, with
everything it pulls in (``import jax`` includes jaxlib, numpy, the plugins it loads). JIT
compilation that happens during an import (a module-level jitted call) is import time: the
probe's phases subtract the overlap from compilation (probe/phases.py). ``importlib.import_module``
calls made by the script itself, outside any import statement, are not seen.
"""

from __future__ import annotations

import builtins
import collections
import threading
import time
from typing import Any

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
dropped = False


def _enter() -> None:
    global _active, _opened
    now = time.perf_counter()
    with _lock:
        if _active == 0:
            _opened = now
        _active += 1


def _leave() -> None:
    global _active, _closed_seconds, dropped
    now = time.perf_counter()
    with _lock:
        _active -= 1
        if _active == 0:
            _closed_seconds += now - _opened
            dropped = dropped or len(recent) == recent.maxlen
            recent.append((_opened, now))


def _timed_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    if getattr(_state, "depth", 0):
        return _real_import(name, globals, locals, fromlist, level)
    _state.depth = 1
    _enter()
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
