"""Result sinks: everything a run writes or reports goes through one of these.

A sink is told when the batch begins, when a job starts, when a benchmark run of it ends (``on_progress``, so a crash
of jaxrun loses at most one run), when the job's result is final (``on_result``), and when the
batch ends (``on_end``, also after Ctrl-C, with ``metadata.complete`` false). ``on_result`` returns
the result, possibly annotated (the history sink adds its regression check); the sinks of a batch
are called in order, each seeing what the previous one returned. docs/ARCHITECTURE.md says how to
add one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence

if TYPE_CHECKING:
    from ..models import BatchResult, ScriptResult
    from ..job import Job


class Sink(Protocol):
    def on_begin(self, jobs: Sequence["Job"]) -> None: ...

    def on_start(self, job: "Job", total: int) -> None: ...

    def on_progress(self, job: "Job", result: "ScriptResult") -> None: ...

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult": ...

    def on_end(self, batch: "BatchResult") -> None: ...


class BaseSink:
    """A sink that does nothing; subclasses override what they need."""

    def on_begin(self, jobs: Sequence["Job"]) -> None:
        pass

    def on_start(self, job: "Job", total: int) -> None:
        pass

    def on_progress(self, job: "Job", result: "ScriptResult") -> None:
        pass

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        return result

    def on_end(self, batch: "BatchResult") -> None:
        pass


NO_SINK: Sink = BaseSink()


class Sinks(BaseSink):
    """Several sinks in order, as one."""

    def __init__(self, sinks: Sequence[Sink]) -> None:
        self.sinks = list(sinks)

    def on_begin(self, jobs: Sequence["Job"]) -> None:
        for sink in self.sinks:
            sink.on_begin(jobs)

    def on_start(self, job: "Job", total: int) -> None:
        for sink in self.sinks:
            sink.on_start(job, total)

    def on_progress(self, job: "Job", result: "ScriptResult") -> None:
        for sink in self.sinks:
            sink.on_progress(job, result)

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        for sink in self.sinks:
            result = sink.on_result(job, result)
        return result

    def on_end(self, batch: "BatchResult") -> None:
        for sink in self.sinks:
            sink.on_end(batch)
