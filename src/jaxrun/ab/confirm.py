"""``jaxrun history --changes --confirm``: each change point of the history re-run as pairs of its
two commits, and labelled confirmed or refuted.

A change point is found in runs recorded one after the other, sometimes days apart: a busier
machine, another kernel or a warmer room moves a series as surely as a commit does. The pairs of
a duet (ab/duet.py: both commits at once, on two halves of the machine) cancel what changed around
the runs, so they decide whether the code changed the metric:

* BASE is the script at the commit of the last run before the change, NEW at the commit of the
  first run after it, each in a temporary worktree (ab/checkouts.py), judged pair by pair on the
  change's metric (judge/paired.py) at the verdict options' alpha;
* **confirmed**: the pairs move the same way, at p < alpha and by at least the smallest effect
  (the verdict options' minimum effect, or half the change's size where that is smaller);
  **refuted**: the ratio's 95% CI shuts out a change of that effect that way; the pairs stop as
  soon as one of the two holds (after the least pairs the test needs), or at ``pairs``;
* both are kept in the history (a refuted change never alarms again, a confirmed one is not run
  again); **undecided** (not kept, tried again next time): nothing could be re-run (no commit, a
  dirty tree, one commit on both sides, another machine's series, a run that failed), or the
  pairs told neither way;
* ``bisect``: a confirmed slowdown whose commits are not neighbours is narrowed to the first
  slower commit between them (ab/bisect.py).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Callable

from jaxrun.ab.ab_comparison import comparison, write_sides
from jaxrun.ab.bisect import bisect
from jaxrun.ab.checkouts import checkouts, remove_abandoned
from jaxrun.ab.duet import Pairing, pairing
from jaxrun.ab.session import (
    OnRun,
    PairedRuns,
    Session,
    metric_samples,
    run_script_pairs,
    script_name,
)
from jaxrun.ab.sides import Side, git, repository_of, revision
from jaxrun.config.ab_options import BisectOptions, ConfirmOptions
from jaxrun.config.options import VerdictOptions
from jaxrun.core.formatting import fmt_commit, plural
from jaxrun.core.timestamps import now_iso
from jaxrun.errors import UsageError
from jaxrun.judge.history import HistoryStore
from jaxrun.judge.paired import judge_paired_script
from jaxrun.results.machine import Machine, this_machine
from jaxrun.results.models import ChangeCheck, PhaseComparison, SeriesChange

__all__ = ["OnCheck", "confirm_changes"]

OnCheck = Callable[[SeriesChange, ChangeCheck], None]


class _Undecided(Exception):
    """Why a change point could not be re-run (one line)."""


def confirm_changes(store: HistoryStore, changes: list[SeriesChange], options: ConfirmOptions | None = None, *,
                    on_check: OnCheck | None = None, on_run: OnRun | None = None) -> list[SeriesChange]:
    """``changes`` (from ``store.changes``), each with its check: the one the history keeps, else a
    new one (kept when it decides). Their pairs go to ``options.results_dir``, one folder each."""
    options = options or ConfirmOptions(confirm=True)
    how = pairing(options.duet, options.run_keywords)  # once; a duet insisted on where it cannot be: refused here
    remove_abandoned(git)  # the checkouts a killed jaxrun ab, bisect or confirmation left
    here: list[Machine] = []
    checked = []
    for change in changes:
        check = change.check
        if check is None or check.verdict == "undecided":
            check = _check(store, change, options, how, here, on_run)
        if options.bisect and check.verdict == "confirmed" and check.first_slower is None and check.bisect_note is None:
            check = _narrowed(change, check, options, on_run)
            if check.verdict != "undecided":
                store.record_check(change, check)
        change = change.model_copy(update={"check": check})
        if on_check is not None:
            on_check(change, check)
        checked.append(change)
    return checked


def _check(store: HistoryStore, change: SeriesChange, options: ConfirmOptions, how: Pairing, here: list[Machine],
           on_run: OnRun | None) -> ChangeCheck:
    before, after = change.last_before.git_commit, change.first_after.git_commit
    check = ChangeCheck(script_path=change.script_path, metric=change.metric, before_commit=before or "",
                        after_commit=after or "", verdict="undecided", checked_at=now_iso())
    try:
        _can_rerun(store, change, here)
        check = _paired(change, check, options, how, on_run)
    except (_Undecided, UsageError) as why:
        return check.model_copy(update={"reason": str(why)})
    if check.verdict != "undecided":
        store.record_check(change, check)
    return check


def _can_rerun(store: HistoryStore, change: SeriesChange, here: list[Machine]) -> None:
    """Raises :class:`_Undecided` when the change's two runs cannot be re-run here as they ran."""
    first, last = change.last_before, change.first_after
    if first.git_commit is None or last.git_commit is None:
        raise _Undecided("the runs around it have no git commit (their script was not in a git repository): "
                         "there is nothing to check out and re-run")
    dirty = [m for m in (first, last) if m.git_dirty]
    if dirty:
        raise _Undecided(f"run {dirty[0].run_id} ran from a tree with uncommitted changes: its commit "
                         f"{fmt_commit(dirty[0].git_commit, False)} is not the code that ran")
    if first.git_commit == last.git_commit:
        raise _Undecided(f"both runs are of commit {fmt_commit(first.git_commit, False)}: no commit made this change "
                         "(the machine, its load or the environment changed between the runs)")
    recorded = store.get(last.run_id)
    if recorded.machine is None:
        if recorded.host != socket.gethostname():
            raise _Undecided(f"the series ran on {recorded.host}, not this machine ({socket.gethostname()}): "
                             "confirm it there")
        return
    if not here:
        from jaxrun.discover.devices import device_facts
        from jaxrun.errors import DeviceProbeError

        try:
            facts = device_facts().record
        except DeviceProbeError:
            facts = None
        here.append(this_machine(facts))
    # The XLA flags are the script's own (its environment), set alike for both sides' runs.
    theirs = recorded.machine.model_copy(update={"xla_flags": []})
    differ = here[0].differences(theirs)
    if differ:
        raise _Undecided(f"the series ran on another machine ({'; '.join(differ)}, here vs there): confirm it there")


