"""Jobs as Ray tasks (``--backend ray``), on a local Ray or an existing cluster.

Each job is one Ray task running the same ``run_job`` as a local batch, with the same
:class:`~jaxrun.options.RunOptions` object (pickled, never rebuilt from a dict); the task
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

Assumptions for a cluster: the script paths and the results folder are on a file system shared
by every node (logs and outputs are written there by the workers), and jaxrun and JAX are
installed in the workers' Python. GPUs are requested with ``num_gpus`` and Ray sets
``CUDA_VISIBLE_DEVICES`` for the task, as Ray documents; jaxrun does not override it. An
accelerator out-of-memory follows the failure table on the worker (retry, then CPU fallback);
Ray gives a task no other GPU to move to.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import signal
import threading
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..defaults import make_jaxrun_importable
from ..errors import UsageError
from ..models import ScriptResult
from ..models.results import Attempt
from ..run.runner import failed_before_running
from .base import BatchInterrupted, RunJob

if TYPE_CHECKING:
    from ..models import DeviceInfo
    from ..options import BatchOptions, RunOptions
    from ..job import Job
    from ..sinks import Sink

_log = logging.getLogger(__name__)

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
    from jaxrun.run.placement import WHOLE_MACHINE
    from jaxrun.run.runner import RunInterrupted
    from jaxrun.sinks import NO_SINK

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

    def __init__(self, options: "BatchOptions", info: "DeviceInfo | None") -> None:
        self.options = options

    def run(self, jobs: Sequence["Job"], run_job: RunJob, sink: "Sink") -> None:
        try:
            import ray
        except ImportError:
            raise UsageError("--backend ray needs Ray: pip install 'jaxrun[ray]'") from None
        options = self.options
        started_ray = False
        restore_output = None
        if not ray.is_initialized():
            sigterm = signal.getsignal(signal.SIGTERM)
            _init_ray(ray, options.ray_address)
            started_ray = True
            restore_output = _quiet_ray_driver(ray)
            if sigterm is not None and threading.current_thread() is threading.main_thread():
                # Ray's driver exits at once on SIGTERM; jaxrun's handler makes it an interrupt that
                # cancels the tasks (stopping their scripts) and leaves valid files.
                signal.signal(signal.SIGTERM, sigterm)
        task = ray.remote(run_on_worker)
        nodes = _NodeWatch(ray)
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
            while queue or pending:
                while queue and len(pending) < max(1, options.jobs):
                    job = queue.popleft()
                    sink.on_start(job, total)  # handed to Ray: it starts when a worker is free
                    submit(job, [])
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                for ref in ready:
                    job, lost, dead_before = pending.pop(ref)
                    result, lost_node = _result_of(ray, ref, job, nodes, dead_before)
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
                sink.on_result(job, _with_lost_attempts(_result_of(ray, ref, job)[0], lost))
            raise BatchInterrupted from None
        finally:
            if started_ray:
                ray.shutdown()
            if restore_output is not None:
                restore_output()


def _init_ray(ray: Any, address: str | None) -> None:
    """``ray.init`` for jaxrun: Ray's own log lines stay out of jaxrun's output (its driver logger
    at ERROR; the workers' output is not forwarded: the scripts' output is in logs/)."""
    if address is not None:
        _use_a_token_if_there_is_one()
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.ERROR, runtime_env={"env_vars": _worker_env()})
    except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
        where = address or "a local Ray"
        hint = ""
        if address is not None:
            hint = (" (a cluster started with token authentication needs its token here: "
                    "RAY_AUTH_TOKEN, the file RAY_AUTH_TOKEN_PATH names, or ~/.ray/auth_token)")
        raise UsageError(f"cannot start or reach {where}: {_first_line(exc)}{hint}") from None


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


def _result_of(ray: Any, ref: Any, job: "Job", nodes: "_NodeWatch | None" = None,
               dead_before: frozenset[str] | None = None) -> tuple[ScriptResult, str | None]:
    """The task's result, or a stand-in for a task that failed or was lost; and, when the task was
    lost with its node (worth running again elsewhere), what was lost, in one line. A lost worker
    counts as a lost node only when a node has died since the task was handed to Ray
    (``dead_before``: the nodes known dead then); otherwise it is the script's own doing."""
    try:
        return ScriptResult.model_validate(ray.get(ref)), None
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
    is lost with its worker or its node (never once a task: a batch of 10,000 scripts asks the GCS
    nothing more). A node that dies while no task of this batch is lost stays unknown until the next
    loss, so the first worker killed by its script after such a death runs once more (the snapshot
    is fresh for its second run); with every node alive, nothing runs twice."""

    def __init__(self, ray: Any) -> None:
        self._ray = ray
        self.dead = self._read()

    def _read(self) -> frozenset[str] | None:
        try:
            return frozenset(n["NodeID"] for n in self._ray.nodes() if not n.get("Alive", True))
        except Exception as exc:  # noqa: BLE001 - unknown, never a crash of the batch
            _log.debug("ray.nodes(): %s", exc)
            return None

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
    """``result`` (of the last run) after the runs lost with their node: those come first in
    ``attempts``, and a warning says the script was run again."""
    if not lost:
        return result
    attempts = [*lost, *(a.model_copy(update={"number": a.number + len(lost)}) for a in result.attempts)]
    note = (f"run again after its Ray node or worker was lost {len(lost)} time(s): "
            + "; ".join(a.error_message or "" for a in lost))
    return result.model_copy(update={"attempts": attempts, "warnings": [*result.warnings, note]})
