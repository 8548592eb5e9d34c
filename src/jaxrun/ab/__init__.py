"""A/B comparisons that a noisy machine cannot fool (``jaxrun ab``, ``jaxrun bisect``): the two
sides run in alternating pairs (or, with ``duet``, at the same time on two halves of the machine)
and are judged on the per-pair ratios (jaxrun.judge.paired).

:func:`run_ab` is the whole of ``jaxrun ab``: the sides made (folders, revisions in temporary
worktrees, interpreters), each script paired and run, the comparison and both sides written.
Its options are :class:`~jaxrun.config.ab_options.ABOptions`, declared with every other option.
"""

from __future__ import annotations

from pathlib import Path

from jaxrun.ab.ab_comparison import COMPARISON_FILE, comparison, write_sides
from jaxrun.ab.duet import pairing
from jaxrun.ab.session import OnRun, PairedRuns, Session, run_script_pairs, scripts_of
from jaxrun.ab.sides import Side, sides
from jaxrun.config.ab_options import ABOptions, BisectOptions
from jaxrun.errors import UsageError
from jaxrun.results.models import ComparisonReport

__all__ = ["ABOptions", "BisectOptions", "COMPARISON_FILE", "PairedRuns", "Side", "run_ab", "run_pairs"]


def run_pairs(session: Session, keys: list[str]) -> list[PairedRuns]:
    """Each script of ``keys`` run on both sides in pairs (session.run_script_pairs), all of them
    paired the session's way."""
    return [run_script_pairs(session, key) for key in keys]


def run_ab(base: Path, new: Path | None = None, results_dir: Path | None = None, options: ABOptions | None = None, *,
           on_run: OnRun | None = None) -> ComparisonReport:
    """``jaxrun ab``: the paired comparison of NEW against BASE, written to ``results_dir``
    (``options.results_dir`` when not given): ``ab_comparison.json``, and each side's runs in
    ``base/`` and ``new/``. ``new`` None: ``base`` at two revisions or under two interpreters
    (``options.base_rev``, ``options.new_python``, ...)."""
    options = options or ABOptions()
    folder = Path(results_dir) if results_dir is not None else options.results_dir
    # Chosen once, before any checkout: a duet asked for where the machine cannot be split is refused here.
    how = pairing(options.duet, options.run_keywords)
    with sides(base, new, options) as (base_side, new_side):
        keys, only_base, only_new = scripts_of(base_side, new_side, options.recursive)
        if not keys:
            raise UsageError(f"no JAX script is on both sides ({base_side.describe()} and {new_side.describe()}): "
                             "ab pairs the scripts by their path under each side")
        session = Session(base_side, new_side, folder, options, how, on_run)
        runs = run_pairs(session, keys)
        report = comparison(session, runs, (only_base, only_new))
        write_sides(session, runs, report)
    return report
