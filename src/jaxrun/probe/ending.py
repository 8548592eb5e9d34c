"""The script's body: when it started, how it ended, and the END event with its phases.

Every way out of a script records its end, once, with the phases measured up to that point:
returning, raising, ``sys.exit`` (in the main thread; in another thread it only ends that
thread, as under ``python``), ``os._exit`` from any thread, ``os.abort``, and a signal the
script sends its own process (``os.kill``, ``os.killpg``, ``signal.raise_signal``) whose default
action ends it. For the last three the END event is written just before the real call, so the
script ends exactly as it would under ``python``. A process ended from outside (a timeout, the
kernel's OOM killer) has no END event: the parent measures its body from the BODY event to the
process's end (run/reading/probe_reading.py).
"""

from __future__ import annotations

import _signal  # signal's own functions and numbers: ``signal`` itself imports enum (~3 ms of CPU)
import _thread  # threading's Lock, without threading's own imports
import os
import resource
import sys
import time

from jaxrun.probe import drain, events, exiting, import_timer, phases
from jaxrun.probe.jax_hooks import (
    compile_cache_facts,
    compile_environment,
    compile_intervals,
    device_facts,
)

TYPE_CHECKING = False  # typing is not imported at run time (probe/events.py says why)
if TYPE_CHECKING:
    from typing import Any, Callable

    from jaxrun.probe.channel import EventWriter

# Signals whose default action does not end the process (ignore, stop, continue).
_NOT_FATAL = {
    getattr(_signal, name) for name in
    ("SIGCHLD", "SIGCONT", "SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGWINCH")
    if hasattr(_signal, name)
}


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _own_peak_rss_kb() -> int | None:
    """This process's peak RSS since it started the probe (Linux VmHWM, which exec resets);
    ``ru_maxrss`` is no use: it keeps the peak of the launcher that forked this process."""
    try:
        with open("/proc/self/status", encoding="utf-8") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


