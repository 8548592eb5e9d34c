"""Where jobs run, declared: each backend is one module with one class implementing
:class:`jaxrun.executors.base.Executor`, and one :class:`Backend` here saying what it is (its
traits). Nothing else in jaxrun names a backend: the options, the batch and the messages read
these traits. Reading the table imports no backend (dotted paths only).

A third-party package adds a backend with an entry point in the ``jaxrun.backends`` group that
names a :class:`Backend` (``toy = "toy_backend:BACKEND"``); it is looked up only when a batch asks
for a name that is not built in. docs/ARCHITECTURE.md, "Add a backend", is the recipe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from jaxrun.core.extras import Extra, require
from jaxrun.core.formatting import shorten_middle
from jaxrun.core.entry_points import installed
from jaxrun.errors import UsageError

if TYPE_CHECKING:
    from jaxrun.config.options import BatchOptions

GROUP = "jaxrun.backends"


class Backend(NamedTuple):
    name: str  # what --backend takes
    executor: str  # "module:Class"
    label: str  # how a message names it ("Ray")
    remote: bool = False  # its jobs run on machines the scheduler chooses: no spare process here, and a
    # device id of this machine means nothing there (ask for a platform)
    extra: Extra | None = None  # the optional dependency it needs, checked before anything runs
    settings: tuple[str, ...] = ()  # the batch options that are its own: given for another backend, refused
    settings_table: str | None = None  # the config file's table of its settings ([slurm]), which may stay
    # while a run chooses another backend
    shares_gpus: bool = True  # several jobs on one GPU (--jobs-per-gpu)
    processes: bool = True  # a --processes N job
    reattaches: bool = False  # its jobs outlive jaxrun, and --resume reattaches to them (running_elsewhere)
    chosen: bool = True  # chosen by --backend (sequential is chosen by --jobs 1)


SLURM_SETTINGS = ("slurm_partition", "slurm_account", "slurm_qos", "slurm_constraint", "slurm_cpus_per_task",
                  "slurm_options", "slurm_setup", "nodes", "slurm_timeout")

BUILT_IN: dict[str, Backend] = {b.name: b for b in (
    Backend("sequential", "jaxrun.executors.sequential:SequentialExecutor", "sequential", chosen=False),
    Backend("local", "jaxrun.executors.local:LocalExecutor", "local"),
    Backend("ray", "jaxrun.executors.ray:RayExecutor", "Ray", remote=True, extra=Extra("ray", "ray", "--backend ray"),
            settings=("ray_address",)),
    Backend("slurm", "jaxrun.executors.slurm:SlurmExecutor", "Slurm", remote=True,
            extra=Extra("submitit", "slurm", "--backend slurm"), settings=SLURM_SETTINGS, settings_table="slurm",
            shares_gpus=False, reattaches=True),
)}
DEFAULT = "local"


def names() -> tuple[str, ...]:
    """What ``--backend`` accepts: the built-in backends, then the installed ones."""
    return _names(installed(GROUP, Backend)[0])


def _names(found: dict[str, Backend]) -> tuple[str, ...]:
    return (*(b.name for b in BUILT_IN.values() if b.chosen), *(n for n in found if n not in BUILT_IN))


def backend_named(name: str) -> Backend:
    """The backend ``--backend NAME`` asks for: built in, or installed through an entry point."""
    if name in BUILT_IN and BUILT_IN[name].chosen:
        return BUILT_IN[name]
    found, problems = installed(GROUP, Backend)
    if name in found:
        return found[name]
    why = f" (the installed backend {problems[name]})" if name in problems else ""
    raise UsageError(f"unknown backend {shorten_middle(repr(name), 60)}{why}: choose one of {', '.join(_names(found))}")


def of_batch(options: "BatchOptions") -> Backend:
    """The backend that runs ``options``' jobs: ``--backend``, or sequential for one local job."""
    chosen = backend_named(options.backend)
    return BUILT_IN["sequential"] if chosen.name == DEFAULT and options.jobs == 1 else chosen


def check_backend(options: "BatchOptions", *, importable: bool = False) -> Backend:
    """``options``' backend, with everything about it checked before anything runs: it exists, no
    option of another backend is given, what it cannot do is not asked, and (``importable``: for a
    batch about to run) its package imports."""
    backend = backend_named(options.backend)
    for other in BUILT_IN.values():  # an installed backend's settings are options of jaxrun's: none of its own
        if other.name != backend.name:
            _refuse_settings_of(other, options)
    if importable and backend.extra is not None:
        require(backend.extra)
    chosen = next((d for d in options.device if ":" in d and not d.startswith("cpu:")), None)
    if chosen is not None and backend.remote:
        how = options.medium("device", "backend")
        raise UsageError(f"{options.said('device', chosen)} chooses a device of this machine; with "
                         f"{options.said('backend', backend.name, how)} {backend.label} chooses each task's device: ask "
                         f"for its platform, {options.said('device', chosen.split(':')[0], how)}")
    if not backend.shares_gpus and options.jobs_per_gpu > 1:
        how = options.medium("jobs_per_gpu", "backend")
        raise UsageError(f"{options.named('jobs_per_gpu', how)} shares one machine's GPUs between its jobs; on "
                         f"{backend.label} each task gets GPUs of its own ({options.named('gpus_per_job', how)})")
    if not backend.processes and options.run.processes > 1:
        raise UsageError(f"{options.named('processes')} runs a job as several processes, which the "
                         f"{backend.name} backend cannot: use another backend")
    return backend


def _refuse_settings_of(other: Backend, options: "BatchOptions") -> None:
    """An option of ``other`` given for this run: refused, naming the backend it needs (a config
    file's table of ``other``'s settings may stay while a run chooses another backend)."""
    kept = ("default", "config") if other.settings_table else ("default",)
    typed = [n for n in other.settings if options.source_of(n) not in kept]
    if typed:
        raise UsageError(f"{options.named(typed[0])} needs the {other.name} backend "
                         f"({options.said('backend', other.name, options.medium(typed[0]))})")
