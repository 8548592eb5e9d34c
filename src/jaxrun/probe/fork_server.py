"""The prestarted interpreter (``python -c ENTRY --prestart-server MODE``): a per-batch process that
has imported the probe (``probe``) and, with ``jax``, jax itself (before any backend or device is
touched), and forks each script's process on request. Its parent side is run/process/prestart.py.

A forked child becomes what ``python -c ENTRY --events ... -- script.py`` would have been
(:func:`_become`), then returns to the probe's ``main`` as an exec'd probe enters it:

* its own session; stdin ``/dev/null``, stdout and stderr the pipes jaxrun passed (``SCM_RIGHTS``),
  its lifeline, and no other descriptor of the server's;
* the signal dispositions and mask the server had when it started (an exec'd Python's: SIGINT's
  handler, SIGPIPE and SIGXFSZ ignored, what jaxrun's process ignores ignored), no wakeup fd;
* jaxrun's umask, resource limits and CPU mask (set before anything else runs, so every thread
  the script makes is born with it), the working folder, ``sys.argv``/``sys.orig_argv``, and the
  environment (``os.environ`` replaced, which also sets the C library's); the probe then joins the
  run's cgroups as it always does;
* ``random`` and numpy's global generator reseeded, no exit handler of the server's (it registers
  none: the child has the exit handlers an exec'd probe has, and jax's with ``jax``), logging's
  root handlers removed, the import system's caches invalidated, and ``sys.modules`` as the exec'd
  probe has it: the modules the server imported for itself (socket, select) are forgotten, so a
  script that imports them gets them fresh; with ``jax``, jax's modules stay (that is the point).

What a fork cannot give back, jaxrun's side checks before it asks (run/process/prestart.py): the
variables a process reads only as it starts (``PYTHON*``, ``LD_*``, the locale: the spare's rule),
and, with ``jax``, every variable jax or its libraries read at import.

Fork safety: before each fork the server lists its threads (``/proc/self/task``) and forks only if
each is known safe: its main thread, the lifeline's watcher (blocked in ``read``, holding nothing),
and OpenBLAS's workers, which ``import numpy`` starts and which OpenBLAS itself shuts down before a
fork and starts again in the child at its next matmul (its ``pthread_atfork`` handlers). Any other
thread: the request is refused with the reason, and jaxrun execs instead.

The server reaps its children itself (a grandchild of jaxrun cannot be waited for by jaxrun) and
reports each end: the pid, the wait status, the kernel's rusage of the child and its waited-for
children, and when it was reaped (``time.perf_counter``: one monotonic clock for every process of
the machine). It ends when jaxrun closes the socket, and, like every probe, when jaxrun's process
ends (the lifeline): its children keep their own lifelines.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # typing is not imported at run time (probe/events.py says why)
if TYPE_CHECKING:
    from typing import Callable

# Set by run/process/prestart.py: the server's end of its SOCK_SEQPACKET socket pair.
SOCKET_ENV = "JAXRUN_PRESTART_SOCKET"
MODES = ("probe", "jax")
_MAX_MESSAGE = 1 << 20  # a job's environment and arguments; the parent refuses a bigger one itself
# Variables jax, jaxlib, numpy's BLAS and the accelerator runtimes read as they are imported: a
# fork+jax child must have the values the server imported jax with (run/process/prestart.py checks,
# discover/scripts.py looks for a script that sets one itself).
JAX_PREFIXES = ("JAX_", "JAXLIB_", "XLA_", "CUDA_", "TPU_", "LIBTPU", "ROCR_", "ROCM_", "HIP_", "NVIDIA_", "TF_",
                "PJRT_", "NCCL_", "OPENBLAS_", "GOTO_", "OMP_", "MKL_", "NPY_", "NUMPY_", "ALLOW_MULTIPLE_LIBTPU")
# Descriptors a fork request passes, in order.
PASSED = ("stdout", "stderr", "lifeline")


class _Server:
    def __init__(self, mode: str, baseline: frozenset[str], watch_lifeline: "Callable[[], None]") -> None:
        import _signal

        self.mode = mode
        self.pid = os.getpid()
        # Before this module adds anything: what an exec'd probe holds at this point.
        self.baseline = baseline
        self.signals = {n: _signal.getsignal(n) for n in _signal.valid_signals() if n not in (9, 19)}
        self.mask = _signal.pthread_sigmask(_signal.SIG_BLOCK, [])
        # The lifeline's watcher (probe/lifeline.py): blocked in read(), holding nothing. Any thread
        # there before it (a sitecustomize's) is unknown.
        before = self._threads()
        watch_lifeline()
        self.known_threads = self._threads() - before
        self.openblas: set[int] = set()
        self.import_time: float | None = None
        self.jax_error: str | None = None
        self.jax_modules: frozenset[str] = frozenset()

    @staticmethod
    def _threads() -> set[int]:
        try:
            return {int(t) for t in os.listdir("/proc/self/task")}
        except OSError:
            return set()

    def import_jax(self) -> None:
        """``import jax`` as the script would, its numpy first so that the threads OpenBLAS starts
        are known by id. No backend, no device: those are the script's."""
        before_modules = set(sys.modules)
        started = time.perf_counter()
        try:
            before = self._threads()
            import numpy  # noqa: F401 - what jax imports first; its BLAS pool's threads are noted

            self.openblas = self._threads() - before if _blas_is_openblas() else set()
            import jax  # noqa: F401
        except BaseException as exc:  # noqa: BLE001 - any failure means: no fork+jax, and why
            self.jax_error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        self.import_time = time.perf_counter() - started
        self.jax_modules = frozenset(set(sys.modules) - before_modules)

    def unsafe_thread(self) -> str | None:
        """The first thread a fork could not copy safely, described; None: every one is known."""
        for tid in sorted(self._threads() - {self.pid} - self.known_threads - self.openblas):
            try:
                with open(f"/proc/self/task/{tid}/comm", encoding="utf-8") as comm:
                    name = comm.read().strip()
            except OSError:
                continue  # ended since the listing
            return f"thread {tid} ({name})"
        return None


