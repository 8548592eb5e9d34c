"""Launch one probe process and watch it: logs to disk, timeout, tree kill, rusage, peak RSS.

This is the only place that starts a script's process. Its output is streamed to capped log files
(never held in memory) and its end reaped with ``os.wait4`` (the kernel's rusage: CPU time of it and
its waited-for children, its max RSS) the moment it exits, both by the one thread that serves every
run of this process (run/process/pipe_reader.py); a forked process's end is the prestarted
interpreter's to report (run/process/prestart.py).

``cpu_time`` counts every process of the run, waited for or not (:func:`run_cpu_time`): where the
script ran in a cgroup, the group's own count, read once at the end (plus the process's start-up
before it joined); otherwise the rusage plus what the monitor sampled of the processes whose time
never reaches it.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, NamedTuple

import msgspec

from jaxrun.core.defaults import KILL_GRACE_SECONDS, MONITOR_INTERVAL
from jaxrun.core.startup_trace import mark
from jaxrun.core.validate import log_cap_bytes
from jaxrun.probe import events as ev
from jaxrun.probe.arguments import interpreter as probe_interpreter
from jaxrun.probe.cgroup_join import CPUS_ENV
from jaxrun.probe.channel import EVENTS_ENV, read_events
from jaxrun.run.process import cgroups, lifeline_pipe
from jaxrun.run.process.prestart import EXEC, ForkedProcess, StartPlan
from jaxrun.run.process.pipe_reader import READER, Reaping, Reading
from jaxrun.run.process.process_pool import ProcessPool
from jaxrun.run.process.spare import Spare
from jaxrun.run.process.transfers import GuardLog, guard_log

if TYPE_CHECKING:
    from jaxrun.run.process.monitor import TreeMonitor

logger = logging.getLogger(__name__)


class ProcessOutcome(msgspec.Struct):
    exit_code: int | None
    signal: int | None
    wall_time: float
    cpu_time: float | None  # user+sys seconds of every process of the run (see cpu_method)
    # ru_maxrss of the reaped process: it survives fork+exec, so it includes the parent's own
    # peak; kept for reference, never reported as the script's memory.
    maxrss_bytes: int | None
    sampled_peak_rss_bytes: int
    timed_out: bool
    interrupted: bool
    stdout_truncated: bool
    stderr_truncated: bool
    escaped_cpu_seconds: float = 0.0  # sampled CPU time of descendants nobody in the tree waited for
    events: list[dict[str, Any]] = msgspec.field(default_factory=list)
    started: float = 0.0  # perf_counter at launch (one monotonic clock for parent and child)
    memory_series: list[tuple[float, int]] | None = None  # (perf_counter, bytes), when recorded
    leftovers: int = 0  # processes still running after the script ended, stopped by jaxrun
    over_memory_limit: bool = False  # stopped by jaxrun for going over --memory-limit
    oom_kills: int = 0  # processes of the run the kernel's OOM killer stopped at the cgroup's limit
    cgroup_peak_bytes: int | None = None  # the kernel's peak charge of the cgroup (page cache included)
    over_process_limit: bool = False  # stopped by jaxrun for going over --max-processes
    refused_forks: int = 0  # forks the kernel refused at the cgroup's pids.max
    peak_processes: int = 0  # most processes of the run alive at one sample
    cgroup: str | None = None  # the cgroup the script ran in, when jaxrun could make one
    kernel_limits: list[str] | None = None  # the limits its cgroup held ("memory", "processes")
    prestarted: bool = False  # a spare process became the script's (run/process/spare.py)
    start_mode: str = "exec"  # how the process started: exec, fork, fork+jax (run/process/prestart.py)
    prestart_reason: str | None = None  # why exec, where a prestart was asked for (or auto chose exec)
    prestart_import_time: float | None = None  # fork+jax: the prestarted process's seconds importing jax
    cpu_method: str | None = None  # how cpu_time was measured (CGROUP_CPU_METHOD, RUSAGE_CPU_METHOD)
    log_errors: list[str] = msgspec.field(default_factory=list)  # a log that could not be written: why, one line each
    transfers: GuardLog | None = None  # JAX's transfer-guard lines counted in its stderr (run/process/transfers.py)


class _LogCopy:
    """Copy a pipe to a file up to ``cap`` bytes; keep draining after that so the child never blocks.

    The pipe is read to its end whatever happens to the file: a log that cannot be written (a
    full disk, an I/O error, a file too large) is left as far as it got, the rest of the output is
    read and discarded, and ``write_error`` says why (the result's warning; the script, whose pipe
    would otherwise fill, runs on). The reading is the pipe reader's (run/process/pipe_reader.py):
    ``start`` hands the pipe over, ``join`` waits for its end."""

    def __init__(self, pipe: IO[bytes], path: Path, cap: int, guard: GuardLog | None = None) -> None:
        self.pipe, self.path, self.cap = pipe, path, cap
        self.guard = guard  # stderr: JAX's transfer-guard lines counted (and left out when jaxrun's)
        self.written = 0
        self.discarded = 0
        self.write_error: OSError | None = None
        self.reading: Reading | None = None
        self._out: int | None = None

    def start(self) -> None:
        self._out = self._open()
        self.reading = READER.read(self.pipe.fileno(), self._chunk, self._finish)

    def join(self, timeout: float | None = None) -> None:
        if self.reading is not None:
            self.reading.done.wait(timeout)

    def _chunk(self, chunk: bytes) -> None:
        if self.guard is not None:
            chunk = self.guard.feed(chunk)  # before the cap: jaxrun's own lines never count against it
        self._out = self._take(self._out, chunk)

    def _finish(self) -> None:
        out = self._out
        try:
            if self.guard is not None:
                out = self._take(out, self.guard.flush())
            if self.discarded and out is not None:
                self._write(out, f"\n[jaxrun: log truncated at {self.cap} bytes; {self.discarded} more bytes "
                            "were discarded]\n".encode())
        finally:
            self._out = self._close(out)
            self.pipe.close()

    def _take(self, out: int | None, chunk: bytes) -> int | None:
        """``chunk`` to the log as far as the cap and the disk allow; the log's descriptor, or
        None once it cannot take more."""
        room = self.cap - self.written if out is not None else 0
        if room > 0:
            kept = self._write(out, chunk[:room])  # type: ignore[arg-type]
            self.written += kept
            self.discarded += len(chunk) - kept
            if kept < min(room, len(chunk)):
                out = self._close(out)
        else:
            self.discarded += len(chunk)
        return out

    def _open(self) -> int | None:
        try:
            return os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as exc:
            self.write_error = exc
            return None

    def _write(self, fd: int, data: bytes) -> int:
        """Bytes of ``data`` written (all of them, unless the file could not take them)."""
        done = 0
        try:
            while done < len(data):
                done += os.write(fd, data[done:])
        except OSError as exc:
            self.write_error = exc
        return done

    @staticmethod
    def _close(fd: int | None) -> None:
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
        return None

    @property
    def truncated(self) -> bool:
        return self.discarded > 0 or self.write_error is not None

    @property
    def incomplete(self) -> str | None:
        """Why the log holds less than the script wrote, when it could not be written: one line."""
        if self.write_error is None:
            return None
        from jaxrun.errors import describe_os_error

        return (f"{self.path.name} is incomplete: cannot write {self.path}: {describe_os_error(self.write_error)}; "
                f"{self.discarded} bytes of output were read and discarded")


class _Waiter:
    """The script's process's end: ``os.wait4``'s status and rusage and when it was reaped
    (``ended``, perf_counter), ``done`` once known. A process of jaxrun's is reaped by the pipe
    reader (run/process/pipe_reader.py); a forked one by the prestarted interpreter, its parent,
    which reports it (run/process/prestart.py)."""

    def __init__(self, pid: int, forked: ForkedProcess | None = None) -> None:
        self.pid = pid
        self._end: "ForkedProcess | Reaping" = forked if forked is not None else READER.reap(pid)
        self.done = forked.reaped if forked is not None else self._end.done  # type: ignore[union-attr]

    @property
    def status(self) -> int | None:
        return self._end.status

    @property
    def rusage(self) -> Any:
        return self._end.rusage

    @property
    def ended(self) -> float | None:
        return self._end.ended


class Limits(NamedTuple):
    """What one run may use: past it jaxrun stops the process tree (the kernel holds what it can)."""

    timeout: float | None = None  # seconds
    memory_limit: int | None = None  # bytes of host memory of the tree
    max_processes: int | None = None
    kill_grace: float = KILL_GRACE_SECONDS  # SIGTERM to SIGKILL when jaxrun stops the tree
    log_cap: int | None = None  # bytes kept of each of stdout and stderr; None: JAXRUN_LOG_CAP_BYTES's


class _Request(NamedTuple):
    """One :func:`launch` call's arguments, as its steps take them."""

    command: list[str]
    cwd: Path
    env: dict[str, str]
    stdout_log: Path
    stderr_log: Path
    events_path: Path
    limits: Limits
    log_cap: int
    cpu_affinity: tuple[int, ...] | None
    stop: threading.Event | None
    record_memory: bool
    start: StartPlan


