"""Jobs as Ray tasks (``--backend ray``), on a local Ray or an existing cluster.

Each job is one Ray task running the same ``run_job`` as a local batch, with the same
:class:`~jaxrun.options.RunOptions` object (pickled, never rebuilt from a dict); the task
returns the result and the driver's sinks write every file, exactly as for local runs. A task that
fails or is lost (worker crash, node loss) becomes a failed result, never a crash of the batch.

Assumptions for a cluster: the script paths and the results folder are on a file system shared
by every node (logs and outputs are written there by the workers), and jaxrun and JAX are
installed in the workers' Python. GPUs are requested with ``num_gpus`` and Ray sets
``CUDA_VISIBLE_DEVICES`` for the task, as Ray documents; jaxrun does not override it. An
accelerator out-of-memory follows the failure table on the worker (retry, then CPU fallback);
Ray gives a task no other GPU to move to.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import TYPE_CHECKING, Any, Sequence

from ..defaults import make_jaxrun_importable
from ..errors import UsageError
from ..models import ScriptResult
from ..run.runner import failed_before_running
from .base import BatchInterrupted, RunJob

if TYPE_CHECKING:
    from ..models import DeviceInfo
    from ..options import BatchOptions, RunOptions
    from ..job import Job
    from ..sinks import Sink

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
    return result.model_dump(mode="json")


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
        if not ray.is_initialized():
            sigterm = signal.getsignal(signal.SIGTERM)
            try:
                ray.init(address=options.ray_address, include_dashboard=False, log_to_driver=False,
                         runtime_env={"env_vars": _worker_env()})
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = options.ray_address or "a local Ray"
                raise UsageError(f"cannot start or reach {where}: {exc}") from None
            started_ray = True
            if sigterm is not None and threading.current_thread() is threading.main_thread():
                # Ray's driver exits at once on SIGTERM; jaxrun's handler makes it an interrupt that
                # cancels the tasks (stopping their scripts) and leaves valid files.
                signal.signal(signal.SIGTERM, sigterm)
        task = ray.remote(run_on_worker)
        pending: dict[Any, "Job"] = {}
        queue = list(jobs)
        try:
            while queue or pending:
                while queue and len(pending) < max(1, options.jobs):
                    job = queue.pop(0)
                    sink.on_start(job, len(jobs))  # handed to Ray: it starts when a worker is free
                    # Ray shares a GPU between tasks that each ask for a fraction of it.
                    gpus = 0.0
                    if job.platform == "gpu":
                        gpus = options.gpus_per_job if options.jobs_per_gpu == 1 else 1 / options.jobs_per_gpu
                    ref = task.options(
                        num_cpus=1, num_gpus=gpus, max_retries=0, runtime_env={"env_vars": _worker_env()},
                    ).remote(run_job, job, options.options_for(job))
                    pending[ref] = job
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                for ref in ready:
                    sink.on_result(pending[ref], _result_of(ray, ref, pending.pop(ref)))
        except KeyboardInterrupt:
            for ref in pending:
                ray.cancel(ref)  # raises KeyboardInterrupt in the task: it stops its script's tree
            for ref, job in pending.items():
                sink.on_result(job, _result_of(ray, ref, job))
            raise BatchInterrupted from None
        finally:
            if started_ray:
                ray.shutdown()


def _result_of(ray: Any, ref: Any, job: "Job") -> ScriptResult:
    """The task's result, or a stand-in for a task that failed or was lost."""
    try:
        return ScriptResult.model_validate(ray.get(ref))
    except ray.exceptions.TaskCancelledError:
        return lost_result(job, "the Ray task was cancelled before it finished", "interrupted")
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None) or exc
        return lost_result(job, f"the Ray task raised {type(cause).__name__}: {cause}", "script_error")
    except ray.exceptions.RayError as exc:  # worker crashed, node died, object lost
        return lost_result(job, f"the Ray task was lost: {type(exc).__name__}: {exc}")
