"""The ``jaxrun`` command's entry point (and ``python -m jaxrun``'s).

``jaxrun run`` starts the first script's process (a spare probe, run/spare.py) before it even
imports its command-line machinery: the interpreter of that process starts while jaxrun reads its
options, so the script begins as early as it can. Everything else is :func:`jaxrun.cli.main`.
"""

from __future__ import annotations

import gc
import sys


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    collecting = gc.isenabled()
    try:
        if args[:1] == ["run"] and not {"--help", "-h"} & set(args[: args.index("--") if "--" in args else None]):
            _start_run()
        from .cli import main as cli_main

        return cli_main(args)
    finally:
        # The objects of the imported modules then stay out of the collection Python makes as it
        # exits (30 of its 38 ms after a batch: measured in issue 14).
        gc.freeze()
        if collecting:
            gc.enable()


def _start_run() -> None:
    from .run.launch import when_started
    from .run.spare import POOL, spare_environment

    POOL.open(spare_environment())
    # No collections while the modules load (their objects are long-lived: ~10 ms of the way to
    # the first script); once it runs they are set aside (freeze) and collection resumes.
    gc.disable()
    when_started(_collect_again)


def _collect_again() -> None:
    gc.freeze()
    gc.enable()