def launch(
    command: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    stdout_log: Path,
    stderr_log: Path,
    events_path: Path,
    limits: Limits,
    cpu_affinity: tuple[int, ...] | None = None,
    stop: threading.Event | None = None,
    record_memory: bool = False,
    pool: ProcessPool | None = None,
    start: StartPlan = EXEC,
) -> ProcessOutcome:
    """Run ``command`` to completion (or timeout, Ctrl-C, ``stop`` being set from another thread,
    or a limit) and return what was measured. Interruption raises :class:`Interrupted`.
    ``start``: exec, or fork from the pool's prestarted interpreter (run/process/prestart.py).

    The limits are watched by sampling and, where jaxrun can make a cgroup, held by the kernel."""
    log_cap = limits.log_cap if limits.log_cap is not None else log_cap_bytes()
    request = _Request(command, cwd, env, stdout_log, stderr_log, events_path, limits, log_cap, cpu_affinity,
                       stop, record_memory, start)
    own_pool = pool is None
    if pool is None:
        pool = ProcessPool()  # no spare, nothing put off: a launch of its own
    try:
        return _contained(request, pool)
    finally:
        if own_pool:
            pool.close()  # a server it started for this launch alone


def _contained(request: _Request, pool: ProcessPool) -> ProcessOutcome:
    """:func:`_launch` of ``request`` in its cgroup (a new one, or the spare's), the spare or the
    prestarted interpreter chosen, and what it used let go of after."""
    command, env, limits, start = request.command, request.env, request.limits, request.start
    memory_limit, max_processes = limits.memory_limit, limits.max_processes
    is_probe = command[:3] == probe_interpreter()
    forks = start.mode != "none" and is_probe
    spare = pool.spares.take(env) if is_probe and not forks else None
    if spare is not None and spare.group is not None and spare.group.holds(memory_limit):
        group: cgroups.ScriptCgroup | None = spare.group  # the spare is in it already
        group.limit(memory_limit, max_processes)
    else:
        group = cgroups.create(memory_limit, max_processes)
    if forks and group is None:
        # Without a cgroup, the processes a script leaves behind are found by the run's marker in
        # their environment, which /proc shows as a process's start-up environment: a forked
        # process's is the server's. Exec'd, every figure keeps its meaning.
        forks, start = False, StartPlan("none", "no cgroup could be made here, and the processes a forked "
                                        "script starts could not all be found without one")
        pool.prestart.say_once(start.reason)  # type: ignore[arg-type]
    if group is not None:
        env = {**env, **group.env()}
    if request.cpu_affinity:
        env = {**env, CPUS_ENV: ",".join(map(str, request.cpu_affinity))}  # the probe holds every thread to it
    try:
        return _launch(request._replace(env=env, start=start if forks else start._replace(mode="none")), group,
                       spare, pool)
    finally:
        for used in (group, spare.group if spare is not None else None):
            if used is not None:
                used.remove()  # the spare's own group too, when the job needed another; once each
        pool.spares.replenish()  # when none was started beside the script (it could not start, or was taken)


