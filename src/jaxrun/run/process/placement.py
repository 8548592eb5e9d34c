"""Where on the machine a job's attempts run: the slot (GPUs or CPU cores) of each attempt.

The runner asks its :class:`Placement` for the slot of the platform an attempt runs on, and, after
an accelerator out-of-memory, whether a GPU it has not tried can be had. Executors that share the
machine between jobs (executors/slots.py) hand out slots; ``jaxrun ab --duet`` gives each side a
:class:`FixedPlacement` (its half of the cores, its own GPU); the others use :data:`WHOLE_MACHINE`.
"""

from __future__ import annotations

from typing import Iterable, Protocol

import msgspec

_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class Slot(msgspec.Struct, frozen=True):
    index: int
    gpus: tuple[int, ...] = ()
    cpus: tuple[int, ...] = ()
    memory_fraction: float | None = None

    @property
    def kind(self) -> str:
        return "gpu" if self.gpus else "cpu"

    def env(self) -> dict[str, str]:
        """Environment variables that confine a job to this slot."""
        if self.gpus:
            env = {
                "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in self.gpus),
                "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
            }
            if self.memory_fraction is not None:
                env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{self.memory_fraction:.3f}"
            return env
        # No XLA flag: XLA_FLAGS (and the compile options they set) enter the key of JAX's
        # persistent compilation cache, so a flag added only under --jobs N made every executable
        # a sequential run had stored a miss. XLA's CPU thread pools are sized from the CPU
        # affinity the launch sets (run/process/process_watch.py), which JAX's cache key does not see.
        threads = str(max(1, len(self.cpus)))
        return {name: threads for name in _THREAD_VARS}


def pinned_cpus(slot: Slot | None, platform: str) -> tuple[int, ...] | None:
    """The cores an attempt on ``platform`` in ``slot`` is pinned to (its CPU affinity); None: all
    the parent has. A CPU slot pins a CPU run, and a GPU slot that names cores pins a GPU run's
    host threads; a slot of another platform (the CPU share a GPU attempt gets where there is no GPU
    pool) pins nothing."""
    if slot is None or slot.kind != platform or not slot.cpus:
        return None
    return slot.cpus


def merge_xla_flags(existing: str | None, extra: Iterable[str]) -> str:
    """Add flags to an XLA_FLAGS value without overriding ones the user already set."""
    flags = (existing or "").split()
    names = {f.split("=", 1)[0] for f in flags}
    for flag in extra:
        if flag.split("=", 1)[0] not in names:
            flags.append(flag)
    return " ".join(flags)


class Placement(Protocol):
    def slot(self, platform: str) -> Slot | None:
        """The slot an attempt on ``platform`` runs in (None: the whole machine)."""

    def has_other_gpu(self) -> bool:
        """Whether a GPU this job has not tried yet exists (it may still be busy)."""

    def move_to_other_gpu(self) -> bool:
        """Give back the current GPU slot and wait for one on untried GPUs; False if none exists."""


class _WholeMachine:
    """Sequential runs and Ray tasks: every attempt sees what the process sees."""

    def slot(self, platform: str) -> Slot | None:
        return None

    def has_other_gpu(self) -> bool:
        return False

    def move_to_other_gpu(self) -> bool:
        return False


WHOLE_MACHINE: Placement = _WholeMachine()


class FixedPlacement:
    """Every attempt in the same slot, for as long as the caller holds it: ``cpu`` for CPU
    attempts, ``gpu`` (its GPUs and, where it names them, cores) for GPU ones; never another GPU
    after an out-of-memory, since the GPUs not in ``gpu`` belong to someone else."""

    def __init__(self, cpu: Slot, gpu: Slot | None = None) -> None:
        self.cpu, self.gpu = cpu, gpu

    def slot(self, platform: str) -> Slot | None:
        if platform == "gpu" and self.gpu is not None:
            return self.gpu
        return self.cpu if platform == "cpu" else None

    def has_other_gpu(self) -> bool:
        return False

    def move_to_other_gpu(self) -> bool:
        return False
