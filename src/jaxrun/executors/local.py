"""Run several scripts at once on this machine, each in a slot (a GPU, or a share of the cores).

The scheduler only decides *when* and *where* a job runs; the job itself is the same
single-script execution as a sequential batch (``run_one``), so results are identical in shape.
Ctrl-C sets a stop event that every running job's launcher watches: their process trees are
stopped, their results saved as ``interrupted``, and only then is the interrupt re-raised.
"""

from __future__ import annotations

import dataclasses
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ..models import ScriptResult
from .slots import Slot, SlotPool


@dataclass(frozen=True)
class Job:
    index: int  # position in the batch's (sequential) order; results are kept in this order
    script: Path
    name: str
    file_name: str
    device: str
    platform: str | None  # where it is planned to run ("cpu", "gpu", "tpu"), for the slot choice
    expected_seconds: float | None = None


RunOne = Callable[[Job, "Slot | None", threading.Event, bool], ScriptResult]
OnEvent = Callable[[Job, "ScriptResult | None"], None]


def longest_first(jobs: Sequence[Job]) -> list[Job]:
    """Longest expected duration first (LPT scheduling); jobs the history does not know first of all,
    since they may be the longest. Ties keep the batch order."""
    return sorted(jobs, key=lambda j: (j.expected_seconds is not None, -(j.expected_seconds or 0.0), j.index))


class _Interrupted(Exception):
    pass


def _run_in_slot(
    job: Job,
    pools: dict[str, SlotPool],
    run_one: RunOne,
    stop: threading.Event,
    fallback: bool,
    started: Callable[[Job], None],
) -> ScriptResult:
    pool = pools.get(job.platform or "cpu") or pools["cpu"]
    slot = pool.acquire()
    if stop.is_set():
        if slot is not None:
            pool.release(slot)
        raise _Interrupted
    started(job)  # only now: a job waiting for a free GPU has not started
    try:
        if slot is None or slot.kind != "gpu":
            return run_one(job, slot, stop, fallback)
        # An accelerator out-of-memory is tried on other GPUs before the CPU fallback.
        result = run_one(job, slot, stop, False)
        tried = set(slot.gpus)
        while result.error_class == "out_of_memory" and result.device_used == "gpu" and not stop.is_set():
            pool.release(slot)
            slot = pool.acquire(avoid_gpus=tried)
            if slot is None:
                break
            tried |= set(slot.gpus)
            retry = run_one(job, slot, stop, False)
            result = retry.model_copy(update={"attempts": [*result.attempts, *retry.attempts]})
        if not result.success and fallback and result.error_class in ("out_of_memory", "device_unavailable"):
            if slot is not None:
                pool.release(slot)
            slot, pool = None, pools["cpu"]
            cpu_slot = pool.acquire()  # the CPU run takes its share of the cores like any CPU job
            try:
                cpu = run_one(dataclasses.replace(job, device="cpu", platform="cpu"), cpu_slot, stop, False)
            finally:
                if cpu_slot is not None:
                    pool.release(cpu_slot)
            reason = f"gpu failed with {result.error_class}: {result.error_message}"
            result = cpu.model_copy(update={
                "attempts": [*result.attempts, *cpu.attempts], "fallback_reason": reason,
                "device_requested": job.device,
            })
        return result
    finally:
        if slot is not None:
            pool.release(slot)


def run_parallel(
    jobs: Sequence[Job],
    *,
    workers: int,
    pools: dict[str, SlotPool],
    run_one: RunOne,
    fallback: bool,
    on_start: OnEvent | None = None,
    on_done: OnEvent | None = None,
) -> list[ScriptResult]:
    """Run ``jobs`` with at most ``workers`` at a time; returns results in batch order.

    ``run_one(job, slot, stop, fallback)`` runs one job and must return its result (raising
    :class:`KeyboardInterrupt` subclasses only when ``stop`` was set). ``on_done`` is called, in
    the calling thread, as each job finishes, so results can be persisted one by one.
    """
    stop = threading.Event()
    done: dict[int, ScriptResult] = {}
    lock = threading.Lock()

    def started(job: Job) -> None:
        if on_start is not None:
            with lock:
                on_start(job, None)

    def task(job: Job) -> ScriptResult:
        return _run_in_slot(job, pools, run_one, stop, fallback, started)

    order = longest_first(jobs)
    executor = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="jaxrun-job")
    futures: dict[Future[ScriptResult], Job] = {executor.submit(task, job): job for job in order}
    pending = set(futures)
    interrupted = False
    try:
        while pending:
            finished, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            for future in finished:
                _collect(future, futures[future], done, on_done)
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
        for future in pending:
            future.cancel()
        for future in pending:
            if not future.cancelled():
                _collect(future, futures[future], done, on_done, wait_for_it=True)
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
    results = [done[i] for i in sorted(done)]
    if interrupted:
        raise ParallelInterrupted(results)
    return results


def _collect(future: Future, job: Job, done: dict[int, ScriptResult], on_done: OnEvent | None, wait_for_it: bool = False) -> None:
    try:
        result = future.result(timeout=None if wait_for_it else 0)
    except _Interrupted:
        return
    except KeyboardInterrupt as stop:  # a job stopped by the stop event carries its result
        result = getattr(stop, "result", None)
        if result is None:
            return
    done[job.index] = result
    if on_done is not None:
        on_done(job, result)


class ParallelInterrupted(KeyboardInterrupt):
    """Ctrl-C during a parallel batch: every running job was stopped; finished results travel along."""

    def __init__(self, results: list[ScriptResult]) -> None:
        super().__init__()
        self.results = results
