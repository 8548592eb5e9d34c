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

The intervals are kept for the overlap with compilation (probe/phases.py), and their number is
bounded without losing the total: library code runs import statements inside functions (JAX's
own, on every call), tens of thousands of them in a tutorial, each of a module already loaded
and a few microseconds long. Consecutive short statements (< ``SHORT_IMPORT``) are kept as one
block (its first start, its last end, the seconds its statements took: at most
``BLOCK_SECONDS``), and should ``MAX_BLOCKS`` ever fill up, neighbouring blocks are merged. Where
a compilation starts or ends inside a block, how much of the block's import time it covers is
known only within the block's seconds: phases.py counts that share in proportion and says so
only when the uncertainty is large enough to show in the figures.
"""

from __future__ import annotations

import _thread  # threading's lock and thread-local data, without threading's own imports
import builtins
import time

TYPE_CHECKING = False  # typing is not imported at run time (probe/events.py says why)
if TYPE_CHECKING:
    from typing import Any

_real_import = builtins.__import__
_state = _thread._local()  # depth: this thread is inside an import statement
_lock = _thread.allocate_lock()
_active = 0  # threads inside an import statement right now
_opened = 0.0  # perf_counter when _active went from 0 to 1
_closed_seconds = 0.0  # length of the union intervals that have closed
_names: list[str] = []  # the modules of the interval open now
MAX_NAMES = 8  # per interval or block; more threads importing at once are counted ("and 3 more")

SHORT_IMPORT = 100e-6  # an import statement of a module already loaded takes a few microseconds
BLOCK_SECONDS = 100e-6  # import time a block of short statements holds at most
MAX_BLOCKS = 10_000
# A block: [start, end, seconds, names (at most MAX_NAMES; the names of several threads' imports
# at once are one tuple), statements, short]; ``seconds`` is end - start for a block of one
# statement, less for several (the gaps between them).
blocks: list[list[Any]] = []  # closed, in time order
_tail: list[Any] | None = None  # the block of short statements still growing


def _enter(module: str) -> None:
    global _active, _opened
    now = time.perf_counter()
    with _lock:
        if _active == 0:
            _opened = now
            _names.clear()
        _active += 1
        _names.append(module)


def _joined(names: str | tuple[str, ...]) -> str:
    """The modules several threads imported at once, as one name: written when the names are read
    (named_spans, outside the lock), so that formatting is imported only then: an import under
    _lock, inside the wrapped __import__ that takes it, would deadlock."""
    if isinstance(names, str):
        return names
    from jaxrun.core.formatting import listed

    return listed(dict.fromkeys(names), MAX_NAMES)


def _add_names(into: list[str], names: list[str]) -> None:
    for name in names:
        if len(into) >= MAX_NAMES:
            return
        if name not in into:
            into.append(name)


def _leave() -> None:
    global _active, _closed_seconds, _tail
    now = time.perf_counter()
    with _lock:
        _active -= 1
        if _active != 0:
            return
        seconds = now - _opened
        _closed_seconds += seconds
        name = _names[0] if len(_names) == 1 else tuple(_names)
        if seconds < SHORT_IMPORT:
            tail = _tail
            if tail is not None and tail[2] + seconds <= BLOCK_SECONDS:
                tail[1] = now
                tail[2] += seconds
                tail[4] += 1
                if len(tail[3]) < MAX_NAMES and name not in tail[3]:
                    tail[3].append(name)
                return
            _close_tail()
            _tail = [_opened, now, seconds, [name], 1, True]
        else:
            _close_tail()
            _push([_opened, now, seconds, [name], 1, False])


def _close_tail() -> None:
    global _tail
    if _tail is not None:
        _push(_tail)
        _tail = None


def _push(block: list[Any]) -> None:
    blocks.append(block)
    if len(blocks) >= MAX_BLOCKS:
        _compact()


def _merge(a: list[Any], b: list[Any]) -> list[Any]:
    names = list(a[3])
    _add_names(names, b[3])
    return [a[0], b[1], a[2] + b[2], names, a[4] + b[4], a[5] and b[5]]


def _compact() -> None:
    """Halve the blocks: neighbouring blocks of short statements first, then, if that freed too
    little, any two neighbours."""
    merged: list[list[Any]] = []
    i = 0
    while i < len(blocks):
        if i + 1 < len(blocks) and blocks[i][5] and blocks[i + 1][5]:
            merged.append(_merge(blocks[i], blocks[i + 1]))
            i += 2
        else:
            merged.append(blocks[i])
            i += 1
    if len(merged) > MAX_BLOCKS * 3 // 4:
        merged = [_merge(merged[k], merged[k + 1]) if k + 1 < len(merged) else merged[k]
                  for k in range(0, len(merged), 2)]
    blocks[:] = merged


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


def _all(until: float) -> tuple[list[list[Any]], bool]:
    """Every block up to ``until`` (the lock held): an import still running then (another
    thread's, when the body ended) is a block of its own up to ``until``."""
    every = list(blocks)
    if _tail is not None:
        every.append(_tail)
    still_open = _active > 0
    if still_open and until > _opened:
        every.append([_opened, until, until - _opened, [tuple(_names)], 1, False])
    return every, still_open


def spans(until: float) -> tuple[float, list[tuple[float, float, float]], bool]:
    """``(seconds, blocks, open)``: the union's length up to ``until``, its blocks as ``(start,
    end, seconds)`` in time order, and whether an import was still running then."""
    with _lock:
        every, still_open = _all(until)
        seconds = _closed_seconds + (until - _opened if still_open and until > _opened else 0.0)
    return seconds, [(b[0], b[1], b[2]) for b in every], still_open


def named_spans(until: float) -> list[tuple[float, float, str, int, float]]:
    """The union's blocks up to ``until`` (as :func:`spans`): ``(start, end, modules, statements,
    seconds)``, the modules its statements named (the first ``MAX_NAMES``, comma-separated)."""
    with _lock:
        every, _ = _all(until)
        taken = [(b[0], b[1], tuple(b[3]), b[4], b[2]) for b in every]
    return [(start, end, ", ".join(map(_joined, names)), statements, seconds)
            for start, end, names, statements, seconds in taken]
