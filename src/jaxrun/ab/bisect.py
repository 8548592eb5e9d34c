"""``jaxrun bisect SCRIPT --good REV --bad REV``: the first revision at which a script got slower,
found as ``git bisect`` would, each step an interleaved A/B of the script at that revision against
the good one (jaxrun.judge.paired's verdict on ``--metric``, run and compile time by default).

The revisions searched are those on the ancestry path from good to bad (``git rev-list
--ancestry-path``), oldest first. The bad revision is judged first: a search for a slowdown that
the two ends do not show would name a commit at random.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from jaxrun.ab.ab_comparison import comparison
from jaxrun.ab.checkouts import checkouts, remove_abandoned
from jaxrun.ab.duet import pairing
from jaxrun.ab.session import OnRun, Session, run_script_pairs
from jaxrun.ab.sides import Side, git, repository_of, revision
from jaxrun.config.ab_options import BisectOptions
from jaxrun.errors import UsageError
from jaxrun.results.models import ScriptComparison

__all__ = ["BisectStep", "Bisection", "bisect"]


@dataclass
class BisectStep:
    commit: str
    subject: str
    verdict: str  # the script at this revision against the good one
    ratio: float | None  # of the first gate phase that moved (or the first gate phase)


@dataclass
class Bisection:
    good: str
    bad: str
    first_slower: str | None  # the commit that made it slower; None when bad is not slower than good
    subject: str | None
    steps: list[BisectStep] = field(default_factory=list)
    reason: str | None = None  # why nothing was named


def _step(judged: ScriptComparison, commit: str, subject: str) -> BisectStep:
    moved = [judged.phases[m] for m in (*judged.slower, *judged.gate) if m in judged.phases]
    return BisectStep(commit, subject, judged.verdict, moved[0].ratio if moved else None)


def bisect(script: Path, options: BisectOptions, *, on_step: Callable[[BisectStep], None] | None = None,
           on_run: OnRun | None = None) -> Bisection:
    """The first revision between ``options.good`` and ``options.bad`` at which ``script`` is judged
    slower than at the good one; each step's runs in ``options.results_dir/stepNN``."""
    good, bad, results_dir = options.good, options.bad, options.results_dir
    if not script.is_file():
        raise UsageError(f"no such script: {str(script)!r} (bisect follows one script through the revisions)")
    how = pairing(options.duet, options.run_keywords)  # once for every step; a duet that cannot be, refused here

    repo, relative = repository_of(script)
    good_commit, bad_commit = revision(repo, good), revision(repo, bad)
    listed = git(repo, "rev-list", "--ancestry-path", "--reverse", f"{good_commit}..{bad_commit}").split()
    if not listed or listed[-1] != bad_commit:
        raise UsageError(f"{bad!r} does not descend from {good!r}: bisect needs the good revision to be an ancestor "
                         "of the bad one")
    result = Bisection(good_commit, bad_commit, None, None)
    remove_abandoned(git)  # the checkouts a killed jaxrun ab or bisect left
    with checkouts(repo, git) as made:
        with made.worktree(good_commit, "good") as good_tree:
            good_side = Side("BASE", good_tree / relative, commit=good_commit, given=f"rev {good}")

            def slower(commit: str, step: int) -> bool:
                subject = git(repo, "log", "-1", "--format=%s", commit)
                with made.worktree(commit, f"rev{step}") as tree:
                    new_side = Side("NEW", tree / relative, commit=commit, given=f"rev {commit[:12]}")
                    session = Session(good_side, new_side, results_dir / f"step{step:02d}", options, how, on_run)
                    runs = run_script_pairs(session, relative.name)
                    report = comparison(session, [runs])
                done = _step(report.scripts[0], commit, subject)
                result.steps.append(done)
                if on_step is not None:
                    on_step(done)
                if runs.stopped and "failed" in runs.stopped:
                    raise UsageError(f"the script failed at {commit[:12]} ({runs.stopped}): bisect compares "
                                     "timings of runs that succeed")
                return done.verdict == "slower"

            if not slower(bad_commit, 0):
                result.reason = (f"{bad} is not judged slower than {good} "
                                 f"({result.steps[0].verdict}): nothing to bisect")
                return result
            low, high, step = -1, len(listed) - 1, 1  # listed[high] is slower; good (index -1) is not
            while high - low > 1:
                middle = (low + high) // 2
                if slower(listed[middle], step):
                    high = middle
                else:
                    low = middle
                step += 1
            result.first_slower = listed[high]
            result.subject = git(repo, "log", "-1", "--format=%s", listed[high])
            return result
