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
        alive = []
        for proc in self._seen.values():
            try:
                # is_running() also checks the creation time, so a recycled pid is not killed.
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
            except psutil.NoSuchProcess:
                continue
        return alive


def signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def group_alive(pgid: int) -> bool:
    return signal_group(pgid, 0)


def stop_tree(pgid: int, monitor: TreeMonitor, grace: float, *, wait_for_exit=None) -> int:
    """SIGTERM the process group and every descendant seen, SIGKILL what is left after ``grace``.

    ``wait_for_exit(timeout) -> bool`` waits for the leader to be reaped by its waiter thread.
    Returns how many processes had to be signalled (0 when the tree was already gone).
    """
    targets = monitor.descendants_alive()
    signalled = int(signal_group(pgid, signal.SIGTERM))
    for proc in targets:
        try:
            proc.terminate()
            signalled += 1
        except psutil.NoSuchProcess:
            pass
    deadline = time.monotonic() + grace
    if wait_for_exit is not None:
        wait_for_exit(grace)
    _, alive = psutil.wait_procs(targets, timeout=max(0.0, deadline - time.monotonic()))
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.02)
    signal_group(pgid, signal.SIGKILL)
    for proc in alive + monitor.descendants_alive():
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(monitor.descendants_alive(), timeout=grace)
    return signalled


def reap_leftovers(pgid: int, monitor: TreeMonitor, grace: float) -> int:
    """After the script exited: stop any process it started that is still running."""
    leftovers = monitor.descendants_alive()
    if not leftovers and not group_alive(pgid):
        return 0
    count = len(leftovers)
    stop_tree(pgid, monitor, grace)
    return max(count, 1)
