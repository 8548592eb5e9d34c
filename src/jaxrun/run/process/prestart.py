"""Prestarted interpreters, jaxrun's side (``--prestart``; the server is probe/fork_server.py): which way
each script's process starts, the per-batch server that forks it, and the process object a launch
watches in place of a ``Popen``.

``--prestart`` is ``none`` (a new interpreter each: exec), ``probe`` (forked from an interpreter
that has imported the probe: a script's process starts in ~1 ms of CPU instead of a Python start-up),
``jax`` (forked from one that has also imported jax: a JAX script's ``import jax`` costs nothing),
or ``auto``, the default: ``probe`` in a local batch, ``none`` where exact start-up costs are what is
measured or a fork cannot be what exec would be (:func:`plan_start` says which runs, and why).

Every result says how its process started (``start_mode``: ``exec``, ``fork``, ``fork+jax``) and,
when it was exec although a prestart was asked for, why (``prestart_reason``). A fork falls back
to exec, per script, where the forked process could not be what exec would have made:

* the variables a process reads only as it starts (``PYTHON*``, ``LD_*``, the locale: the spare's
  rule, run/process/spare.py) differ from the server's;
* with ``jax``: the variables jax and its libraries read as jax is imported (``JAX_*``, ``XLA_*``,
  ``CUDA_*``, ``TPU_*``, ``LIBTPU*``, thread counts: :data:`JAX_PREFIXES`) differ from those the
  server imported it with; ``--env`` sets variables; a sweep's point sets what jaxrun applies itself
  (``devices``, ``x64``, ...); the script sets such a variable itself (discover/scripts.py reads it);
  or jax could not be imported;
* the server has a thread not known to be fork-safe (probe/fork_server.py checks before each fork).

The figures keep their meaning: the process's wall time starts at the fork (its interpreter's
start-up is the server's, done once); its CPU time starts at the fork too (a forked process's
rusage and its cgroup's count begin there); its memory is read as for any process (RSS and VmHWM
count the server's pages the child maps, shared copy-on-write, as an exec'd process counts the
same interpreter's and modules' pages as its own: the figures are comparable; in ``fork+jax`` they
include jax's modules, which a JAX script imports anyway).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple

from jaxrun.core.formatting import listed, plural
from jaxrun.probe.arguments import PRESTART_SERVER
from jaxrun.probe.arguments import interpreter as probe_interpreter
from jaxrun.probe.fork_server import JAX_PREFIXES, MODES, PASSED, SOCKET_ENV
from jaxrun.run.process import lifeline_pipe
from jaxrun.run.process.spare import startup_variables

if TYPE_CHECKING:
    from pathlib import Path

    from jaxrun.config.options import RunOptions

logger = logging.getLogger(__name__)

CHOICES = ("auto", "none", "probe", "jax")
START_MODES = {"probe": "fork", "jax": "fork+jax"}
# The longest a launch waits for the server's answer to a fork: its first answer may wait for its
# own start-up (with jax, importing it: seconds on a loaded machine). Past it, the script is exec'd.
ANSWER_SECONDS = 120.0
# The longest the server's exit status is waited for once its socket has closed.
ENDING_SECONDS = 2.0
_MAX_REQUEST = 200 * 1024  # a Unix datagram's size the kernel takes by default; past it: exec, saying so


def jax_variables(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(JAX_PREFIXES)}


class StartPlan(NamedTuple):
    """How a run's process is to start: ``mode`` ``none`` (exec), ``probe`` or ``jax`` (forked),
    and, for exec where a prestart was asked for or ``auto`` chose exec, why."""

    mode: str
    reason: str | None = None


EXEC = StartPlan("none")


def plan_start(options: "RunOptions", auto: str | None, script: "Path | None" = None) -> StartPlan:
    """The start of one run: ``options.prestart`` with ``auto`` resolved (``auto``: what the pool's
    batch chose, None where no batch prestarts: a run alone, another machine's). Checks what the
    options and the script say; the environment is checked when the fork is asked for."""
    asked = options.prestart
    exec_only = _exec_only(options)
    if asked == "auto":
        if auto is None:
            return EXEC
        if exec_only is not None:
            return StartPlan("none", f"{exec_only} start a new interpreter each (--prestart auto)")
        asked = auto
    if asked == "none":
        return EXEC
    if options.processes > 1:
        return StartPlan("none", "--processes N starts its processes together, each a new interpreter")
    if options.python is not None:
        from jaxrun.core.interpreters import is_other

        if is_other(options.python):
            return StartPlan("none", "the prestarted interpreter is jaxrun's own, not --python's")
    if options.randomize_setup:
        return StartPlan("none", "--randomize-setup pads the environment a new process starts with")
    if asked == "jax":
        why = _jax_environment_set(options, script)
        if why is not None:
            return StartPlan("none", why)
    return StartPlan(asked)


def _exec_only(options: "RunOptions") -> str | None:
    """What makes ``auto`` exec: runs whose figures are the interpreter's whole start-up, or that
    a fork cannot be."""
    for reason, applies in (
        ("benchmark runs", options.benchmark_runs or options.warmup_runs),
        ("--warm runs", options.entry is not None),
        ("profiled runs (--profile)", options.enable_profiling),
        ("--processes N runs", options.processes > 1),
        ("runs under another interpreter (--python)", options.python is not None),
        ("runs with --randomize-setup", options.randomize_setup),
    ):
        if applies:
            return reason
    return None


def _jax_environment_set(options: "RunOptions", script: "Path | None") -> str | None:
    if options.env:
        return (f"--env sets {', '.join(sorted(options.env))}, which jax may read as it is imported "
                "(--prestart jax imported it without)")
    if options.params:
        from jaxrun.config.sweeps import SPECIAL

        special = sorted(set(options.params) & set(SPECIAL))
        if special:
            return f"the sweep's point sets {', '.join(special)}, which jaxrun applies through jax's environment"
    if script is not None:
        from jaxrun.discover.scripts import sets_jax_variables

        name = sets_jax_variables(script)
        if name is not None:
            return f"the script sets {name} itself, which jax reads as it is imported"
    return None


def _differences(ours: Mapping[str, str], theirs: Mapping[str, str]) -> list[str]:
    return sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))


class ForkedProcess:
    """A script's process forked by the server: what a launch uses of a ``Popen`` (``pid``,
    ``stdout``, ``stderr``, ``poll``, ``wait``, ``returncode``, ``send_signal``, ``kill``), with
    what the server's ``wait4`` said: ``status``, ``rusage`` and ``ended`` (perf_counter)."""

    stdin = None

    def __init__(self, pid: int, forked_at: float, stdout: Any, stderr: Any, mode: str) -> None:
        self.pid, self.forked_at, self.stdout, self.stderr = pid, forked_at, stdout, stderr
        self.start_mode = START_MODES[mode]
        self.status: int | None = None
        self.rusage: Any = None
        self.ended: float | None = None
        self.returncode: int | None = None
        self.reaped = threading.Event()

    def _exited(self, status: int | None, rusage: Any, ended: float) -> None:
        self.status, self.rusage, self.ended = status, rusage, ended
        self.returncode = -9 if status is None else os.waitstatus_to_exitcode(status)
        self.reaped.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self.reaped.wait(timeout):
            import subprocess

            raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        if not self.reaped.is_set():  # once reaped, the pid may be another process's
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        import signal

        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        import signal

        self.send_signal(signal.SIGKILL)


