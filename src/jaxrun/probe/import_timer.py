"""How long the script spends importing modules: the ``import_time`` phase of a run.

``builtins.__import__`` is wrapped while the script runs; only the outermost import statement of
each thread is timed, so a module that imports others is counted once, with everything it pulls
in (``import jax`` includes jaxlib, numpy, the plugins it loads). JIT compilation that happens
during an import (a module-level jitted call) is tallied apart by jax_hooks, so the parent can
subtract it once. ``importlib.import_module`` calls made by the script itself, outside any
import statement, are not seen.
"""

from __future__ import annotations

import builtins
import collections
import threading
import time
from typing import Any

_real_import = builtins.__import__
_state = threading.local()
_lock = threading.Lock()
_seconds = 0.0
# The latest outermost imports, (start, end): library code may import while JAX compiles, and that
# time must not count twice. Bounded: only imports that end inside a compile phase matter.
recent: collections.deque[tuple[float, float]] = collections.deque(maxlen=10_000)


def _timed_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    global _seconds
    if getattr(_state, "depth", 0):
        return _real_import(name, globals, locals, fromlist, level)
    _state.depth = 1
    started = time.perf_counter()
    try:
        return _real_import(name, globals, locals, fromlist, level)
    finally:
        ended = time.perf_counter()
        _state.depth = 0
        with _lock:
            _seconds += ended - started
            recent.append((started, ended))


def start() -> None:
    builtins.__import__ = _timed_import


def stop() -> None:
    builtins.__import__ = _real_import


def importing() -> bool:
    """Whether this thread is inside an import statement right now."""
    return bool(getattr(_state, "depth", 0))


def import_seconds() -> float:
    with _lock:
        return _seconds
