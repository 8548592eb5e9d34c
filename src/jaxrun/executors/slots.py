"""Execution slots: which accelerators and CPU cores a job may use while it runs.

A pure component (no processes, no JAX): the scheduler asks for a slot, runs a job with the slot's
environment and CPU affinity, and gives the slot back. Its tests drive it with a plain device
list, since the machine that runs them has no GPU.

* GPU slots: with G GPUs, ``gpus_per_job=k`` and ``jobs_per_gpu=m`` there are (G // k) * m
  slots; each job sees only its GPUs through ``CUDA_VISIBLE_DEVICES`` (JAX then numbers them
  from 0), with preallocation off and, when a GPU is shared, a memory fraction of 1/m of the
  usable 90%. A job that ran out of accelerator memory can ask for a slot on *other* GPUs.
* CPU slots: the cores are divided among the jobs that may run at once, so N jobs never
  oversubscribe the machine: each job gets a disjoint set of cores (applied as CPU affinity,
  which also sizes XLA's CPU thread pools) and thread-count variables for OpenMP, MKL and
  OpenBLAS. Never an XLA flag: XLA_FLAGS enter JAX's persistent compilation cache key, so the
  executables a sequential run stored would all be misses under ``--jobs N``.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from jaxrun.errors import UsageError
from jaxrun.run.process.placement import Slot, merge_xla_flags

# Leave XLA headroom on a shared GPU (its default preallocation fraction is 0.75 for one process).
USABLE_GPU_MEMORY = 0.9

__all__ = ["Slot", "merge_xla_flags", "gpu_slots", "cpu_slots", "SlotPool", "PooledPlacement", "USABLE_GPU_MEMORY"]


def gpu_slots(gpu_ids: Sequence[int], *, gpus_per_job: int = 1, jobs_per_gpu: int = 1) -> list[Slot]:
    """Slots over accelerators: disjoint groups of ``gpus_per_job``, each shared ``jobs_per_gpu`` ways."""
    if gpus_per_job < 1 or jobs_per_gpu < 1:
        raise UsageError(
            f"gpus_per_job and jobs_per_gpu must be >= 1, got {gpus_per_job} and {jobs_per_gpu}"
        )
    if gpus_per_job > 1 and jobs_per_gpu > 1:
        raise UsageError("use either --gpus-per-job or --jobs-per-gpu, not both")
    ids = list(dict.fromkeys(gpu_ids))
    if len(ids) < gpus_per_job:
        raise UsageError(
            f"--gpus-per-job {gpus_per_job} needs at least {gpus_per_job} GPUs; this machine has {len(ids)}"
        )
    groups = [tuple(ids[i : i + gpus_per_job]) for i in range(0, len(ids) - gpus_per_job + 1, gpus_per_job)]
    fraction = USABLE_GPU_MEMORY / jobs_per_gpu if jobs_per_gpu > 1 else None
    slots = []
    for share in range(jobs_per_gpu):
        for group in groups:
            slots.append(Slot(index=len(slots), gpus=group, memory_fraction=fraction))
    return slots


def cpu_slots(jobs: int, cores: Sequence[int] | None = None) -> list[Slot]:
    """``jobs`` slots dividing the cores as evenly as possible (never fewer than one core each)."""
    if jobs < 1:
        raise UsageError(f"jobs must be >= 1, got {jobs}")
    available = list(cores) if cores is not None else sorted(_usable_cores())
    if not available:
        available = [0]
    slots = []
    for index in range(jobs):
        if jobs <= len(available):
            share = tuple(available[index::jobs])
        else:
            share = (available[index % len(available)],)  # more jobs than cores: they must share
        slots.append(Slot(index=index, cpus=tuple(sorted(share))))
    return slots


def _usable_cores() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


@dataclass
class SlotPool:
    """Hands out slots to concurrent jobs; a job waits until a suitable slot is free."""

    slots: list[Slot]
    _free: list[Slot] = field(init=False)
    _cond: threading.Condition = field(init=False, default_factory=threading.Condition)

    def __post_init__(self) -> None:
        if not self.slots:
            raise UsageError("no execution slots: nothing could run")
        self._free = list(self.slots)

    def acquire(self, *, avoid_gpus: Iterable[int] = (), gpu: int | None = None,
                timeout: float | None = None) -> Slot | None:
        """The first free slot that shares no GPU with ``avoid_gpus`` (and holds GPU ``gpu``, a
        chosen device: --device gpu:1 waits for that GPU's slot, never takes another).

        Returns None when no such slot exists at all (so waiting would never end) or when
        ``timeout`` passes.
        """
        avoid = set(avoid_gpus)
        if not any(self._fits(s, avoid, gpu) for s in self.slots):
            return None
        with self._cond:
            found = self._cond.wait_for(lambda: self._pick(avoid, gpu) is not None, timeout=timeout)
            if not found:
                return None
            slot = self._pick(avoid, gpu)
            assert slot is not None
            self._free.remove(slot)
            return slot

    @staticmethod
    def _fits(slot: Slot, avoid: set[int], gpu: int | None) -> bool:
        return not (set(slot.gpus) & avoid) and (gpu is None or gpu in slot.gpus)

    def _pick(self, avoid: set[int], gpu: int | None = None) -> Slot | None:
        return next((s for s in self._free if self._fits(s, avoid, gpu)), None)

    def release(self, slot: Slot) -> None:
        with self._cond:
            if slot in self._free or slot not in self.slots:
                raise ValueError(f"slot {slot.index} was not taken from this pool")
            self._free.append(slot)
            self._free.sort(key=lambda s: s.index)
            self._cond.notify_all()

    @property
    def free(self) -> int:
        with self._cond:
            return len(self._free)


class PooledPlacement:
    """A job's slots taken from shared pools: its first slot is taken when it is created (the job
    waits for it), a CPU fallback takes a CPU share like any CPU job, and an accelerator
    out-of-memory may move it to GPUs it has not tried, unless its GPU was chosen (``gpu``:
    --device gpu:1 takes GPU 1's slot and stays there). :meth:`close` gives every slot back."""

    def __init__(self, pools: dict[str, SlotPool], platform: str | None, gpu: int | None = None) -> None:
        self.pools = pools
        self._held: dict[str, Slot] = {}
        self._tried_gpus: set[int] = set()
        self._gpu = gpu
        kind = platform if platform in pools else "cpu"
        self._take(kind)

    def _take(self, kind: str, avoid: Iterable[int] = ()) -> Slot | None:
        slot = self.pools[kind].acquire(avoid_gpus=avoid, gpu=self._gpu if kind == "gpu" else None)
        if slot is not None:
            self._held[kind] = slot
            self._tried_gpus |= set(slot.gpus)
        return slot

    def _give_back(self, kind: str) -> None:
        slot = self._held.pop(kind, None)
        if slot is not None:
            self.pools[kind].release(slot)

    def slot(self, platform: str) -> Slot | None:
        kind = platform if platform in self.pools else "cpu"
        if kind not in self._held:
            # Moving to another platform (the CPU fallback) frees the slot of the one left behind.
            for other in list(self._held):
                self._give_back(other)
            self._take(kind)
        return self._held.get(kind)

    def has_other_gpu(self) -> bool:
        pool = self.pools.get("gpu")
        return pool is not None and self._gpu is None and any(not (set(s.gpus) & self._tried_gpus) for s in pool.slots)

    def move_to_other_gpu(self) -> bool:
        if not self.has_other_gpu():
            return False
        self._give_back("gpu")
        return self._take("gpu", avoid=self._tried_gpus) is not None

    def close(self) -> None:
        for kind in list(self._held):
            self._give_back(kind)
