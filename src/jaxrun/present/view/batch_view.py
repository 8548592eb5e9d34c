"""The view of a batch: one object computed from a batch (a results folder) and, when given, a
baseline batch, that every surface renders: the terminal summary and closing line, the progress
lines, Markdown, the HTML report and the MCP replies. What a figure is, which verdict a script
got and why the batch's exit status is what it is are decided here, once."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import msgspec

from jaxrun.core.defaults import HISTORY_NOT_USED
from jaxrun.core.formatting import fmt, listed, plural
from jaxrun.core.paths import is_history_url
from jaxrun.present.view.script_rows import (
    ScriptView,
    on_several_devices,
    relative_path,
    script_view,
)
from jaxrun.present.view.sweep_view import SweepView, sweep_views
from jaxrun.results.batch_summary import slowest_first

if TYPE_CHECKING:
    from jaxrun.results.models import BatchResult, ComparisonReport, ScriptResult

EXIT_OK, EXIT_FAILED = 0, 1
SLOWEST_SHOWN = 3  # scripts the terminal's "slowest:" line names; the rest are counted


class Skipped(msgspec.Struct, frozen=True):
    label: str
    reason: str
    origin: Optional[str]


class BatchView(msgspec.Struct, frozen=True):
    scripts: list[ScriptView]
    results_dir: str
    complete: bool
    device_requested: str
    device_used: Optional[str]
    executed: int
    succeeded: int
    failed: int
    xfailed: int
    xpassed: int
    kept: int
    skipped: list[Skipped]
    total_time: Optional[float]  # seconds of every process run (a benchmark's runs all counted)
    largest_memory: Optional[float]  # MiB (2^20 bytes)
    exit_status: int
    exit_reasons: list[str]  # why the exit status is 1, one line each
    notes: list[str] = msgspec.field(default_factory=list)  # said once, under the table
    unreadable: list[str] = msgspec.field(default_factory=list)
    # Every script with a time, the slowest first: the ranking of performance_summary's
    # slowest_script / fastest_script (summary.slowest_first), failed and kept scripts included.
    slowest: list[ScriptView] = msgspec.field(default_factory=list)
    sweeps: list[SweepView] = msgspec.field(default_factory=list)  # one per script run as a parameter sweep

    @property
    def counts(self) -> str:
        """``3/4 succeeded, 1 failed as expected (xfail), 2 kept from the earlier run, 1 skipped``."""
        parts = [f"{self.succeeded}/{self.executed} succeeded"]
        parts += [text for n, text in (
            (self.xfailed, f"{self.xfailed} failed as expected (xfail)"),
            (self.xpassed, f"{self.xpassed} passed unexpectedly (xfail)"),
            (self.kept, f"{self.kept} kept from the earlier run"),
            (len(self.skipped), f"{len(self.skipped)} skipped"),
        ) if n]
        return ", ".join(parts)

    @property
    def heading(self) -> str:
        """The title of a report: the counts, the state, and the exit status with its reason."""
        state = "" if self.complete else " (interrupted before the end)"
        head = f"{self.succeeded}/{plural(self.executed, 'script')} succeeded{state}"
        if self.exit_status:
            head += " — exit 1: " + "; ".join(self.exit_reasons)
        return head

    @property
    def closing(self) -> str:
        """The terminal's last line."""
        line = f"{self.counts}; results in {self.results_dir}"
        if self.exit_status:
            line += " — exit 1: " + "; ".join(self.exit_reasons)
        return line

    @property
    def slowest_line(self) -> Optional[str]:
        """``slowest: slow.py 10.12 s (timeout), s2.py 5.53 s (kept), s4.py 5.49 s and 4 more``:
        where the time went, each time as the table's "time s" column writes it; None for a run
        of fewer than two timed scripts."""
        if len(self.slowest) < 2:
            return None
        def said(s: ScriptView) -> str:
            marks = [m for m in (None if s.status == "ok" else s.status_text, "kept" if s.kept else None) if m]
            return f"{s.label} {fmt(s.time)} s" + (f" ({', '.join(marks)})" if marks else "")
        return "slowest: " + listed([said(s) for s in self.slowest], SLOWEST_SHOWN)

    @property
    def attention(self) -> list[ScriptView]:
        """What a reader must look at first: failures, unexpected passes and regressions."""
        return [s for s in self.scripts if s.status in ("failed", "xpassed") or s.regression]

    def timing_note(self) -> tuple[str, Optional[str]]:
        """(the mark after a median in a table, the line that says what every row's figures are):
        a run whose every row is a median says it once; otherwise the medians are marked and the
        line says what the other rows hold (one run's figures: a failed benchmark's are those of
        the run that failed, which is where it stopped)."""
        timings = sorted({s.timing for s in self.scripts if s.timing})
        if not timings:
            return "", None
        if all(s.timing for s in self.scripts):
            return "", "times: " + "; ".join(timings)
        failed = any(not s.timing and s.status in ("failed", "xfailed") for s in self.scripts)
        others = "unmarked: one run's figures" + (" (a failed script's: the run that failed)" if failed else "")
        return " *", "* " + "; ".join(timings) + "; " + others