def _fork(request: "_Request", env: dict[str, str], pool: ProcessPool) -> tuple[ForkedProcess | None, str | None]:
    """The script's process forked by the pool's prestarted interpreter, or why it is not (then a
    new process is started: exec), said once in the run log."""
    start = request.start
    if start.mode == "none":
        return None, start.reason
    got = pool.prestart.fork(start, request.command[3:], env, request.cwd, request.cpu_affinity, request.command)
    if isinstance(got, str):
        pool.prestart.say_once(got)
        return None, got
    return got, None


def _start(command: list[str], cwd: Path, env: dict[str, str], group: cgroups.ScriptCgroup | None,
           cpu_affinity: tuple[int, ...] | None, spare: Spare | None) -> tuple[subprocess.Popen, float | None]:
    """The script's process: ``spare`` becoming it (run/process/spare.py), or a new one. Returns it and,
    for a spare, when it was started.

    Its CPU mask holds from its first instruction, for every thread: a new process is born with
    it (:func:`_pinned_thread`); a spare, which has threads already (its lifeline's), is given it
    with its job and puts every thread of its own on it before the script starts; the probe does
    the same after joining its cgroups, where a move into a ``cpuset`` group resets the mask
    (probe/cgroup_join.py)."""
    if spare is None:
        with _pinned_thread(cpu_affinity):
            proc = subprocess.Popen(
                command,
                cwd=cwd,
                env={**env, **lifeline_pipe.child_env()},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group: one signal reaches the whole tree
                pass_fds=lifeline_pipe.child_fds(),  # it stops its tree when jaxrun is gone (run/process/lifeline_pipe.py)
            )
    else:
        proc = spare.proc
    if group is not None and (spare is None or group is not spare.group):
        group.adopt(proc.pid)
    if spare is None:
        if cpu_affinity and not hasattr(os, "sched_setaffinity"):
            _set_affinity(proc.pid, cpu_affinity)  # no thread of its own yet where this is all there is
        return proc, None
    if not spare.hand_over(command[3:], env, cwd):
        return _start(command, cwd, env, group, cpu_affinity, None)  # it died waiting: a new process
    return proc, spare.spawned_at


