"""Several jobs at once on this machine (``--jobs N``), each in a slot: a GPU (or a share of one),
or a share of the CPU cores (executors/slots.py).

Jobs start as slots free up, longest first when the history knows their durations (among the
jobs planned so far: a small batch is planned whole before it starts, plan/batch_plan.py). Ctrl-C sets a stop event that
every running job's process watcher watches: their process trees are stopped, their results reported as
``interrupted``, and only then is the interrupt raised.
"""

from __future__ import annotations

import heapq
import queue
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Sequence

from jaxrun.discover.devices import device_ids
from jaxrun.executors.base import BatchInterrupted, RunJob
from jaxrun.executors.slots import PooledPlacement, SlotPool, cpu_slots, gpu_slots
from jaxrun.plan.job import Jobs
from jaxrun.run.process.environment import chosen_index
from jaxrun.run.runner import RunInterrupted

if TYPE_CHECKING:
    from jaxrun.config.options import BatchOptions
    from jaxrun.discover.devices import Facts
    from jaxrun.plan.job import Job
    from jaxrun.results.models import ScriptResult
    from jaxrun.plan.sink import Sink


def _priority(job: "Job") -> tuple[bool, float, int]:
    return (job.expected_seconds is not None, -(job.expected_seconds or 0.0), job.index)


def longest_first(jobs: Sequence["Job"]) -> list["Job"]:
    """Longest expected duration first (LPT scheduling); jobs the history does not know first of all,
    since they may be the longest. Ties keep the batch order."""
    return sorted(jobs, key=_priority)


def slot_pools(jobs: int, facts: "Facts | None", gpus_per_job: int, jobs_per_gpu: int) -> dict[str, SlotPool]:
    """A CPU pool dividing the cores among ``jobs``, and a GPU pool when GPUs are present."""
    pools = {"cpu": SlotPool(cpu_slots(jobs))}
    ids = device_ids("gpu", facts) if facts is not None else []
    if ids:
        pools["gpu"] = SlotPool(gpu_slots(ids, gpus_per_job=gpus_per_job, jobs_per_gpu=jobs_per_gpu))
    return pools


class _NotStarted(Exception):
    """The batch was stopped while this job waited for its slot."""


class _Locked:
    """A sink whose calls from job threads are serialised."""

    def __init__(self, sink: "Sink", lock: threading.Lock) -> None:
        self.sink, self.lock = sink, lock

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        method = getattr(self.sink, name)

        def locked(*args, **kwargs):  # type: ignore[no-untyped-def]
            with self.lock:
                return method(*args, **kwargs)

        return locked


