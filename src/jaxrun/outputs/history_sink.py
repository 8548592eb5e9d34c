"""The history sink: stores each benchmarked result in the history database and annotates it with
the regression check against earlier comparable runs; stores what every run that used JAX compiled
(:mod:`jaxrun.judge.compile_history`) and, where a warm persistent cache compiled a program that an
earlier run of the same script (same host) loaded from it or wrote into it, says which ingredient of
the cache key changed (the program's ``cache_miss_reason`` and one warning). The history never costs a batch: once SQLite
cannot read or write it (a damaged page, an I/O error), the sink stops using it, says so once in the
batch's metadata (``history_problem``) and marks each later benchmark "not judged: history
unreadable (...)". A PostgreSQL server lost mid-batch is connected to again, and the benchmarks from
then on are written; those it missed are counted (``history_unwritten``) and ``--resume`` writes
them, each once under the key it was given when it was measured (``ScriptBenchmark.run_key``)."""

from __future__ import annotations

import socket
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

from jaxrun.core.defaults import HISTORY_NOT_USED
from jaxrun.core.formatting import listed
from jaxrun.core.paths import is_history_url
from jaxrun.core.timestamps import now_iso
from jaxrun.errors import UsageError
from jaxrun.judge.cache_misses import nearest_miss
from jaxrun.judge.compile_history import CachedBefore, CompileRun
from jaxrun.judge.history import HistoryStore, history_run_from_benchmark
from jaxrun.outputs.history_opener import benchmarks
from jaxrun.plan.sink import BaseSink
from jaxrun.probe.channel import valid_text
from jaxrun.results.machine import this_machine
from jaxrun.results.models import RegressionCheck

if TYPE_CHECKING:
    from jaxrun.config.options import BatchOptions
    from jaxrun.outputs.declarations import OutputContext
    from jaxrun.outputs.history_opener import HistoryOpener
    from jaxrun.plan.job import Job
    from jaxrun.results.models import (
        BatchMetadata,
        BatchResult,
        DeviceInfo,
        ScriptResult,
    )


MAX_NAMED = 3  # programs named in one cache-miss warning; the rest are counted


RECONNECT_SECONDS = 30.0  # a PostgreSQL server that did not answer is asked again after this, not at every result