@contextmanager
def _pinned_thread(cpus: tuple[int, ...] | None) -> Iterator[None]:
    """This thread on ``cpus`` while it starts a process: a new process (and every thread it
    makes) is born with the CPU mask of the thread that created it, so it never runs a moment
    outside its share, as a mask set on it after the start would let it (the threads it made by
    then keep the old one). Only where the kernel's call exists (Linux)."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)  # 0: this thread only (the kernel's call is per thread)
    try:
        os.sched_setaffinity(0, cpus)
    except OSError:
        yield  # cores this process may not use: the process runs where it may, as without a mask
        return
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _set_affinity(pid: int, cpus: "Iterable[int]") -> None:
    """Pin process ``pid`` to ``cpus`` with psutil, where Python lacks the kernel's call."""
    try:
        import psutil

        psutil.Process(pid).cpu_affinity(list(cpus))
    except Exception:  # noqa: BLE001 - affinity is an optimisation; a process that cannot have it still runs
        pass


def _launch(request: _Request, group: cgroups.ScriptCgroup | None, spare: Spare | None,
            pool: ProcessPool) -> ProcessOutcome:
    command, cwd, env, stdout_log, stderr_log, events_path, limits, log_cap, cpu_affinity, stop, record_memory, _ = request
    started = time.perf_counter()
    forked, prestart_reason = _fork(request, env, pool)
    proc: "subprocess.Popen | ForkedProcess"
    if forked is not None:
        # Its time starts at the fork: the interpreter's start-up is the server's, done once.
        proc, spawned_at, started = forked, None, forked.forked_at
    else:
        proc, spawned_at = _start(command, cwd, env, group, cpu_affinity, spare)
    mark("the job handed to its process")
    waiter = _Waiter(proc.pid, forked)
    # The limits are watched from now on: in a thread of their own while this one has put-off
    # set-up to do (up to a second on a loaded machine, at a batch's first script), so that a
    # timeout fires and a fork bomb is stopped on time; else by this thread, which has nothing
    # else to do while the script runs (a thread a script, started, switched to and joined, was
    # a tenth of jaxrun's CPU in a batch of small scripts).
    watch = _Watch(proc.pid, env, group, record_memory, limits, started, stop, waiter)
    in_thread = pool.has_deferred()
    if in_thread:
        watch.start()
    guard = guard_log(env)
    pumps = [_LogCopy(proc.stdout, stdout_log, log_cap), _LogCopy(proc.stderr, stderr_log, log_cap, guard)]  # type: ignore[arg-type]
    # From here on the script runs: a Ctrl-C at any moment stops it and its result says it was
    # interrupted (not that it never ran), however long the set-up below takes.
    ctrl_c = False
    try:
        for pump in pumps:
            pump.start()
        # The next script's process starts now, beside this one: started once this one ended, its
        # interpreter's start-up was on the way from each script to the next (~30 ms a script).
        pool.spares.replenish()
        # The script runs meanwhile; its logs are drained, its end noted by the waiter, its
        # limits held by the watch.
        pool.started()
    except KeyboardInterrupt:
        ctrl_c = True
        watch.interrupt()
    ctrl_c = (_join(watch) if in_thread else watch.here()) or ctrl_c
    monitor, pgid = watch.monitor, proc.pid
    assert monitor is not None  # made before the watch's first sample (its errors were raised above)
    # A Ctrl-C after the script ended by itself still stops the batch.
    timed_out, interrupted = watch.ended_by == "timeout", watch.ended_by == "interrupted" or ctrl_c
    over_memory, over_processes = watch.ended_by == "memory", watch.ended_by == "processes"
    from jaxrun.run.process.monitor import reap_leftovers

    waiter.done.wait()
    mark("the script's teardown (JAX's too), its process reaped")
    ended = waiter.ended if waiter.ended is not None else time.perf_counter()
    monitor.sample(scan=True)  # descendants still running: their memory and CPU so far
    # Popen must not try to reap the pid the waiter already reaped.
    if forked is None:
        proc.returncode = -1 if waiter.status is None else os.waitstatus_to_exitcode(waiter.status)
    leftovers = reap_leftovers(pgid, monitor, KILL_GRACE_SECONDS)
    if group is not None:
        # Whatever the session and the marker missed (a daemon that cleared its environment and
        # was started after the last sample) is still in the cgroup.
        leftovers += group.kill_all(KILL_GRACE_SECONDS)
    for pump in pumps:
        if pump.reading is not None:  # a Ctrl-C may have come before it was started
            pump.join(timeout=KILL_GRACE_SECONDS + 2)

    exit_code: int | None = None
    sig: int | None = None
    if waiter.status is not None:
        if os.WIFSIGNALED(waiter.status):
            sig = os.WTERMSIG(waiter.status)
        else:
            exit_code = os.WEXITSTATUS(waiter.status)
    events = read_events(events_path)
    if spawned_at is not None:
        # A spare started earlier: its interpreter's start-up belongs to the process's wall time,
        # the time it sat ready waiting for this job does not.
        ready = _start_event(events).get("spare_ready_at")
        idle = max(0.0, started - ready) if isinstance(ready, (int, float)) else 0.0
        started = min(started, spawned_at + idle)
    wall = ended - started
    joined = group if group is not None and _joined(events) else None  # the probe is in the cgroup
    # Every process of the run has ended (the cgroup is empty): the group's count is final.
    cpu, cpu_method = run_cpu_time(waiter.rusage, joined, events, unwaited_cpu=monitor.unwaited_cpu_seconds)
    maxrss = int(waiter.rusage.ru_maxrss) * 1024 if waiter.rusage is not None else None  # Linux: KiB
    outcome = ProcessOutcome(
        exit_code=exit_code,
        signal=sig,
        wall_time=wall,
        cpu_time=cpu,
        maxrss_bytes=maxrss,
        sampled_peak_rss_bytes=monitor.peak_rss_bytes,
        timed_out=timed_out,
        over_memory_limit=over_memory,
        interrupted=interrupted,
        stdout_truncated=pumps[0].truncated,
        stderr_truncated=pumps[1].truncated,
        log_errors=[note for note in (pump.incomplete for pump in pumps) if note is not None],
        escaped_cpu_seconds=monitor.escaped_cpu_seconds,
        events=events,
        started=started,
        memory_series=monitor.series,
        leftovers=leftovers,
        oom_kills=group.oom_kills() if group is not None else 0,
        cgroup_peak_bytes=group.peak_bytes() if group is not None else None,
        over_process_limit=over_processes,
        refused_forks=group.refused_forks() if group is not None else 0,
        peak_processes=monitor.peak_count,
        cgroup=joined.label if joined is not None else None,
        kernel_limits=joined.kernel_limits if joined is not None else None,
        prestarted=spawned_at is not None,
        start_mode=forked.start_mode if forked is not None else "exec",
        prestart_reason=prestart_reason,
        prestart_import_time=pool.prestart.import_time("jax") if forked is not None and request.start.mode == "jax" else None,
        cpu_method=cpu_method,
        transfers=guard,
    )
    if interrupted:
        raise Interrupted(outcome)
    return outcome


