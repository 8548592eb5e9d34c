"""Interleaved A/B runs: each script present on both sides runs BASE then NEW, then NEW then BASE,
and so on (the order of each pair alternates too), after warm-up pairs, for ``pairs`` pairs or
until a time budget is spent or the ratios are as precise as asked. A drift of the machine's load
lands on both runs of a pair alike, so the per-pair ratios (jaxrun.judge.paired) do not see it.

Each run is one process, as ``jaxrun run`` makes it (ab/runs.py: run/execute.py's ``run_job``), without the
persistent compilation cache (every run compiles: compile time is compared, not cache loads).

By default (``duet``) the two of a pair run at the same time instead, each on its own half of
the machine, the halves swapped every pair (ab/duet.py): a change of load then lands on
both at once, not a run's length apart; where the machine cannot be split fairly (one CPU, one
GPU) the pairs alternate and the report says why.

A :class:`Session` is what every script of one comparison shares (its sides, folder, options and
pairing); the options are config/ab_options.py's, declared and checked there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from jaxrun.ab.duet import DuetHalves, Pairing, side_by_side
from jaxrun.ab.runs import ScriptRuns, script_runs
from jaxrun.ab.sides import Side
from jaxrun.config.ab_options import PairedOptions
from jaxrun.config.options import VerdictOptions
from jaxrun.core.formatting import plural
from jaxrun.discover.scripts import find_jax_scripts, script_display_name
from jaxrun.judge.compare import single_value
from jaxrun.judge.paired import judge_paired_script, pairs_needed
from jaxrun.judge.verdicts import metrics_for
from jaxrun.results.models import ScriptResult

__all__ = ["OnRun", "PairedRuns", "Session", "run_script_pairs", "scripts_of", "metric_samples", "script_name"]

OnRun = Callable[[str, Side, int, bool, ScriptResult], None]  # script, side, pair, warm-up, result


@dataclass(frozen=True)
class Session:
    """One comparison: BASE and NEW, the folder their runs go to (``base/pairNNN``,
    ``new/pairNNN``), its options, how its pairs run (a duet's halves, or alternating and why:
    duet.pairing, chosen once) and who hears of each run."""

    base: Side
    new: Side
    results_dir: Path
    options: PairedOptions
    how: Pairing = (None, None)
    on_run: OnRun | None = None


@dataclass
class PairedRuns:
    """One script's runs on both sides: ``base[i]`` and ``new[i]`` are pair i (warm-ups apart)."""

    key: str  # its path relative to each side's folder ("a/model.py"; a side that is a file: its name)
    base: list[ScriptResult] = field(default_factory=list)
    new: list[ScriptResult] = field(default_factory=list)
    warmups: list[tuple[ScriptResult, ScriptResult]] = field(default_factory=list)  # (base, new)
    stopped: str | None = None  # why it ended before the pairs asked for (budget, precision, a failure)
    halves: DuetHalves | None = None  # duet runs: the two halves of the machine (None: alternating runs)
    alternating_reason: str | None = None  # why the pairs alternated where a duet was the default


def scripts_of(base: Side, new: Side, recursive: bool = True) -> tuple[list[str], list[str], list[str]]:
    """``(in both, only in BASE, only in NEW)``: the scripts paired by their path under each side
    (two files are one pair whatever their names)."""
    if base.root.is_file() and new.root.is_file():
        return [new.root.name], [], []

    def found(side: Side) -> dict[str, Path]:
        if side.root.is_file():
            return {side.root.name: side.root}
        return {p.relative_to(side.root).as_posix(): p for p in find_jax_scripts(side.root, recursive)}

    a, b = found(base), found(new)
    return sorted(a.keys() & b.keys()), sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())


def script_name(key: str) -> str:
    """A script's ``<name>`` on both sides, as a batch names it (discovery's one rule):
    ``a/model.py`` -> ``a__model``, ``a/train.ipynb`` -> ``a__train.ipynb``."""
    return script_display_name(Path("/", key), "/")  # the key is relative: named under a root of its own


def _script(side: Side, key: str) -> Path:
    return side.root if side.root.is_file() else side.root / key