def _paired(change: SeriesChange, check: ChangeCheck, options: ConfirmOptions, how: Pairing,
            on_run: OnRun | None) -> ChangeCheck:
    """The change's two commits run in pairs until the pairs decide, judged."""
    repo, relative = repository_of(Path(change.script_path))
    before, after = revision(repo, check.before_commit), revision(repo, check.after_commit)
    size = abs(change.change) if change.change is not None else None
    effect = options.verdict.min_effect if not size else min(options.verdict.min_effect, size / 2)
    verdict = options.verdict.evolve(metric=change.metric, min_effect=effect)
    rose = (change.change or 0.0) > 0
    folder = options.results_dir / f"{script_name(relative.as_posix())}-{fmt_commit(before)}-{fmt_commit(after)}"

    def decided(runs: PairedRuns) -> str | None:
        phase = _judged(runs, change.metric, verdict)
        label = None if phase is None else _label(phase, rose, effect)
        return None if label is None else f"{label} after {plural(len(runs.new), 'pair')}"

    with checkouts(repo, git) as made, made.worktree(before, "before") as base_tree, \
            made.worktree(after, "after") as new_tree:
        base = Side("BASE", base_tree / relative, commit=before, given=f"rev {fmt_commit(before)}")
        new = Side("NEW", new_tree / relative, commit=after, given=f"rev {fmt_commit(after)}")
        session = Session(base, new, folder, options.evolve(verdict=verdict), how, on_run)
        runs = run_script_pairs(session, relative.name, stop=decided)
        report = comparison(session, [runs])
        write_sides(session, [runs], report)
    phase = report.scripts[0].phases.get(change.metric)
    done = check.model_copy(update={"alpha": verdict.alpha, "min_effect": effect, "pairs": len(runs.new),
                                    "duet": how[0] is not None, "results_dir": str(folder),
                                    **(_figures(phase) if phase is not None else {})})
    if runs.stopped and "failed" in runs.stopped:
        return done.model_copy(update={"reason": f"a run failed: {runs.stopped}"})
    if phase is None:
        return done.model_copy(update={"reason": f"{change.metric} was not measured on both sides"})
    label = _label(phase, rose, effect)
    if label == "confirmed":
        return done.model_copy(update={"verdict": "confirmed"})
    bound = f"{1 + effect:.3f}" if rose else f"{1 - effect:.3f}"
    if label == "refuted":
        return done.model_copy(update={"verdict": "refuted", "reason": (
            f"the ratio's 95% CI is {'below' if rose else 'above'} {bound}: any change is smaller than {effect:.1%}")})
    said = phase.note or f"{phase.verdict}, and the ratio's 95% CI still reaches {bound}"
    return done.model_copy(update={"reason": f"the pairs could not tell in {plural(len(runs.new), 'pair')} ({said}): "
                                             "more pairs (--confirm-pairs) may"})


