"""Where the history's series changed level (``jaxrun history --changes``): each script's runs of
one device, machine (its fingerprint, results/machine.py; a host where unknown), mode and
numerics, in the order they were recorded, one point a run (the
median of its counted successful samples of the metric), cut by judge/change_points.py. Each
change names the last run before it and the first after, with their commits.

A series of a few noisy runs cannot prove a small step: each series says its noise and the
smallest step the change points would find in it, and what the lower bar (``CANDIDATE_ALPHA``)
finds beyond the changes is listed as a candidate, for a duet of its commits to decide
(``--confirm``, ab/confirm.py)."""

from __future__ import annotations

import os
import statistics
from typing import NamedTuple, Protocol

from jaxrun.judge.change_points import (
    ALPHA,
    CANDIDATE_ALPHA,
    CONFIDENCE,
    MIN_SEGMENT,
    ChangePoint,
    change_points,
    noise,
    smallest_step,
)
from jaxrun.results.models import HistoryRun, RunMark, SeriesChange, SeriesSummary


class RunsOf(Protocol):
    """What is read of a history: judge/history.py's ``HistoryStore`` is one (and calls
    :func:`history_changes` with itself)."""

    def runs(self, script: str | os.PathLike[str] | None = None) -> list[HistoryRun]: ...


class HistorySeries(NamedTuple):
    """One series: its runs in the order they were recorded (those with the metric), each run's
    point (the median of its counted successful samples), where the level changed (candidates
    among them), and what its noise lets the change points see."""

    runs: list[HistoryRun]
    points: list[float]
    changes: list[SeriesChange]
    summary: SeriesSummary


def history_series(store: RunsOf, script: str | os.PathLike[str] | None = None, *, metric: str = "run_time",
                   since: str | None = None, alpha: float = ALPHA, candidate_alpha: float = CANDIDATE_ALPHA,
                   confidence: float = CONFIDENCE) -> list[HistorySeries]:
    """Every series of ``script`` (every script when None) in ``store``, by script, then the order
    each began, with its change points: those at ``alpha``, and the candidates found only at the
    lower bar ``candidate_alpha``; ``since``: only runs recorded at or after it (an ISO date or
    time, compared as the history writes them)."""
    from jaxrun.core.validate import validate_since
    from jaxrun.judge.benchmark_runs import metric_values
    from jaxrun.results.benchmark_result import resolve_metric

    metric = resolve_metric(metric)
    since = None if since is None else validate_since(since, "since")
    found: list[HistorySeries] = []
    for series in _series(store.runs(script), since):
        kept = [(run, statistics.median(values)) for run in series if (values := metric_values(run.samples, metric))]
        if not kept:
            continue
        runs, points = [run for run, _ in kept], [value for _, value in kept]
        cuts = change_points(points, alpha=alpha, confidence=confidence)
        proven = {cut.index for cut in cuts}
        if candidate_alpha > alpha:
            # The lower bar's segments are its own: a candidate is a cut there that is not one at alpha.
            cuts += [c for c in change_points(points, alpha=candidate_alpha, confidence=confidence)
                     if all(abs(c.index - at) >= MIN_SEGMENT for at in proven)]
        changes = [_change(runs, points, metric, cut, confidence, candidate=cut.index not in proven)
                   for cut in sorted(cuts, key=lambda c: c.index)]
        spread = noise(points)
        last = runs[-1]
        summary = SeriesSummary(
            script_path=last.script_path, script_name=last.script_name, metric=metric, device=last.device_used,
            host=last.host, machine_id=last.machine_id, mode=last.mode, runs=len(points), noise=spread,
            smallest_step=smallest_step(len(points), spread, alpha=alpha),
            changes=sum(not c.candidate for c in changes), candidates=sum(c.candidate for c in changes))
        found.append(HistorySeries(runs, points, changes, summary))
    return found


def _change(runs: list[HistoryRun], points: list[float], metric: str, cut: ChangePoint, confidence: float,
            candidate: bool) -> SeriesChange:
    before, after = runs[cut.index - 1], runs[cut.index]
    return SeriesChange(
        script_path=after.script_path, script_name=after.script_name, metric=metric, device=after.device_used,
        host=after.host, machine_id=after.machine_id, mode=after.mode, last_before=_mark(before), first_after=_mark(after),
        before=cut.before, after=cut.after, change=cut.change, change_low=cut.change_low, change_high=cut.change_high,
        confidence=confidence, p_value=cut.p_value, runs_before=cut.points_before, runs_after=cut.points_after,
        runs_since=len(points) - cut.index, candidate=candidate)


def history_changes(store: RunsOf, script: str | os.PathLike[str] | None = None, *, metric: str = "run_time",
                    since: str | None = None, alpha: float = ALPHA, confidence: float = CONFIDENCE) -> list[SeriesChange]:
    """The change points at ``alpha`` of every series of ``script`` (every script when None) in
    ``store``, by script, then series, then place (:func:`history_series`'s, without the runs and
    the candidates)."""
    return [change for series in history_series(store, script, metric=metric, since=since, alpha=alpha,
                                                candidate_alpha=alpha, confidence=confidence)
            for change in series.changes]


def _series(runs: list[HistoryRun], since: str | None) -> list[list[HistoryRun]]:
    """``runs`` (oldest first) split into series of comparable runs, in the order each began."""
    groups: dict[tuple[object, ...], list[HistoryRun]] = {}
    for run in runs:
        if since is not None and run.recorded_at < since:
            continue
        numerics = None if run.numerics is None else run.numerics.model_dump_json()
        # One machine's runs (its fingerprint; runs recorded before jaxrun kept it: one host's).
        machine = ("machine", run.machine_id) if run.machine_id is not None else ("host", run.host)
        groups.setdefault((run.script_path, run.device_used, machine, run.mode, numerics), []).append(run)
    return list(groups.values())


def _mark(run: HistoryRun) -> RunMark:
    return RunMark(run_id=int(run.id or 0), recorded_at=run.recorded_at, git_commit=run.git_commit,
                   git_dirty=run.git_dirty)


def recent(change: SeriesChange, runs: int) -> bool:
    """Whether ``change`` is within the newest ``runs`` runs of its series (``--fail-on-change``)."""
    return change.runs_since <= runs
