"""Jobs as Ray tasks (``--backend ray``), on a local Ray or an existing cluster.

Each job is one Ray task running the same ``run_job`` as a local batch, with the same
:class:`~jaxrun.config.options.RunOptions` object (pickled, never rebuilt from a dict); the task
returns the result and the driver's sinks write every file, exactly as for local runs. A task that
fails becomes a failed result, never a crash of the batch. Nothing is run twice, except a task
lost with its node, a transient failure: it is run again on a node still alive, at most
``LOST_NODE_RETRIES`` times, then becomes a ``crashed`` result. Lost with its node means Ray's
``NodeDiedError``, or a lost worker (``WorkerCrashedError``, ...) while a node that was alive when
the task was handed to Ray is no longer alive (``ray.nodes()``, read when the error arrives: Ray
does not say which node ran the lost task). A worker that died on a cluster whose nodes are all
still alive was killed by its script (or by something else on its node: the kernel's OOM killer,
a signal): one ``crashed`` result that says so, not run again (:class:`_NodeWatch`). Each result
records the node that ran it (``node``, ``ray_node_id``). Ray's own log lines stay out of jaxrun's output, and the
user's Ray token is sent to ``--ray-address`` as ``ray start`` would (:func:`_init_ray`).

Every wait on the cluster ends within ``--ray-connect-timeout`` seconds (:func:`_within`): reaching
it (before anything in the results folder changes: the executor connects when it is made), a
finished task's result, the question whether it is still there while no task finishes, and the
disconnection. Ray's own calls cannot be interrupted, so each runs in a thread that is left behind
when it does not answer; what jaxrun then says is one line.

Assumptions for a cluster: the script paths and the results folder are on a file system shared
by every node (logs and outputs are written there by the workers), and jaxrun and JAX are
installed in the workers' Python. GPUs are requested with ``num_gpus`` and Ray sets
``CUDA_VISIBLE_DEVICES`` for the task, as Ray documents; jaxrun does not override it. An
accelerator out-of-memory follows the failure table on the worker (retry, then CPU fallback);
Ray gives a task no other GPU to move to.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import re
import signal
import socket
import sys
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar

from jaxrun.core.defaults import DEFAULT_RAY_CONNECT_TIMEOUT
from jaxrun.core.paths import make_jaxrun_importable
from jaxrun.errors import UsageError
from jaxrun.executors.base import BatchInterrupted, RunJob, with_lost_attempts
from jaxrun.results.models import ScriptResult
from jaxrun.results.script_result import Attempt
from jaxrun.run.reading.result import failed_before_running

if TYPE_CHECKING:
    from jaxrun.config.options import BatchOptions, RunOptions
    from jaxrun.discover.devices import Facts
    from jaxrun.plan.job import Job
    from jaxrun.plan.sink import Sink

_log = logging.getLogger(__name__)
T = TypeVar("T")

# Environment variables a JAX job may depend on, passed to the workers through runtime_env.
_PASSED_ENV_PREFIXES = ("JAX_", "XLA_", "JAXRUN_", "TF_CPP_", "CUDA_", "NVIDIA_", "TPU_")


def _worker_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith(_PASSED_ENV_PREFIXES)}
    # Ray assigns GPUs per task; a driver-side CUDA_VISIBLE_DEVICES must not pin every task.
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return make_jaxrun_importable(env)


def run_on_worker(run_job: RunJob, job: "Job", options: "RunOptions") -> dict[str, Any]:
    """The task body: one job through the ordinary ``run_job``, returned as plain data."""
    from jaxrun.plan.sink import NO_SINK
    from jaxrun.run.process.placement import WHOLE_MACHINE
    from jaxrun.run.runner import RunInterrupted

    try:
        result = run_job(job, options, placement=WHOLE_MACHINE, stop=None, sink=NO_SINK)
    except RunInterrupted as stopped:  # ray.cancel: the script's process tree was stopped
        result = stopped.result
    data = result.model_dump(mode="json")
    data["node"], data["ray_node_id"] = _this_node()
    return data


def _this_node() -> tuple[str | None, str | None]:
    """(host name, Ray node id) of the node running this task."""
    import socket

    import ray

    try:
        node_id = ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - a missing id is null, never a lost result
        node_id = None
    return socket.gethostname(), node_id


def lost_result(job: "Job", message: str, error_class: str = "crashed") -> ScriptResult:
    return failed_before_running(
        job, message, error_class,
        hint="the Ray task running this script failed or was lost; check the Ray worker logs "
        "(ray logs) and that the script path is reachable on every node",
    )


class RayExecutor:
    starts_processes_here = False  # Ray's workers start them

    def __init__(self, options: "BatchOptions", facts: "Facts | None") -> None:
        """Reaches Ray at once (a local one is started): a cluster that cannot be reached is a
        usage error before the batch changes anything in its results folder."""
        from jaxrun.core.extras import require
        from jaxrun.executors.backends import BUILT_IN

        ray = require(BUILT_IN["ray"].extra)  # the one message for a missing or broken Ray (the batch asked first)
        self.options = options
        self.ray = ray
        self.timeout = options.ray_connect_timeout
        self._started_ray = False
        self._restore_output: Callable[[], None] | None = None
        if not ray.is_initialized():
            sigterm = signal.getsignal(signal.SIGTERM)
            _init_ray(ray, options.ray_address, self.timeout)
            self._started_ray = True
            self._restore_output = _quiet_ray_driver(ray)
            if sigterm is not None and threading.current_thread() is threading.main_thread():
                # Ray's driver exits at once on SIGTERM; jaxrun's handler makes it an interrupt that
                # cancels the tasks (stopping their scripts) and leaves valid files.
                signal.signal(signal.SIGTERM, sigterm)

    def close(self) -> None:
        """Disconnect from (or stop) the Ray this executor started, waiting at most the timeout;
        called by :meth:`run`, and by the batch when it stops before running."""
        started, self._started_ray = self._started_ray, False
        try:
            if started:
                try:
                    _within(self.timeout, self.ray.shutdown)
                except _NoAnswer:
                    _log.warning("Ray did not disconnect within %s s (--ray-connect-timeout); jaxrun left it",
                                 _seconds(self.timeout))
                    _no_shutdown_at_exit(self.ray)
                except Exception as exc:  # noqa: BLE001 - the results are written: a note, not a failure
                    _log.debug("ray.shutdown(): %s", exc)
        finally:
            if self._restore_output is not None:
                self._restore_output()
                self._restore_output = None

    def run(self, jobs: Sequence["Job"], run_job: RunJob, sink: "Sink") -> None:
        ray, options, timeout = self.ray, self.options, self.timeout
        task = ray.remote(run_on_worker)
        nodes = _NodeWatch(ray, timeout)
        # ref -> the job, its attempts lost with a node, the nodes known dead when it was handed to Ray
        pending: dict[Any, tuple["Job", list[Attempt], frozenset[str] | None]] = {}
        queue = collections.deque(jobs)  # the whole plan: its tasks are handed to the cluster as slots free up
        total = len(queue)

        def submit(job: "Job", lost: list[Attempt]) -> None:
            # Ray shares a GPU between tasks that each ask for a fraction of it.
            gpus = 0.0
            if job.platform == "gpu":
                gpus = options.gpus_per_job if options.jobs_per_gpu == 1 else 1 / options.jobs_per_gpu
            ref = task.options(
                num_cpus=1, num_gpus=gpus, max_retries=0, runtime_env={"env_vars": _worker_env()},
            ).remote(run_job, job, options.options_for(job))
            pending[ref] = (job, lost, nodes.dead)

        try:
            heard = time.monotonic()  # when the cluster last showed it is there
            while queue or pending:
                while queue and len(pending) < max(1, options.jobs):
                    job = queue.popleft()
                    sink.on_start(job, total)  # handed to Ray: it starts when a worker is free
                    submit(job, [])
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                if not ready and time.monotonic() - heard > timeout:
                    # Scripts may run for hours; a cluster that no longer answers is another matter.
                    if not nodes.answers():
                        _cluster_gone(ray, pending, queue, sink, total, options.ray_address, timeout)
                        return
                    heard = time.monotonic()
                for ref in ready:
                    heard = time.monotonic()
                    job, lost, dead_before = pending.pop(ref)
                    result, lost_node = _result_of(ray, ref, job, timeout, nodes, dead_before)
                    if lost_node is not None and len(lost) < LOST_NODE_RETRIES:
                        # The node (or its worker) went away under the task: run it again; Ray
                        # places it on a node still alive.
                        submit(job, [*lost, _lost_attempt(result, len(lost) + 1)])
                        continue
                    sink.on_result(job, _with_lost_attempts(result, lost))
        except KeyboardInterrupt:
            for ref in pending:
                ray.cancel(ref)  # raises KeyboardInterrupt in the task: it stops its script's tree
            for ref, (job, lost, _) in pending.items():
                sink.on_result(job, _with_lost_attempts(_result_of(ray, ref, job, timeout)[0], lost))
            raise BatchInterrupted from None
        finally:
            self.close()


class _NoAnswer(Exception):
    """Ray did not answer within the time given."""


# What was left running in a thread because Ray did not answer (its name, for calls_left_behind).
_LEFT_BEHIND: list[str] = []


def calls_left_behind() -> list[str]:
    """The calls into Ray that did not answer and still run in a thread of this process. Ray's
    driver is then half torn down, and the interpreter's own exit runs Ray's exit handlers and
    destroys its C++ objects under that thread (a crash, SIGSEGV): the ``jaxrun`` command ends
    the process at once instead (jaxrun/interfaces/entry.py)."""
    return list(_LEFT_BEHIND)


def _within(seconds: float, call: Callable[[], T]) -> T:
    """``call()``, waited for at most ``seconds``; raises :class:`_NoAnswer` past it. A call into Ray
    cannot be interrupted, so it runs in a daemon thread that is left behind when it does not answer
    (it never keeps the process alive)."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="jaxrun-ray-call", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        _LEFT_BEHIND.append(getattr(call, "__qualname__", repr(call)))
        raise _NoAnswer
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _no_shutdown_at_exit(ray: Any) -> None:
    """Ray's driver shuts itself down again when the interpreter exits (an ``atexit`` handler of
    its worker module), a wait no thread bounds: after one that did not answer, the process would
    never end."""
    import atexit

    for shutdown in {getattr(ray, "shutdown", None), getattr(getattr(getattr(ray, "_private", None), "worker", None),
                                                             "shutdown", None)}:
        if shutdown is not None:
            atexit.unregister(shutdown)