def _blas_is_openblas() -> bool:
    try:
        config = sys.modules["numpy"].__config__.CONFIG
        return "openblas" in str(config["Build Dependencies"]["blas"]["name"]).lower()
    except Exception:  # noqa: BLE001 - no way to tell: its threads are unknown, not trusted
        return False


def serve(argv: list[str], baseline: frozenset[str], watch_lifeline: "Callable[[], None]") -> list[str] | None:
    """Run the server. Returns, in each forked child, the probe's arguments (the probe's ``main``
    goes on with them); in the server itself, None when jaxrun closed the socket."""
    mode = argv[0] if argv and argv[0] in MODES else "probe"
    fd = os.environ.pop(SOCKET_ENV, "")
    if not fd.isdigit():
        return None
    server = _Server(mode, baseline, watch_lifeline)
    if mode == "jax":
        server.import_jax()
    import _signal
    import _socket
    import gc
    import select

    sock = _socket.socket(fileno=int(fd))
    # SIGCHLD wakes the loop (set_wakeup_fd writes to a pipe the poll watches): no thread reaps.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    _signal.signal(_signal.SIGCHLD, lambda *_: None)
    _signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    _send(sock, {"op": "ready", "pid": server.pid, "import_time": server.import_time, "jax_error": server.jax_error})
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    compile(b"", "<jaxrun>", "exec")  # the compiler's one-time set-up (~1 ms), done once for every child
    gc.freeze()  # the server's objects stay out of the children's collections: their pages stay shared
    while True:
        for ready, _ in poller.poll():
            if ready == wake_r:
                try:
                    os.read(wake_r, 512)
                except BlockingIOError:
                    pass
                _reap(sock)
                continue
            try:
                data, ancillary, flags, _ = sock.recvmsg(_MAX_MESSAGE, _socket.CMSG_LEN(4 * len(PASSED)))
            except InterruptedError:
                continue
            except OSError:
                data = b""
            fds = _fds(ancillary)
            if not data:
                for passed in fds:
                    os.close(passed)
                return None  # jaxrun closed its end: its children keep their own lifelines
            job = _job(data, flags)
            if job is None or len(fds) != len(PASSED):
                _close(fds)
                _send(sock, {"op": "refused", "id": job.get("id") if job else None,
                             "reason": "the prestarted process could not read the request"})
                continue
            reason = _refusal(server)
            if reason is not None:
                _close(fds)
                _send(sock, {"op": "refused", "id": job["id"], "reason": reason})
                continue
            child = _fork(server, job, fds, (sock.fileno(), wake_r, wake_w))
            if child is None:  # this is the child: it runs the script
                sock.detach()  # closed by number in _become; the object must not close it again
                return list(job["argv"])
            _close(fds)
            _send(sock, {"op": "forked", "id": job["id"], "pid": child[0], "at": child[1]})


def _refusal(server: _Server) -> str | None:
    if server.jax_error is not None:
        return f"jax could not be imported in the prestarted process ({server.jax_error})"
    thread = server.unsafe_thread()
    if thread is not None:
        return (f"the prestarted process has a {thread} that is not known to be fork-safe "
                "(only its lifeline's watcher and OpenBLAS's pool are)")
    return None


def _fork(server: _Server, job: dict, fds: list[int], own: tuple[int, ...]) -> tuple[int, float] | None:
    """Fork the script's process; in the child, make it the job's probe and return None. In the
    server: (pid, when it forked) once the child has its own session (so that jaxrun can signal
    its process group from the moment it learns the pid)."""
    settled_r, settled_w = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    forked_at = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            _become(server, job, fds, (*own, settled_r, settled_w))
        except BaseException as exc:  # noqa: BLE001 - nothing of the server may run on in a child
            try:
                os.write(2, f"jaxrun: the forked process could not become the script's: {exc!r}\n".encode())
            finally:
                os._exit(70)
        return None
    os.close(settled_w)
    try:
        os.read(settled_r, 1)  # end-of-file: the child has its session (or has ended)
    finally:
        os.close(settled_r)
    return pid, forked_at


