"""A kernel control group (cgroup) per script run, where jaxrun may create one.

The probe moves itself into the group before the script starts (``probe/cgroup_join.py``), and every
process the script starts is born in it: a daemon that double-forks, calls ``setsid`` and clears
its environment escapes the process group and the marker variable, but not its cgroup. So the
group is the surest list of what the script left running. Where the controllers exist the kernel
also enforces the limits: ``--memory-limit`` (``memory.limit_in_bytes`` / ``memory.max``; the OOM
killer acts, and its kills are counted) and a backstop for ``--max-processes``: ``pids.max`` counts
threads as well as processes (a JAX process runs a dozen threads on 2 cores, hundreds on a big
machine), so the kernel holds ``max_processes`` x :func:`tasks_per_process` tasks, which caps how far a fork
bomb gets between two samples, while the exact process count is jaxrun's sampled watch. The group
also counts the CPU time of every process that ran in it, waited for or not (``cpuacct.usage`` in
v1, ``usage_usec`` of ``cpu.stat`` in v2, which every v2 group has): ``cpu_time`` reads it once,
when the run is over.

Both cgroup versions are handled: v1 (one hierarchy per controller: ``pids``, ``cpuacct``,
``memory``) and v2 (one unified hierarchy; limits only where the parent delegates the controllers).
Creating a group needs write access to jaxrun's own cgroup (root, or a delegated subtree): without it
:func:`create` returns None and jaxrun tracks processes by session and marker alone, the limits
then watched by sampling only (``result.cgroup`` is null).
"""

from __future__ import annotations

import functools
import itertools
import os
import signal
import time
from pathlib import Path

import msgspec

from jaxrun.probe.cgroup_join import CPU_USAGE_FILES, group_cpu_seconds, read_count
from jaxrun.probe.channel import CGROUPS_ENV, read_file

_PREFIX = "jaxrun-"
# Set to 1 to never create cgroups (tracking by session and marker, limits by sampling only).
DISABLE_ENV = "JAXRUN_NO_CGROUP"
_counter = itertools.count(1)


def tasks_per_process() -> int:
    """Threads allowed per process under ``--max-processes`` (XLA sizes its pools by the cores)."""
    return 4 * (os.cpu_count() or 1) + 64


def _own_cgroups() -> dict[str, str]:
    """Controller (``"pids"``, ``"cpuacct"``, ``"memory"``; ``""`` for v2) -> this process's cgroup path."""
    found: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(","):
                found[controller] = parts[2]
    return found


def _mounts() -> dict[str, tuple[Path, str]]:
    """Controller (``""`` for v2) -> (mount point, hierarchy root mounted there)."""
    found: dict[str, tuple[Path, str]] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        head, _, tail = line.partition(" - ")
        fields, tail_fields = head.split(), tail.split()
        if len(fields) < 5 or len(tail_fields) < 3:
            continue
        fstype, options = tail_fields[0], tail_fields[2].split(",")
        root, mount_point = fields[3], Path(fields[4].replace("\\040", " "))
        if fstype == "cgroup2":
            found.setdefault("", (mount_point, root))
        elif fstype == "cgroup":
            for controller in ("pids", "cpuacct", "memory"):
                if controller in options:
                    found.setdefault(controller, (mount_point, root))
    return found


@functools.lru_cache(maxsize=None)
def _own_dir(controller: str) -> Path | None:
    """The folder of this process's cgroup in the hierarchy of ``controller``, if mounted (read once
    per process: jaxrun's own cgroup does not change while it runs)."""
    mount = _mounts().get(controller)
    path = _own_cgroups().get(controller)
    if mount is None or path is None:
        return None
    mount_point, root = mount
    relative = os.path.relpath(path, root) if root != "/" else path.lstrip("/")
    if relative.startswith(".."):
        return None  # our group is outside what is mounted here (a container's view)
    folder = mount_point / relative if relative != "." else mount_point
    return folder if (folder / "cgroup.procs").exists() else None


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