def _seconds(value: float) -> str:
    return f"{value:g}"


def _init_ray(ray: Any, address: str | None, timeout: float) -> None:
    """``ray.init`` for jaxrun: Ray's own log lines stay out of jaxrun's output (its driver logger
    at ERROR; the workers' output is not forwarded: the scripts' output is in logs/). An address
    is reached within ``timeout`` seconds or not at all: one :class:`UsageError` that says why
    (nothing listens there, no such host, no answer in time). A local Ray is Ray's own start-up on
    this machine, which Ray bounds itself."""
    kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
                                  runtime_env={"env_vars": _worker_env()})
    if address is None:
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
            raise UsageError(f"cannot start a local Ray: {_first_line(exc)}") from None
        return
    _use_a_token_if_there_is_one()
    deadline = time.monotonic() + timeout
    target = _tcp_target(address)
    if target is not None:
        try:
            _within(timeout, lambda: _reachable(target, timeout))
        except _NoAnswer:
            raise _no_answer(address, timeout) from None
        except OSError as exc:
            raise UsageError(f"cannot reach the Ray cluster at {address}: {_socket_problem(exc, target)}; "
                             f"{_CHECK_ADDRESS}") from None
    with _ray_lines_kept_out():
        try:
            _within(max(0.0, deadline - time.monotonic()), lambda: ray.init(address=address, **kwargs))
        except _NoAnswer:
            raise _no_answer(address, timeout) from None
        except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
            raise UsageError(
                f"cannot reach the Ray cluster at {address}: {_first_line(exc)} (a cluster started with token "
                "authentication needs its token here: RAY_AUTH_TOKEN, the file RAY_AUTH_TOKEN_PATH names, or "
                "~/.ray/auth_token)") from None


