"""The :class:`BatchPool`: a batch's process pool (run/process/process_pool.py: the spare process
and the set-up put off until a script runs) with the attempt it is handed to. A batch passes
``pool.attempt`` as the ``attempt`` of :func:`jaxrun.run.execute.run_job`: run/attempt.py's
:func:`~jaxrun.run.attempt.make_attempt`, given this pool to start its processes from. The pool
itself knows nothing of attempts.

The ``jaxrun`` command makes one before it even imports its CLI, to start a spare process
(interfaces/entry.py): this module imports the pool alone, and the attempt's own modules (the
options, the launch) when the first attempt is made, not on the way to that spare.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jaxrun.run.process.process_pool import ProcessPool

if TYPE_CHECKING:
    from jaxrun.run.reading.attempt_run import AttemptRun


class BatchPool(ProcessPool):
    def attempt(self, *args: Any) -> "AttemptRun":
        """:func:`jaxrun.run.attempt.make_attempt` with this pool (the ``attempt`` of
        :func:`jaxrun.run.execute.run_job`)."""
        from jaxrun.run.attempt import make_attempt

        return make_attempt(*args, pool=self)
