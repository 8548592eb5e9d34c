"""Run scripts as Ray tasks (``--backend ray``), on a local Ray or an existing cluster.

Each script is one Ray task that runs the same single-script executor as a local batch
(:func:`jaxrun.execute_jax_script`) on the worker and returns the same result model; the driver
writes the result files exactly as for local runs. A task that fails or is lost (worker crash,
node loss) becomes a failed result, never a crash of the batch.

Assumptions for a cluster: the script paths and the results folder are on a file system shared
by every node (logs and outputs are written there by the workers), and jaxrun and JAX are
installed in the workers' Python. GPUs are requested with ``num_gpus`` and Ray sets
``CUDA_VISIBLE_DEVICES`` for the task, as Ray documents; jaxrun does not override it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from .. import resultfiles
from ..config import importable_pythonpath
from ..errors import UsageError
from ..models import ScriptResult
from ..runner import failed_before_running
from .local import Job

# Environment variables a JAX job may depend on, passed to the workers through runtime_env.
_PASSED_ENV_PREFIXES = ("JAX_", "XLA_", "JAXRUN_", "TF_CPP_", "CUDA_", "NVIDIA_", "TPU_")


def _worker_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith(_PASSED_ENV_PREFIXES)}
    # Ray assigns GPUs per task; a driver-side CUDA_VISIBLE_DEVICES must not pin every task.
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env["PYTHONPATH"] = importable_pythonpath(os.environ.get("PYTHONPATH"))
    return env


def run_job_on_worker(script: str, device: str, name: str, file_name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The task body: one script through the ordinary executor, returned as plain data."""
    from jaxrun.execute import execute_jax_script
    from jaxrun.runner import RunInterrupted

    try:
        result = execute_jax_script(script, device, name=name, file_name=file_name, **kwargs)
    except RunInterrupted as stop:  # ray.cancel: the script's process tree was stopped
        result = stop.result
    return result.model_dump(mode="json")


def lost_result(job: Job, message: str, error_class: str = "crashed") -> ScriptResult:
    return failed_before_running(
        job.name, job.script, job.device, message, error_class,
        hint="the Ray task running this script failed or was lost; check the Ray worker logs "
        "(ray logs) and that the script path is reachable on every node",
    )


def run_on_ray(
    jobs: list[Job],
    *,
    ray_address: str | None,
    workers: int,
    run_kwargs: dict[str, Any],
    gpus_per_job: int,
    jobs_per_gpu: int = 1,
    on_start: Callable[[Job, ScriptResult | None], None],
    on_done: Callable[[Job, ScriptResult | None], None],
) -> None:
    """Submit every job as a Ray task, at most ``workers`` in flight, reporting each as it ends."""
    try:
        import ray
    except ImportError:
        raise UsageError("--backend ray needs Ray: pip install 'jaxrun[ray]'") from None

    started_ray = False
    if not ray.is_initialized():
        try:
            ray.init(address=ray_address, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": _worker_env()})
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = ray_address or "a local Ray"
            raise UsageError(f"cannot start or reach {where}: {exc}") from None
        started_ray = True
    task = ray.remote(run_job_on_worker)
    results_dir = run_kwargs.get("results_dir")

    def finish(ref: Any, job: Job) -> None:
        result, lost = _result_of(ray, ref, job)
        if lost and results_dir:
            # A task that failed or was lost never wrote script_results/<name>_result.json on the
            # worker; a local batch always has that file, so the driver writes it here.
            resultfiles.write_model(resultfiles.script_result_path(Path(results_dir), job.file_name), result)
        on_done(job, result)

    pending: dict[Any, Job] = {}
    queue = list(jobs)
    try:
        while queue or pending:
            while queue and len(pending) < max(1, workers):
                job = queue.pop(0)
                on_start(job, None)
                # Ray shares a GPU between tasks that each ask for a fraction of it.
                gpus = (gpus_per_job if jobs_per_gpu == 1 else 1 / jobs_per_gpu) if job.platform == "gpu" else 0
                ref = task.options(
                    num_cpus=1, num_gpus=gpus, max_retries=0,
                    runtime_env={"env_vars": _worker_env()},
                ).remote(str(job.script), job.device, job.name, job.file_name, run_kwargs)
                pending[ref] = job
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in ready:
                finish(ref, pending.pop(ref))
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref)  # raises KeyboardInterrupt in the task: it stops its script's tree
        for ref, job in pending.items():
            try:
                finish(ref, job)
            except Exception:
                pass
        raise
    finally:
        if started_ray:
            ray.shutdown()


def _result_of(ray: Any, ref: Any, job: Job) -> tuple[ScriptResult, bool]:
    """The task's result, and whether it is a stand-in for a task that failed or was lost."""
    try:
        return ScriptResult.model_validate(ray.get(ref)), False
    except ray.exceptions.TaskCancelledError:
        return lost_result(job, "the Ray task was cancelled before it finished", "interrupted"), True
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None) or exc
        return lost_result(job, f"the Ray task raised {type(cause).__name__}: {cause}", "script_error"), True
    except ray.exceptions.RayError as exc:  # worker crashed, node died, object lost
        return lost_result(job, f"the Ray task was lost: {type(exc).__name__}: {exc}"), True