_CHECK_ADDRESS = ("check the address (`ray status` on the cluster's head node shows it) and that the cluster is "
                  "running")


def _no_answer(address: str, timeout: float) -> UsageError:
    return UsageError(f"the Ray cluster at {address} did not answer within {_seconds(timeout)} s "
                      f"(--ray-connect-timeout): {_CHECK_ADDRESS}, or wait longer with --ray-connect-timeout SECONDS")


def _tcp_target(address: str) -> tuple[str, int] | None:
    """The host and port that ``address`` (``host:port``, ``ray://host:port``, ``[::1]:6379``)
    names, or None for an address Ray resolves itself (``auto``, ...)."""
    text = address.strip()
    if "://" in text:
        scheme, _, text = text.partition("://")
        if scheme != "ray":
            return None
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        return None
    return host, int(port)


def _reachable(target: tuple[str, int], timeout: float) -> None:
    """A TCP connection to ``target``, opened and closed: an address where nothing listens (or a
    host that does not exist) is said at once, where Ray's client would retry it for minutes."""
    with socket.create_connection(target, timeout=timeout):
        pass


def _socket_problem(exc: OSError, target: tuple[str, int]) -> str:
    host, port = target
    if isinstance(exc, ConnectionRefusedError):
        return f"nothing listens on {host}:{port} (connection refused)"
    if isinstance(exc, socket.gaierror):
        return f"no host named {host!r} ({exc.strerror or exc})"
    if isinstance(exc, TimeoutError):
        return f"{host}:{port} did not answer (connection timed out)"
    return f"{host}:{port}: {exc.strerror or exc}"


