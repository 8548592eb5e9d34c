"""The old name of :mod:`jaxrun.ab` (docs/guide/ab.md named ``jaxrun.interfaces.ab`` for
``run_ab`` and ``ABOptions``): A/B is a package of its own now, beside the batch. Kept so that
code written against the old name still runs; new code imports :mod:`jaxrun.ab`."""

from jaxrun.ab import COMPARISON_FILE, ABOptions, BisectOptions, PairedRuns, Side, run_ab, run_pairs

__all__ = ["ABOptions", "BisectOptions", "COMPARISON_FILE", "PairedRuns", "Side", "run_ab", "run_pairs"]
