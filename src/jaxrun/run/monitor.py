"""Watching and stopping a script's whole process tree with psutil.

The tree is sampled while the script runs: the sum of RSS over the tree gives its peak host
memory, and every descendant ever seen is remembered, so that a grandchild that left the process
group (``setsid``, double fork) can still be stopped when the script ends or times out.
"""

from __future__ import annotations

import os
import signal
import time

import psutil


class TreeMonitor:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_rss_bytes = 0
        self.samples = 0
        self._seen: dict[int, psutil.Process] = {}
        try:
            self._root: psutil.Process | None = psutil.Process(pid)
        except psutil.NoSuchProcess:
            self._root = None

    def sample(self) -> None:
        if self._root is None:
            return
        try:
            members = [self._root, *self._root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        total = 0
        for proc in members:
            if proc.pid != self.pid:
                self._seen.setdefault(proc.pid, proc)
            try:
                total += proc.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        self.samples += 1
        self.peak_rss_bytes = max(self.peak_rss_bytes, total)

    def descendants_alive(self) -> list[psutil.Process]:
        return [proc for proc in self._seen.values() if is_alive(proc)]


def is_alive(proc: psutil.Process) -> bool:
    """Running and not a zombie. An orphan's zombie can linger when PID 1 reaps slowly (as in
    some containers); it holds no memory or CPU, so it counts as gone."""
    try:
        # is_running() also checks the creation time, so a recycled pid is never signalled.
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until every process has exited (zombies included); return those still alive."""
    deadline = time.monotonic() + timeout
    alive = [p for p in procs if is_alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.02)
        alive = [p for p in alive if is_alive(p)]
    return alive


def signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes of a process group, including ones never sampled."""
    members = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and is_alive(proc):
                members.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return members


def stop_tree(pgid: int, monitor: TreeMonitor, grace: float, *, wait_for_exit=None) -> int:
    """SIGTERM the process group and every descendant seen, SIGKILL what is left after ``grace``.

    ``wait_for_exit(timeout) -> bool`` waits for the leader to be reaped by its waiter thread.
    Returns how many processes were signalled.
    """
    targets = {p.pid: p for p in monitor.descendants_alive() + group_members(pgid)}
    signal_group(pgid, signal.SIGTERM)
    for proc in targets.values():
        try:
            proc.terminate()
        except psutil.NoSuchProcess:
            pass
    deadline = time.monotonic() + grace
    if wait_for_exit is not None:
        wait_for_exit(grace)
    alive = wait_gone(list(targets.values()), max(0.0, deadline - time.monotonic()))
    # Whatever ignored SIGTERM, or was started meanwhile, is killed outright.
    signal_group(pgid, signal.SIGKILL)
    for proc in alive + monitor.descendants_alive():
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    wait_gone(monitor.descendants_alive() + group_members(pgid), grace)
    return len(targets)


def reap_leftovers(pgid: int, monitor: TreeMonitor, grace: float) -> int:
    """After the script exited: stop any process it started that is still running."""
    if not monitor.descendants_alive() and not group_members(pgid):
        return 0
    return stop_tree(pgid, monitor, grace)