class Body:
    """One script body in the probe's process: :meth:`begin` before the script's first line,
    :meth:`end` once, from whichever way out the script took."""

    def __init__(self, writer: EventWriter, finish_hooks: list[Callable[[EventWriter], None]] | None = None) -> None:
        self.writer = writer
        self.pid = os.getpid()
        self.started = 0.0
        self._finish_hooks = finish_hooks or []
        self._lock = _thread.allocate_lock()
        self._ended = False
        self._real: dict[str, Callable[..., Any]] = {}
        self._closing: list[Callable[[float], None]] = []

    def on_end(self, close: Callable[[float], None]) -> None:
        """``close(now)`` is called first when the body ends, whichever way: what the script
        had open then (a notebook's cell) ends with it, before the END event."""
        self._closing.append(close)

    def begin(self) -> None:
        self._watch_exits()
        import_timer.start()
        exiting.start()
        self.started = time.perf_counter()
        self.writer.send(events.Body(type=events.BODY, pid=self.pid, at=self.started))

    def end(self, exit_code: int | None, ended_by: str, *, wait_for_devices: bool) -> None:
        """Write the END event (once; later calls do nothing): the body's phases up to now, and
        up to the end of the device work it dispatched when ``wait_for_devices``."""
        now = time.perf_counter()
        with self._lock:
            if self._ended or os.getpid() != self.pid:
                return  # a forked child left the script's code: its end is not the script's
            self._ended = True
        for close in self._closing:
            try:
                close(now)
            except Exception:  # noqa: BLE001 - the END event is written whatever a hook did
                pass
        compile_cache = compile_cache_facts()  # before the drain, whose own lookup is not the script's
        ended, waited = drain.drain(now) if wait_for_devices else (now, 0.0)
        import_timer.stop()
        _, import_blocks, import_open = import_timer.spans(ended)
        split = phases.split(self.started, ended, import_blocks, compile_intervals(), import_still_running=import_open)
        event = events.End(
            type=events.END,
            body_start=self.started,
            body_time=split["body_time"],
            import_time=split["import_time"],
            compile_wall_time=split["compile_wall_time"],
            run_time=split["run_time"],
            phases_notes=split["notes"],
            drain_time=waited,
            ended_by=ended_by,
            cpu_time=_cpu_seconds(),
            peak_rss_kb=_own_peak_rss_kb(),
            device=device_facts(),
            compile_cache=compile_cache,
            exit_code=exit_code,
        )
        environment = compile_environment()
        if environment is not None:
            event["compile_environment"] = environment
        if self._finish_hooks:  # profiling: the imports are a profile's timeline (the body's part)
            event["imports"] = [
                [max(a, self.started), min(b, ended), module] + ([statements, seconds] if statements > 1 else [])
                for a, b, module, statements, seconds in import_timer.named_spans(ended)
                if b > self.started and a < ended]
        for hook in self._finish_hooks:
            hook(self.writer)
        self.writer.send(event)
        self.writer.close()
        sys.stdout.flush()
        sys.stderr.flush()

    # -- ways out that never return to the probe -------------------------------------------------

    def _watch_exits(self) -> None:
        """Wrap the calls that end the process at once, so the END event is written first."""
        body = self

        def _exit(code: int) -> None:
            body._ending(f"os._exit({code})", code if isinstance(code, int) else None)
            body._real["_exit"](code)

        def abort() -> None:
            body._ending("os.abort()", None)
            body._real["abort"]()

        def kill(pid: int, sig: int) -> None:
            if pid in (0, os.getpid(), -os.getpgrp()) and body._fatal(sig):
                body._ending(f"the script sent its own process {_name(sig)}", None)
            body._real["kill"](pid, sig)

        def killpg(pgid: int, sig: int) -> None:
            if pgid in (0, os.getpgrp()) and body._fatal(sig):
                body._ending(f"the script sent its own process group {_name(sig)}", None)
            body._real["killpg"](pgid, sig)

        def raise_signal(sig: int) -> None:
            if body._fatal(sig):
                body._ending(f"the script raised {_name(sig)}", None)
            body._real["raise_signal"](sig)

        # raise_signal is wrapped where ``signal`` takes it from as it is imported (``from _signal
        # import *``), and in ``signal`` itself if something imported it already.
        signal_modules = [_signal] + ([sys.modules["signal"]] if "signal" in sys.modules else [])
        for modules, name, wrapper in (([os], "_exit", _exit), ([os], "abort", abort), ([os], "kill", kill),
                                       ([os], "killpg", killpg), (signal_modules, "raise_signal", raise_signal)):
            if hasattr(modules[0], name):
                self._real[name] = getattr(modules[0], name)
                wrapper.__name__ = wrapper.__qualname__ = name
                wrapper.__doc__ = self._real[name].__doc__
                for module in modules:
                    setattr(module, name, wrapper)

    def _ending(self, how: str, code: int | None) -> None:
        try:
            self.end(code, how, wait_for_devices=False)  # the process ends now: pending work is lost
        except Exception:  # noqa: BLE001 - never stand between the script and its way out
            pass

    @staticmethod
    def _fatal(sig: int) -> bool:
        """Whether ``sig`` would end this process now: its default action ends processes and no
        Python handler catches it (SIGKILL always)."""
        try:
            if sig == _signal.SIGKILL:
                return True
            if sig in _NOT_FATAL or sig == 0:
                return False
            return _signal.getsignal(sig) in (_signal.SIG_DFL, None)
        except (ValueError, TypeError):
            return False


def _name(sig: int) -> str:
    """``signal.Signals(sig).name`` (the same names: of the numbers several names share, the first in
    alphabetical order, as enum makes them aliases), without importing ``signal`` in the script's
    last moments, while its import time is still being measured."""
    names = sorted((value, name) for name, value in vars(_signal).items()
                   if name.isupper() and name.startswith("SIG") and not name.startswith("SIG_"))
    for value, name in names:
        if value == sig:
            return name
    return f"signal {sig}"