class PrestartServer:
    """One server process (probe/fork_server.py) of ``mode`` started with ``env``."""

    def __init__(self, mode: str, env: Mapping[str, str]) -> None:
        # The C socket module and a memory file, not socket.py and tempfile (with random, shutil
        # and the compressors: ~5 ms of imports on the way to the first script).
        import _socket
        import subprocess

        self.mode = mode
        self.env = dict(env)
        self.startup = startup_variables(self.env)
        self.jax_env = jax_variables(self.env)
        self._lock = threading.Lock()
        self._ids = iter(range(1, 1 << 62))
        self._pending: dict[int, list[Any]] = {}  # id -> [event, reply]
        self._children: dict[int, ForkedProcess] = {}
        self._mine: dict[int, tuple[Any, Any, str]] = {}  # id -> the parent's pipe ends, the mode
        self.ready = threading.Event()
        self.import_time: float | None = None
        self.gone: str | None = None  # why it can fork no more
        self._own: tuple[int, dict[int, tuple[int, int]]] | None = None  # jaxrun's umask and limits
        self.sock, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        self._stderr = _memory_file("jaxrun-prestart-stderr")  # what it says as it ends
        try:
            self.proc = subprocess.Popen(
                [*probe_interpreter(), PRESTART_SERVER, mode],
                env={**self.env, SOCKET_ENV: str(theirs.fileno()), **lifeline_pipe.child_env()},
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr,
                start_new_session=True, pass_fds=(theirs.fileno(), *lifeline_pipe.child_fds()),
            )
        finally:
            theirs.close()
        self._reader = threading.Thread(target=self._read, daemon=True, name="jaxrun-prestart")
        self._reader.start()

    # -- the requests ------------------------------------------------------------------------------

    def fork(self, argv: list[str], env: Mapping[str, str], cwd: "Path", cpus: tuple[int, ...] | None,
             command: list[str]) -> ForkedProcess | str:
        """The script's process, forked; or why not (the caller execs)."""
        startup = startup_variables(env)
        if startup != self.startup:
            return (f"{', '.join(_differences(startup, self.startup))} differ from the prestarted process's, "
                    "and Python reads them only as it starts")
        if self.mode == "jax":
            differ = _differences(jax_variables(env), self.jax_env)
            if differ:
                return f"{listed(differ, 6)} differ from what the prestarted process imported jax with"
        if self.gone is not None:
            return self.gone
        import _socket
        import array
        import marshal

        request_id = next(self._ids)
        if self._own is None:
            # jaxrun's umask and limits, read once a batch (~20 system calls, each a moment the
            # other threads may take the interpreter): a child has them as jaxrun had them then.
            self._own = (_umask(), _rlimits())
        umask, rlimits = self._own
        job = {"id": request_id, "argv": list(argv), "env": dict(env), "cwd": str(cwd), "umask": umask,
               "rlimits": rlimits, "cpus": list(cpus) if cpus else _own_cpus(), "orig_argv": list(command)}
        data = marshal.dumps(job)
        if len(data) > _MAX_REQUEST:
            return f"the script's environment and arguments ({plural(len(data), 'byte')}) are too large to hand over"
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        stdout, stderr = os.fdopen(out_r, "rb", buffering=0), os.fdopen(err_r, "rb", buffering=0)  # read by their number
        waiting: list[Any] = [threading.Event(), None]
        try:
            with self._lock:
                if self.gone is not None:  # set under this lock by _lost: nobody would answer
                    raise OSError(self.gone)
                self._pending[request_id] = waiting
                self._mine[request_id] = (stdout, stderr, self.mode)
                fds = [out_w, err_w, lifeline_pipe.child_fds()[0]]
                assert len(fds) == len(PASSED)
                self.sock.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", fds))])
        except OSError as exc:
            self._forget(request_id)
            stdout.close()
            stderr.close()
            return f"the prestarted process could not be reached ({exc.strerror or exc})"
        finally:
            os.close(out_w)  # the child has its own copies now (or never will)
            os.close(err_w)
        if not waiting[0].wait(ANSWER_SECONDS):
            self._forget(request_id)  # an answer after this is for nobody: _read stops what it forked
            stdout.close()
            stderr.close()
            return f"the prestarted process did not answer within {ANSWER_SECONDS:.0f} s"
        reply = waiting[1]
        if isinstance(reply, ForkedProcess):
            return reply
        stdout.close()
        stderr.close()
        return str(reply)

    def _forget(self, request_id: int) -> None:
        with self._lock:
            self._pending.pop(request_id, None)
            self._mine.pop(request_id, None)

    # -- what the server says ----------------------------------------------------------------------

    def _read(self) -> None:
        import marshal
        import resource

        while True:
            try:
                data = self.sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            try:
                message = marshal.loads(data)
            except (EOFError, ValueError, TypeError):
                continue
            op = message.get("op")
            if op == "ready":
                self.import_time = message.get("import_time")
                self.ready.set()
            elif op in ("forked", "refused"):
                with self._lock:
                    waiting = self._pending.pop(message.get("id"), None)
                    mine = self._mine.pop(message.get("id"), None)
                    if waiting is None:
                        if op == "forked":
                            _stop_forked(message["pid"])
                        continue
                    if op == "forked" and mine is not None:
                        child = ForkedProcess(message["pid"], message["at"], mine[0], mine[1], mine[2])
                        self._children[child.pid] = child
                        waiting[1] = child
                    else:
                        waiting[1] = message.get("reason") or "the prestarted process refused"
                waiting[0].set()
            elif op == "exited":
                with self._lock:
                    child = self._children.pop(message.get("pid"), None)
                if child is not None:
                    child._exited(message["status"], resource.struct_rusage(message["rusage"]), message["at"])
        self._lost()

    def _lost(self) -> None:
        """The server ended (or jaxrun closed it): nothing more can be forked, and its children, whose
        ends it can no longer report, are stopped (their lifelines would keep them running)."""
        why = self.gone or self._why_gone(self._status())
        self.ready.set()
        with self._lock:
            self.gone = why
            pending, self._pending = list(self._pending.values()), {}
            children, self._children = list(self._children.values()), {}
        for waiting in pending:
            waiting[1] = self.gone
            waiting[0].set()
        for child in children:
            _stop_forked(child.pid)
            child._exited(None, None, time.perf_counter())

    def _status(self) -> int | None:
        """The ended server's exit status: its socket closes as it exits, a moment before it can
        be reaped (a moment that is longer on a loaded machine); None if it has not ended by then."""
        import subprocess

        try:
            return self.proc.wait(timeout=ENDING_SECONDS)
        except subprocess.TimeoutExpired:
            return None

    def _why_gone(self, status: int | None) -> str:
        try:
            self._stderr.seek(0)
            tail = self._stderr.read()[-300:].decode("utf-8", "replace").strip().splitlines()
        except (OSError, ValueError):
            tail = []
        said = f": {tail[-1]}" if tail else ""
        return f"the prestarted process ended (status {status}){said}"

    def close(self) -> None:
        """Stop the server: its socket closed, it ends; its running children are the launches'."""
        self.gone = "the prestarted process was stopped"
        try:
            self.sock.shutdown(2)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001 - a server that does not end is killed
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=5)
        self.sock.close()
        self._stderr.close()