# A line of Ray's core (C++) log: "[2026-11-27 05:51:28,006 W 4710 4710] rpc_client.h:153: ..."
_RAY_NATIVE_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z] \d+ \d+\] ")


@contextlib.contextmanager
def _ray_lines_kept_out() -> Iterator[None]:
    """While Ray's driver connects to a cluster its core writes its retries (``Failed to connect to
    GCS at address ...``) straight to file descriptor 2, past Python's logging. Meanwhile that
    descriptor is a temporary file; afterwards Ray's lines go to jaxrun's debug log and every other
    line to stderr, as it was written."""
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    saved = os.dup(2)
    capture = tempfile.TemporaryFile()
    os.dup2(capture.fileno(), 2)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        capture.seek(0)
        text = capture.read().decode("utf-8", "replace")
        capture.close()
        for line in text.splitlines(keepends=True):
            if _RAY_NATIVE_LINE.match(line):
                _log.debug("ray: %s", line.rstrip())
            else:
                with contextlib.suppress(Exception):
                    sys.stderr.write(line)


def _cluster_gone(ray: Any, pending: dict[Any, tuple["Job", list[Attempt], Any]], queue: "collections.deque[Job]",
                  sink: "Sink", total: int, address: str | None, timeout: float) -> None:
    """The cluster stopped answering: each script handed to it, and each one still waiting, gets a
    result that says so (the batch ends instead of waiting for a cluster that is gone)."""
    where = f"the Ray cluster at {address}" if address else "the local Ray"
    why = (f"{where} stopped answering: no script finished and it did not answer within "
           f"{_seconds(timeout)} s (--ray-connect-timeout)")
    for ref, (job, lost, _) in list(pending.items()):
        with contextlib.suppress(Exception):
            _within(timeout, lambda ref=ref: ray.cancel(ref, force=True))
        result = _with_lost_attempts(lost_result(job, f"{why}; what the script did is unknown"), lost)
        sink.on_result(job, result.model_copy(update={"may_still_run": True}))  # the cancel may not have reached it
    pending.clear()
    while queue:
        job = queue.popleft()
        sink.on_start(job, total)
        sink.on_result(job, lost_result(job, f"not run: {why}"))


