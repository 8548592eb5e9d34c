"""Where jaxrun's own milliseconds go, around the scripts it runs: with ``JAXRUN_STARTUP_TRACE=FILE``
set, each :func:`mark` appends ``<unix time> <step>`` to FILE (benchmarks/run.py reads them beside
the script's own first- and last-line stamps); with ``JAXRUN_STARTUP_TRACE_MODULES=1`` too, a
``+ <module>`` line after it for each module imported since the mark before (what each step of the
way to the first script imported; tests/run/test_startup_imports.py reads them). Unset, a mark is one
global lookup."""

from __future__ import annotations

import os
import sys
import time

_FILE = os.environ.get("JAXRUN_STARTUP_TRACE")
_MODULES = bool(_FILE and os.environ.get("JAXRUN_STARTUP_TRACE_MODULES"))
_known: set[str] = set()


def mark(step: str) -> None:
    if _FILE:
        lines = [f"{time.time()!r} {step}\n"]
        if _MODULES:
            new = sorted(set(sys.modules) - _known)
            _known.update(new)
            lines += [f"+ {name}\n" for name in new]
        with open(_FILE, "a", encoding="utf-8") as trace:
            trace.writelines(lines)
