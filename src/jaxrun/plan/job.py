"""One script to run, and where its files go: the unit every executor schedules; and the batch's
jobs as its plan finds them (``Jobs``)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Iterable, Iterator

import msgspec

from jaxrun.config.options import RunOptions
from jaxrun.results import result_files


# A struct, its fields in slots: a batch of 10,000 scripts holds 10,000 of them
class Job(msgspec.Struct, frozen=True):
    index: int  # position in the batch's order; results are reported in this order
    script: Path
    name: str  # the script's batch-unique ``<name>`` (docs/ARCHITECTURE.md, "Results folder")
    file_name: str  # ``<name>``, or ``<name>@<device>`` when a batch runs on several devices
    device: str  # the device asked for
    platform: str | None  # where the batch plans to run it ("cpu", "gpu", "tpu"); None: nowhere
    results_dir: Path
    expected_seconds: float | None = None  # from the history, to start the longest first
    # The job's own run options, when per-script settings changed the batch's (BatchOptions.options_for).
    run_options: RunOptions | None = None
    # What a reader sees (the view's label): the path relative to the folder given, with "/".
    label: str = ""
    # Which process of a multi-process job (--processes N) this is, where each process is run as a
    # job of its own (a Slurm task); its logs are then logs/<file_name>.p<k>.*.log (k > 0).
    process: int = 0

    @property
    def shown(self) -> str:
        return self.label or self.file_name

    @property
    def stdout_log(self) -> Path:
        return self._log("stdout")

    @property
    def stderr_log(self) -> Path:
        return self._log("stderr")

    def _log(self, stream: str) -> Path:
        process = f".p{self.process}" if self.process else ""
        return self.results_dir / result_files.LOGS_DIR / f"{self.file_name}{process}.{stream}.log"

    @property
    def output_dir(self) -> Path:
        return self.results_dir / result_files.OUTPUTS_DIR / self.file_name

    @property
    def profile_dir(self) -> Path:
        """Where ``--profile`` puts this script's jax.profiler trace and device memory profile."""
        return self.results_dir / result_files.PROFILING_DIR / result_files.TRACES_DIR / self.file_name

    @property
    def result_file(self) -> Path:
        return result_files.script_result_path(self.results_dir, self.file_name)


class Jobs:
    """A batch's jobs in batch order, as its plan finds them (plan/batch_plan.py reads the folder one
    script at a time in a thread of its own, so the first script starts while the rest of a
    large folder is still being read).

    Iterating waits for each next job until the plan is complete, then ends, or raises the
    error that stopped the plan where it stopped. ``total`` is ``None`` until the plan is
    complete; ``planned()`` is what is known now. Built from a list, it is complete at once.
    """

    def __init__(self, jobs: Iterable[Job] = (), *, complete: bool = True) -> None:
        self._jobs: list[Job] = list(jobs)
        self._complete = complete
        self._error: BaseException | None = None
        self._changed = threading.Condition()
        # How many jobs each waiting thread waits for: a job added wakes them only once one has
        # its count (a thread woken at every job of a large folder's plan, only to wait again,
        # took the interpreter from the plan's thread each time: 0.4 ms a job, against 0.13).
        self._awaited: list[int] = []

    @classmethod
    def of(cls, jobs: "Iterable[Job] | Jobs") -> "Jobs":
        return jobs if isinstance(jobs, Jobs) else cls(jobs)

    def add(self, job: Job) -> None:
        with self._changed:
            self._jobs.append(job)
            if self._awaited and len(self._jobs) >= min(self._awaited):
                self._changed.notify_all()

    def finish(self, error: BaseException | None = None) -> None:
        """The plan is complete, or stopped by ``error`` (raised to whoever iterates past it)."""
        with self._changed:
            self._complete, self._error = True, error
            self._changed.notify_all()

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def error(self) -> BaseException | None:
        return self._error

    @property
    def total(self) -> int | None:
        """How many jobs the batch has; None while the plan is still finding them."""
        return len(self._jobs) if self._complete else None

    def planned(self, start: int = 0) -> list[Job]:
        """The jobs planned so far, from position ``start``."""
        with self._changed:
            return self._jobs[start:]

    def wait(self, count: int | None = None, timeout: float | None = None) -> bool:
        """Wait until ``count`` jobs are planned (None: all of them) or the plan is complete;
        whether that happened within ``timeout`` seconds."""
        with self._changed:
            return self._wait_for(count, timeout)

    def _wait_for(self, count: int | None, timeout: float | None = None) -> bool:
        """:meth:`wait`, the lock held."""
        needed = count if count is not None else 1 << 62  # None: none short of the plan's end
        if self._complete or len(self._jobs) >= needed:
            return True
        self._awaited.append(needed)
        try:
            return self._changed.wait_for(lambda: self._complete or len(self._jobs) >= needed, timeout)
        finally:
            self._awaited.remove(needed)

    def all(self) -> list[Job]:
        """Every job, once the plan is complete (the plan's error, if it stopped)."""
        self.wait()
        if self._error is not None:
            raise self._error
        return list(self._jobs)

    def __iter__(self) -> Iterator[Job]:
        position = 0
        while True:
            with self._changed:
                self._wait_for(position + 1)
                if position >= len(self._jobs):
                    if self._error is not None:
                        raise self._error
                    return
                job = self._jobs[position]
            yield job
            position += 1
