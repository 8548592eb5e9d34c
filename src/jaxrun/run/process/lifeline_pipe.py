"""Scripts never outlive jaxrun. Every probe process holds the read end of a pipe whose write end
only this jaxrun process holds: when it ends, however it ends (SIGKILL included), the kernel closes
the write end, the probe's watcher reads end-of-file and stops the script's whole tree
(probe/lifeline.py). A pipe, not ``PR_SET_PDEATHSIG``: that fires when the *thread* that started
the child ends, and jaxrun starts scripts from worker threads and keeps spare processes.

(The results folder stays locked until the last probe of a killed run is gone: batch/folder_lock.py.)
"""

from __future__ import annotations

import os
import threading

from jaxrun.probe.lifeline import ENV

_lock = threading.Lock()
_pipe: tuple[int, int] | None = None  # (read, write), made on first use
_owner: int | None = None  # the process the pipe belongs to (a forked process makes its own)


def _read_end() -> int:
    global _pipe, _owner
    with _lock:
        if _pipe is None or _owner != os.getpid():
            _pipe, _owner = os.pipe(), os.getpid()  # both ends close on exec: only pass_fds passes one
        return _pipe[0]


def child_fds() -> tuple[int, ...]:
    """What a probe process must be started with (``pass_fds``)."""
    return (_read_end(),)


def child_env() -> dict[str, str]:
    """The variable that tells the probe which descriptor is its lifeline."""
    return {ENV: str(_read_end())}