def _become(server: _Server, job: dict, fds: list[int], server_fds: tuple[int, ...]) -> None:
    import _signal

    os.setsid()
    stdout, stderr, lifeline = fds
    os.close(server_fds[-1])  # the settled pipe's write end: the server goes on
    cpus = job.get("cpus")
    if cpus:
        # First: every thread the child makes from here on (the lifeline's, the script's) inherits it.
        try:
            os.sched_setaffinity(0, cpus)
        except OSError:
            pass
    _signal.set_wakeup_fd(-1)
    for number, disposition in server.signals.items():
        if disposition is not None and _signal.getsignal(number) != disposition:
            try:
                _signal.signal(number, disposition)
            except (OSError, ValueError, TypeError):
                pass
    _signal.pthread_sigmask(_signal.SIG_SETMASK, server.mask)
    devnull = os.open(os.devnull, os.O_RDONLY)
    for target, source in ((0, devnull), (1, stdout), (2, stderr)):
        os.dup2(source, target)
    keep = {0, 1, 2, lifeline}
    for name in os.listdir("/proc/self/fd"):
        number = int(name)
        if number not in keep:
            try:
                os.close(number)
            except OSError:
                pass  # the listing's own descriptor
    os.set_inheritable(lifeline, True)  # as pass_fds leaves it; the probe's watcher takes it back
    os.umask(job["umask"])
    import resource

    for limit, (soft, hard) in job.get("rlimits", {}).items():
        try:
            if resource.getrlimit(limit) != (soft, hard):
                resource.setrlimit(limit, (soft, hard))
        except (OSError, ValueError):
            pass
    os.chdir(job["cwd"])
    env = dict(job["env"])
    from jaxrun.probe.lifeline import ENV as LIFELINE_ENV

    env[LIFELINE_ENV] = str(lifeline)
    _take_environment(env)
    sys.argv = ["-c", *job["argv"]]
    if job.get("orig_argv"):
        sys.orig_argv = list(job["orig_argv"])
    # Exit handlers: the server registers none of its own; those of the interpreter's start-up (a
    # site's) and, with jax, jax's are an exec'd process's too, and stay (tests/run/test_prestart.py
    # counts them against an exec'd script's).
    # Folders the script's imports read may have changed since the server's: what
    # importlib.invalidate_caches() does, without importing importlib's package (~1 ms a child).
    for finder in sys.meta_path:
        invalidate = getattr(finder, "invalidate_caches", None)
        if invalidate is not None:
            invalidate()
    _reseed()
    logging = sys.modules.get("logging")
    if logging is not None:
        root = logging.getLogger()
        for handler in list(root.handlers):
            root.removeHandler(handler)
    _forget_own_modules(server)  # last: what this function imported goes too
    if server.mode == "jax":
        from jaxrun.probe.jax_hooks import hold_preloaded_jax

        hold_preloaded_jax()  # the script's `import jax` is seen, as an exec'd probe sees it


def _take_environment(env: dict[str, str]) -> None:
    """``os.environ`` becomes ``env``, in ``env``'s order (as an exec'd process has it). Where
    ``env`` is this process's variables in their order with more after them (a job's usually is:
    the server's plus the run's own), only what differs is set (~0.1 ms, where clearing and
    setting each of ~100 variables takes ~0.5 ms)."""
    environ = os.environ
    have = list(environ)
    if list(env)[:len(have)] != have:
        environ.clear()
        environ.update(env)
        return
    for name, value in env.items():
        if environ.get(name) != value:
            environ[name] = value


def _forget_own_modules(server: _Server) -> None:
    """``sys.modules`` as an exec'd probe has it (plus jax's, with ``jax``): the modules the
    server imported for itself are dropped, so a script that imports one runs its import."""
    keep = server.baseline | server.jax_modules
    for name in [n for n in sys.modules if n not in keep]:
        del sys.modules[name]


def _reseed() -> None:
    """Fresh generators, as a new interpreter's (random reseeds itself after a fork too)."""
    random = sys.modules.get("random")
    if random is not None:
        random.seed()
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        try:
            numpy_random.seed()
        except Exception:  # noqa: BLE001 - a numpy without the legacy global generator
            pass


def _reap(sock) -> None:  # type: ignore[no-untyped-def]
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(sock, {"op": "exited", "pid": pid, "status": status, "rusage": tuple(usage),
                     "at": time.perf_counter()})


def _send(sock, message: dict) -> None:  # type: ignore[no-untyped-def]
    import marshal

    try:
        sock.sendall(marshal.dumps(message))
    except OSError:
        pass  # jaxrun is gone: the loop reads end-of-file next


def _job(data: bytes, flags: int) -> dict | None:
    import _socket
    import marshal

    if flags & getattr(_socket, "MSG_TRUNC", 0):
        return None
    try:
        job = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return None
    return job if isinstance(job, dict) and "id" in job and "argv" in job else None


def _fds(ancillary: list) -> list[int]:  # type: ignore[type-arg]
    import _socket

    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds += [int.from_bytes(data[i:i + 4], sys.byteorder, signed=True) for i in range(0, usable, 4)]
    return fds


def _close(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