def view_batch(batch: "BatchResult", comparison: "ComparisonReport | None" = None) -> BatchView:
    """The view of ``batch``; ``comparison`` (``compare_results(baseline, batch)``) puts the
    verdicts against that baseline in place of the history's."""
    meta = batch.metadata
    judged = {}
    if comparison is not None:
        judged = {(c.script_name, c.device): c for c in comparison.scripts}
    # One pass over the results (a running batch's are read back one at a time: results/held_results.py).
    scripts = []
    names: list[str] = []
    succeeded = 0
    ran = _HowTheyRan()
    for r in batch.script_results:
        against = judged.get((r.script_name, r.device_used)) or judged.get((r.script_name, r.device_requested)) \
            if comparison is not None else None
        scripts.append(script_view(r, meta.search_paths, kept=r.kept, comparison=against))
        names.append(r.script_name)  # a sweep's points are one script under several names
        succeeded += r.success
        ran.add(r)
    runs_of = Counter(names)
    if len(runs_of) < len(names):
        # A script run on several devices is one row per device: only then does its label say which.
        scripts = [on_several_devices(s) if runs_of[name] > 1 else s for s, name in zip(scripts, names)]
    del names, runs_of
    # Skipped scripts never ran; their label is their path, as the table's.
    skipped = [Skipped(relative_path(s.script_path, meta.search_paths) if s.script_path else s.script_name,
                       s.reason, s.origin) for s in meta.skipped]
    reasons, notes = _exit(batch, scripts, comparison)
    notes += [note for note in (ran.slurm_note(), ran.start_note()) if note]
    memory = [s.memory for s in scripts if s.memory is not None]
    return BatchView(
        scripts=scripts, results_dir=meta.results_dir, complete=meta.complete,
        device_requested=meta.device_requested, device_used=meta.device_used,
        executed=len(scripts), succeeded=succeeded,  # as the result files count
        failed=sum(s.status == "failed" for s in scripts),
        xfailed=sum(s.status == "xfailed" for s in scripts), xpassed=sum(s.status == "xpassed" for s in scripts),
        kept=sum(s.kept for s in scripts), skipped=skipped,
        total_time=batch.performance_summary.total_execution_time, largest_memory=max(memory) if memory else None,
        exit_status=EXIT_FAILED if reasons else EXIT_OK, exit_reasons=reasons, notes=notes,
        unreadable=list(meta.unreadable_paths),
        slowest=slowest_first(scripts, lambda s: s.time),
        sweeps=sweep_views(batch),
    )


def _exit(batch: "BatchResult", scripts: list[ScriptView],
          comparison: "ComparisonReport | None") -> tuple[list[str], list[str]]:
    """Why the run exits 1 (nothing: it exits 0), and what is said without failing it. Against a
    comparison whose command was given --fail-on-regression (jaxrun ab's folder), its regressions
    fail it as they failed the command (compare.exit_reasons)."""
    meta = batch.metadata
    baseline = comparison is not None
    reasons: list[str] = []
    notes: list[str] = []
    failed = [s.label for s in scripts if s.status == "failed"]
    if failed:
        reasons.append(f"{plural(len(failed), 'script')} failed ({', '.join(failed)})")
    xpassed = [s.label for s in scripts if s.status == "xpassed"]
    if xpassed and meta.strict_xfail:
        reasons.append(f"{plural(len(xpassed), 'script')} marked xfail passed, with strict_xfail ({', '.join(xpassed)})")
    if not meta.complete:
        reasons.append("the batch did not finish")
    slower = [s.label for s in scripts if s.regression]
    if comparison is not None and comparison.fail_on_regression:
        from jaxrun.judge.compare import exit_reasons

        reasons += exit_reasons(comparison)
    elif slower:
        against = "the baseline" if baseline else "its history"
        if meta.fail_on_regression and not baseline:
            reasons.append(f"slower than {against} ({', '.join(slower)}), with --fail-on-regression")
        else:
            notes.append(f"slower than {against}: {', '.join(slower)} (reported; the exit status does not count it"
                         + ("" if baseline else " without --fail-on-regression") + ")")
    if meta.history_problem and meta.history_problem.startswith(HISTORY_NOT_USED):
        notes.append(f"history {meta.history_problem}")  # it could not be opened: nothing is damaged
    elif meta.history_problem and is_history_url(meta.history_problem):
        notes.append(f"history server lost ({meta.history_problem}): "
                     + (f"{plural(meta.history_unwritten, 'benchmarked script')} not written to it; run the batch "
                        "again with --resume, once the server answers, to write them" if meta.history_unwritten
                        else "every benchmark was written to it once the server answered again"))
    elif meta.history_problem:
        notes.append(f"history unreadable ({meta.history_problem}): "
                     + (f"{plural(meta.history_unwritten, 'benchmarked script')} not written to it"
                        if meta.history_unwritten else "the benchmarks were not all recorded or judged")
                     + "; `jaxrun history --check` says what is damaged, `jaxrun history --repair` saves what can be "
                     "read" + (", then --resume writes them" if meta.history_unwritten else ""))
    if meta.compile_cache_warning:
        notes.append(meta.compile_cache_warning)
    return reasons, notes


