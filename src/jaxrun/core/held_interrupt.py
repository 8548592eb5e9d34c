"""Ctrl-C that is never lost: held back where Python or a library would swallow it, and raised
as soon as that code has returned.

Python runs a signal's handler in the main thread wherever that thread is. Two places there lose
the ``KeyboardInterrupt`` it raises, and the batch went on after Ctrl-C (a SIGINT sent as a
batch's first script started was lost about once in ten): the import system's own callbacks (a
module lock's weakref callback prints "Exception ignored" and drops it), and msgspec's C code as it
works out a model's types (it clears an error of the Python it calls). The ``jaxrun`` program's
handler (:func:`install`) therefore sends the signal again a few milliseconds later while the
main thread is inside the import system; and the work of msgspec runs under :func:`interrupt_held`,
which notes the signal and raises it once the work is done.
"""

from __future__ import annotations

import _thread
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

AGAIN_SECONDS = 0.005  # after which a signal that came inside the import system is sent again


def install() -> None:
    """The program's SIGINT handler: ``KeyboardInterrupt``, unless the main thread is inside the
    import system, where it would be lost: then the signal comes again shortly."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where it is ignored
        signal.signal(signal.SIGINT, _on_interrupt)


def _on_interrupt(number: int, frame: FrameType | None) -> None:
    if _importing(frame):
        _thread.start_new_thread(_send_again, ())
        return
    raise KeyboardInterrupt


def _importing(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _send_again() -> None:
    time.sleep(AGAIN_SECONDS)
    os.kill(os.getpid(), signal.SIGINT)


@contextmanager
def interrupt_held() -> Iterator[None]:
    """Hold SIGINT for the ``with`` block, in the main thread (only it runs Python's signal
    handlers; elsewhere the block runs as it is), and act on it once the block is done."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: noted.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if noted:
            if callable(previous):
                previous(signal.SIGINT, None)  # Python's handler or the program's: KeyboardInterrupt
            elif previous == signal.SIG_DFL:
                os.kill(os.getpid(), signal.SIGINT)  # what the signal would have done
