"""The probe's side of run/process/lifeline_pipe.py: when jaxrun's process is gone (the lifeline pipe reads
end-of-file), nobody supervises the script any more, so it is stopped with its whole tree: every
process in the run's cgroups, then the process group the probe leads, the probe last. Nothing
the script started runs on unsupervised, writing into a results folder a new run may be using.

While it lives, the probe (and any process the script forks) holds a shared lock on the results
folder's ``.jaxrun.scripts.lock``; a new run takes it exclusively before starting (batch/folder_lock.py),
so it waits until the last script of a killed run is gone: no script runs twice at once."""

from __future__ import annotations

import _signal  # signal's numbers without signal's enum (~3 ms of CPU in every script's process)
import _thread  # a thread without threading's own imports (it is no thread of the script's)
import fcntl  # here, not where the lock is taken: a forked child would import it again (~0.8 ms)
import os

from jaxrun.probe.cgroup_join import joined_folders

ENV = "JAXRUN_LIFELINE_FD"  # the descriptor number, set by run/process/lifeline_pipe.py
SCRIPTS_LOCK_ENV = "JAXRUN_SCRIPTS_LOCK"  # the path, set by run/process/environment.py
SCRIPTS_LOCK_FILE = ".jaxrun.scripts.lock"
_held: list[int] = []  # the lock's descriptor, open for the process's life


def watch() -> None:
    """Start watching the lifeline jaxrun passed, if any (a probe run by hand has none)."""
    value = os.environ.pop(ENV, None)  # the script's own processes are not probes
    if not value or not value.isdigit():
        return
    fd = int(value)
    try:
        os.set_inheritable(fd, False)  # a program the script runs does not keep jaxrun's pipe open
    except OSError:
        return  # not open: started without one
    _thread.start_new_thread(_wait, (fd,))  # a daemon: the interpreter never waits for it


def hold_scripts_lock() -> None:
    """Take the shared lock the job's environment names (a spare: once it has its job)."""
    path = os.environ.pop(SCRIPTS_LOCK_ENV, None)
    if not path:
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return  # a folder this node cannot reach (another machine's results): no lock to hold
    _held.append(fd)


def _wait(fd: int) -> None:
    while True:
        try:
            if not os.read(fd, 64):
                break  # every write end closed: jaxrun's process has ended
        except InterruptedError:
            continue
        except OSError:
            break
    stop_tree()


def stop_tree() -> None:
    """SIGKILL to every process of the run but this one, then to this one: the script cannot be
    asked to finish its work (its results would have no reader), only stopped."""
    me = os.getpid()
    for folder in joined_folders:
        for _ in range(10):  # a process forking as it is killed: read the group again
            try:
                with open(os.path.join(folder, "cgroup.procs"), encoding="utf-8") as procs:
                    others = [int(p) for p in procs.read().split() if p.isdigit() and int(p) != me]
            except OSError:
                break
            if not others:
                break
            for pid in others:
                try:
                    os.kill(pid, _signal.SIGKILL)
                except OSError:
                    pass
    try:
        os.killpg(os.getpgrp(), _signal.SIGKILL)  # the probe leads its group: this ends it too
    except OSError:
        pass
    os._exit(137)