def _use_a_token_if_there_is_one() -> None:
    """Turn on Ray's token authentication for this driver when the user has a token and has not
    chosen (``RAY_AUTH_MODE`` unset), as ``ray start`` and ``ray.init()`` without an address do:
    a ``ray start`` cluster asks for the token whenever one exists (~/.ray/auth_token, which any
    earlier local Ray wrote), but Ray's driver never sends it to an address it is given. A driver
    that sends a token also reaches a cluster that asks for none. Ray's own function, quietly;
    a Ray without token authentication has nothing to turn on."""
    if "RAY_AUTH_MODE" in os.environ:
        return
    try:
        from ray._private.authentication import authentication_token_setup as setup
        turn_on = setup.maybe_enable_token_auth_if_token_available
    except (ImportError, AttributeError):
        return
    ray_logger = logging.getLogger(setup.__name__)
    level = ray_logger.level
    ray_logger.setLevel(logging.ERROR)  # "Token authentication is enabled ...": what the user has
    try:
        turn_on(warn_if_disabled=False)
    except Exception as exc:  # noqa: BLE001 - then ray.init says what is wrong
        _log.debug("Ray token authentication: %s", exc)
    finally:
        ray_logger.setLevel(level)


def _quiet_ray_driver(ray: Any) -> Callable[[], None] | None:
    """Send the messages Ray's driver prints whatever ``log_to_driver`` says (its error listener's
    ``(raylet) A worker died ...``, ``node ... dead``) to jaxrun's debug log instead of the terminal:
    what they say is in the results (a lost node's attempt and warning). Ray's driver reads the
    name ``print_to_stdstream`` of ``ray._private.worker`` at each message; where this Ray has no
    such name, nothing changes. Returns what puts it back."""
    module = getattr(getattr(ray, "_private", None), "worker", None)
    original = getattr(module, "print_to_stdstream", None)
    if original is None:
        return None

    def to_debug_log(data: Any, *args: Any, **kwargs: Any) -> None:
        lines = data.get("lines", ()) if isinstance(data, dict) else ()
        for line in lines:
            _log.debug("ray (%s): %s", data.get("pid"), line)

    module.print_to_stdstream = to_debug_log

    def restore() -> None:
        module.print_to_stdstream = original

    return restore


def _result_of(ray: Any, ref: Any, job: "Job", timeout: float, nodes: "_NodeWatch | None" = None,
               dead_before: frozenset[str] | None = None) -> tuple[ScriptResult, str | None]:
    """The task's result (waited for ``timeout`` seconds at most), or a stand-in for a task that
    failed or was lost; and, when the task was lost with its node (worth running again elsewhere),
    what was lost, in one line. A lost worker counts as a lost node only when a node has died since
    the task was handed to Ray (``dead_before``: the nodes known dead then); otherwise it is the
    script's own doing."""
    try:
        return ScriptResult.model_validate(ray.get(ref, timeout=timeout)), None
    except ray.exceptions.GetTimeoutError:
        return lost_result(job, f"Ray did not hand over the task's result within {_seconds(timeout)} s "
                           "(--ray-connect-timeout); what the script did is unknown"), None
    except ray.exceptions.TaskCancelledError:
        return lost_result(job, "the Ray task was cancelled before it finished", "interrupted"), None
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None) or exc
        return lost_result(job, f"the Ray task raised {type(cause).__name__}: {cause}", "script_error"), None
    except ray.exceptions.RayError as exc:  # worker crashed, node died, object lost
        what = f"{type(exc).__name__}: {_first_line(exc)}"
        if isinstance(exc, _node_died_errors(ray)):
            if nodes is not None:
                nodes.died_since(None)  # tasks handed to Ray from now on know that node dead
            result = lost_result(job, f"the Ray task was lost with its node: {what}")
            node = _NODE_ID.search(str(exc))
            result.ray_node_id = node.group(1) if node else None
            return result, f"{type(exc).__name__}" + (f" on node {node.group(1)}" if node else "")
        if isinstance(exc, _node_lost_errors(ray)):
            died = nodes.died_since(dead_before) if nodes is not None else None
            if died:
                names = ", ".join(sorted(died))
                result = lost_result(job, f"the Ray task was lost: {what} (node {names} died meanwhile)")
                return result, f"{type(exc).__name__}, node {names} died"
            checked = "" if died is not None else " (ray.nodes() could not be read to check)"
            return failed_before_running(
                job, f"the Ray worker running this script died while the script ran ({what}), and every "
                f"node of the cluster is still alive{checked}: the script, or a process it started, killed "
                "its worker (or the worker was killed on its node: the kernel's OOM killer, a signal); "
                "not run again", "crashed",
                hint="a script must not kill its parent process (the Ray worker running it); look at "
                "what the script kills, or at the node's kernel log (dmesg) for the OOM killer",
            ), None
        return lost_result(job, f"the Ray task was lost: {what}"), None


