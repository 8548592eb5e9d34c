"""A multi-process job (``--processes N``) on Slurm: N tasks of one job step (``srun``, across
``--nodes``), each running one process of the job as a one-process run of its own, merged into the
job's one result as run/reading/job_run.py merges the processes of a local job.

``jax.distributed.initialize()`` with no arguments finds Slurm's own environment (JAX's Slurm
cluster: SLURM_PROCID, SLURM_NTASKS, SLURM_STEP_NODELIST): jaxrun gives no coordinator of its own
(probe/cluster.py's is present only with ``JAX_COORDINATOR_ADDRESS``), only ``JAXRUN_PROCESS_ID``
and ``JAXRUN_PROCESS_COUNT`` for the script to read, as in a local job. A process that fails stops
the others (a SIGTERM to the job step, as a local job stops them), rather than leaving them waiting
in a collective.
"""

from __future__ import annotations

import os
import subprocess
from datetime import datetime
from typing import TYPE_CHECKING

import msgspec.structs

from jaxrun.probe.cluster import PROCESS_COUNT_ENV, PROCESS_ID_ENV
from jaxrun.results.models import ScriptResult
from jaxrun.results.script_result import ProcessResult
from jaxrun.run.reading.job_run import CPU_METHOD, sum_known

if TYPE_CHECKING:
    from jaxrun.config.options import RunOptions
    from jaxrun.plan.job import Job


def rank() -> tuple[int, int]:
    """(this task's process id, the step's process count) from Slurm's variables; (0, 1) outside a step."""
    return int(os.environ.get("SLURM_PROCID", "0")), int(os.environ.get("SLURM_NTASKS", "1"))


def process_of(job: "Job", options: "RunOptions", process: int, count: int) -> tuple["Job", "RunOptions"]:
    """Process ``process`` of ``count``: its own logs, one process of its own to run."""
    os.environ[PROCESS_ID_ENV], os.environ[PROCESS_COUNT_ENV] = str(process), str(count)
    return msgspec.structs.replace(job, process=process), options.evolve(processes=1)


def stop_the_others() -> None:
    """SIGTERM to every task of this job step (this one ignores it: it already ended its run)."""
    step = f"{os.environ.get('SLURM_JOB_ID', '')}.{os.environ.get('SLURM_STEP_ID', '')}"
    try:
        subprocess.run(["scancel", "--signal=TERM", step], timeout=30, capture_output=True, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        pass  # the others meet their own timeout instead


def merged(results: list[ScriptResult], stopped_by_slurm: list[bool], options_key: str) -> ScriptResult:
    """The job's one result from its processes' (in process order): its error and phases those of
    its lead (the first process that failed on its own, else process 0), its wall time from the
    first start to the last end, its CPU and memory the sums; each process in ``processes``."""
    count = len(results)
    failed = [k for k, r in enumerate(results) if not r.success and not stopped_by_slurm[k]]
    lead = min(failed, key=lambda k: results[k].finished_at) if failed else 0
    processes = []
    for k, result in enumerate(results):
        stopped = (f"stopped by jaxrun: process {lead} failed first"
                   if failed and k != lead and stopped_by_slurm[k] else None)
        processes.append(ProcessResult(
            process_id=k, success=result.success, error_class=None if stopped else result.error_class,
            error_message=None if stopped else result.error_message, stopped=stopped, exit_code=result.exit_code,
            signal=result.signal, execution_time=result.execution_time, body_time=result.body_time,
            import_time=result.import_time, jit_compile_time=result.jit_compile_time, run_time=result.run_time,
            cpu_time=result.cpu_time, memory_peak=result.memory_peak, compile_count=result.compile_count,
            results=result.results, stdout_log=result.stdout_log, stderr_log=result.stderr_log,
        ))
    head = results[lead]
    starts, ends = [_at(r.started_at) for r in results], [_at(r.finished_at) for r in results]
    nodes = list(dict.fromkeys(r.node for r in results if r.node))
    update = dict(
        processes=processes, options_key=options_key,
        started_at=min(r.started_at for r in results), finished_at=max(r.finished_at for r in results),
        execution_time=(max(ends) - min(starts)).total_seconds() if head.execution_time is not None else None,
        cpu_time=sum_known([r.cpu_time for r in results]), memory_peak=sum_known([r.memory_peak for r in results]),
        cpu_method=CPU_METHOD.format(method=head.cpu_method) if head.cpu_method else None,
        stdout_log=results[0].stdout_log, stderr_log=results[0].stderr_log,
        node=",".join(nodes) or None,
    )
    if failed:
        update["error_message"] = f"process {lead} of {count}: {head.error_message}"
    return head.model_copy(update=update)


def _at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)

