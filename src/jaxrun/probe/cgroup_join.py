"""The probe's first act: join the run's cgroups (run/process/cgroups.py) before the script can start
anything, so that every process the script starts is born in them, and say how much CPU this
process used before it joined (its interpreter's start-up), which the group's count lacks. Then
every thread of the process takes the run's CPU mask (``JAXRUN_CPUS``, a ``--jobs N`` share or a
duet's half): the threads a spare already has (its lifeline's), and the mask a move into a
``cpuset`` group resets, so that the script and every thread it makes run on its cores alone.

Where no group counts CPU, the process reaps the children that ended unwaited for as it exits, so
that their CPU reaches its rusage (jaxrun reads it as it reaps this process).
"""

from __future__ import annotations

import atexit
import os
import resource

from jaxrun.probe.channel import CGROUPS_ENV, read_file

# The run's cgroups this process joined (probe/lifeline.py stops every process in them).
joined_folders: list[str] = []
# The cores the run's processes are pinned to, comma-separated (set by run/process/process_watch.py).
CPUS_ENV = "JAXRUN_CPUS"


# Where a cgroup counts the CPU time of its processes: controller (``""`` for v2) -> (file, key,
# seconds per unit). A v1 ``cpu.stat`` has no ``usage_usec``. run/process/cgroups.py reads the same files.
CPU_USAGE_FILES: dict[str, tuple[str, str | None, float]] = {
    "cpuacct": ("cpuacct.usage", None, 1e-9),
    "": ("cpu.stat", "usage_usec", 1e-6),
}


# The kernel's files here are ASCII, read and written as UTF-8 (the same text): its codec is loaded
# in every interpreter, the ascii one would be imported in every script's process.
def read_count(path: str, key: str | None = None) -> int | None:
    """An integer file, or the value of ``key`` in a ``key value`` file; None when absent."""
    try:
        text = read_file(path).decode("utf-8", "replace")
    except OSError:
        return None
    if key is None:
        return int(text.strip()) if text.strip().isdigit() else None
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return None


def group_cpu_seconds(folder: str) -> float | None:
    """CPU seconds the cgroup ``folder`` has counted (user+sys of every process while it was in
    it); None where it keeps no such count."""
    for name, key, unit in CPU_USAGE_FILES.values():
        value = read_count(os.path.join(folder, name), key)
        if value is not None:
            return value * unit
    return None


def _cpu_before_join(folders: list[str]) -> float | None:
    """CPU seconds this process used before it joined the cgroup (its interpreter's start-up),
    which the group never counted: all it used (it has started nothing yet) minus what the group
    counted since it joined (alone in it: the group is new, or its own as a spare). Its own time
    is read first: reading it brings the kernel's count of this running process, the group's
    included, up to date."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    in_group = next((s for s in map(group_cpu_seconds, folders) if s is not None), None)
    return None if in_group is None else max(0.0, own.ru_utime + own.ru_stime - in_group)


def _reap_finished_children() -> None:
    """At exit, after the script's exit handlers (this one is registered before the script runs,
    so it runs last): reap the children that ended unwaited for, so that the kernel adds their CPU
    to this process's rusage, which jaxrun reads as it reaps this process. Only where no cgroup
    counts the run's CPU. Running children are left alone; a finished one would be reaped by init
    a moment later anyway, so nothing the script can still do depends on it, unless a daemon
    thread or a finaliser of the interpreter's shutdown waits for that very child (it gets ECHILD;
    subprocess and multiprocessing take that as "already reaped")."""
    while True:
        try:
            if os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG) is None:
                return  # children left, none finished
        except OSError:
            return  # no children left (ECHILD)


def join_cgroups() -> dict[str, object]:
    """Move this process into the run's cgroups (before the script can start anything), so that
    every process the script starts is born in them; the START event says how it went, and, where
    the group counts CPU, ``cpu_before_join`` (jaxrun adds it to the group's count). Where no group
    counts CPU, the process reaps its finished children as it exits (``_reap_finished_children``)."""
    atexit.unregister(_reap_finished_children)  # a spare joins twice: as a spare, then for its job
    folders = [f for f in os.environ.pop(CGROUPS_ENV, "").split(os.pathsep) if f]
    joined_folders[:] = folders
    joined = _join(folders) if folders else {}
    if joined.get("cgroup_joined"):
        cpu_before = _cpu_before_join(folders)
        if cpu_before is not None:
            joined["cpu_before_join"] = cpu_before
    if "cpu_before_join" not in joined:
        atexit.register(_reap_finished_children)
    _take_cpu_mask(os.environ.pop(CPUS_ENV, ""))  # after the moves: joining a cpuset group resets it
    return joined


def _single_threaded() -> bool:
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _take_cpu_mask(value: str) -> None:
    """Every thread of this process on the cores ``value`` lists (none: left as it is). A thread
    takes its creator's mask when it is made, so once every thread has it, so does all the script
    makes; the list is read again until a reading shows no thread it has not set (one started
    meanwhile had the old mask)."""
    cpus = [int(c) for c in value.split(",") if c.strip().isdigit()]
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return
    done: set[str] = set()
    while True:
        try:
            threads = set(os.listdir("/proc/self/task"))
        except OSError:
            threads = {str(os.getpid())}  # no /proc: this thread, which makes the script's
        if threads <= done:
            return
        for tid in threads - done:
            try:
                os.sched_setaffinity(int(tid), cpus)
            except OSError:
                pass  # ended meanwhile, or cores it may not use: it runs where it may
            done.add(tid)


def _join(folders: list[str]) -> dict[str, object]:
    me = str(os.getpid())
    alone = _single_threaded()
    for folder in folders:
        path = os.path.join(folder, "cgroup.procs")
        try:
            with open(path, encoding="utf-8") as procs:
                if me in procs.read().split():
                    continue  # the parent moved it here already (run/process/cgroups.py: adopt)
            tasks = os.path.join(folder, "tasks")
            if alone and os.path.exists(tasks):
                # A v1 group's ``tasks`` takes "0", the writing thread alone: the kernel then skips
                # the lock over every thread group it takes to move a whole process, whose first
                # taking after a quiet moment waits for an RCU grace period (10-16 ms here, on the
                # way to a forked script's first line). With one thread, that thread is the process.
                with open(tasks, "w", encoding="utf-8") as own:
                    own.write("0")
                continue
            with open(path, "w", encoding="utf-8") as procs:
                procs.write(me)
        except OSError as exc:
            return {"cgroup_joined": False, "cgroup_error": f"{folder}: {exc.strerror or exc}"}
    return {"cgroup_joined": True}
