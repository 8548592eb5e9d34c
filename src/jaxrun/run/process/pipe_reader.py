"""One thread that reads every script's pipes and notes every exec'd process's end, for all the runs
of this jaxrun process: a batch under ``--jobs N`` had three threads a script (two log pumps and a
waiter), each started and torn down per launch; here the pipes and the processes' pidfds are
registered with one selector, and what each needs is done when it is ready.

What is read from a pipe goes to its :class:`Reading`'s ``take`` (a log copied up to its cap,
run/process/process_watch.py); at the pipe's end, ``finish``. A process's end (its pidfd readable:
Linux 5.3 and later) is reaped with ``os.wait4``: its status and rusage, and when. Where pidfds are
missing, each process gets a waiting thread, as before.
"""

from __future__ import annotations

import os
import selectors
import threading
import time
from typing import Any, Callable

_CHUNK = 1 << 16


class Reading:
    """A pipe being read to its end: ``take(chunk)`` for each chunk, ``finish()`` at its end (both
    in the reader's thread; ``finish`` closes the pipe, whose owner holds it), then ``done`` is set."""

    def __init__(self, fd: int, take: Callable[[bytes], None], finish: Callable[[], None]) -> None:
        self.fd, self.take, self.finish = fd, take, finish
        self.done = threading.Event()


class Reaping:
    """A process of this one whose end is awaited: ``status``, ``rusage`` (os.wait4's) and ``ended``
    (time.perf_counter when it was reaped) once ``done`` is set."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.status: int | None = None
        self.rusage: Any = None
        self.ended: float | None = None
        self.done = threading.Event()

    def reap(self, block: bool) -> bool:
        """os.wait4 the process; False when it has not ended yet (``block=False``)."""
        try:
            pid, status, rusage = os.wait4(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere (a signal handler's waitpid): its end is all there is
            pid, status, rusage = self.pid, None, None
        except InterruptedError:
            return False
        if pid == 0:
            return False
        self.status, self.rusage, self.ended = status, rusage, time.perf_counter()
        self.done.set()
        return True


class PipeReader:
    """The selector thread (started with the first registration, for the life of the process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._selector: selectors.BaseSelector | None = None
        self._wake_w = -1
        self._pending: list[tuple[int, Any]] = []

    def read(self, fd: int, take: Callable[[bytes], None], finish: Callable[[], None]) -> Reading:
        """Read the pipe ``fd`` (non-blocking from now on) to its end."""
        os.set_blocking(fd, False)
        reading = Reading(fd, take, finish)
        self._add(fd, reading)
        return reading

    def reap(self, pid: int) -> Reaping:
        """Note the end of ``pid``, a child of this process."""
        reaping = Reaping(pid)
        try:
            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):  # no pidfds here (an older kernel): a thread waits for it
            threading.Thread(target=reaping.reap, args=(True,), daemon=True, name="jaxrun-reap").start()
            return reaping
        self._add(pidfd, reaping)
        return reaping

    def _add(self, fd: int, what: Any) -> None:
        with self._lock:
            if self._selector is None:
                self._start()
            self._pending.append((fd, what))
        os.write(self._wake_w, b"x")

    def _start(self) -> None:
        self._selector = selectors.DefaultSelector()
        wake_r, self._wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._selector.register(wake_r, selectors.EVENT_READ, None)
        threading.Thread(target=self._run, args=(self._selector, wake_r), daemon=True, name="jaxrun-pipes").start()

    def _run(self, selector: selectors.BaseSelector, wake_r: int) -> None:
        while True:
            for key, _ in selector.select():
                what = key.data
                if what is None:
                    try:
                        os.read(wake_r, 4096)
                    except BlockingIOError:
                        pass
                    with self._lock:
                        pending, self._pending = self._pending, []
                    for fd, item in pending:
                        selector.register(fd, selectors.EVENT_READ, item)
                elif isinstance(what, Reading):
                    self._drain(selector, what)
                elif what.reap(block=False):
                    selector.unregister(key.fd)
                    os.close(key.fd)

    @staticmethod
    def _drain(selector: selectors.BaseSelector, reading: Reading) -> None:
        try:
            chunk = os.read(reading.fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            reading.take(chunk)
            return
        selector.unregister(reading.fd)
        try:
            reading.finish()
        finally:
            reading.done.set()


READER = PipeReader()