def _read_int(path: Path, key: str | None = None) -> int:
    """An integer file, or the value of ``key`` in a ``key value`` file; 0 when absent (a counter
    the kernel has not started is at 0)."""
    return read_count(str(path), key) or 0


def _sweep(parent: Path) -> None:
    """Remove empty groups left by jaxrun processes that died before cleaning up."""
    try:
        stale = [p for p in parent.glob(f"{_PREFIX}*") if p.is_dir()]
    except OSError:
        return
    for folder in stale:
        owner = folder.name[len(_PREFIX):].split("-")[0]
        if owner.isdigit() and int(owner) != os.getpid() and not Path(f"/proc/{owner}").exists():
            try:
                folder.rmdir()
            except OSError:
                pass


class ScriptCgroup(msgspec.Struct):
    """The groups of one run: ``dirs`` maps a controller (``"pids"``, ``"cpuacct"``, ``"memory"``,
    ``""`` for v2) to its folder. ``memory_enforced`` / ``processes_enforced``: the kernel holds
    that limit."""

    dirs: dict[str, Path]
    memory_enforced: bool = False
    processes_enforced: bool = False
    _removed: bool = False

    @property
    def kernel_limits(self) -> list[str]:
        """The limits the kernel holds for this run: ``"memory"``, ``"processes"``."""
        return [name for name, held in (("memory", self.memory_enforced), ("processes", self.processes_enforced)) if held]

    @property
    def label(self) -> str:
        """What the result records: the group's folder (v2 or the v1 ``pids`` one first)."""
        return str(next(iter(self.dirs.values())))

    def env(self) -> dict[str, str]:
        """The variable through which the probe finds the groups it must join."""
        return {CGROUPS_ENV: os.pathsep.join(str(d) for d in self.dirs.values())}

    def holds(self, memory_limit: int | None) -> bool:
        """Whether this group can hold a run's limits (cgroup v1 keeps memory in a hierarchy of
        its own, made only for a run with a memory limit)."""
        return memory_limit is None or "memory" in self.dirs or "" in self.dirs

    def limit(self, memory_limit: int | None, max_processes: int | None) -> None:
        """Have the kernel hold these limits, where it can."""
        if memory_limit is not None:
            self.memory_enforced = _limit_memory(self, memory_limit)
        if max_processes is not None:
            folder = self.dirs.get("pids", self.dirs.get(""))
            self.processes_enforced = folder is not None and _write(
                folder / "pids.max", str(max_processes * tasks_per_process()))

    def adopt(self, pid: int) -> None:
        """Move ``pid`` into the groups: done by the parent right after the launch, while the child
        starts its interpreter (a move costs 10-30 ms in the kernel); the probe checks, and joins
        itself if this has not happened yet, before the script runs. A spare joins a group of
        its own while it waits (run/process/spare.py), and that group becomes its job's."""
        for folder in self.dirs.values():
            _write(folder / "cgroup.procs", str(pid))

    def pids(self) -> set[int]:
        found: set[int] = set()
        # The cpuacct group holds the same processes as the others (the probe joins them all and a
        # child is born in its parent's groups): not read again at every sample.
        tracking = [folder for controller, folder in self.dirs.items() if controller != "cpuacct"]
        for folder in tracking or self.dirs.values():
            try:
                found.update(int(p) for p in read_file(os.path.join(folder, "cgroup.procs")).split())
            except (OSError, ValueError):
                continue
        return found

    def oom_kills(self) -> int:
        """Processes the kernel's OOM killer stopped for going over the memory limit."""
        if "memory" in self.dirs:
            return _read_int(self.dirs["memory"] / "memory.oom_control", "oom_kill")
        if "" in self.dirs:
            return _read_int(self.dirs[""] / "memory.events", "oom_kill")
        return 0

    def refused_forks(self) -> int:
        """Forks (or new threads) the kernel refused at ``pids.max``."""
        folder = self.dirs.get("pids", self.dirs.get(""))
        return _read_int(folder / "pids.events", "max") if folder is not None else 0

    def _cpu_controller(self) -> str | None:
        """The controller whose folder counts this group's CPU time (probe/cgroup_join.py)."""
        return next((c for c in CPU_USAGE_FILES if c in self.dirs), None)

    @property
    def cpu_source(self) -> str | None:
        """The kernel's count that :meth:`cpu_seconds` reads (``"cpuacct.usage"``,
        ``"cpu.stat usage_usec"``); None where the group keeps none."""
        controller = self._cpu_controller()
        return None if controller is None else " ".join(p for p in CPU_USAGE_FILES[controller][:2] if p)

    def cpu_seconds(self) -> float | None:
        """CPU seconds (user+sys) of every process while it was in the group, exited ones and
        ones nobody waited for included; None where the group keeps no such count. The kernel
        charges CPU as it is used, so once the group is empty the figure is final."""
        controller = self._cpu_controller()
        return None if controller is None else group_cpu_seconds(str(self.dirs[controller]))

    def peak_bytes(self) -> int | None:
        """The kernel's peak charge of the group (page cache included), where it keeps one."""
        if "memory" in self.dirs:
            return _read_int(self.dirs["memory"] / "memory.max_usage_in_bytes") or None
        if "" in self.dirs:
            return _read_int(self.dirs[""] / "memory.peak") or None
        return None

    def kill_all(self, grace: float) -> int:
        """SIGKILL everything still in the group until it is empty (a fork bomb is capped by
        ``pids.max`` or outpaced by the rounds); return how many processes were killed."""
        killed: set[int] = set()
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            members = self.pids()
            if not members:
                break
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.01)
        return len(killed)

    def remove(self) -> None:
        """Delete the groups (empty by then; a last straggler is retried briefly)."""
        if self._removed:
            return
        self._removed = True
        for folder in self.dirs.values():
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)  # a killed process leaves the group a moment after its signal


