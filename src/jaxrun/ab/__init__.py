"""A/B comparisons that a noisy machine cannot fool (``jaxrun ab``, ``jaxrun bisect``): the two
sides run in alternating pairs and are judged on the per-pair ratios (jaxrun.paired).

:func:`run_ab` is the whole of ``jaxrun ab``: the sides made (folders, revisions in temporary
worktrees, interpreters), each script paired and run, the comparison and both sides written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..models import ComparisonReport
from ..options import VerdictOptions
from .report import COMPARISON_FILE, comparison, write_sides
from .session import OnRun, PairedRuns, run_script_pairs, scripts_of
from .sides import Side, sides

__all__ = ["COMPARISON_FILE", "PairedRuns", "Side", "run_ab", "run_pairs"]

DEFAULT_PAIRS = 10
DEFAULT_WARMUP_PAIRS = 1


def run_pairs(base: Side, new: Side, keys: list[str], results_dir: Path, *, pairs: int = DEFAULT_PAIRS,
              warmup_pairs: int = DEFAULT_WARMUP_PAIRS, time_budget: float | None = None,
              precision: float | None = None, verdict: VerdictOptions | None = None,
              run_options: dict[str, Any] | None = None, on_run: OnRun | None = None) -> list[PairedRuns]:
    """Each script of ``keys`` run on both sides in alternating pairs (session.run_script_pairs)."""
    if pairs < 1 or warmup_pairs < 0:
        raise UsageError(f"--pairs must be at least 1 and --warmup-pairs at least 0 (got {pairs} and {warmup_pairs})")
    verdict = verdict or VerdictOptions()
    return [run_script_pairs(key, base, new, results_dir, pairs=pairs, warmup_pairs=warmup_pairs,
                             time_budget=time_budget, precision=precision, verdict=verdict,
                             run_options=dict(run_options or {}), on_run=on_run) for key in keys]


def run_ab(base: Path, new: Path | None, results_dir: Path, *, base_rev: str | None = None,
           new_rev: str | None = None, base_python: str | None = None, new_python: str | None = None,
           pairs: int = DEFAULT_PAIRS, warmup_pairs: int = DEFAULT_WARMUP_PAIRS, time_budget: float | None = None,
           precision: float | None = None, verdict: VerdictOptions | None = None, recursive: bool = True,
           run_options: dict[str, Any] | None = None, on_run: OnRun | None = None) -> ComparisonReport:
    """``jaxrun ab``: the paired comparison of NEW against BASE, written to ``results_dir``
    (``ab_comparison.json``, and each side's runs in ``base/`` and ``new/``)."""
    verdict = verdict or VerdictOptions()
    run_options = dict(run_options or {})
    with sides(base, new, base_rev=base_rev, new_rev=new_rev, base_python=base_python,
               new_python=new_python) as (base_side, new_side):
        keys, only_base, only_new = scripts_of(base_side, new_side, recursive)
        if not keys:
            raise UsageError(f"no JAX script is on both sides ({base_side.describe()} and {new_side.describe()}): "
                             "ab pairs the scripts by their path under each side")
        runs = run_pairs(base_side, new_side, keys, results_dir, pairs=pairs, warmup_pairs=warmup_pairs,
                         time_budget=time_budget, precision=precision, verdict=verdict, run_options=run_options,
                         on_run=on_run)
        report = comparison(base_side, new_side, runs, only_base, only_new, options=verdict, pairs=pairs,
                            warmup_pairs=warmup_pairs)
        write_sides(results_dir, base_side, new_side, runs, report, pairs=pairs, warmup_pairs=warmup_pairs,
                    device=str(run_options.get("device", "auto")))
    return report