class HistorySink(BaseSink):
    def __init__(self, store: HistoryStore | None, facts: "DeviceInfo | None", options: "BatchOptions | None" = None, *,
                 meta: "BatchMetadata | None" = None, problem: str | None = None) -> None:
        """``store``: None when it could not be opened, ``problem`` then says why. ``options``: the
        batch's: whether it judges against runs with other numerics, whether its runs start with
        an empty compilation cache (a script's own setting wins), and where its history is (a
        PostgreSQL server lost mid-batch is connected to again)."""
        self.store, self.facts, self.meta = store, facts, meta
        self.allow_mismatch = options.allow_mismatch if options is not None else False
        self.cold_cache = options.run.cold_cache if options is not None else False
        history = options.history if options is not None else None
        self.server = str(history) if history is not None and is_history_url(history) else None
        self.asked_at: float | None = None  # when the server was last asked for a connection, in vain
        self.problem: str | None = None
        if problem is not None:
            self._unreadable(problem)

    def _unreadable(self, problem: str) -> None:
        self.problem = problem
        if self.meta is not None:
            self.meta.history_problem = problem
        if self.store is not None:
            try:
                self.store.close()
            except sqlite3.Error:
                pass
            self.store = None

    def _reconnect(self) -> None:
        """A PostgreSQL history lost during the batch: connected to again (at most once every
        :data:`RECONNECT_SECONDS` while the server does not answer), so that the runs from then on
        are written; those measured while it was away are counted (``history_unwritten``) for
        ``--resume`` to write. An SQLite file that failed stays unused: it is damaged."""
        if self.store is not None or self.server is None:
            return
        if self.asked_at is not None and time.monotonic() - self.asked_at < RECONNECT_SECONDS:
            return
        try:
            self.store = HistoryStore(self.server)
        except (UsageError, sqlite3.Error):
            self.asked_at = time.monotonic()
            return
        self.problem, self.asked_at = None, None

    def _unwritten(self) -> None:
        if self.meta is not None:
            self.meta.history_unwritten += 1

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        result = self._benchmark(result)
        if used_jax(result) and not result.kept:  # a result --resume reuses was recorded when it ran
            cold = job.run_options.cold_cache if job.run_options is not None else self.cold_cache
            result = self._compiles(result, cold)
        return result

    def _compiles(self, result: "ScriptResult", cold: bool) -> "ScriptResult":
        """Record what the run compiled; explain each program a warm cache compiled though an
        earlier run of the script loaded it or wrote it there (a program compiled and loaded in one
        run only had a new variant: not a miss of the cache)."""
        self._reconnect()
        if self.store is None:
            return result
        environment = result.compile_environment
        warm = environment is not None and environment.cache_dir is not None and not cold
        look_back = [name for name, stats in result.compiles.items()
                     if stats.count > 0 and stats.cache_hits == 0] if warm else []
        bench = result.benchmark
        run = CompileRun(
            recorded_at=result.finished_at or now_iso(), script_name=result.script_name,
            script_path=valid_text(str(Path(result.script_path).expanduser().resolve())),
            content_hash=result.content_hash, host=result.node or socket.gethostname(),
            device_requested=result.device_requested, device_used=result.device_used, environment=environment,
            programs=result.compiles, history_run_id=bench.history_run_id if bench is not None else None,
        )
        try:
            _, before = self.store.record_compiles(run, look_back)
        except sqlite3.Error as exc:
            self._unreadable(f"{self.store.path}: {exc}")
            return result
        if not before:
            return result
        compiles = dict(result.compiles)
        said: dict[tuple[str, bool, str], list[str]] = {}  # (when, loaded, reason) -> programs: one warning each
        for name, earlier in before.items():
            nearest = nearest_miss(environment, compiles[name], earlier)
            if nearest is None:
                continue
            run, reason = nearest
            compiles[name] = compiles[name].model_copy(update={"cache_miss_reason": reason})
            said.setdefault((_when(run), run.loaded, reason), []).append(name)
        if not said:
            return result
        warnings = list(result.warnings)
        for (when, loaded, reason), names in said.items():
            names.sort(key=lambda name: compiles[name].source is None)  # the script's own programs first
            shown = listed(names, MAX_NAMED)
            verb, pronoun = ("was", "it") if len(names) == 1 else ("were", "them")
            how = f"loaded {pronoun} from" if loaded else f"wrote {pronoun} to"
            warnings.append(f"{shown} {verb} compiled though the run of {when} {how} the persistent cache: {reason}")
        return result.model_copy(update={"compiles": compiles, "warnings": warnings})

    def _benchmark(self, result: "ScriptResult") -> "ScriptResult":
        bench = result.benchmark
        if bench is None or not bench.runs_completed or bench.history_run_id is not None:
            return result  # nothing measured, or already recorded (a result --resume reuses)
        environment = result.compile_environment
        run = history_run_from_benchmark(
            bench,
            jax_version=self.facts.jax_version if self.facts else None,
            jaxlib_version=self.facts.jaxlib_version if self.facts else None,
            machine=this_machine(self.facts, environment.xla_flags if environment is not None else None),
            # A result --resume reuses is written when it ran, under the key it was given then.
            recorded_at=result.finished_at if result.kept else None,
        )
        bench = bench.model_copy(update={"run_key": run.run_key, "git_commit": run.git_commit,
                                         "git_dirty": run.git_dirty, "git_commit_time": run.git_commit_time})
        run_id = None
        self._reconnect()
        if self.store is not None:
            try:
                run_id = self.store.record(run)
                check = self.store.check_regression(run_id, allow_mismatch=self.allow_mismatch)
            except sqlite3.Error as exc:
                self._unreadable(f"{self.store.path}: {exc}")
        if run_id is None:
            self._unwritten()
        if self.problem is not None:
            check = RegressionCheck(
                script_path=run.script_path, device=run.device_used, host=run.host, gate=[], newest_run_id=run_id,
                previous_runs=0, judged=False, regression=False,
                reason=f"not judged: history unreadable ({self.problem})",
            )
        annotated = bench.model_copy(update={"history_run_id": run_id, "history_check": check})
        return result.model_copy(update={"benchmark": annotated})

    def on_end(self, batch: "BatchResult") -> None:
        if self.store is not None:
            self.store.close()


def used_jax(result: "ScriptResult") -> bool:
    """Whether a script's run used JAX (its compile environment was read, or it compiled)."""
    return result.compile_environment is not None or bool(result.compiles)


def _when(loaded: CachedBefore) -> str:
    """``2026-11-24 06:10:34`` from an ISO time."""
    return loaded.recorded_at[:19].replace("T", " ")


def _sink(opener: "HistoryOpener", context: "OutputContext", problem: str | None = None) -> HistorySink:
    options = context.options
    return HistorySink(opener.store, context.facts, options, meta=context.meta, problem=problem or opener.problem)


class HistoryWhenNeeded(BaseSink):
    """The history sink of a batch that may need one, opened at the first result that does: a
    script's own settings benchmark it, or it used JAX (what it compiled is kept); a batch of
    scripts that never use JAX never opens it. A history jaxrun cannot open for a run that only
    used JAX (a folder, a file that is no history, a folder it may not create) is one note in
    the batch's metadata, as an unreadable one; for a benchmark it is a usage error, as before."""

    def __init__(self, context: "OutputContext") -> None:
        self.context = context
        self.sink: HistorySink | None = None

    def on_result(self, job: "Job", result: "ScriptResult") -> "ScriptResult":
        if self.sink is None and (benchmarks(job) or used_jax(result)):
            opener = self.context.history
            problem = None
            try:
                opener.open(scripts_ran=True)
            except UsageError as exc:
                if benchmarks(job):
                    raise
                problem = f"{HISTORY_NOT_USED}: {exc}"
            self.sink = _sink(opener, self.context, problem)
        return self.sink.on_result(job, result) if self.sink is not None else result

    def on_end(self, batch: "BatchResult") -> None:
        if self.sink is not None:
            self.sink.on_end(batch)


def for_batch(context: "OutputContext") -> BaseSink:
    """The history of a batch that names one (``--history``): the store opened before anything ran
    (a benchmark), or opened at the first result that needs it."""
    opener = context.history
    if opener.store is None and opener.problem is None:
        return HistoryWhenNeeded(context)
    return _sink(opener, context)