class _Watch(threading.Thread):
    """The run's limits, held from the moment its process exists until it ends: samples the tree
    every ``MONITOR_INTERVAL`` and stops it at the first limit passed (``ended_by``: ``"memory"``,
    ``"processes"``, ``"timeout"``, ``"interrupted"``; None: it ended by itself). In a thread of its
    own (:meth:`start`, then :func:`_join`) while the launching thread has other work, else in the
    launching thread (:meth:`here`)."""

    def __init__(self, pid: int, env: Mapping[str, str], group: cgroups.ScriptCgroup | None, record: bool,
                 limits: Limits, started: float, stop: threading.Event | None, waiter: _Waiter) -> None:
        super().__init__(daemon=True, name="jaxrun-watch")
        self.pid, self.env, self.group, self.record, self.limits = pid, env, group, record, limits
        self.deadline = None if limits.timeout is None else started + limits.timeout
        self.stop, self.waiter = stop, waiter
        self._halt = threading.Event()  # Ctrl-C in the launching thread
        self.monitor: "TreeMonitor | None" = None
        self.ended_by: str | None = None
        self.error: BaseException | None = None  # raised in the launching thread (_join)

    def interrupt(self) -> None:
        self._halt.set()

    def run(self) -> None:
        try:
            self._watch()
        except BaseException as exc:  # noqa: BLE001 - the launching thread raises it
            self.error = exc
            self._stop_unwatched()

    def here(self) -> bool:
        """Watch in this thread until the run ends or is stopped; whether a Ctrl-C came (the tree
        is stopped then, and a second one while it is being stopped does not cut that short)."""
        ctrl_c = False
        while True:
            try:
                self._watch()
                return ctrl_c
            except KeyboardInterrupt:
                ctrl_c = True
                self.interrupt()
            except BaseException:
                self._stop_unwatched()
                raise

    def _stop_unwatched(self) -> None:
        try:  # nobody watches it any more: it is stopped, not left running unwatched
            if self.monitor is not None:
                _stop(self.pid, self.monitor, self.group, self.waiter, self.limits.kill_grace)
            else:
                os.killpg(self.pid, signal.SIGKILL)
        except Exception:  # noqa: BLE001 - the first error is the one to raise
            pass

    def _watch(self) -> None:
        memory_limit, max_processes = self.limits.memory_limit, self.limits.max_processes
        if self.monitor is None:
            self.monitor = _monitor(self.pid, self.env, self.group, self.record, max_processes)
        monitor = self.monitor
        # The first sample one interval after the start, not at it: the process has only just
        # started, nothing of the script's can be measured or over a limit yet (the kernel holds
        # the cgroup's meanwhile), and a script that ends sooner (a batch of small ones) costs
        # no sample at all, only the last one, after it ends.
        while True:
            if not self._halt.is_set():  # a Ctrl-C stops the tree now, not a sample later
                wait = MONITOR_INTERVAL
                if self.deadline is not None:  # woken at the deadline, not up to a sample after it
                    wait = min(wait, max(0.0, self.deadline - time.perf_counter()))
                if self.waiter.done.wait(wait):
                    return
                monitor.sample()
            self.ended_by = self._limit_passed(monitor, memory_limit, max_processes)
            if self.ended_by is not None:
                _stop(self.pid, monitor, self.group, self.waiter, self.limits.kill_grace)
                return

    def _limit_passed(self, monitor: "TreeMonitor", memory_limit: int | None, max_processes: int | None) -> str | None:
        if memory_limit is not None and monitor.last_bytes > memory_limit:
            return "memory"
        # A sample counting more processes than allowed stops the tree; the cgroup's backstop
        # (run/process/cgroups.py) only caps how far a bomb gets between two samples.
        if max_processes is not None and monitor.last_count > max_processes:
            return "processes"
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            return "timeout"
        # Ctrl-C reaches only the main thread; jobs in worker threads learn of it from `stop`.
        if self._halt.is_set() or (self.stop is not None and self.stop.is_set()):
            return "interrupted"
        return None


