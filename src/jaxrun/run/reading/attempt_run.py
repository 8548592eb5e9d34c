"""What one attempt left: its process (or none, when nothing could be launched) and everything
learnt from it, which run/reading/result.py turns into the script's result.

Plain Python: the attempt loop (run/runner.py) holds one from before its first launch, and the
modules that fill it in (the result models, the probe's reading) are imported once a script's
process has started.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from jaxrun.discover.energy import JobEnergy
    from jaxrun.results.models import Numerics, RunEnvironment
    from jaxrun.run.process.process_watch import ProcessOutcome
    from jaxrun.run.reading.classify import Classification
    from jaxrun.run.reading.job_run import JobRun
    from jaxrun.run.reading.probe_reading import ProbeReading


class AttemptRun(msgspec.Struct):
    """One attempt's process (or processes, or none when none could start) and everything learnt from it."""

    outcome: "ProcessOutcome | None"
    failure: "Classification | None"
    reading: "ProbeReading | None" = None  # None: nothing was launched (run/reading/result.py reads an empty one)
    utilization: tuple[float | None, str | None] | None = None
    energy: "JobEnergy | None" = None  # its GPUs' and the host's, from their counters (discover/energy.py)
    command: list[str] | None = None  # what the process ran
    numerics: "Numerics | None" = None  # read from its environment
    environment: "RunEnvironment | None" = None
    guard_env: dict[str, str] = msgspec.field(default_factory=dict)  # its transfer-guard variables (run/process/transfers.py)
    processes: "JobRun | None" = None  # --processes N: each process (run/reading/job_run.py); None: one process