class LocalExecutor:
    starts_processes_here = True  # through the batch's pool (run/batch_pool.py)
    def __init__(self, options: "BatchOptions", facts: "Facts | None") -> None:
        self.options = options
        self.pools = slot_pools(options.jobs, facts, options.gpus_per_job, options.jobs_per_gpu)

    def run(self, jobs: "Jobs | Sequence[Job]", run_job: RunJob, sink: "Sink") -> None:
        jobs = Jobs.of(jobs)
        stop = threading.Event()
        shared = _Locked(sink, threading.Lock())
        width = max(1, self.options.jobs)

        def task(job: "Job") -> ScriptResult:
            # Waits for a free slot (a chosen GPU, --device gpu:1: that GPU's slot).
            placement = PooledPlacement(self.pools, job.platform, chosen_index(job.device, job.platform))
            try:
                if stop.is_set():
                    raise _NotStarted
                shared.on_start(job, jobs.total)  # only now: a job waiting for a free GPU has not started
                options = self.options.options_for(job)
                return run_job(job, options, placement=placement, stop=stop, sink=shared)  # type: ignore[arg-type]
            finally:
                placement.close()

        # One queue says when a job has finished or the plan has a new one: waiting on all the
        # pending futures at every result (concurrent.futures.wait) costs the square of the
        # batch's size. Jobs are started as slots free up, the longest first among those
        # planned (plan/batch_plan.py plans a small batch whole before it starts).
        events: queue.SimpleQueue[Future[ScriptResult] | None] = queue.SimpleQueue()
        threading.Thread(target=_tell_planned, args=(jobs, events), name="jaxrun-plan-watch", daemon=True).start()
        executor = ThreadPoolExecutor(max_workers=width, thread_name_prefix="jaxrun-job")
        waiting: list[tuple[tuple[bool, float, int], "Job"]] = []  # a heap: planned, not yet started
        taken = 0  # jobs read from the plan
        futures: dict[Future[ScriptResult], "Job"] = {}  # started, not yet reported
        finished: tuple[Future[ScriptResult], "Job"] | None = None  # ended, not yet reported
        try:
            while True:
                planned = jobs.planned(taken)
                taken += len(planned)
                for job in planned:
                    heapq.heappush(waiting, (_priority(job), job))
                while waiting and len(futures) < width:
                    job = heapq.heappop(waiting)[1]
                    future = executor.submit(task, job)
                    futures[future] = job
                    future.add_done_callback(events.put)
                if finished is not None:
                    # Reported once the next job is on its way: its process starts while this
                    # result is written (should the writing fail, that job is stopped as the
                    # running ones are). The future is let go of (its condition, lock and result:
                    # ~1.8 KB a job).
                    done, finished = finished, None
                    self._hand_over(*done, shared)
                if not futures and not waiting and jobs.complete and not jobs.planned(taken):
                    if jobs.error is not None:
                        raise jobs.error  # the plan stopped at a mistake (batch/pipeline.py says it)
                    return
                try:
                    ended = events.get(timeout=0.2)
                except queue.Empty:
                    continue
                if ended is not None:
                    finished = ended, futures.pop(ended)
        except KeyboardInterrupt:
            self._stop(self._with(futures, finished), shared, stop)
            raise BatchInterrupted from None
        except BaseException:
            # A result that could not be written (a full disk) stops the batch: no job starts, the
            # running ones are stopped (not waited for) and their results reported as far as they
            # can be; batch/pipeline.py marks the rest and says the first error.
            self._stop(self._with(futures, finished), shared, stop, quiet=True)
            raise
        finally:
            executor.shutdown(wait=True, cancel_futures=True)

    @staticmethod
    def _with(futures: dict, finished: "tuple[Future, Job] | None") -> dict:
        """The jobs to report as the batch stops: those started, and the one that ended and was
        not reported yet."""
        return futures if finished is None else {**futures, finished[0]: finished[1]}

    @classmethod
    def _stop(cls, futures: dict, sink: _Locked, stop: threading.Event, quiet: bool = False) -> None:
        """No job starts any more; each running one (``futures``: started, not yet reported) is
        stopped and its result reported (``quiet``: a failure to report it is not said: the error
        that stopped the batch is the one to say)."""
        stop.set()
        for future in futures:
            future.cancel()
        for future in futures:
            if future.cancelled():
                continue
            try:
                cls._hand_over(future, futures[future], sink, wait_for_it=True)
            except Exception:  # noqa: BLE001
                if not quiet:
                    raise

    @staticmethod
    def _hand_over(future: Future, job: "Job", sink: _Locked, wait_for_it: bool = False) -> None:
        try:
            result = future.result(timeout=None if wait_for_it else 0)
        except _NotStarted:
            return
        except RunInterrupted as stopped:  # a job stopped by the stop event carries its result
            result = stopped.result
        sink.on_result(job, result)


def _tell_planned(jobs: Jobs, events: "queue.SimpleQueue[Future[ScriptResult] | None]") -> None:
    """Wake the executor (``None`` on its queue) for each job the plan adds, and at its end."""
    try:
        for _ in jobs:
            events.put(None)
    except BaseException:  # noqa: BLE001 - the plan's error is the executor's to raise
        pass
    events.put(None)