def _join(watch: _Watch) -> bool:
    """Wait for the watch to end (the script's end, or its stop); a Ctrl-C meanwhile has it stop
    the tree, and the wait goes on until it has. Whether a Ctrl-C came."""
    ctrl_c = False
    while True:
        try:
            watch.join()
            break
        except KeyboardInterrupt:
            ctrl_c = True
            watch.interrupt()
    if watch.error is not None:
        raise watch.error
    return ctrl_c


def _monitor(pid: int, env: Mapping[str, str], group: cgroups.ScriptCgroup | None, record: bool,
             process_limit: int | None = None) -> "TreeMonitor":
    """The watcher of the script's process tree. psutil (~10 ms to import) is first needed here,
    once the script runs: not on its way to start."""
    from jaxrun.run.process.monitor import TreeMonitor

    return TreeMonitor(pid, marker=(EVENTS_ENV, env[EVENTS_ENV]) if EVENTS_ENV in env else None, record=record,
                       members=group.pids if group is not None else None,
                       group_cpu=group.cpu_seconds if group is not None else None, process_limit=process_limit)


def _stop(pgid: int, monitor: TreeMonitor, group: cgroups.ScriptCgroup | None, waiter: _Waiter,
          grace: float = KILL_GRACE_SECONDS) -> None:
    from jaxrun.run.process.monitor import stop_tree

    stop_tree(pgid, monitor, grace, wait_for_exit=waiter.done.wait)
    if group is not None:
        group.kill_all(grace)


