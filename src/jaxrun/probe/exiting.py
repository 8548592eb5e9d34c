"""How the probe's process ends once the script is done: as ``python script.py`` ends, without the
interpreter's teardown where nothing the script left behind needs it.

CPython's exit joins the threads that are not daemons (threading's shutdown), calls the exit
handlers (atexit), flushes ``sys.stdout`` and ``sys.stderr``, then tears the interpreter down:
every module's namespace cleared and every object freed, which runs the finalizers of the objects
still alive (an unclosed file's buffer is written then, a suspended generator's ``finally`` runs).
The teardown is ~2 ms of CPU in a process forked from the prestarted interpreter (freeing the
objects it shares with it copies their pages: ~800 page faults), more than the whole of a tiny
script.

So, where no thread is left that is no daemon (else Python's exit waits for it), the probe calls
the exit handlers and flushes the streams itself, then ends with ``os._exit`` when the teardown
would do nothing anyone can see:

* no object made since the body began (``gc.freeze()`` sets the probe's own aside then) has a
  finalizer with work left: an open file, a suspended generator or coroutine, an instance of a
  class with ``__del__``, a weak reference with a callback;
* no extension module was imported since (its C library may hold buffered output, or exit
  handlers of its own that only the C library's exit runs), and no jax (its runtime's likewise);
* no module of another kind than Python's own (a lazy module would load itself to be looked at);
* the script did not make more than :data:`_SCAN_LIMIT` memory blocks (beyond it, looking at
  every object costs about what the teardown saves);
* the exit status is 0-255 and both streams flushed.

Otherwise the process exits as Python's does (``sys.exit``); the exit handlers, if called
already, are not called again. Its teardown's garbage collections are most of it (~120 of 150 ms
after a jitted matmul, jax's objects looked at pass after pass): what exists then is set aside
from them (``gc.freeze``; freeing by reference counts goes on, every module's names cleared) once
every open file is flushed, unless an object of the script's own code (not Python's library, an
installed package or jaxrun) has a finalizer left that only a collection would run: a ``__del__``,
a suspended generator, a weak reference's callback, kept alive by a cycle. Where the script left
a thread running, the exit is Python's throughout.
"""

from __future__ import annotations

import gc
import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time (probe/events.py says why)
if TYPE_CHECKING:
    from typing import NoReturn

# Memory blocks the script may have made (Python's allocator, sys.getallocatedblocks) for its
# objects to be looked at: ~0.2 s of CPU a million objects, against the teardown's ~2 ms saved.
_SCAN_LIMIT = 200_000
# Memory blocks beyond which the objects are not listed at the exit (8 bytes each in the list).
_WALK_LIMIT = 2_000_000
# The kinds of finalizer that are done once their object is: a closed file's, a finished generator's.
_IO_BASE = sys.modules["io"].IOBase
_WEAKREF = sys.modules["_weakref"].ref

_started: tuple[int, frozenset[str], int] | None = None


def start() -> None:
    """The script's body begins: what exists now is the probe's (its objects frozen, its modules noted)."""
    global _started
    gc.freeze()
    _started = (os.getpid(), frozenset(sys.modules), sys.getallocatedblocks())


def leave(code: int, *, script: bool = True) -> "NoReturn":
    """End this process with ``code``, as the interpreter's exit would. ``script``: the probe's
    process, whose script's leftovers are looked at as above; False: jaxrun's own, whose objects
    need no finalizer at its end (only its threads, exit handlers and output are waited for)."""
    if _threads_to_join():
        sys.exit(code)  # the interpreter's exit waits for them, and reports an interrupt as it does
    import atexit

    atexit._run_exitfuncs()  # once: it clears them (the interpreter's exit finds none left)
    if (not script or _needs_teardown(code) is None) and flushed():
        os._exit(code)
    if script:
        _spare_the_last_collections()
    sys.exit(code)


def _threads_to_join() -> bool:
    """Whether threading's shutdown has a thread to wait for (one that is no daemon). Its own exit
    handlers (concurrent.futures') are there to join such threads: with none alive they have
    nothing to do."""
    threading = sys.modules.get("threading")
    if threading is None:
        return False
    main = threading.main_thread()
    return any(thread is not main and not thread.daemon and thread.is_alive() for thread in threading.enumerate())


def flushed() -> bool:
    """Flush stdout and stderr; whether all of it went out."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # noqa: BLE001 - the interpreter's exit reports it, with its status (120)
            return False
    return True


def _needs_teardown(code: object) -> str | None:
    """Why this process must exit through the interpreter's teardown; None: nothing needs it."""
    if _started is None:
        return "the body did not begin"
    if type(code) is not int or not 0 <= code <= 255:
        return f"the exit status {code!r}"
    pid, modules, blocks = _started
    if pid != os.getpid():
        return "a process the script forked"
    if "jax" in sys.modules:
        return "jax was imported"
    for name in sys.modules.keys() - modules:
        module = sys.modules.get(name)
        if module is None:
            continue
        if type(module) is not type(sys):
            return f"the module {name} is a {type(module).__name__}"
        where = module.__dict__.get("__file__")
        if isinstance(where, str) and where.endswith(_EXTENSIONS):
            return f"the extension module {name}"
    if sys.getallocatedblocks() - blocks > _SCAN_LIMIT:
        return "more objects than are worth looking at"
    made = gc.get_objects()  # those made since start(): the probe's own are frozen
    finalized = {kind for kind in set(map(type, made)) if hasattr(kind, "__del__") or issubclass(kind, _WEAKREF)}
    for obj in made if finalized else ():
        if type(obj) in finalized and _pending(obj):
            return f"a {type(obj).__name__} to finalize"
    return None


