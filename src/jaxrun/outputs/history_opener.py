"""The batch's history database, opened once and closed once: before anything runs when the batch
benchmarks (a bad ``--history`` is a usage error, exit 2, nothing run), else at the first result
that needs it (outputs/history_sink.py), and closed however the batch ends."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jaxrun.errors import UsageError

if TYPE_CHECKING:
    from jaxrun.config.options import BatchOptions
    from jaxrun.judge.history import HistoryStore
    from jaxrun.plan.job import Job


def benchmarks(job: "Job") -> bool:
    """Whether a job's own settings benchmark it (its history is then opened before anything runs)."""
    return job.run_options is not None and bool(job.run_options.benchmark_runs)


class HistoryOpener:
    def __init__(self, options: "BatchOptions") -> None:
        self.options = options
        self.store: "HistoryStore | None" = None
        self.problem: str | None = None  # why SQLite could not use it (a damaged page): the batch goes on without

    def open(self, *, scripts_ran: bool = False) -> None:
        """A --history that is no history database (a folder, another file) is a UsageError; so
        is a damaged one while no script has run (checked with the rest, exit 2, nothing run).
        Once scripts ran (``scripts_ran``), a damaged history is a note and the batch goes on."""
        from jaxrun.judge.history import HistoryStore, HistoryUnreadable
        from jaxrun.judge.history_db import HistoryUnreachable

        if self.store is None and self.problem is None:
            try:
                self.store = HistoryStore(self.options.history)  # type: ignore[arg-type]
            except HistoryUnreadable as exc:
                if not scripts_ran:
                    raise UsageError(f"{exc} (or run with --no-history)") from None
                self.problem = exc.problem
            except HistoryUnreachable as exc:
                # A PostgreSQL server that cannot be reached once scripts ran: a note, as a damaged
                # file is (a path that is no database stays the caller's to say).
                if not scripts_ran:
                    raise
                self.problem = exc.problem

    def __enter__(self) -> "HistoryOpener":
        if self.options.run.benchmark_runs and self.options.history:
            self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.store is not None:
            self.store.close()  # the history sink may have closed it already: closing again is nothing