def _judged(runs: PairedRuns, metric: str, verdict: VerdictOptions) -> PhaseComparison | None:
    judged = judge_paired_script(runs.key, None, metric_samples(runs.base, (metric,)),
                                 metric_samples(runs.new, (metric,)), verdict)
    return judged.phases.get(metric)


def _label(phase: PhaseComparison, rose: bool, effect: float) -> str | None:
    """confirmed: the paired verdict is the change's way (p < alpha, at least ``effect``);
    refuted: the ratio's CI shuts out a change of ``effect`` that way; None: not yet told."""
    if phase.verdict == ("slower" if rose else "faster"):
        return "confirmed"
    low, high = phase.ratio_ci_low, phase.ratio_ci_high
    if phase.verdict in ("slower", "faster", "no significant change") and low is not None and high is not None:
        if (rose and high < 1 + effect) or (not rose and low > 1 - effect):
            return "refuted"
    return None


def _figures(phase: PhaseComparison) -> dict[str, object]:
    return {"ratio": phase.ratio, "ratio_ci_low": phase.ratio_ci_low, "ratio_ci_high": phase.ratio_ci_high,
            "p_value": phase.p_value}


def _narrowed(change: SeriesChange, check: ChangeCheck, options: ConfirmOptions, on_run: OnRun | None) -> ChangeCheck:
    """A confirmed change's first slower commit: the commit after it when the two are neighbours,
    else bisected between them."""
    if (change.change or 0.0) <= 0:
        return check.model_copy(update={"bisect_note": "bisect finds the first slower commit; this change is a speed-up"})
    try:
        repo, _ = repository_of(Path(change.script_path))
        between = git(repo, "rev-list", "--ancestry-path", f"{check.before_commit}..{check.after_commit}").split()
        if len(between) == 1:
            subject = git(repo, "log", "-1", "--format=%s", check.after_commit)
            return check.model_copy(update={"first_slower": check.after_commit, "first_slower_subject": subject,
                                            "bisect_note": "the two commits are neighbours"})
        narrowing = BisectOptions(good=check.before_commit, bad=check.after_commit, warmup_pairs=options.warmup_pairs,
                                  device=options.device, duet=options.duet, verdict=options.verdict.evolve(
                                      metric=change.metric, min_effect=check.min_effect or options.verdict.min_effect),
                                  run_options=options.run_options,
                                  results_dir=Path(check.results_dir or options.results_dir) / "bisect")
        found = bisect(Path(change.script_path), narrowing, on_run=on_run)
    except UsageError as why:
        return check.model_copy(update={"bisect_note": f"not bisected: {why}"})
    if found.first_slower is None:
        return check.model_copy(update={"bisect_note": found.reason or "no commit named"})
    return check.model_copy(update={"first_slower": found.first_slower, "first_slower_subject": found.subject,
                                    "bisect_note": f"bisected in {plural(len(found.steps), 'step')} of "
                                                   f"{plural(len(between), 'commit')}"})
