"""Result sinks: everything a run writes or reports goes through one of these.

A sink is told when the batch begins (with its :class:`~jaxrun.plan.job.Jobs`, which a large batch's
plan is still adding to: ``jobs.total`` is None until it is complete), when a job starts (with
the total, or None while it is not known), when a benchmark run of it ends (``on_progress``, so a crash
of jaxrun loses at most one run), when the job's result is final (``on_result``), and when the
batch ends (``on_end``, also after Ctrl-C, with ``metadata.complete`` false). ``on_result`` returns
the result, possibly annotated (the history sink adds its regression check); the sinks of a batch
are called in order, each seeing what the previous one returned. docs/ARCHITECTURE.md says how to
add one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol, Sequence

if TYPE_CHECKING:
    from jaxrun.plan.job import Job, Jobs
    from jaxrun.results.models import BatchResult, ScriptResult


class Sink(Protocol):
    def on_begin(self, jobs: "Jobs") -> None: ...

    def on_start(self, job: "Job", total: int | None) -> None: ...

    def on_progress(self, job: "Job", result: "ScriptResult") -> None: ...

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult": ...

    def on_end(self, batch: "BatchResult") -> None: ...


class BaseSink:
    """A sink that does nothing; subclasses override what they need."""

    def on_begin(self, jobs: "Jobs") -> None:
        pass

    def on_start(self, job: "Job", total: int | None) -> None:
        pass

    def on_progress(self, job: "Job", result: "ScriptResult") -> None:
        pass

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        return result

    def on_end(self, batch: "BatchResult") -> None:
        pass


NO_SINK: Sink = BaseSink()


class Sinks(BaseSink):
    """Several sinks in order, as one. A file one of them cannot write (a full disk:
    :class:`~jaxrun.errors.ResultsWriteError`) does not keep the others from the event: each is
    told, then the first such error is raised (the batch stops there: batch/pipeline.py)."""

    def __init__(self, sinks: Sequence[Sink]) -> None:
        self.sinks = list(sinks)

    def on_begin(self, jobs: "Jobs") -> None:
        self._each(lambda sink: sink.on_begin(jobs))

    def on_start(self, job: "Job", total: int | None) -> None:
        self._each(lambda sink: sink.on_start(job, total))

    def on_progress(self, job: "Job", result: "ScriptResult") -> None:
        self._each(lambda sink: sink.on_progress(job, result))

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        from jaxrun.errors import ResultsWriteError

        first: ResultsWriteError | None = None
        for sink in self.sinks:
            try:
                result = sink.on_result(job, result)
            except ResultsWriteError as exc:
                first = first or exc
        if first is not None:
            raise first
        return result

    def on_end(self, batch: "BatchResult") -> None:
        self._each(lambda sink: sink.on_end(batch))

    def _each(self, call: Callable[[Sink], None]) -> None:
        from jaxrun.errors import ResultsWriteError

        first: ResultsWriteError | None = None
        for sink in self.sinks:
            try:
                call(sink)
            except ResultsWriteError as exc:
                first = first or exc
        if first is not None:
            raise first


class Later(BaseSink):
    """A sink made when first needed: by :meth:`build` (a batch calls it once its first script's
    process has started: what it imports and builds then overlaps the script instead of delaying
    it), or by the first event that must be answered now (a benchmark run's result, a result, the
    end). The events it was told before (the batch's begin, jobs' starts) are told to it then, in
    their order."""

    def __init__(self, make: Callable[[], Sink]) -> None:
        import threading

        self._make: Callable[[], Sink] | None = make
        self._sink: Sink | None = None
        self._told: list[tuple[str, tuple[object, ...]]] = []
        self._lock = threading.Lock()

    def build(self) -> Sink:
        with self._lock:  # held while it is made: an event from another thread waits for it
            if self._sink is None:
                assert self._make is not None
                sink = self._make()
                for name, args in self._told:
                    getattr(sink, name)(*args)
                self._sink, self._told, self._make = sink, [], None
            return self._sink

    def _tell(self, name: str, *args: object) -> None:
        with self._lock:
            if self._sink is None:
                self._told.append((name, args))
                return
        getattr(self._sink, name)(*args)

    def on_begin(self, jobs: "Jobs") -> None:
        self._tell("on_begin", jobs)

    def on_start(self, job: "Job", total: int | None) -> None:
        self._tell("on_start", job, total)

    def on_progress(self, job: "Job", result: "ScriptResult") -> None:
        self.build().on_progress(job, result)

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        return self.build().on_result(job, result)

    def on_end(self, batch: "BatchResult") -> None:
        self.build().on_end(batch)
