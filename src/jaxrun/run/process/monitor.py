"""Watching and stopping a script's whole process tree with psutil.

The tree is sampled while the script runs (see :class:`TreeMonitor` for what one sample counts),
and every descendant ever seen is remembered, so that a grandchild that left the process group
(``setsid``, double fork) can still be stopped when the script ends or times out.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Callable

import psutil

# How often (in samples) every process on the machine is checked for the run's marker.
_MARKER_SCAN_EVERY = 10
MAX_SERIES = 20_000  # memory samples kept for a profile (at 0.1 s: 33 min; then every other one)


def _has_children(pid: int) -> bool:
    """Whether ``pid`` has a child process: its threads' ``/proc/PID/task/TID/children`` files;
    True where they cannot be read (a kernel without them), so the caller looks the long way."""
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as handle:
                if handle.read().strip():
                    return True
    except OSError:
        return True
    return False


class TreeMonitor:
    """Samples a script's process tree: its memory, and every descendant ever seen.

    Memory of one sample: the RSS of the script's own process plus the USS (private pages) of each
    descendant, so pages a forked child shares with its parent count once. Descendants are the
    process's children, and every process that carries ``marker`` (an environment variable and
    value only this run's processes inherit): a grandchild that left the tree (double fork,
    ``setsid``) is still found, its memory counted and its CPU time kept (``escaped_cpu_seconds``;
    the script's own rusage never includes it, as nobody in the tree waits for it), and so is
    the CPU time of a descendant that ended as a zombie nobody in the tree will reap (its parent
    ended without waiting for it: init is its parent now). ``members``,
    when given, lists the pids of the run's cgroup: found at every sample, whatever their
    environment (run/process/cgroups.py).
    """

    method = "rss of the script's process + uss of each descendant, sampled"

    def __init__(self, pid: int, marker: tuple[str, str] | None = None, *, record: bool = False,
                 members: Callable[[], set[int]] | None = None,
                 group_cpu: Callable[[], float | None] | None = None, process_limit: int | None = None) -> None:
        self.pid = pid
        # --max-processes: a sample that counts more ends as soon as it has counted them (the tree
        # is to be stopped), without reading the memory of hundreds of processes first.
        self.process_limit = process_limit
        self.marker = marker
        self.members = members
        # The CPU seconds the run's cgroup counted: above 0, the script's process joined it (a
        # tiny script may end between two samples, never seen in it). Nothing else enters it.
        self.group_cpu = group_cpu
        self.peak_rss_bytes = 0
        self.last_bytes = 0
        self.last_count = 0  # live processes of the run at the last sample, the script's included
        self.peak_count = 0
        self.samples = 0
        self._grouped = False  # the script's process was seen in the run's cgroup (run/process/cgroups.py)
        # (perf_counter, bytes) of every sample, when asked (profiling); halved past MAX_SERIES.
        self.series: list[tuple[float, int]] | None = [] if record else None
        self._seen: dict[int, psutil.Process] = {}
        # pid -> CPU seconds of a descendant nobody in the tree waits for: as last sampled while it
        # runs, final once read from its zombie (those in _final_cpu, never read again).
        self._escaped_cpu: dict[int, float] = {}
        self._final_cpu: set[int] = set()
        try:
            self._root: psutil.Process | None = psutil.Process(pid)
        except psutil.NoSuchProcess:
            self._root = None

    def _marked(self) -> list[psutil.Process]:
        if self.marker is None:
            return []
        name, value = self.marker
        found = []
        for proc in psutil.process_iter():
            if proc.pid == self.pid or proc.pid in self._seen:
                continue
            try:
                if proc.environ().get(name) == value:
                    found.append(proc)
            except (psutil.Error, OSError):
                continue
        return found

    def sample(self, *, scan: bool = False) -> None:
        """One sample; ``scan`` looks for marked processes now (else every few samples)."""
        if self._root is None:
            return
        grouped = self.members() if self.members is not None else set()
        self._grouped = self._grouped or self.pid in grouped or (
            scan and self.group_cpu is not None and not is_alive(self._root) and (self.group_cpu() or 0.0) > 0)
        if self._grouped and self.process_limit is not None and len(grouped) > self.process_limit:
            # Over --max-processes by the group's own list (live processes only: a zombie has left
            # it), one file read: a fork bomb is not given the time it takes to read each process.
            self._over_limit(len(grouped))
            return
        if self._grouped:
            # The script's process is (or was, until it ended: the last sample) in the run's
            # cgroup, where every process it starts is born and stays: the group is the tree, read
            # from one file. Scanning every process's parent and environment (~5 ms a sample with
            # a hundred processes on the machine) is CPU taken from the script, and jaxrun's own.
            tree = self._cgroup_members(set(), grouped)
        else:
            tree = self._descendants()
            # Not at the first sample: the process has only just been started (or a spare given
            # its job), the script has not run, nothing of it can have left the tree yet.
            if scan or (self.samples and self.samples % _MARKER_SCAN_EVERY == 0):
                tree += self._marked()
            tree += self._cgroup_members({p.pid for p in tree}, grouped)
        for proc in tree:
            self._seen.setdefault(proc.pid, proc)
        in_tree = {self.pid, *(p.pid for p in tree)}
        total = 0
        try:
            total += self._root.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
        alive, ended = self._alive_and_ended()
        count = len(alive) + (1 if is_alive(self._root) else 0)
        if self.process_limit is not None and count > self.process_limit:
            self._over_limit(count)
            return
        self.last_count = count
        self.peak_count = max(self.peak_count, count)
        self.samples += 1
        for proc in alive:
            try:
                total += proc.memory_full_info().uss
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            self._note_cpu_if_unwaited(proc, in_tree, ended=False)
        for proc in ended:
            self._note_cpu_if_unwaited(proc, in_tree, ended=True)
        self.last_bytes = total
        self.peak_rss_bytes = max(self.peak_rss_bytes, total)
        if self.series is not None:
            self.series.append((time.perf_counter(), total))
            if len(self.series) > MAX_SERIES:
                del self.series[::2]

    def _over_limit(self, count: int) -> None:
        """A sample that counted more processes than ``process_limit``: it ends there, their
        memory unread (the tree is to be stopped; last_bytes and the peak keep the previous
        sample's)."""
        self.last_count = count
        self.peak_count = max(self.peak_count, count)
        self.samples += 1

    def _descendants(self) -> list[psutil.Process]:
        """Every descendant of the script's process; none, read from its threads' ``children``
        files (a few files, not every process's ``stat``), while it has started none (a probe
        before its script runs: a spare not yet in its cgroup)."""
        if self._root is not None and self._root.is_running() and not _has_children(self.pid):
            return []
        try:
            return self._root.children(recursive=True) if self._root is not None else []
        except psutil.NoSuchProcess:
            return []

    def _cgroup_members(self, known: set[int], grouped: set[int]) -> list[psutil.Process]:
        found = []
        for pid in grouped:
            if pid == self.pid or pid in known:
                continue
            if pid in self._seen:
                found.append(self._seen[pid])
                continue
            try:
                found.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
        return found

    def _note_cpu_if_unwaited(self, proc: psutil.Process, in_tree: set[int], *, ended: bool) -> None:
        """Keep the CPU time of a descendant whose time will never reach the script's rusage: its
        parent is outside the tree (a double fork; or its parent ended without waiting for it, and
        init adopted it) or is such a process itself (nothing in the tree waits for either). An
        ended one (a zombie init has not reaped yet) gives its final figure."""
        if proc.pid in self._final_cpu:
            return
        try:
            with proc.oneshot():  # ppid and CPU times from one read of /proc/PID/stat
                parent = proc.ppid()
                if parent in in_tree and parent not in self._escaped_cpu:
                    return  # its parent may still wait for it: then its time is in the rusage
                times = proc.cpu_times()
        except psutil.Error:
            return
        self._escaped_cpu[proc.pid] = times.user + times.system
        if ended:
            self._final_cpu.add(proc.pid)

    @property
    def escaped_cpu_seconds(self) -> float:
        """CPU seconds of descendants nobody in the tree waits for (those that left it, their own
        descendants, and zombies init adopted): as last sampled, or final for those seen ended."""
        return sum(self._escaped_cpu.values())

    def unwaited_cpu_seconds(self) -> float:
        """:attr:`escaped_cpu_seconds` once the run is over (its processes stopped), with the final
        figure of each descendant still a zombie: unreaped now, its time is in no rusage of the
        run, whatever its parent was. Where init reaps slowly, this catches what a daemon burnt
        after the last sample, and the unwaited children of a script that ended by ``os._exit``."""
        for proc in self._alive_and_ended()[1]:
            self._note_cpu_if_unwaited(proc, set(), ended=True)
        return self.escaped_cpu_seconds

    def descendants_alive(self) -> list[psutil.Process]:
        return self._alive_and_ended()[0]

    def _alive_and_ended(self) -> tuple[list[psutil.Process], list[psutil.Process]]:
        """Descendants ever seen that still run, and those that ended but are not reaped yet
        (zombies), from one status read each."""
        alive, ended = [], []
        for proc in self._seen.values():
            status = _status(proc)
            if status == psutil.STATUS_ZOMBIE:
                ended.append(proc)
            elif status is not None:
                alive.append(proc)
        return alive, ended


def _status(proc: psutil.Process) -> str | None:
    """psutil's status of the process; None once it is gone (reaped)."""
    try:
        # is_running() also checks the creation time, so a recycled pid is never signalled.
        return proc.status() if proc.is_running() else None
    except psutil.NoSuchProcess:
        return None


def is_alive(proc: psutil.Process) -> bool:
    """Running and not a zombie. An orphan's zombie can linger when PID 1 reaps slowly (as in
    some containers); it holds no memory or CPU, so it counts as gone."""
    return _status(proc) not in (None, psutil.STATUS_ZOMBIE)


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


def _group_gone(pgid: int) -> bool:
    """No process at all (not even a zombie) is left in the process group: one system call, where
    :func:`group_members` reads every process of the machine."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass
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
    if not monitor.descendants_alive() and (_group_gone(pgid) or not group_members(pgid)):
        return 0
    return stop_tree(pgid, monitor, grace)