def _memory_file(name: str) -> Any:
    """A file of its own in memory (Linux), else a temporary file."""
    if hasattr(os, "memfd_create"):
        return open(os.memfd_create(name), "w+b", buffering=0)
    import tempfile

    return tempfile.TemporaryFile()


def _stop_forked(pid: int) -> None:
    """Stop a forked process nobody can watch (a launch stopped waiting for it, or its server ended,
    which alone could report its end) and what it started: its own session's group. (monitor.py's
    signal_group is the same call, but imports psutil, which this module keeps off jaxrun's start-up.)"""
    import signal

    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def _umask() -> int:
    """This process's umask, read without setting it (os.umask would, racing other threads)."""
    try:
        with open("/proc/self/status", encoding="utf-8") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _rlimits() -> dict[int, tuple[int, int]]:
    import resource

    limits = {}
    for name in dir(resource):
        if name.startswith("RLIMIT_"):
            number = getattr(resource, name)
            try:
                limits[number] = resource.getrlimit(number)
            except (OSError, ValueError):
                pass
    return limits


def _own_cpus() -> list[int] | None:
    """The launching thread's CPU mask, which a new process would have been born with."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


class Prestarts:
    """A pool's prestart servers, one per mode, each started when first needed (or opened early by
    the batch), and the batch's resolution of ``auto`` (None: no batch here: exec)."""

    def __init__(self) -> None:
        self.auto: str | None = None
        self._servers: dict[str, PrestartServer] = {}
        self._lock = threading.Lock()
        self._said: set[str] = set()
        self.closed = False

    def open(self, mode: str, env: Mapping[str, str]) -> None:
        """Start the ``mode`` server now, with ``env`` (``probe``: jaxrun's scripts' environment,
        see run/process/spare.py's spare_environment)."""
        self.server(mode, env)

    def server(self, mode: str, env: Mapping[str, str]) -> PrestartServer | None:
        with self._lock:
            if self.closed:
                return None
            server = self._servers.get(mode)
            if server is None:
                try:
                    server = self._servers[mode] = PrestartServer(mode, env)
                except OSError as exc:
                    logger.info("no prestarted interpreter: %s", exc)
                    return None
            return server

    def drop(self, mode: str) -> None:
        """Stop the ``mode`` server, if one was started (a batch that will not use it)."""
        with self._lock:
            server = self._servers.pop(mode, None)
        if server is not None:
            server.close()

    def fork(self, plan: StartPlan, argv: list[str], env: Mapping[str, str], cwd: "Path",
             cpus: tuple[int, ...] | None, command: list[str]) -> ForkedProcess | str:
        # The jax server imports jax with the first of its jobs' environment (what jax reads then).
        server = self.server(plan.mode, env)
        if server is None:
            return "the prestarted process could not be started"
        return server.fork(argv, env, cwd, cpus, command)

    def import_time(self, mode: str) -> float | None:
        server = self._servers.get(mode)
        return server.import_time if server is not None else None

    def say_once(self, reason: str) -> None:
        with self._lock:
            if reason in self._said:
                return
            self._said.add(reason)
        logging.getLogger("jaxrun").info("started by exec, not forked: %s", reason)

    def close(self) -> None:
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
            self.closed = True
        for server in servers:
            server.close()

    def reopen(self) -> None:
        with self._lock:
            self.closed = False


assert set(MODES) == {"probe", "jax"}
