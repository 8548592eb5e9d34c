"""The ``jaxrun`` command's entry point (and ``python -m jaxrun``'s).

``jaxrun run`` starts the first script's process (a spare probe, run/spare.py) before it even
imports its command-line machinery: the interpreter of that process starts while jaxrun reads its
options, so the script begins as early as it can. Everything else is :func:`jaxrun.cli.main`.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["run"] and not {"--help", "-h"} & set(args[: args.index("--") if "--" in args else None]):
        from .run.spare import POOL, spare_environment

        POOL.open(spare_environment())
    from .cli import main as cli_main

    return cli_main(args)
