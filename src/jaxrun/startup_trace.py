"""Where jaxrun's own milliseconds go, around the scripts it runs: with ``JAXRUN_STARTUP_TRACE=FILE``
set, each :func:`mark` appends ``<unix time> <step>`` to FILE (benchmarks/run.py reads them beside
the script's own first- and last-line stamps). Unset, a mark is one global lookup."""

from __future__ import annotations

import os
import time

_FILE = os.environ.get("JAXRUN_STARTUP_TRACE")


def mark(step: str) -> None:
    if _FILE:
        with open(_FILE, "a", encoding="utf-8") as trace:
            trace.write(f"{time.time()!r} {step}\n")