CGROUP_CPU_METHOD = (
    "the run's cgroup's count ({source}: every process of the run while it was in the group, waited for "
    "or not) + the script's process's CPU before it joined the group (its interpreter's start-up)"
)
RUSAGE_CPU_METHOD = (
    "rusage of the script's process and the children it waited for (and the finished ones it left "
    "unwaited, reaped as it exited) + CPU of the descendants nobody in its tree waited for (that left "
    f"the tree, or ended as zombies init adopted), sampled every {MONITOR_INTERVAL:g} s"
)
PROBE_CPU_METHOD = "rusage of the script's process and the children it waited for, read by the probe at the body's end"


def run_cpu_time(rusage: Any, group: cgroups.ScriptCgroup | None, events: list[dict[str, Any]], *,
                 unwaited_cpu: Callable[[], float]) -> tuple[float | None, str | None]:
    """``(cpu_time, cpu_method)`` of a finished run. ``group``: the cgroup the probe joined, empty
    by now. Its count covers every process from the moment it joined, so the probe's own CPU
    before that (its START event's ``cpu_before_join``) is added; the rusage is not, it would
    count the probe and its waited-for children twice. Without a group: the rusage (the probe
    and the children it waited for) + ``unwaited_cpu()``, the descendants whose time never
    reaches it (asked only then: it reads the zombies the run left)."""
    before_join = _start_event(events).get("cpu_before_join")
    in_group = group.cpu_seconds() if group is not None else None
    if in_group is not None and isinstance(before_join, (int, float)):
        return in_group + before_join, CGROUP_CPU_METHOD.format(source=group.cpu_source)
    if rusage is not None:
        return rusage.ru_utime + rusage.ru_stime + unwaited_cpu(), RUSAGE_CPU_METHOD
    return None, None


def cpu_time_of(outcome: ProcessOutcome | None, probe_cpu: float | None) -> tuple[float | None, str | None]:
    """``(cpu_time, cpu_method)`` for a result: the launch's figure, else the probe's own at the
    body's end (a process jaxrun could not reap), else unknown (null, never 0)."""
    if outcome is not None and outcome.cpu_time is not None:
        return outcome.cpu_time, outcome.cpu_method
    if probe_cpu is not None:
        return probe_cpu, PROBE_CPU_METHOD
    return None, None


def _start_event(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next((e for e in events if e.get(ev.TYPE) == ev.START), None) or {}


def _joined(events: list[dict[str, Any]]) -> bool:
    return bool(_start_event(events).get("cgroup_joined"))


class Interrupted(KeyboardInterrupt):
    """Ctrl-C while a script ran: the tree is stopped and its partial outcome travels with this."""

    def __init__(self, outcome: ProcessOutcome) -> None:
        super().__init__()
        self.outcome = outcome