def _spare_the_last_collections() -> None:
    """Set what exists now aside (``gc.freeze``) from the collections the teardown makes, where
    those would run no finalizer of the script's own code. Every open file is flushed first."""
    if _started is None or _started[0] != os.getpid():
        return  # a process the script forked ends as python's would
    if sys.getallocatedblocks() > _WALK_LIMIT:
        return  # the list of them alone would be memory the script may not have
    made = gc.get_objects()  # those made since start(): the probe's own are frozen
    kinds = {kind for kind in set(map(type, made)) if _may_finalize(kind)}
    libraries = _library_folders()
    for obj in made if kinds else ():
        if type(obj) not in kinds:
            continue
        if isinstance(obj, _IO_BASE):
            try:
                if not obj.closed:
                    obj.flush()
            except Exception:  # noqa: BLE001 - its own finalizer, if it runs, meets the same error
                pass
        elif _pending(obj) and _own_code(_finalizer_code(obj), libraries):
            return
    del made
    gc.freeze()


def _may_finalize(kind: type) -> bool:
    return issubclass(kind, _WEAKREF) or kind in _FRAMES or hasattr(kind, "__del__")


def _finalizer_code(obj: object) -> object:
    """The code object (or other callable) whose run finalizing ``obj`` would be."""
    if isinstance(obj, _WEAKREF):
        return getattr(obj.__callback__, "__code__", None)
    frame = _FRAMES.get(type(obj))
    if frame is not None:
        return getattr(obj, frame[:2] + "_code", None)
    for kind in type(obj).__mro__:
        finalizer = kind.__dict__.get("__del__")
        if finalizer is not None:
            return getattr(finalizer, "__code__", None)  # None: a C type's own (freeing memory)
    return None


def _own_code(code: object, libraries: tuple[str, ...]) -> bool:
    """Whether ``code`` is the script's or its own modules' (neither Python's library nor an
    installed package, jaxrun: ``libraries``, :func:`_library_folders`): code the script's author
    expects to run at its exit. A finalizer written in C (no code object) only frees what it holds."""
    where = getattr(code, "co_filename", None)
    if not isinstance(where, str):
        return False
    return not where.startswith(libraries)


def _library_folders() -> tuple[str, ...]:
    """Python's library, the installed packages' folders, and jaxrun's own (the probe's code)."""
    stdlib = os.path.dirname(os.__file__)
    installed = [path for path in sys.path if os.path.basename(path) in ("site-packages", "dist-packages")]
    jaxrun = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return tuple(os.path.join(folder, "") for folder in (stdlib, jaxrun, *installed))


def _pending(obj: object) -> bool:
    """Whether ``obj``'s finalizer would still do something."""
    if isinstance(obj, _IO_BASE):
        try:
            return not obj.closed
        except Exception:  # noqa: BLE001 - a detached wrapper, a broken subclass: its finalizer runs
            return True
    if isinstance(obj, _WEAKREF):  # its callback runs as its object is freed
        callback = obj.__callback__
        return callback is not None and not _bookkeeping(callback)
    frame = _FRAMES.get(type(obj))
    if frame is not None:  # a generator or coroutine: done once it has no frame
        return getattr(obj, frame) is not None
    return True


# Whose weak references' callbacks only forget what died: the import system's module locks, weak
# sets and dictionaries, abc's caches (and weakref.finalize's, which its own exit handler ends).
_BOOKKEEPING = frozenset({"_frozen_importlib", "_weakrefset", "weakref", "abc"})


def _bookkeeping(callback: object) -> bool:
    if type(callback) is type(len) and getattr(callback, "__name__", None) == "_destroy":
        return True  # the C abc's caches
    return getattr(callback, "__module__", None) in _BOOKKEEPING


_EXTENSIONS = tuple(sys.modules["_imp"].extension_suffixes()) or (".so",)


def _generator_types() -> dict[type, str]:
    def generator():  # type: ignore[no-untyped-def]
        yield

    async def coroutine():  # type: ignore[no-untyped-def]
        pass

    async def asynchronous():  # type: ignore[no-untyped-def]
        yield

    made = coroutine()
    kinds = {type(generator()): "gi_frame", type(made): "cr_frame", type(asynchronous()): "ag_frame"}
    made.close()  # never awaited, and not to be warned about
    return kinds


_FRAMES = _generator_types()