def create(memory_limit: int | None = None, max_processes: int | None = None) -> ScriptCgroup | None:
    """New groups for one run under jaxrun's own, with the limits set; None where not allowed
    (or turned off with ``JAXRUN_NO_CGROUP=1``)."""
    if os.environ.get(DISABLE_ENV, "") not in ("", "0"):
        return None
    name = f"{_PREFIX}{os.getpid()}-{next(_counter)}"
    # pids first: the result names the group by its first folder. cpuacct for cpu_time: each v1
    # hierarchy is one more move of the process (~10 ms of the kernel's, hardly any CPU).
    wanted = ["pids", "cpuacct", "memory"] if memory_limit is not None else ["pids", "cpuacct"]
    dirs: dict[str, Path] = {}
    for controller in wanted:
        parent = _own_dir(controller)
        if parent is not None and _make(parent, name):
            dirs[controller] = parent / name
    if "pids" not in dirs or "cpuacct" not in dirs:
        # v2, or v1 without a pids or cpuacct hierarchy: track (and count CPU) in the unified one.
        parent = _own_dir("")
        if parent is not None and _make(parent, name):
            dirs[""] = parent / name
    if not dirs:
        return None
    group = ScriptCgroup(dirs)
    group.limit(memory_limit, max_processes)
    return group


_swept: set[Path] = set()  # the parents swept by this process: once each, not at every script


def _make(parent: Path, name: str) -> bool:
    if parent not in _swept:
        _swept.add(parent)
        _sweep(parent)
    try:
        (parent / name).mkdir()
        return True
    except OSError:
        return False


def _limit_memory(group: ScriptCgroup, limit: int) -> bool:
    if "memory" in group.dirs:
        folder = group.dirs["memory"]
        if not _write(folder / "memory.limit_in_bytes", str(limit)):
            return False
        # With swap, the limit above only moves pages to swap; hold memory + swap to it too.
        _write(folder / "memory.memsw.limit_in_bytes", str(limit))
        return True
    if "" in group.dirs:
        folder = group.dirs[""]
        if _write(folder / "memory.max", str(limit)):
            _write(folder / "memory.swap.max", "0")
            return True
    return False
