"""The ``jaxrun`` command's entry point (and ``python -m jaxrun``'s).

``jaxrun run`` starts the first script's process (a spare probe, run/spare.py) before it even
imports its command-line machinery: the interpreter of that process starts while jaxrun reads its
options, so the script begins as early as it can. Everything else is :func:`jaxrun.cli.main`.
"""

from __future__ import annotations

import gc
import sys
from typing import TYPE_CHECKING

from .startup_trace import mark

if TYPE_CHECKING:
    from .run.launcher import Launcher


def main(argv: list[str] | None = None) -> int:
    mark("Python started, jaxrun's entry point runs")
    args = list(sys.argv[1:] if argv is None else argv)
    collecting = gc.isenabled()
    launcher = None
    try:
        if args[:1] == ["run"] and not {"--help", "-h"} & set(args[: args.index("--") if "--" in args else None]):
            launcher = _start_run()
            mark("a spare process started")
        from .cli import main as cli_main

        mark("click and the CLI imported")
        return cli_main(args, launcher=launcher)
    finally:
        mark("the command returned; exiting")
        # The objects of the imported modules then stay out of the collection Python makes as it
        # exits (30 of its 38 ms after a batch: measured in issue 14).
        gc.freeze()
        if collecting:
            gc.enable()


def _start_run() -> "Launcher":
    from .run.launcher import Launcher
    from .run.spare import spare_environment

    launcher = Launcher()
    launcher.open_spares(spare_environment())
    # No collections while the modules load (their objects are long-lived: ~10 ms of the way to
    # the first script); once it runs they are set aside (freeze) and collection resumes.
    gc.disable()
    launcher.when_started(_collect_again)
    return launcher


def _collect_again() -> None:
    gc.freeze()
    gc.enable()
