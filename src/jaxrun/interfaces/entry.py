"""The ``jaxrun`` command's entry point (and ``python -m jaxrun``'s).

``jaxrun run`` starts the first script's process (a spare probe, run/process/spare.py) before it even
imports its command-line machinery: the interpreter of that process starts while jaxrun reads its
options, so the script begins as early as it can. Everything else is :func:`jaxrun.interfaces.cli.main`.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING

from jaxrun.core import held_interrupt
from jaxrun.core.startup_trace import mark
from jaxrun.probe import exiting

if TYPE_CHECKING:
    from jaxrun.run.batch_pool import BatchPool


def main(argv: list[str] | None = None) -> int:
    mark("Python started, jaxrun's entry point runs")
    held_interrupt.install()  # first: a Ctrl-C while the imports below run must not be lost
    args = list(sys.argv[1:] if argv is None else argv)
    collecting = gc.isenabled()
    pool = None
    try:
        if args[:1] == ["run"] and not {"--help", "-h"} & set(args[: args.index("--") if "--" in args else None]):
            pool = _start_pool()
            mark("the prestarted interpreter started")
        from jaxrun.interfaces.cli import main as cli_main

        mark("click and the CLI imported")
        status = cli_main(args, pool=pool)
        _end_now_if_ray_was_left_behind(status)
        return status
    finally:
        mark("the command returned; exiting")
        # The objects of the imported modules then stay out of the collection Python makes as it
        # exits (30 of its 38 ms after a batch, when this was measured).
        gc.freeze()
        if collecting:
            gc.enable()


def command(argv: list[str] | None = None) -> None:
    """The ``jaxrun`` program (its console script, ``python -m jaxrun``): :func:`main`, then
    ``sys.exit`` less the interpreter's teardown, which frees every object of every module one by
    one (~10 ms, after jaxrun has written and said everything): the exit handlers run, the output
    is flushed, the process ends. Where a thread that Python would wait for still runs, or the
    output cannot be flushed (a closed pipe: Python says so and exits with 120), Python's own exit
    does it."""
    exiting.leave(main(argv), script=False)


def _end_now_if_ray_was_left_behind(status: int) -> None:
    """A call into Ray that never answered still runs in a thread (executors/ray.py): the
    interpreter's exit would wait for Ray's exit handlers or crash under that thread, after jaxrun
    has said everything. Its output flushed, the process ends here with its status."""
    ray_executor = sys.modules.get("jaxrun.executors.ray")
    if ray_executor is None or not ray_executor.calls_left_behind():
        return
    exiting.flushed()
    os._exit(status)


def _start_pool() -> "BatchPool":
    from jaxrun.run.batch_pool import BatchPool
    from jaxrun.run.process.spare import spare_environment

    pool = BatchPool()
    # A local batch forks its scripts from a prestarted interpreter (--prestart auto): started now,
    # it is ready by the time the first script is known; a batch that execs stops it and starts a
    # spare instead (batch/pipeline.py).
    pool.prestart.open("probe", spare_environment())
    # No collections while the modules load (their objects are long-lived: ~10 ms of the way to
    # the first script); once it runs they are set aside (freeze) and collection resumes.
    gc.disable()
    pool.when_started(_collect_again)
    return pool


def _collect_again() -> None:
    gc.freeze()
    gc.enable()