class _NodeWatch:
    """The Ray nodes known dead, read from ``ray.nodes()`` at the start and again only when a task
    is lost with its worker or its node, or when no task has finished for ``--ray-connect-timeout``
    seconds (:meth:`answers`: is the cluster still there?); never once a task: a batch of 10,000
    scripts asks the GCS nothing more. A node that dies while no task of this batch is lost stays unknown until the next
    loss, so the first worker killed by its script after such a death runs once more (the snapshot
    is fresh for its second run); with every node alive, nothing runs twice."""

    def __init__(self, ray: Any, timeout: float = DEFAULT_RAY_CONNECT_TIMEOUT) -> None:
        self._ray = ray
        self._timeout = timeout
        self.dead = self._read()

    def _read(self) -> frozenset[str] | None:
        try:
            nodes = _within(self._timeout, self._ray.nodes)
            return frozenset(n["NodeID"] for n in nodes if not n.get("Alive", True))
        except _NoAnswer:
            _log.debug("ray.nodes(): no answer within %s s", _seconds(self._timeout))
            return None
        except Exception as exc:  # noqa: BLE001 - unknown, never a crash of the batch
            _log.debug("ray.nodes(): %s", exc)
            return None

    def answers(self) -> bool:
        """Whether the cluster still answers (``ray.nodes()`` within the timeout); the nodes known
        dead are refreshed on the way."""
        now = self._read()
        if now is not None:
            self.dead = now
        return now is not None

    def died_since(self, dead_before: frozenset[str] | None) -> frozenset[str] | None:
        """The nodes dead now that were not known dead when a task was handed to Ray (empty: none
        died; None: unknown)."""
        now = self._read()
        if now is None:
            return None
        self.dead = now
        return now - (dead_before or frozenset())


# A task lost with its node: run again on a node still alive, this many times at most, then
# reported as crashed.
LOST_NODE_RETRIES = 2
_NODE_ID = re.compile(r"node ID: ([0-9a-f]{16,})")


def _node_died_errors(ray: Any) -> tuple[type, ...]:
    """Ray's errors that say the task's node died (a transient failure: run again elsewhere)."""
    cls = getattr(ray.exceptions, "NodeDiedError", None)
    return (cls,) if isinstance(cls, type) else ()


def _node_lost_errors(ray: Any) -> tuple[type, ...]:
    """Ray's errors for a task whose worker (or its return value) was lost: lost with its node or
    killed on a node still alive; :func:`_result_of` tells which from the nodes' liveness."""
    names = ("WorkerCrashedError", "ActorDiedError", "ObjectLostError")
    owner_died = getattr(ray.exceptions, "OwnerDiedError", None)  # the owner is this driver: not a node loss
    return tuple(cls for cls in (getattr(ray.exceptions, name, None) for name in names)
                 if isinstance(cls, type) and cls is not owner_died)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _lost_attempt(result: ScriptResult, number: int) -> Attempt:
    attempt = result.attempts[-1].model_copy(update={"number": number})
    return attempt


def _with_lost_attempts(result: ScriptResult, lost: list[Attempt]) -> ScriptResult:
    return with_lost_attempts(result, lost, "its Ray node or worker was lost")
