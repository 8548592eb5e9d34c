"""The ``on_start`` / ``on_result`` callbacks of :func:`jaxrun.run_jax_scripts`, as a sink."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from jaxrun.plan.sink import BaseSink

if TYPE_CHECKING:
    from jaxrun.plan.job import Job, Jobs
    from jaxrun.results.models import ScriptResult

# (position from 1, total, file name): total is None while a large batch's plan is still finding scripts
OnStart = Callable[[int, "int | None", str], None]
OnResult = Callable[[int, "int | None", "ScriptResult"], None]  # (position from 1, total, result)


class CallbackSink(BaseSink):
    def __init__(self, on_start: OnStart | None, on_result: OnResult | None) -> None:
        self._on_start, self._on_result = on_start, on_result
        self._jobs: "Jobs | None" = None

    def on_begin(self, jobs: "Jobs") -> None:
        self._jobs = jobs

    def on_start(self, job: "Job", total: int | None) -> None:
        if self._on_start is not None:
            self._on_start(job.index + 1, total, job.file_name)

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        if self._on_result is not None:
            self._on_result(job.index + 1, self._jobs.total if self._jobs is not None else None, result)
        return result
