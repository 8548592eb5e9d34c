"""A/B comparisons that a noisy machine cannot fool (``jaxrun ab``, ``jaxrun bisect``): the two
sides run in alternating pairs (or, with ``duet``, at the same time on two halves of the machine)
and are judged on the per-pair ratios (jaxrun.judge.paired).

:func:`run_ab` is the whole of ``jaxrun ab``: the sides made (folders, revisions in temporary
worktrees, interpreters), each script paired and run, the comparison and both sides written.
"""

from __future__ import annotations

from pathlib import Path

from jaxrun.errors import UsageError
from jaxrun.interfaces.ab.ab_report import COMPARISON_FILE, comparison, write_sides
from jaxrun.interfaces.ab.duet import Pairing, pairing
from jaxrun.interfaces.ab.session import (
    ABOptions,
    OnRun,
    PairedRuns,
    run_script_pairs,
    scripts_of,
)
from jaxrun.interfaces.ab.sides import Side, sides
from jaxrun.results.models import ComparisonReport

__all__ = ["ABOptions", "COMPARISON_FILE", "PairedRuns", "Side", "run_ab", "run_pairs"]

def run_pairs(base: Side, new: Side, keys: list[str], results_dir: Path, options: ABOptions,
              on_run: OnRun | None = None, how: Pairing | None = None) -> list[PairedRuns]:
    """Each script of ``keys`` run on both sides in pairs (session.run_script_pairs), all of them
    paired one way (``how``, chosen here when not given)."""
    how = how if how is not None else pairing(options.duet, options.run_options)
    return [run_script_pairs(key, base, new, results_dir, options, on_run, how) for key in keys]


def run_ab(base: Path, new: Path | None, results_dir: Path, options: ABOptions | None = None, *,
           base_rev: str | None = None, new_rev: str | None = None, base_python: str | None = None,
           new_python: str | None = None, on_run: OnRun | None = None) -> ComparisonReport:
    """``jaxrun ab``: the paired comparison of NEW against BASE, written to ``results_dir``
    (``ab_comparison.json``, and each side's runs in ``base/`` and ``new/``)."""
    options = options or ABOptions()
    # Chosen once, before any checkout: a duet asked for where the machine cannot be split is refused here.
    how = pairing(options.duet, options.run_options)
    with sides(base, new, base_rev=base_rev, new_rev=new_rev, base_python=base_python,
               new_python=new_python) as (base_side, new_side):
        keys, only_base, only_new = scripts_of(base_side, new_side, options.recursive)
        if not keys:
            raise UsageError(f"no JAX script is on both sides ({base_side.describe()} and {new_side.describe()}): "
                             "ab pairs the scripts by their path under each side")
        runs = run_pairs(base_side, new_side, keys, results_dir, options, on_run, how)
        report = comparison(base_side, new_side, runs, only_base, only_new, options)
        write_sides(results_dir, base_side, new_side, runs, report, options)
    return report
