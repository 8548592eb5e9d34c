"""Duet runs (``jaxrun ab --duet``): BASE and NEW at the same time, each process pinned to its own
half of the cores (and, on a GPU, given a GPU of its own), the halves swapped from pair to pair.
A change of the machine's load then lands on both runs of a pair at once, where alternating
pairs leave the two runs a run's length apart (Bulej et al., "Duet Benchmarking: Improving
Measurement Accuracy in the Cloud", 2020). Each side has half the machine, so its absolute times
are not a solo run's: only the ratios are meant.

The halves are the cores this process may use (``os.sched_getaffinity``), sorted and cut into two
contiguous halves of equal size (an odd core left over is jaxrun's own): unequal halves would
make every other pair's ratio lean one way.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence, TypeVar

from jaxrun.core.validate import split_device
from jaxrun.errors import DeviceProbeError, UsageError
from jaxrun.run.process.placement import FixedPlacement, Slot

__all__ = ["DuetHalves", "Pairing", "duet_halves", "machine_halves", "pairing", "side_by_side"]

T = TypeVar("T")


@dataclass(frozen=True)
class DuetHalves:
    """The two halves of the machine: in pair i, BASE runs on ``slots[i % 2]`` and NEW on the other."""

    slots: tuple[Slot, Slot]

    def placement(self, half: int) -> FixedPlacement:
        slot = self.slots[half]
        # A GPU run keeps its host threads on the half's cores too; a CPU fallback of it, the half's cores.
        return FixedPlacement(Slot(slot.index, cpus=slot.cpus), slot if slot.gpus else None)

    def describe(self) -> str:
        def one(slot: Slot) -> str:
            gpu = f" and GPU {','.join(map(str, slot.gpus))}" if slot.gpus else ""
            return f"CPUs {','.join(map(str, slot.cpus))}{gpu}"

        return f"{one(self.slots[0])} | {one(self.slots[1])}"


# How the pairs of a comparison run: a duet's halves, or None and why the pairs alternate.
Pairing = tuple[DuetHalves | None, str | None]


def duet_halves(cpus: Iterable[int], platform: str, gpu_ids: Sequence[int] = (), processes: int = 1) -> DuetHalves:
    """The halves for runs on ``platform`` (cpu, gpu: what the device asked for resolves to here)
    with ``cpus`` usable and ``gpu_ids`` present; a :class:`UsageError` of one line when duet
    runs cannot be fair here."""
    if processes > 1:
        raise UsageError(f"--duet runs one process per side on half the machine; --processes {processes} would "
                         "put several on each half: leave one of them out")
    usable = sorted(set(cpus))
    if len(usable) < 2:
        raise UsageError(f"--duet needs at least 2 CPUs, one half for each side; this process may use "
                         f"{len(usable)} ({','.join(map(str, usable)) or 'none'}, os.sched_getaffinity)")
    if platform not in ("cpu", "gpu"):
        raise UsageError(f"--duet splits CPUs and GPUs between the sides; runs on {platform} cannot be split: "
                         "pass --device cpu or gpu, or leave --duet out")
    gpus = list(dict.fromkeys(gpu_ids))
    if platform == "gpu" and len(gpus) < 2:
        raise UsageError(f"--duet on a GPU needs 2 GPUs, one for each side; this machine has {len(gpus)} "
                         "(pass --device cpu to run both sides on the CPUs, or leave --duet out)")
    size = len(usable) // 2
    halves = (tuple(usable[:size]), tuple(usable[size:2 * size]))
    return DuetHalves(tuple(Slot(i, gpus=(gpus[i],) if platform == "gpu" else (), cpus=halves[i])  # type: ignore[arg-type]
                            for i in range(2)))


def machine_halves(run_options: Mapping[str, object]) -> DuetHalves:
    """:func:`duet_halves` for this machine and the device the runs ask for (``--device``, else auto:
    a GPU when there is one, so a machine with one GPU is refused rather than shared)."""
    device = str(run_options.get("device") or "auto")
    platform, index = split_device(device)
    if index is not None:
        raise UsageError(f"--duet gives each side a device of its own: ask for a platform (--device {platform}), "
                         f"not one device ({device})")
    gpu_ids: list[int] = []
    if platform in ("gpu", "auto"):
        from jaxrun.discover.devices import device_facts, device_ids, resolve_device

        try:
            facts = device_facts()
        except DeviceProbeError as exc:
            if platform == "gpu":
                raise UsageError(f"--duet on a GPU needs to know the GPUs here, and they could not be read: {exc}") from None
            facts = None
        if facts is not None:
            gpu_ids = device_ids("gpu", facts)
            if platform == "auto":
                platform = resolve_device("auto", facts)[0] or "cpu"
    if platform == "auto":  # no device facts: the runs will find no accelerator either
        platform = "cpu"
    try:
        cpus: Iterable[int] = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        cpus = range(os.cpu_count() or 1)
    return duet_halves(cpus, platform, gpu_ids, int(run_options.get("processes") or 1))  # type: ignore[call-overload]


def pairing(duet: bool | None, run_options: Mapping[str, object]) -> "Pairing":
    """How the pairs run: the halves of a duet, or None for alternating pairs with the reason when a
    duet was the default (``duet=None``) and this machine cannot be split fairly. ``duet=True``
    insists (one line where it cannot), ``duet=False`` alternates."""
    if duet is False:
        return None, None
    try:
        return machine_halves(run_options), None
    except UsageError as exc:
        if duet:
            raise
        return None, str(exc).replace("--duet ", "a duet ", 1)


def side_by_side(first: Callable[[], T], second: Callable[[], T]) -> tuple[T, T]:
    """``first()`` and ``second()`` at the same time: ``second`` in a thread of its own, ``first`` in
    this one (so Ctrl-C stops it as it stops any run; the other's run is waited for, then the
    interruption goes on)."""
    done: list[T] = []
    failed: list[BaseException] = []

    def other() -> None:
        try:
            done.append(second())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
            failed.append(exc)

    thread = threading.Thread(target=other, name="jaxrun-duet", daemon=True)
    thread.start()
    try:
        mine = first()
    finally:
        thread.join()
    if failed:
        raise failed[0]
    return mine, done[0]
