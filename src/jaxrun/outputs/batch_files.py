"""The files of a results folder that describe the whole batch (docs/ARCHITECTURE.md, "Results folder"):
``jax_device_info.json`` once, and ``jax_execution_results.json``, ``jax_performance_metrics.json``
and, when benchmarking, ``jax_benchmark_results.json`` (atomically), so a batch cut off by a crash
or Ctrl-C still leaves valid files (``metadata.complete`` says whether it ended).

Each of these files holds every result so far, so rewriting them after every script would cost the
square of the batch's size (10,000 scripts: about 45 minutes). They are rewritten after a script
unless the rewrites would then take more than ``MAX_WRITE_SHARE`` of the batch's time, and then as
soon as that share allows (in practice: after every script of ordinary batches, every few hundred of
a flood of short ones), and always at the start (:meth:`BatchFilesSink.begin`, which the batch has
done while the first script runs: run/process/process_pool.py ``when_started``) and at the end (and
on Ctrl-C). Every script's own result file is written when it finishes, so a batch killed outright
loses nothing: :func:`jaxrun.results.batch_summary.with_unlisted_results` adds those files to a
batch file that lags behind (compare, report and --resume read through it).

Only the last rewrite is made durable (fsync). The ones before it survive a crash of jaxrun
without; a crash of the machine may cost the newest of them, as it may the newest script files
(written the same way), and --resume rebuilds the batch from what survived. An fsync waits while the file system's journal writes out every
other process's data too: 45 ms on an idle test machine for a first version listing no result
(1.6 ms of CPU), more under load; counted in the rewrite's cost, it held the next rewrite back
seconds, so that the second script of a batch did not find the first in these files.

A full disk must not cost a result that finished: the batch keeps room for its last rewrite of
these files, ``.jaxrun.reserve`` (allocated at the start, grown with the batch, removed at its
end). When a write fails, :meth:`BatchFilesSink.release` frees that room, no more per-script files
are written, and the last rewrite lists every result the batch holds (those whose own file could
not be written included: plan/sink.py tells every sink), so --resume runs again only what did
not finish.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from jaxrun.core.timestamps import now_iso
from jaxrun.core.version import __version__
from jaxrun.outputs.script_files import UNWRITTEN, ScriptFileSink
from jaxrun.plan.sink import BaseSink
from jaxrun.results import result_files
from jaxrun.results.batch_summary import (
    assemble_batch,
    figures_of,
    latest_by_name,
    performance_metrics_head,
    script_metrics,
)
from jaxrun.results.held_results import HeldList, HeldResults
from jaxrun.results.models import (
    BatchMetadata,
    BatchResult,
    BenchmarkResults,
    DeviceInfo,
    ScriptResult,
)

if TYPE_CHECKING:
    from jaxrun.config.options import BatchOptions
    from jaxrun.outputs.declarations import OutputContext
    from jaxrun.plan.job import Job


logger = logging.getLogger("jaxrun")

# The room kept for the last rewrite: twice the bytes of the results it will hold (the batch file
# and its temporary copy side by side, the results that finish meanwhile), plus this.
_RESERVE_MARGIN = 64 * 1024
_RESULT_BYTES_GUESS = 8 * 1024  # a result's text before any is known (a few KiB each)
_SCRIPTS_GUESS = 100  # results the reserve counts on while the plan has not counted them all

# The most of a batch's time the rewrites of the batch files may take: after a rewrite that took
# w seconds (_own_clock), the next waits w / MAX_WRITE_SHARE.
# 2%: at 1,000 tiny scripts a share of 5% was ~3 ms of jaxrun's CPU a script (its budget: 10 ms,
# benchmarks/README.md).
MAX_WRITE_SHARE = 0.02


def _own_clock() -> float:
    """Seconds on a clock that stands still while this thread waits for a core (its run-queue
    wait, from Linux's ``/proc/thread-self/schedstat``): a rewrite's cost is what it takes to do,
    the file system's time included, not how long other processes kept it from a core (on a loaded
    machine a rewrite of 20 ms took 1 s of wall time, and the files then lagged 50 s behind the
    results). The monotonic clock where the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as stat:
            waited = int(stat.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        waited = 0.0
    return time.monotonic() - waited


class BatchFilesSink(BaseSink):
    def __init__(
        self, meta: BatchMetadata, facts: DeviceInfo | None, options: "BatchOptions", *,
        texts: ScriptFileSink | None = None, expected: "Callable[[], int | None]" = lambda: None,
    ) -> None:
        """``options``: the batch's (its benchmark runs and devices); ``texts``: the sink before this one that wrote each result's own file, whose text of
        the result this one holds (else it serializes the result itself); ``expected``: how many
        results the batch will hold (None while unknown), for the room kept for them."""
        self.results_dir = Path(meta.results_dir)
        self.meta, self.facts = meta, facts
        run = options.run
        self.benchmark_runs, self.warmup_runs, self.devices = run.benchmark_runs, run.warmup_runs, list(options.device)
        # Every result so far, a few hundred bytes each (results/held_results.py), as this sink is given it:
        # a sink after this one that changes a result returns the changed one (plan/sink.py).
        self._held = HeldResults()
        self._texts = texts
        self._last_write = 0.0  # time.monotonic() when the last rewrite ended
        self._write_seconds = 0.0  # what the last rewrite cost (_own_clock)
        self._begun = False
        # Held by the first version, each rewrite and the deferred one (another thread's: _catch_up).
        self._lock = threading.RLock()
        self._catch_up: threading.Timer | None = None  # the rewrite a result not yet written waits for
        self._written = 0  # results the last rewrite listed
        self._stopped = False  # the last rewrite has begun, or the batch stops: no deferred one
        self._expected = expected
        self._text_bytes = 0  # of the results held so far
        self._reserved = 0  # bytes of .jaxrun.reserve
        self._released = False

    def begin(self) -> None:
        """Write the files' first version (no results yet), once: whoever gets here first, the
        first script's start or the first result, does it."""
        with self._lock:
            if self._begun:
                return
            self._reserve()
            if self.facts is not None:
                result_files.write_model(self.results_dir / result_files.DEVICE_INFO, self.facts)
            self._write(self.batch(complete=False))
            self._begun = True

    def on_result(self, job: "Job", result: ScriptResult) -> ScriptResult:
        # First: held even when the files cannot be written.
        text = self._texts.text_of(result) if self._texts is not None else UNWRITTEN
        with self._lock:
            if text is UNWRITTEN:
                self._held.add(job.index, result)
            else:
                self._held.add(job.index, result, text)  # type: ignore[arg-type]
            self._text_bytes += len(text) if isinstance(text, str) else _RESULT_BYTES_GUESS
            self.begin()
            self._rewrite_when_due()
        return result

    def on_end(self, batch: BatchResult) -> None:
        self.begin()  # jax_device_info.json, when no script ever started
        with self._lock:
            self._stop_catching_up()  # no rewrite after the last
            self._write(batch, durable=True)
        self.release()

    def _rewrite_when_due(self) -> None:
        """Rewrite the files now if the spacing allows, else once it does: a result that came too
        soon after the last rewrite is not left out of them until the next one comes, which may
        be a long script later (it came a few ms after a first version written late, under load)."""
        due = self._last_write + self._write_seconds / MAX_WRITE_SHARE
        if time.monotonic() >= due:
            since = _own_clock()
            self._write(self.batch(complete=False), since=since)  # assembling it is part of its cost
            self._reserve()
        elif self._catch_up is None and not self._stopped:
            self._catch_up = threading.Timer(due - time.monotonic(), self._caught_up)
            self._catch_up.daemon = True
            self._catch_up.name = "jaxrun-batch-files"
            self._catch_up.start()

    def _caught_up(self) -> None:
        with self._lock:
            self._catch_up = None
            if self._stopped or len(self._held) == self._written:
                return
            try:
                self._rewrite_when_due()
            except Exception as exc:  # noqa: BLE001 - the script files hold the results; the last rewrite says it
                logger.info("could not rewrite the batch files: %s", exc)

    def _stop_catching_up(self) -> None:
        with self._lock:
            self._stopped = True
            if self._catch_up is not None:
                self._catch_up.cancel()
                self._catch_up = None

    # -- the room kept for the last rewrite ---------------------------------------------------------

    def _reserve(self) -> None:
        """Grow ``.jaxrun.reserve`` to the room the last rewrite will need (by a quarter at least,
        so that it is seldom touched). Best effort: a disk that has no room for it now is one
        whose next write fails anyway, and stops the batch."""
        if self._released:
            return
        held = len(self._held)
        per_result = self._text_bytes / held if held else _RESULT_BYTES_GUESS
        results = max(self._expected() or held + _SCRIPTS_GUESS, held)
        need = int(2 * per_result * results) + _RESERVE_MARGIN
        if need <= self._reserved:
            return
        need = max(need, self._reserved + self._reserved // 4)
        try:
            fd = os.open(self.results_dir / result_files.RESERVE, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                os.posix_fallocate(fd, 0, need)
            finally:
                os.close(fd)
            self._reserved = need
        except OSError as exc:
            logger.info("could not keep %d bytes for the batch files' last rewrite: %s", need, exc)

    def release(self) -> None:
        """Free the room kept for the last rewrite (and write no more per-script files): the batch
        stops, or has ended."""
        self._released = True
        self._stop_catching_up()
        if self._texts is not None:
            self._texts.stop()
        try:
            os.unlink(self.results_dir / result_files.RESERVE)
        except FileNotFoundError:
            pass
        except OSError as exc:
            logger.info("could not remove %s: %s", self.results_dir / result_files.RESERVE, exc)

    @property
    def reported(self) -> set[int]:
        """The indices of the jobs whose result is in."""
        with self._lock:
            return self._held.indices()

    def batch(self, complete: bool) -> BatchResult:
        """The batch as it stands: every result so far, in batch order (read back on use:
        ``script_results`` is a :class:`~jaxrun.results.held_results.HeldList`)."""
        with self._lock:
            results = self._held.results()
        benchmarking = None
        if self.benchmark_runs:
            from jaxrun.judge.benchmark_runs import (
                benchmarking_section,  # numpy: only when the batch benchmarks
            )

            benchmarking = benchmarking_section(list(results.benchmarks()), self.benchmark_runs, self.warmup_runs,
                                                self.devices)
        return assemble_batch(self.meta, self.facts, results, complete=complete, benchmarking=benchmarking,
                              figures=results.figures())

    def _write(self, batch: BatchResult, since: float | None = None, durable: bool = False) -> None:
        started = _own_clock() if since is None else since
        self._write_files(batch, durable)
        self._written = len(batch.script_results)
        self._last_write = time.monotonic()
        self._write_seconds = _own_clock() - started

    def _write_files(self, batch: BatchResult, durable: bool) -> None:
        out = self.results_dir
        if batch.benchmarking.enabled:
            result_files.write_model(
                out / result_files.BENCHMARK_RESULTS,
                BenchmarkResults(
                    generated_at=now_iso(), host=self.meta.host, jaxrun_version=__version__,
                    jax_version=self.meta.jax_version, search_paths=self.meta.search_paths, **dict(batch.benchmarking),
                ),
                durable=durable,
            )
        # Both written one result at a time (the same bytes as dumping them whole): dumped whole,
        # the text was held twice at every rewrite, ~7 MB at 1,000 results besides the
        # serializer's own buffer (the peak RSS a result has a budget: benchmarks/README.md); one
        # result at a time, ~0.3 MB. Held results are written as the texts and figures they are
        # held as, never read back.
        results = batch.script_results
        if isinstance(results, HeldList):
            items: Iterable[ScriptResult | str] = results.texts()
            figures = results.figures()
        else:
            items, figures = results, [figures_of(r) for r in results]
        result_files.write_model_chunks(out / result_files.EXECUTION_RESULTS,
                                       batch.model_copy(update={"script_results": []}), "script_results", items,
                                       durable=durable)
        result_files.write_model_chunks(
            out / result_files.PERFORMANCE_METRICS, performance_metrics_head(figures, batch.performance_summary),
            "scripts", ((name, script_metrics(f)) for name, f in latest_by_name(figures)), durable=durable)


def for_batch(context: "OutputContext") -> BatchFilesSink:
    """The batch files of the batch's metadata (made by the batch first); each result held as the
    text its own file was written with (the script files' sink, made before this one)."""
    assert context.meta is not None
    texts = context.built.get("script_files")
    return BatchFilesSink(context.meta, context.facts, context.options,
                          texts=texts if isinstance(texts, ScriptFileSink) else None, expected=context.expected)