def metric_samples(results: list[ScriptResult], metrics: tuple[str, ...]) -> dict[str, list[float | None]]:
    """Per metric, each pair's figure (None where that run could not measure it)."""
    return {m: [single_value(r, m) for r in results] for m in metrics}


def _precise(runs: PairedRuns, options: VerdictOptions, precision: float) -> bool:
    """Whether every gate phase's ratio is known to within +-``precision`` (its 95% CI)."""
    metrics, _ = metrics_for(options.metric)
    judged = judge_paired_script(runs.key, None, metric_samples(runs.base, metrics), metric_samples(runs.new, metrics),
                                 options)
    gate = [judged.phases[m] for m in judged.gate if m in judged.phases]
    return bool(gate) and all(
        p.ratio is not None and p.ratio_ci_low is not None and p.ratio_ci_high is not None
        and (p.ratio_ci_high - p.ratio_ci_low) / 2 <= precision * p.ratio for p in gate)


def _runs(session: Session, side: Side, key: str) -> ScriptRuns:
    """``key`` of ``side`` with its run options, resolved once for all its pairs."""
    options = session.options
    given = {"randomize_setup": options.randomize_setup, **options.run_keywords}
    if side.python is not None:
        given["python"] = side.python
    return script_runs(_script(side, key), script_name(key), given, options.config)


def run_script_pairs(session: Session, key: str, stop: Callable[[PairedRuns], str | None] | None = None) -> PairedRuns:
    """Run ``key`` on both sides, pair by pair (at the same time in a duet); stops at the first
    failed run (it would repeat). ``stop``: asked after each pair from the least a test needs on,
    the reason to stop early or None."""
    options, base, new, on_run = session.options, session.base, session.new, session.on_run
    pairs, warmup_pairs, verdict = options.pairs, options.warmup_pairs, options.verdict
    time_budget, precision = options.time_budget, options.precision
    halves, why = session.how
    runs = PairedRuns(key, halves=halves, alternating_reason=why)
    started = time.monotonic()
    least = pairs_needed(verdict.alpha)
    each = {side.label: _runs(session, side, key) for side in (base, new)}

    def run(side: Side, number: int, half: int | None) -> ScriptResult:
        return each[side.label].run(session.results_dir / side.label.lower() / f"pair{number:03d}",
                                    halves.placement(half) if halves is not None and half is not None else None)

    for number in range(warmup_pairs + pairs):
        warmup = number < warmup_pairs
        order = (base, new) if number % 2 == 0 else (new, base)
        done: dict[str, ScriptResult] = {}
        if halves is not None:
            # order[0] is on half 0 (BASE in even pairs), and runs in this thread; both start together.
            first, second = side_by_side(lambda: run(order[0], number, 0), lambda: run(order[1], number, 1))
            done = {order[0].label: first, order[1].label: second}
        for side in order:
            if halves is None:
                done[side.label] = run(side, number, None)
            if on_run is not None:
                on_run(key, side, number - warmup_pairs, warmup, done[side.label])
        pair = (done[base.label], done[new.label])
        if warmup:
            runs.warmups.append(pair)
        else:
            runs.base.append(pair[0])
            runs.new.append(pair[1])
        failed = [(s, r) for s, r in zip((base, new), pair) if not r.success]
        if failed:
            side, result = failed[0]
            which = f"warm-up pair {number + 1}" if warmup else f"pair {number - warmup_pairs + 1}"
            runs.stopped = f"{side.label} failed in {which} ({result.error_class}: {result.error_message})"
            break
        counted = len(runs.base)
        if warmup or counted < least or counted >= pairs:
            continue
        if time_budget is not None and time.monotonic() - started >= time_budget:
            runs.stopped = f"the time budget of {time_budget:g} s was spent after {plural(counted, 'pair')}"
            break
        if precision is not None and _precise(runs, verdict, precision):
            runs.stopped = f"every gate ratio was known to within {precision:.0%} after {plural(counted, 'pair')}"
            break
        if stop is not None and (why := stop(runs)) is not None:
            runs.stopped = why
            break
    return runs