class _HowTheyRan:
    """What the notes say of how the scripts ran, gathered in the view's one pass over the results
    (a batch's held results are read back one at a time, never all at once)."""

    def __init__(self) -> None:
        self.tasks = 0  # --backend slurm: tasks, their arrays, their waits in the queue
        self.arrays: set[str] = set()
        self.waits: list[float] = []
        self.with_jax = 0  # --prestart: scripts forked with jax imported, and what importing it took
        self.import_time: float | None = None
        self.fell_back: dict[str, list[str]] = {}  # why a fork asked for became an exec -> the scripts

    def add(self, r: "ScriptResult") -> None:
        if r.kept:
            return
        if r.slurm_job_id:
            self.tasks += 1
            self.arrays.add(r.slurm_job_id.partition("_")[0])
            if r.queue_wait is not None:
                self.waits.append(r.queue_wait)
        if r.start_mode == "fork+jax":
            self.with_jax += 1
            if self.import_time is None:
                self.import_time = r.prestart_import_time
        elif r.start_mode == "exec" and r.prestart_reason and "--prestart auto" not in r.prestart_reason:
            self.fell_back.setdefault(r.prestart_reason, []).append(r.script_name)

    def start_note(self) -> str | None:
        """How the scripts' processes started (--prestart), said once: where jax was imported ahead
        (fork+jax) or a fork that was asked for became an exec, and why. A plain batch's forks, the
        default, go unsaid."""
        parts = []
        if self.with_jax:
            seconds = self.import_time
            once = f"; jax imported once, {seconds:.2f} s, in no script's figures" if seconds is not None else ""
            parts.append(f"{plural(self.with_jax, 'script')} forked with jax imported (fork+jax{once})")
        if self.fell_back:
            said = listed((f"{listed(names, 3)}: {why}" for why, names in self.fell_back.items()), 3, "; ",
                          what="other reasons")
            count = sum(len(names) for names in self.fell_back.values())
            parts.append(f"{plural(count, 'script')} exec'd instead ({said})")
        return "started: " + ", ".join(parts) if parts else None

    def slurm_note(self) -> str | None:
        """--backend slurm: the tasks and arrays that ran the scripts, and how long they waited in the
        queue (queue_wait, which no script's time includes)."""
        if not self.tasks:
            return None
        arrays = sorted(self.arrays, key=lambda a: (len(a), a))
        waits = sorted(self.waits)
        line = (f"Slurm: {plural(self.tasks, 'task')} in {plural(len(arrays), 'job array')} "
                f"({listed(arrays, 5)})")
        if waits:
            line += (f"; waited in the queue {fmt(statistics.median(waits), 1)} s (median), "
                     f"{fmt(waits[-1], 1)} s at most (queue_wait, not part of any script's time)")
        return line


def read_batch(results_dir: Path) -> "BatchResult":
    """The run in ``results_dir`` as its files hold it (with the scripts a cut-off batch has only
    in their own files). Raises UsageError when the folder holds no readable run."""
    from jaxrun.errors import UsageError
    from jaxrun.results import result_files
    from jaxrun.results.batch_summary import with_unlisted_results
    from jaxrun.results.models import BatchResult

    source = result_files.existing_folder(results_dir) / result_files.EXECUTION_RESULTS
    try:
        return with_unlisted_results(result_files.read_model(source, BatchResult), Path(results_dir))
    except FileNotFoundError:
        raise UsageError(f"no jaxrun results in {str(results_dir)!r} ({result_files.EXECUTION_RESULTS} is missing); "
                         "pass a folder `jaxrun run` wrote") from None
    except OSError as exc:
        raise UsageError(f"cannot read {str(source)!r} ({type(exc).__name__}: {exc.strerror or exc})") from None
    # A damaged file: result_files.DamagedFileError, a UsageError whose one line says where.


def read_batch_view(results_dir: Path, baseline: Optional[Path] = None) -> BatchView:
    """The view of the batch in ``results_dir`` (against ``baseline``, another results folder, when
    given). Raises UsageError when the folder holds no readable batch."""
    comparison = None
    if baseline is not None:
        from jaxrun.judge.compare import compare_results

        comparison = compare_results(baseline, results_dir)
    return view_batch(read_batch(results_dir), comparison)


# The old names (a batch's view was called a run's), kept for code that imported them.
RunView = BatchView
run_view = view_batch
read_run_view = read_batch_view
